#!/usr/bin/env bash
# The fidelity matrix: every case on the real GPU (cuda backend) and on the
# sim with the same device preset, side by side. Runs on the GPU machine as
# one command; bench/fidelity_table.py turns OUT_DIR into the table of
# docs/fidelity.md.
#   bench/fidelity.sh BIN_DIR OUT_DIR [MODES] [CAPACITIES] [POLICIES]
# BIN_DIR is what scripts/package-device.sh made (.device). MODES are the
# cuda backend's memory modes (default "driver engine"), CAPACITIES default
# "0.75 0.5", POLICIES default demand,uvm-default,deepum. UMLAB_FIDELITY_WORKLOADS
# overrides the workloads (NAME or NAME:ARGS, space-separated), and
# UMLAB_FIDELITY_DEVICE_PARAM adds one --device-param K=V to every run. The sim
# predicts with UMLAB_FIDELITY_SIM, default sim:policy_from=user: the policy
# from user space over a modelled driver, as the cuda backend runs it.
# UMLAB_FIDELITY_CUDA_ARGS adds parameters to every cuda backend spec (e.g.
# infer_residency=true).
# UMLAB_FIDELITY_PACE=1 also runs each workload at capacity 1.0 under ideal
# and demand with the per-kernel log (OUT/full_W.json, OUT/kernels_W.csv)
# and umlab_cuda_calibrate (OUT/calibration.json), for bench/pace_table.py.
set -uo pipefail
bin=$1
out=$2
modes=${3:-driver engine}
capacities=${4:-0.75 0.5}
policies=${5:-demand,uvm-default,deepum}
sim=${UMLAB_FIDELITY_SIM:-sim:policy_from=user}
# Extra --device-param for both sides (e.g. warps=16), if any.
device_params=()
[ -n "${UMLAB_FIDELITY_DEVICE_PARAM:-}" ] && device_params=(--device-param "$UMLAB_FIDELITY_DEVICE_PARAM")
workloads=${UMLAB_FIDELITY_WORKLOADS:-mlp gpt2-small:batch=1 bert-base:batch=8 \
resnet50:batch=32 vit-b:batch=16 mobilenet:batch=64}
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out"
log="$out/fidelity.log"
umlab="$bin/umlab"

run() {  # file, args...
  local file=$1
  shift
  local start=$(date +%s%N)
  "$umlab" compare "$@" --device=h200 "${device_params[@]}" --policies="$policies" --format=json \
    > "$out/$file.json" 2>> "$log"
  local code=$?
  echo "$file: exit $code in $(( ($(date +%s%N) - start) / 1000000 )) ms: umlab compare $*" | tee -a "$log"
}

if [ "${UMLAB_FIDELITY_PACE:-0}" = 1 ]; then
  "$bin/umlab_cuda_calibrate" > "$out/calibration.json" 2>> "$log"
  echo "calibration: exit $?" | tee -a "$log"
fi
for workload in $workloads; do
  name=${workload%%:*}
  args=()
  [ "$name" != "$workload" ] && args=(--workload-arg "${workload#*:}")
  if [ "${UMLAB_FIDELITY_PACE:-0}" = 1 ]; then
    # compare rewrites the kernel log per policy: it ends as demand's.
    policies_saved=$policies
    policies=ideal,demand
    run "full_${name}" --backend="cuda:kernels=$out/kernels_${name}.csv" --workload="$name" \
      "${args[@]}" --capacity=1.0
    policies=$policies_saved
  fi
  for capacity in $capacities; do
    run "sim_${name}_${capacity}" --backend="$sim" --workload="$name" "${args[@]}" --capacity="$capacity"
    for mode in $modes; do
      run "cuda-${mode}_${name}_${capacity}" \
        --backend="cuda:memory=$mode${UMLAB_FIDELITY_CUDA_ARGS:+,$UMLAB_FIDELITY_CUDA_ARGS}" --workload="$name" \
        "${args[@]}" --capacity="$capacity"
    done
  done
done
