#!/bin/bash
# Session 14: host kernels on the GPU (the new CudaBackendTest case and the
# rest), the remote gather sweep by row size, and the ZeRO-Offload variant
# on the real driver.
export LD_LIBRARY_PATH=$PWD/.device/lib:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv
mkdir -p $OUT
timeout 300 ./.device/cuda_backend_test 2>&1 | tail -40 | tee $OUT/cuda_backend_test.txt
timeout 240 ./.device/umlab_remote_probe > $OUT/remote_probe.json 2> $OUT/remote_probe.err; echo "probe rc=$?"
python3 -c "
import json
d=json.load(open('$OUT/remote_probe.json'))
for g in d.get('gathers',[]): print(g)
" 2>&1 | tail -25
W="--workload=gpt2-small --workload-arg offload=true --workload-arg precision=fp16 --workload-arg batch=2 --workload-arg seq=256 --workload-arg iterations=4"
for p in demand zero-offload:freed_pages=recycle memferry:freed_pages=recycle; do
  for mode in engine driver; do
    f=$OUT/offload_${p%%:*}_$mode
    timeout 200 ./.device/umlab run $W --capacity=1.0 --device=h200 --backend=cuda:memory=$mode --policy=$p --format=json > $f.json 2> $f.err
    echo "$p $mode rc=$?"; tail -1 $f.err
    python3 -c "
import json
d=json.load(open('$f.json'))['runs'][0]
print('$p $mode', 'iters_ms', [round(i['time_ns']/1e6,1) for i in d['per_iteration']], 'h2d_MiB', round(d['h2d_bytes']/2**20), 'd2h_MiB', round(d['d2h_bytes']/2**20), 'host_kernels', d['host_kernels'], 'host_wb_MiB', round(d['host_writeback_bytes']/2**20), 'host_wait_ms', round(d['host_wait_ns']/1e6,1), 'faulted_blocks', d['faulted_blocks'], 'ideal_ms', round(d['ideal_time_ns']/1e6,1))
" 2>&1 | tail -1
  done
done
nvidia-smi --query-gpu=memory.used --format=csv
