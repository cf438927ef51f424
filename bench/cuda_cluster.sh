#!/usr/bin/env bash
# SnuRHAC on the GPUs of the device machine (docs/snurhac.md, "The cuda
# run"): gemm, hotspot, tpacf and lavaMD at the thesis's sizes (Table 7.10,
# scale 1), on 1 and 2 GPUs, with demand paging (none) and static
# prefetching (sp), against one GPU with explicit copies. Builds nothing:
# scripts/package-device.sh puts the binaries beside it, as cluster.sh.
#   .device/cluster.sh [BIN_DIR] [OUT_DIR]    (defaults: this script's folder, $OUT)
# Prints the machine (topology, peers) and a summary table; writes one JSON
# report per program and their logs to OUT_DIR. Each program is cut off
# after UMLAB_CLUSTER_TIMEOUT seconds (default 90), so that the whole run
# stays within about 8 minutes. UMLAB_CLUSTER_DEVICE_PARAM overrides the
# h200 preset the programs' compute times come from ("hbm_gbps=3350" for
# H100 SXM cards). UMLAB_CLUSTER_ARGS adds arguments to every
# umlab_cuda_cluster call ("--cupti=off": CUPTI slows the driver's paging,
# so runs meant to be timed against the sim leave it off). The sim's
# prediction for the same runs is the command printed at the end
# (deterministic: run it on any machine).
set -uo pipefail
bin=${1:-$(cd "$(dirname "$0")" && pwd)}
out=${2:-${OUT:-.}}
limit=${UMLAB_CLUSTER_TIMEOUT:-90}
# Preset overrides for the programs' compute times, e.g. "hbm_gbps=3350" on
# H100 SXM cards; the sim command printed at the end takes the same.
params=${UMLAB_CLUSTER_DEVICE_PARAM:-}
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$out"
nvidia-smi topo -m 2>&1 | tee "$out/topology.txt"
nvidia-smi --query-gpu=index,name,memory.total,pcie.link.gen.current,pcie.link.width.current \
  --format=csv 2>&1 | tee -a "$out/topology.txt"
apps="gemm hotspot tpacf lavamd"
for app in $apps; do
  start=$(date +%s)
  timeout "$limit" "$bin/umlab_cuda_cluster" --app="$app:scale=1" --devices=1,2 \
    --schemes=none,sp --device=h200 ${params:+"--device-param=$params"} \
    ${UMLAB_CLUSTER_ARGS:-} --json="$out/$app.json" > "$out/$app.txt" 2> "$out/$app.log"
  code=$?
  echo "$app: exit $code in $(( $(date +%s) - start )) s" | tee -a "$out/cluster.log"
  [ $code -eq 0 ] || tail -3 "$out/$app.log"
done
# One table: the first file's machine lines and header, every file's rows.
first=1
for app in $apps; do
  [ -s "$out/$app.txt" ] || continue
  if [ $first -eq 1 ]; then cat "$out/$app.txt"; first=0; else grep -E "^$app" "$out/$app.txt"; fi
done | tee "$out/summary.txt"
cat <<SIM
The cluster sim's prediction for the same runs (docs/snurhac.md):
  umlab snurhac --app=gemm --app=hotspot --app=tpacf --app=lavamd --devices=1,2 \\
    --schemes=none,sp --device=h200 --capacity=80GiB --devices-per-node=2 \
    ${params:+--device-param=$params}
SIM
