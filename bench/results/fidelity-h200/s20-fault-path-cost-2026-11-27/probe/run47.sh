#!/bin/bash
# Session 20: how a policy's calls overlap the driver's fault path (first call;
# the probe then had no PACE_US argument: its third argument was "cupti").
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
P=.device/umlab_call_overlap_probe
for args in "128 3" "128 3 cupti" "512 2" "512 2 cupti" "32 3 cupti"; do
  echo "== $args"
  timeout 120 $P $args > $OUT/overlap-${args// /-}.json 2> $OUT/overlap-${args// /-}.err
  echo "rc=$?"; cat $OUT/overlap-${args// /-}.err
done
