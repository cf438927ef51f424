#!/bin/bash
# CPU-Adam's pace on the device machine's host, for the presets' cpu_gbps.
set -u
nproc; lscpu | grep -E "Model name|Socket|Core|Thread|NUMA node\(s\)" ; free -g | head -2
python3 - <<'PY' 2>&1 | tee $OUT/cpu_adam.txt
import time, torch
torch.manual_seed(0)
print("torch", torch.__version__, "threads", torch.get_num_threads())
n = 200_000_000
def bench(label, fn, reps=5):
    fn()
    ts=[]
    for _ in range(reps):
        t=time.perf_counter(); fn(); ts.append(time.perf_counter()-t)
    ts.sort(); return ts[len(ts)//2]
a = torch.empty(n, dtype=torch.float32).uniform_()
b = torch.empty_like(a)
t = bench("copy", lambda: b.copy_(a))
print(f"copy fp32 {n} elems: {t*1e3:.1f} ms, {2*4*n/t/1e9:.1f} GB/s (read+write)")
t = bench("triad", lambda: torch.add(a, b, alpha=2.0, out=b))
print(f"add-inplace: {t*1e3:.1f} ms, {3*4*n/t/1e9:.1f} GB/s")
del a, b
for fused in (False, True):
  for foreach in ((False,) if fused else (False, True)):
    p = torch.nn.Parameter(torch.empty(n, dtype=torch.float32).uniform_())
    p.grad = torch.empty_like(p).uniform_()
    kw = dict(lr=1e-3)
    if fused: kw["fused"]=True
    else: kw["foreach"]=foreach
    try:
        opt = torch.optim.Adam([p], **kw)
    except Exception as e:
        print("adam", kw, "unavailable:", e); continue
    t = bench("adam", lambda: opt.step())
    # per parameter: read p, g, m, v (16 B), write p, m, v (12 B)
    print(f"adam {kw}: {t*1e3:.1f} ms for {n} params, {t/n*1e9:.3f} ns/param, {28*n/t/1e9:.1f} GB/s at 28 B/param")
    del opt, p
PY
