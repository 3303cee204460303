/* simdnorm: the instruction sets, written once.
 *
 * Every list of ISAs in the library comes from this table: the C++ and C enums, the names that
 * SIMDNORM_ISA and the benchmarks use, the dispatch order, the per-ISA kernel tables, and the
 * lane counts and FMA facts that tests and benchmarks read through simdnorm::isa_lanes and
 * simdnorm::isa_has_fma. Adding an ISA is a row here, its kernel unit src/isa/<name>.cpp (which
 * names the xsimd architecture) and its simdnorm_add_isa line (compiler flags) in CMakeLists.txt.
 *
 * X(name, NAME, id, lanes, fma, arch, features), best ISA first within each architecture:
 *   name      enum value, SIMDNORM_ISA value, namespace and file name of the kernels
 *   NAME      the same in capitals, for the C enum (SIMDNORM_ISA_<NAME>)
 *   id        stable integer value of both enums
 *   lanes     f32 lanes per vector
 *   fma       1 when the kernels fuse multiply-adds (results differ in the last bits from the
 *             ISAs without)
 *   arch      "x86_64", "aarch64" or "any": the architectures it runs on
 *   features  CPU features it needs beyond the architecture's baseline, space-separated: on
 *             x86 as named by GCC's __builtin_cpu_supports, checked with the OS register state
 *             (XCR0); on AArch64 as named in /proc/cpuinfo, checked in the kernel's HWCAP bits
 */
#ifndef SIMDNORM_ISA_LIST_H
#define SIMDNORM_ISA_LIST_H

#define SIMDNORM_ISA_LIST(X)                                                                     \
  X(avx512bf16, AVX512BF16, 6, 16, 1, "x86_64", "avx512f avx512cd avx512dq avx512bw avx512bf16") \
  X(avx512bw, AVX512BW, 4, 16, 1, "x86_64", "avx512f avx512cd avx512dq avx512bw")                \
  X(avx2_fma, AVX2_FMA, 3, 8, 1, "x86_64", "avx2 fma f16c")                                      \
  X(sse4_2, SSE4_2, 2, 4, 0, "x86_64", "sse4.2")                                                 \
  X(sse2, SSE2, 1, 4, 0, "x86_64", "sse2")                                                       \
  X(neon64_bf16, NEON64_BF16, 7, 4, 1, "aarch64", "bf16")                                        \
  X(neon64, NEON64, 5, 4, 1, "aarch64", "")                                                      \
  X(scalar, SCALAR, 0, 1, 0, "any", "")

#endif /* SIMDNORM_ISA_LIST_H */
