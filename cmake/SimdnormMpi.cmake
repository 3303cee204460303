# MPI programs as ctest tests (label mpi), used by examples/ and tests/mpi/.
#
#   simdnorm_link_mpi(<target>)
#
# links MPI's C bindings into a C++ target (Debian's Open MPI mpi.h otherwise pulls in its
# deprecated C++ bindings, whose library is not linked).
#
#   simdnorm_add_mpi_test(<name> <target> RANKS <n> [RUNS <k>] [ARGS <args...>])
#
# runs `mpiexec -n <n> <target> <args>` <k> times (default 1) through tests/mpi/run.cmake, which
# fails on a non-zero exit and, with k > 1, when the lines a run prints starting with "digest "
# (hashes of its outputs) differ from the first run's: bitwise reproducibility from run to run.
#
# Open MPI needs two things on a small machine or in a container: --oversubscribe for more ranks
# than cores, and, as root (containers), OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}. Its default
# transports need no network besides loopback; btl self,vader (shared memory) keeps it off
# TCP altogether, since every rank runs on this machine. Other MPIs get mpiexec as found.
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _simdnorm_mpiexec_version
  ERROR_QUIET)
if(_simdnorm_mpiexec_version MATCHES "(Open MPI|OpenRTE)\\) ([0-9]+)\\.")
  set(SIMDNORM_MPIEXEC_PREFLAGS --oversubscribe)
  set(SIMDNORM_MPIEXEC_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  if(CMAKE_MATCH_2 LESS 5)  # Open MPI 5 calls vader sm
    list(APPEND SIMDNORM_MPIEXEC_ENV OMPI_MCA_btl=self,vader)
  endif()
else()
  set(SIMDNORM_MPIEXEC_PREFLAGS "")
  set(SIMDNORM_MPIEXEC_ENV "")
endif()
set(_simdnorm_mpi_run ${CMAKE_CURRENT_LIST_DIR}/../tests/mpi/run.cmake)

function(simdnorm_add_mpi_test name target)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "RANKS;RUNS" "ARGS")
  if(NOT arg_RUNS)
    set(arg_RUNS 1)
  endif()
  set(cmd ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${arg_RANKS} ${MPIEXEC_PREFLAGS}
      ${SIMDNORM_MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS} ${arg_ARGS})
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<JOIN:${cmd},|>" -DRUNS=${arg_RUNS}
    -P ${_simdnorm_mpi_run})
  set_tests_properties(${name} PROPERTIES LABELS mpi TIMEOUT 300
    ENVIRONMENT "${SIMDNORM_MPIEXEC_ENV}")
endfunction()

function(simdnorm_link_mpi target)
  target_link_libraries(${target} PRIVATE MPI::MPI_C)
  target_compile_definitions(${target} PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
endfunction()
