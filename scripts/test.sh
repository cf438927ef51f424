#!/usr/bin/env bash
# Builds everything and runs the whole test suite. Warnings are errors here
# (a user's own build leaves UMLAB_WERROR off).
#   scripts/test.sh                 the default build type (Release, -O3) in build/, then the
#                                   README's main job on that binary
#   scripts/test.sh --sanitize      AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/,
#                                   with clang (installed if missing), the build scripts/fuzz.sh
#                                   fuzzes in
#   scripts/test.sh --tsan          ThreadSanitizer in build-tsan/, only the tests labelled
#                                   `threads` (tests/CMakeLists.txt lists them)
# ccache is used when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

build=build
extra=()
targets=()
ctest_args=()
case "${1:-}" in
  "") ;;
  --sanitize)
    # clang, shared with the fuzz targets (scripts/sanitized-build.sh).
    scripts/setup.sh --fuzz
    source scripts/sanitized-build.sh
    build="$sanitized_build_dir"
    forget_other_compiler "$build"
    extra=("${sanitized_cmake_args[@]}")
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ;;
  --tsan)
    build=build-tsan
    # Only the multi-threaded code is worth the (5-15x) slower TSan build; the
    # cuda backend needs a GPU to run, so it is not built here.
    # RelWithDebInfo, not the project's Release: TSan's reports want line
    # numbers, and at -O3 with TSan's instrumentation GCC 12 reports a
    # std::optional<std::string> in cli/arguments.cc as maybe uninitialized
    # (-Wmaybe-uninitialized, a false positive it gives for optional at -O3).
    # Its -g is -g1: line tables, all a report's file:line needs (inlined
    # frames included), in 13% less compile time than -g. As in the ASan
    # build (scripts/sanitized-build.sh), the libraries are unity builds and
    # lld links. Together these took this build from 906 s of CPU to 421 s
    # (user + sys, ccache off, on a 2-core machine).
    extra=(-DUMLAB_SANITIZE=thread -DUMLAB_BENCH=OFF -DUMLAB_CUDA=OFF
           -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
           -DUMLAB_UNITY_BUILD=ON -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld)
    targets=(--target threaded_tests)
    ctest_args=(-L threads)
    # No suppressions: every race TSan reported here was fixed at its root.
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    ;;
  *)
    echo "usage: scripts/test.sh [--sanitize | --tsan]" >&2
    exit 2
    ;;
esac
if command -v ccache >/dev/null; then
  extra+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

cmake -S . -B "$build" -G Ninja -DUMLAB_WERROR=ON "${extra[@]}" >/dev/null
cmake --build "$build" "${targets[@]}"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${ctest_args[@]}"
if [ -z "${1:-}" ]; then
  # The default build is the one users run: the README's main job must work
  # on it (the policy regression suite is a test case above).
  "$build/cli/umlab" compare --workload=mlp --capacity=0.5 >/dev/null
  echo "the README's main job ran on the -O3 build"
fi
