#!/usr/bin/env bash
# Builds everything and runs the whole test suite.
#   scripts/test.sh                 normal build in build/
#   scripts/test.sh --sanitize      AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/
#   scripts/test.sh --tsan          ThreadSanitizer in build-tsan/, only the tests labelled
#                                   `threads` (tests/CMakeLists.txt lists them)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

build=build
extra=()
targets=()
selection=()
if [ "${1:-}" = "--sanitize" ]; then
  build=build-asan
  # Benchmarks are speed, not behaviour: not worth a sanitized build.
  extra=(-DUMLAB_SANITIZE=address,undefined -DUMLAB_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug)
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
elif [ "${1:-}" = "--tsan" ]; then
  build=build-tsan
  # Only the multi-threaded code is worth the (5-15x) slower TSan build; the
  # cuda backend needs a GPU to run, so it is not built here.
  extra=(-DUMLAB_SANITIZE=thread -DUMLAB_BENCH=OFF -DUMLAB_CUDA=OFF)
  targets=(--target threaded_tests)
  selection=(-L threads)
  # No suppressions: every race TSan reported here was fixed at its root.
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
fi

cmake -S . -B "$build" -G Ninja -DUMLAB_WERROR=ON "${extra[@]}" >/dev/null
cmake --build "$build" "${targets[@]}"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${selection[@]}"
