#!/usr/bin/env bash
# Builds everything and runs the whole test suite. Warnings are errors here
# (a user's own build leaves UMLAB_WERROR off).
#   scripts/test.sh                 default build type (RelWithDebInfo) in build/
#   scripts/test.sh --release       Release (-O3) in build-release/: everything but the
#                                   GoogleTest programs and the cuda backend, then the policy regression suite and
#                                   the README's main job on the -O3 binary
#   scripts/test.sh --sanitize      AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/
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
release_checks=0
case "${1:-}" in
  "") ;;
  --release)
    build=build-release
    # What -O3 adds over the default build (-O2, NDEBUG in both) is its own
    # warnings, in the code users build, and code generation. So this builds
    # every library, the CLI and the benchmarks at -O3 with warnings as
    # errors, and checks behaviour through the CLI: the policy regression
    # suite's exact figures and the README's main job. Compiling the 48
    # GoogleTest programs again at -O3 cost CI about four minutes of its 30
    # and found nothing the default build's run of them does not. The Python
    # module is a thin layer over the same code, tested in the default build.
    # The cuda backend is left out too: the default build compiles it with
    # warnings as errors, and without a GPU its -O3 code never runs here.
    extra=(-DCMAKE_BUILD_TYPE=Release -DUMLAB_PYTHON=OFF -DBUILD_TESTING=OFF -DUMLAB_CUDA=OFF)
    release_checks=1
    ;;
  --sanitize)
    build=build-asan
    # Benchmarks are speed, not behaviour, and the cuda backend cannot run
    # without a GPU: neither is worth a sanitized build.
    extra=(-DUMLAB_SANITIZE=address,undefined -DUMLAB_BENCH=OFF -DUMLAB_CUDA=OFF
           -DCMAKE_BUILD_TYPE=Debug)
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ;;
  --tsan)
    build=build-tsan
    # Only the multi-threaded code is worth the (5-15x) slower TSan build; the
    # cuda backend needs a GPU to run, so it is not built here.
    extra=(-DUMLAB_SANITIZE=thread -DUMLAB_BENCH=OFF -DUMLAB_CUDA=OFF)
    targets=(--target threaded_tests)
    ctest_args=(-L threads)
    # No suppressions: every race TSan reported here was fixed at its root.
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    ;;
  *)
    echo "usage: scripts/test.sh [--release | --sanitize | --tsan]" >&2
    exit 2
    ;;
esac
if command -v ccache >/dev/null; then
  extra+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

cmake -S . -B "$build" -G Ninja -DUMLAB_WERROR=ON "${extra[@]}" >/dev/null
cmake --build "$build" "${targets[@]}"
if [ "$release_checks" -eq 1 ]; then
  "$build/cli/umlab" regress tests/suites/policies.json
  "$build/cli/umlab" compare --workload=mlp --capacity=0.5 >/dev/null
  echo "release: the policy suite passed and the main job ran at -O3"
  exit 0
fi
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${ctest_args[@]}"
