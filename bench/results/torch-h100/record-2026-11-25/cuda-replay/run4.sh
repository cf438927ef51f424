#!/usr/bin/env bash
# Session 8, run 4: the recorded real trainings replayed by the cuda
# backend's replay kernel on the real driver (ordered access, as the sim's
# default): is the replay as slow as the sim, where PyTorch itself is fast?
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
mkdir -p /tmp/o
nvidia-smi --query-gpu=name --format=csv > /tmp/o/gpu.txt
for m in gpt2 resnet50 bert; do
  for c in 0.75 0.5; do
    timeout 120 .device/umlab replay tests/data/torch/$m.umt --backend=cuda:memory=driver \
      --policy=demand --capacity=$c --format=json --quiet > /tmp/o/cuda_${m}_$c.json 2> /tmp/o/cuda_${m}_$c.err
    echo "$m $c rc=$?" >> /tmp/o/status.txt
  done
done
cat /tmp/o/status.txt; head -c 300 /tmp/o/cuda_gpt2_0.5.err
tar czf $OUT/run4.tgz -C /tmp/o .
