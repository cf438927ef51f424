#!/bin/bash
# Session 11: the driver's eviction cost by victim history and call pattern.
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
for i in 1 2; do
  timeout 200 .device/umlab_cuda_calibrate > $OUT/calibration$i.json 2> $OUT/calibration$i.err
  echo "rc=$?"
  python3 -c "import json;d=json.load(open('$OUT/calibration$i.json'));print(json.dumps(d['policy_calls']))"
done
nvidia-smi --query-gpu=memory.used --format=csv,noheader
