#!/usr/bin/env bash
# A real Slurm test of `umlab sweep`: starts a one-node cluster on this
# machine (munged with a fresh key, slurmctld and slurmd with a generated
# configuration, all in a temporary folder), submits a 20-case grid as job
# arrays through the scripts sweep writes, waits, merges, and checks that the
# merged JSON and CSV are byte for byte those of the same grid run through
# GNU parallel here. The cluster is torn down on every exit path.
#
#   tests/slurm_sweep.sh [UMLAB]     UMLAB defaults to build/cli/umlab
#
# Installs nothing: it needs Debian's slurm-wlm, munge and parallel, and
# exits 77 (skipped) without them. Runs as root (the daemons run as the
# caller; SlurmUser is the caller too). Built for containers: no cgroups
# (proctrack/linuxproc, task/none). Not part of .ci/run; docs/sweeps.md
# gives the command and a measured run.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
umlab=$(realpath "${1:-$root/build/cli/umlab}")
[ -x "$umlab" ] || { echo "slurm_sweep: no umlab at $umlab; build it first" >&2; exit 2; }
for tool in munged mungekey slurmctld slurmd sbatch squeue sinfo parallel; do
  if ! command -v "$tool" >/dev/null; then
    echo "slurm_sweep: skipped: $tool is not installed (Debian: slurm-wlm munge parallel)"
    exit 77
  fi
done

work=$(mktemp -d /tmp/umlab-slurm.XXXXXX)
pids=()
teardown() {
  local status=$?
  # Only the daemons this script started, by pid.
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" -ne 0 ] && [ -d "$work" ]; then
    echo "slurm_sweep: failed (exit $status); daemon logs:" >&2
    tail -n 20 "$work"/*.log >&2 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap teardown EXIT
trap 'exit 130' INT TERM

started=$(date +%s.%N)
user=$(id -un)
host=$(hostname -s)
port=$((20000 + RANDOM % 20000))

# munge: a fresh key and its own socket, so a system munged is not touched.
mkdir -p "$work/munge" && chmod 700 "$work/munge"
mungekey --create --keyfile="$work/munge/munge.key" 2>/dev/null
munged --force --socket="$work/munge/munge.socket" --key-file="$work/munge/munge.key" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munged.log" \
  --seed-file="$work/munge/munged.seed"
pids+=("$(cat "$work/munge/munged.pid")")

mkdir -p "$work/state" "$work/spool"
cat >"$work/slurm.conf" <<EOF
ClusterName=umlabtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=2048 State=UNKNOWN
PartitionName=umlab Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$work/slurm.conf"
slurmctld -D -i -f "$SLURM_CONF" >/dev/null 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 60); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || { echo "slurm_sweep: the node did not come up (state '$state')" >&2; exit 1; }
up=$(date +%s.%N)

# The grid: 5 policies x 2 capacities x 2 devices on a small mlp.
cat >"$work/grid.json" <<EOF
{"fixed": {"workload": "mlp", "workload-arg": ["layers=2,hidden=512,batch=256,iterations=3"]},
 "axes": {"policy": ["demand", "uvm-default", "deepum", "deepum-prefetch", "ideal"],
          "capacity": [0.5, 1.0],
          "device": ["v100-pcie3", "h200"]},
 "slurm": {"max_running": 4}}
EOF

"$umlab" sweep "$work/grid.json" --results="$work/slurm-run" --umlab="$umlab" >/dev/null
ids=$(sh "$work/slurm-run/slurm/submit.sh" | cut -d';' -f1 | paste -sd, -)
echo "slurm_sweep: submitted job array(s) $ids"
for _ in $(seq 600); do
  [ -z "$(squeue -h -j "$ids" 2>/dev/null)" ] && break
  sleep 0.5
done
[ -z "$(squeue -h -j "$ids" 2>/dev/null)" ] || { echo "slurm_sweep: jobs still queued" >&2; exit 1; }
slurm_done=$(date +%s.%N)
"$umlab" merge "$work/slurm-run"

local_start=$(date +%s.%N)
"$umlab" sweep "$work/grid.json" --results="$work/local-run" --umlab="$umlab" --run=local \
  >/dev/null
local_done=$(date +%s.%N)
"$umlab" merge "$work/local-run"

cmp "$work/slurm-run/merged.json" "$work/local-run/merged.json"
cmp "$work/slurm-run/merged.csv" "$work/local-run/merged.csv"
runs=$(grep -c '"case":' "$work/slurm-run/merged.json")
[ "$runs" -eq 20 ] || { echo "slurm_sweep: $runs runs merged, expected 20" >&2; exit 1; }
printf 'slurm_sweep: passed: 20 cases, Slurm and GNU parallel merge identically\n'
awk -v a="$started" -v b="$up" -v c="$slurm_done" -v d="$local_start" -v e="$local_done" \
  -v f="$(date +%s.%N)" 'BEGIN { printf "  cluster up in %.1f s; Slurm run %.1f s; GNU parallel run %.1f s; total %.1f s\n", b - a, c - b, e - d, f - a }'
