# Sourced by scripts/test.sh --sanitize and scripts/fuzz.sh: the one build
# both run in. The suite under AddressSanitizer and UndefinedBehaviorSanitizer
# and the libFuzzer targets need the same instrumented libraries, so they
# share them: clang with -DUMLAB_FUZZ=ON instruments every library for
# coverage, ASan and UBSan, and the test executables link them with the
# sanitizer runtimes (which carry the coverage callbacks). A second full
# build for the fuzzers cost CI about six of its 30 minutes.
# RelWithDebInfo: a report's stack wants line numbers, and -O2 runs the
# suite under ASan about twice as fast as -O0 (umlab has no assert()s that
# NDEBUG would drop). Benchmarks are speed, not behaviour, and the cuda
# backend cannot run without a GPU: neither is built here.
# Compile time is most of this build's time in CI, so: the libraries as unity
# builds (UMLAB_UNITY_BUILD, top-level CMakeLists.txt), line tables only for
# debug information (-gline-tables-only: all a report's file:line needs, and
# 7% less compile time), and lld, which links a test executable in 0.6 s of
# CPU where ld.bfd takes 2 s. Together they took the whole build from 1,624 s
# of CPU to 1,037 s (user + sys, ccache off, on a 2-core machine).
sanitized_build_dir=build-asan
sanitized_cmake_args=(-DCMAKE_CXX_COMPILER=clang++ -DUMLAB_FUZZ=ON
                      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUMLAB_CUDA=OFF -DUMLAB_BENCH=OFF
                      -DUMLAB_WERROR=ON -DUMLAB_UNITY_BUILD=ON
                      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG"
                      -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld)

# A build directory configured with another compiler (build-asan/ was gcc's
# before it was shared with the fuzzers) cannot switch in place: CMake drops
# its cache and the configure fails. Start such a one afresh.
forget_other_compiler() {
  local cache="$1/CMakeCache.txt"
  if [ -f "$cache" ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++$' "$cache"; then
    echo "$1 was configured with another compiler than clang++; configuring it afresh" >&2
    rm -rf "$cache" "$1/CMakeFiles"
  fi
}
