#!/bin/bash
# Session 20: paced calls, calls that move nothing, paging into discarded blocks.
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
P=.device/umlab_call_overlap_probe
for args in "128 3 300 cupti" "128 3 0 cupti" "128 3 300" "512 2 300 cupti"; do
  echo "== $args"
  timeout 150 $P $args > $OUT/overlap-${args// /-}.json 2> $OUT/overlap-${args// /-}.err
  echo "rc=$?"; cat $OUT/overlap-${args// /-}.err
done
$P 0 > /dev/null 2>&1; echo "bad-arg rc=$?"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
