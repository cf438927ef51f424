#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang in build-asan/ (the
# build scripts/test.sh --sanitize runs the suite in) and runs
# each for SECONDS (default 60), starting from a scratch copy of its committed
# seed corpus. Fails on any crash, leak, timeout or out-of-memory; prints the
# executions per target. Needs clang and libclang-rt (scripts/setup.sh --fuzz).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 300 trace_file
#
# UMLAB_FUZZ_WORKERS="trace_file:6 g10_graph:2" runs that many independent
# fuzzers on a target (each its own corpus copy and seed) and adds up their
# executions; the rest get one. On a 16-core machine this reaches 10^7
# executions per target in about 9 minutes (docs/fuzzing.md).
set -euo pipefail

seconds="${1:-60}"
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
  echo "fuzz.sh: SECONDS must be a positive integer, not '$seconds'" >&2
  exit 2
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/sanitized-build.sh"
build="$root/$sanitized_build_dir"
fuzz_dir="$root/tests/fuzz"
# Limits (docs/fuzzing.md): memory per process (libFuzzer also fails any single
# allocation above it), seconds per input, and input size per target.
rss_limit_mb=2048
timeout_s=10
max_len() {
  case "$1" in
    trace_file) echo 65536 ;;
    trace_chunk | g10_graph | regress_suite) echo 16384 ;;
    g10_kernel_time | device_g10_config) echo 4096 ;;
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
forget_other_compiler "$build"
cmake -S "$root" -B "$build" -G Ninja "${sanitized_cmake_args[@]}" "${launcher[@]}" >/dev/null
cmake --build "$build" --target "${targets[@]/%/_fuzz}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
artifacts="$build/artifacts"
mkdir -p "$artifacts"
workers_of() {
  local item
  for item in ${UMLAB_FUZZ_WORKERS:-}; do
    if [ "${item%%:*}" = "$1" ]; then echo "${item#*:}"; return; fi
  done
  echo 1
}

# One worker's run of a target; its exit status goes to
# $build/$target.$worker.status and its log to $build/$target.$worker.log.
run_worker() {
  local target="$1" worker="$2" corpus="$scratch/$1.$2" status=0
  mkdir -p "$corpus"
  cp "$fuzz_dir/corpus/$target"/* "$corpus"/
  local options=(-max_total_time="$seconds" -rss_limit_mb="$rss_limit_mb" -timeout="$timeout_s"
                 -max_len="$(max_len "$target")" -print_final_stats=1 -seed="$((worker * 7919))"
                 -artifact_prefix="$artifacts/$target-")
  if [ -f "$fuzz_dir/$target.dict" ]; then options+=(-dict="$fuzz_dir/$target.dict"); fi
  "$build/tests/fuzz/${target}_fuzz" "${options[@]}" "$corpus" >"$build/$target.$worker.log" 2>&1 ||
    status=$?
  echo "$status" >"$build/$target.$worker.status"
}

# Workers run side by side, one per core: each is single-threaded, and the
# whole set then takes SECONDS x workers / cores.
parallel="$(nproc)"
for target in "${targets[@]}"; do
  for worker in $(seq 1 "$(workers_of "$target")"); do
    while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
    echo "fuzz.sh: $target worker $worker for ${seconds}s (log: $build/$target.$worker.log)"
    run_worker "$target" "$worker" &
  done
done
wait

failed=()
summary=()
for target in "${targets[@]}"; do
  executions=0
  status=0
  for worker in $(seq 1 "$(workers_of "$target")"); do
    log="$build/$target.$worker.log"
    worker_status="$(cat "$build/$target.$worker.status" 2>/dev/null || echo 1)"
    count="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    executions=$((executions + ${count:-0}))
    if [ "$worker_status" -ne 0 ]; then
      status="$worker_status"
      grep -E "^==[0-9]+==ERROR|SUMMARY|Test unit written" "$log" >&2 || tail -20 "$log" >&2
    fi
  done
  summary+=("$(printf '%-16s %12s executions  %s' "$target" "$executions" \
    "$([ "$status" -eq 0 ] && echo ok || echo "FAILED (exit $status)")")")
  if [ "$status" -ne 0 ]; then failed+=("$target"); fi
done

printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz.sh: ${failed[*]} failed; the crashing inputs are in $artifacts" >&2
  exit 1
fi
