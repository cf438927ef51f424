#!/usr/bin/env python3
"""How much a GPU reads when it computes on parameters left in host memory.

MemFerry's direct host access (DHA) pays off for a layer only if reading its
parameters in place costs less than copying them in (docs/policies.md,
memferry, "The modelling gap"). umlab's sim charges every byte a kernel
touches one crossing of the link; a GEMM on a GPU reads its weight once per
tile row of its output unless L2 keeps it. This probe measures that on the
GPU it runs on, with CuPy (cuBLAS) in fp32 as the zoo's default precision:

  - for GPT-2 small's GEMM shapes at M = 3072 rows (batch 3 x 1024 tokens):
    the GEMM with its weight on the device, the same GEMM with the weight in
    pinned host memory read in place, the weight's copy to the device, and a
    streaming read of the weight in place (one crossing per byte);
  - c_fc's GEMM over M, to see how the re-reads grow with the rows;
  - an embedding gather (3072 rows of 50257 x 768) and a LayerNorm-like
    broadcast of a 768-float weight, the reads DHA is meant for.

"DHA / stream" is the DHA GEMM's time over the streaming read's: how many
times the weight crossed, where the GEMM is bound by the link.

Run where CuPy sees a GPU: python3 bench/dha_gemm_probe.py
"""
import cupy as cp
import numpy as np


def time_us(fn, repeats=5):
    fn()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) / repeats * 1e3


def host_array(shape):
    """A float32 array in pinned host memory, and a device view of it in place
    (unified addressing: the host pointer is valid on the device)."""
    count = int(np.prod(shape))
    memory = cp.cuda.alloc_pinned_memory(count * 4)
    host = np.frombuffer(memory, np.float32, count).reshape(shape)
    host[:] = np.random.rand(*shape)
    view = cp.ndarray(shape, cp.float32,
                      cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(memory.ptr, count * 4, memory), 0))
    return host, view, memory


def main():
    props = cp.cuda.runtime.getDeviceProperties(0)
    print(props["name"].decode(), "L2", props["l2CacheSize"] >> 20, "MiB")
    rows = 3072
    for name, k, n in [("attn.c_proj", 768, 768), ("attn.c_attn", 768, 2304),
                       ("mlp.c_fc", 768, 3072), ("mlp.c_proj", 3072, 768),
                       ("lm_head", 768, 50257)]:
        size = k * n * 4
        x = cp.random.rand(rows, k, dtype=cp.float32)
        host, in_place, keep = host_array((k, n))
        on_device = cp.asarray(host)
        assert cp.allclose(x[:4] @ in_place, x[:4] @ on_device, rtol=1e-3)
        gpu = time_us(lambda: x @ on_device)
        dha = time_us(lambda: x @ in_place)
        copy = time_us(lambda: on_device.set(host))
        stream = time_us(lambda: cp.sum(in_place))
        print(f"{name:12s} weight {size / 1e6:6.1f} MB: on device {gpu:8.1f} us, DHA {dha:9.1f} us, "
              f"copy {copy:7.1f} us ({size / copy / 1e3:4.1f} GB/s), streamed in place {stream:7.1f} us "
              f"({size / stream / 1e3:4.1f} GB/s), DHA / stream {dha / stream:5.1f}")
        del keep

    k, n = 768, 3072
    host, in_place, keep = host_array((k, n))
    on_device = cp.asarray(host)
    stream = time_us(lambda: cp.sum(in_place))
    for m in [64, 256, 512, 1024, 2048, 3072, 8192]:
        x = cp.random.rand(m, k, dtype=cp.float32)
        gpu = time_us(lambda: x @ on_device)
        dha = time_us(lambda: x @ in_place)
        print(f"c_fc M={m:5d}: on device {gpu:8.1f} us, DHA {dha:9.1f} us, DHA / stream {dha / stream:5.1f}")

    vocab, dim, draws = 50257, 768, 3072
    host, table, keep = host_array((vocab, dim))
    on_device = cp.asarray(host)
    ids = cp.random.randint(0, vocab, draws)
    gpu = time_us(lambda: cp.take(on_device, ids, axis=0))
    dha = time_us(lambda: cp.take(table, ids, axis=0))
    copy = time_us(lambda: on_device.set(host))
    print(f"embedding gather of {draws} rows: on device {gpu:.1f} us, DHA {dha:.1f} us, "
          f"copying the table {copy:.1f} us")

    activations = cp.random.rand(draws, dim, dtype=cp.float32)
    host, weight, keep = host_array((dim,))
    on_device = cp.asarray(host)
    print(f"LayerNorm-like scale: on device {time_us(lambda: activations * on_device):.1f} us, "
          f"DHA {time_us(lambda: activations * weight):.1f} us")


if __name__ == "__main__":
    main()
