#!/usr/bin/env bash
# Builds everything and runs the whole test suite.
#   scripts/test.sh                 normal build in build/
#   scripts/test.sh --sanitize      AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

build=build
extra=()
if [ "${1:-}" = "--sanitize" ]; then
  build=build-asan
  # Benchmarks are speed, not behaviour: not worth a sanitized build.
  extra=(-DUMLAB_SANITIZE=address,undefined -DUMLAB_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug)
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

cmake -S . -B "$build" -G Ninja -DUMLAB_WERROR=ON "${extra[@]}" >/dev/null
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
