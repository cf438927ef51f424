#!/usr/bin/env bash
# The fidelity matrix's cuda runs again, each on its own under
# bench/pcie_traffic.py, so that NVML's PCIe byte counts stand beside
# CUPTI's (docs/fidelity.md, "CUPTI's missing write-backs"). Runs on the GPU
# machine; bench/pcie_table.py reads OUT_DIR.
#   bench/pcie_pass.sh BIN_DIR OUT_DIR [CAPACITIES] [POLICIES]
# BIN_DIR is what scripts/package-device.sh made (.device). CAPACITIES
# default "0.75 0.5", POLICIES "demand deepum" (demand first: its traffic
# calibrates NVML's counts). UMLAB_FIDELITY_WORKLOADS overrides the
# workloads as for bench/fidelity.sh.
set -uo pipefail
bin=$1
out=$2
capacities=${3:-0.75 0.5}
policies=${4:-demand deepum}
workloads=${UMLAB_FIDELITY_WORKLOADS:-mlp gpt2-small:batch=1 bert-base:batch=8 \
resnet50:batch=32 vit-b:batch=16 mobilenet:batch=64}
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out"
for workload in $workloads; do
  name=${workload%%:*}
  args=()
  [ "$name" != "$workload" ] && args=(--workload-arg "${workload#*:}")
  for capacity in $capacities; do
    for policy in $policies; do
      case="${name}_${capacity}_${policy}"
      python3 "$here/pcie_traffic.py" --period-ms 10 --stdout "$out/run-$case.json" -- \
        "$bin/umlab" run --backend=cuda:memory=driver --workload="$name" "${args[@]}" \
        --capacity="$capacity" --policy="$policy" --device=h200 --format=json \
        > "$out/pcie-$case.json" 2>> "$out/pcie.log"
      echo "$case: exit $?" >> "$out/pcie.log"
    done
  done
done
