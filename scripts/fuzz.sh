#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang in build-fuzz/ and runs
# each for SECONDS (default 60), starting from a scratch copy of its committed
# seed corpus. Fails on any crash, leak, timeout or out-of-memory; prints the
# executions per target. Needs clang and libclang-rt (scripts/setup.sh --fuzz).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 300 trace_file
set -euo pipefail

seconds="${1:-60}"
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
  echo "fuzz.sh: SECONDS must be a positive integer, not '$seconds'" >&2
  exit 2
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"
fuzz_dir="$root/tests/fuzz"
# Limits (docs/fuzzing.md): memory per process (libFuzzer also fails any single
# allocation above it), seconds per input, and input size per target.
rss_limit_mb=2048
timeout_s=10
max_len() {
  case "$1" in
    trace_file) echo 65536 ;;
    trace_chunk | g10_graph | regress_suite) echo 16384 ;;
    g10_kernel_time) echo 4096 ;;
    *) echo 512 ;;
  esac
}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for source in "$fuzz_dir"/*_fuzz.cc; do
    name="$(basename "$source" _fuzz.cc)"
    targets+=("$name")
  done
fi
for target in "${targets[@]}"; do
  if [ ! -f "$fuzz_dir/${target}_fuzz.cc" ]; then
    echo "fuzz.sh: no target '$target'; the targets are tests/fuzz/*_fuzz.cc" >&2
    exit 2
  fi
done

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DUMLAB_FUZZ=ON \
  -DUMLAB_CUDA=OFF -DUMLAB_BENCH=OFF -DBUILD_TESTING=OFF -DUMLAB_WERROR=ON "${launcher[@]}" >/dev/null
cmake --build "$build" --target "${targets[@]/%/_fuzz}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
artifacts="$build/artifacts"
mkdir -p "$artifacts"
# One target's run; its exit status goes to $build/$target.status.
run_target() {
  local target="$1" corpus="$scratch/$1" log="$build/$1.log" status=0
  mkdir -p "$corpus"
  cp "$fuzz_dir/corpus/$target"/* "$corpus"/
  local options=(-max_total_time="$seconds" -rss_limit_mb="$rss_limit_mb" -timeout="$timeout_s"
                 -max_len="$(max_len "$target")" -print_final_stats=1
                 -artifact_prefix="$artifacts/$target-")
  if [ -f "$fuzz_dir/$target.dict" ]; then options+=(-dict="$fuzz_dir/$target.dict"); fi
  "$build/tests/fuzz/${target}_fuzz" "${options[@]}" "$corpus" >"$log" 2>&1 || status=$?
  echo "$status" >"$build/$target.status"
}

# Targets run side by side, one per core: each is single-threaded, and the
# whole set then takes SECONDS x targets / cores.
parallel="$(nproc)"
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  echo "fuzz.sh: $target for ${seconds}s (log: $build/$target.log)"
  run_target "$target" &
done
wait

failed=()
summary=()
for target in "${targets[@]}"; do
  log="$build/$target.log"
  status="$(cat "$build/$target.status" 2>/dev/null || echo 1)"
  executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  summary+=("$(printf '%-16s %12s executions  %s' "$target" "${executions:-?}" \
    "$([ "$status" -eq 0 ] && echo ok || echo "FAILED (exit $status)")")")
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
    grep -E "^==[0-9]+==ERROR|SUMMARY|Test unit written" "$log" >&2 || tail -20 "$log" >&2
  fi
done

printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz.sh: ${failed[*]} failed; the crashing inputs are in $artifacts" >&2
  exit 1
fi
