// The doctest runner. Test cases that need a variable of the environment are decorated with
// doctest::skip(<variable not set>); listing (--list-test-cases, what ctest's discovery runs at
// build time) shows them all, so that ctest has an entry for each whatever the build's
// environment, and that entry reports "skipped" when its run finds the variable unset.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>

int main(int argc, char** argv) {
  doctest::Context context;
  for (int k = 1; k < argc; ++k)
    if (std::strcmp(argv[k], "--list-test-cases") == 0 || std::strcmp(argv[k], "-ltc") == 0)
      context.setOption("no-skip", true);
  context.applyCommandLine(argc, argv);
  return context.run();
}
