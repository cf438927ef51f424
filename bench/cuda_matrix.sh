#!/usr/bin/env bash
# The whole GPU matrix in one device call: probe, calibration, the GPU
# tests, and the cuda-backend runs, gathered into one JSON report.
#   bench/cuda_matrix.sh BIN_DIR OUT_DIR [POLICIES]
# BIN_DIR is what scripts/package-device.sh made (.device); POLICIES is the
# comparison at half capacity (default demand,deepum,ideal). Writes
# OUT_DIR/report.json, OUT_DIR/matrix.log and a small recorded trace,
# OUT_DIR/mlp_small_cuda.umt. UMLAB_EXTRA_WORKLOADS="bert-base:batch=8 ..."
# adds comparisons on more workloads.
set -uo pipefail
bin=$1
out=$2
policies=${3:-demand,deepum,ideal}
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out"
work=$(mktemp -d)
log="$out/matrix.log"
umlab="$bin/umlab"
: > "$log"

"$bin/umlab_cuda_probe" > "$work/probe.txt" 2>&1
cat "$work/probe.txt" | tee -a "$log"
"$bin/umlab_cuda_calibrate" > "$work/calibration.json" 2>> "$log"
"$bin/cuda_backend_test" >> "$log" 2>&1
echo "cuda_backend_test exit $?" | tee -a "$log"

run() {  # name, args...
  local name=$1
  shift
  local start=$(date +%s%N)
  "$umlab" "$@" --device=h200 --format=json > "$work/$name.json" 2>> "$log"
  local code=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "$name: exit $code in $ms ms: umlab $*" | tee -a "$log"
}
run mlp_half compare --backend=cuda --workload=mlp --capacity=0.5 --policies="$policies"
run mlp_full run --backend=cuda --workload=mlp --capacity=1.0 --policy=demand
run mlp_small_record record --backend=cuda --workload=mlp \
  --workload-arg layers=2,hidden=512,batch=256,iterations=2 --capacity=0.5 \
  --output="$out/mlp_small_cuda.umt"
for extra in ${UMLAB_EXTRA_WORKLOADS:-}; do  # NAME:ARGS, e.g. bert-base:batch=8
  run "extra_${extra%%:*}" compare --backend=cuda --workload="${extra%%:*}" \
    --workload-arg "${extra#*:}" --capacity=0.5 --policies="$policies"
done

{
  printf '{"probe":"%s"' "$(tr -d '\n"' < "$work/probe.txt")"
  printf ',\n"calibration":%s' "$(tr -d '\n' < "$work/calibration.json" | grep . || echo null)"
  for f in "$work"/*.json; do
    case "$f" in */calibration.json) continue ;; esac
    printf ',\n"%s":%s' "$(basename "$f" .json)" "$(tr -d '\n' < "$f" | grep . || echo null)"
  done
  printf '}\n'
} > "$out/report.json"
rm -rf "$work"
echo "report: $out/report.json" | tee -a "$log"
