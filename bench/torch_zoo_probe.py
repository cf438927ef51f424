#!/usr/bin/env python3
"""Measures real PyTorch training iterations of the zoo's models on a GPU.

For each model: parameters, peak memory allocated and reserved by PyTorch's
caching allocator over the steady iterations, CUDA kernels launched per
steady iteration (torch.profiler), their summed GPU time, and the wall time
of an iteration. These are the figures umlab's zoo generators are checked
against (docs/workloads.md, "The zoo against PyTorch"). Prints one JSON
object per model.

Models are built from their configs with random weights (no network), fp32,
trained with Adam (lr 1e-4) as the zoo's default; --foreach=off makes Adam
launch one kernel per parameter tensor, as the zoo's generator does.

  python3 bench/torch_zoo_probe.py [--models gpt2-small:1,resnet50:32] [--iterations 4]
"""
import argparse
import json
import sys
import time

import torch


def build(name, batch):
    """Returns (model, a function that makes one batch's inputs and loss)."""
    if name in ("gpt2-small", "bert-base"):
        import transformers
        if name == "gpt2-small":
            config = transformers.GPT2Config()  # 124 M, 1024 positions
            model = transformers.GPT2LMHeadModel(config)
            seq, vocab = config.n_positions, config.vocab_size
        else:
            config = transformers.BertConfig()  # base, 512 positions
            model = transformers.BertForMaskedLM(config)
            seq, vocab = config.max_position_embeddings, config.vocab_size
        tokens = torch.randint(0, vocab, (batch, seq), device="cuda")

        def step(m):
            return m(input_ids=tokens, labels=tokens).loss
        return model, step
    import torchvision
    constructors = {"resnet50": torchvision.models.resnet50,
                    "vit-b": torchvision.models.vit_b_16,
                    "mobilenet": torchvision.models.mobilenet_v2}
    model = constructors[name]()
    images = torch.randn(batch, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (batch,), device="cuda")

    def step(m):
        return torch.nn.functional.cross_entropy(m(images), labels)
    return model, step


def dump_iteration(directory, name, kernels, iteration):
    """Writes one steady iteration's kernels (name, GPU time) and its caching
    allocator events (action, size), for matching the zoo's generators."""
    with open(f"{directory}/{name}.kernels.json", "w") as out:
        json.dump([[e.name, getattr(e, "device_time", None) or e.cuda_time] for e in kernels], out)
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python")
    iteration()
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = [[e["action"], e["size"], e["addr"]] for trace in snapshot["device_traces"] for e in trace]
    segments = [[s["address"], s["total_size"], s["segment_type"]] for s in snapshot["segments"]]
    with open(f"{directory}/{name}.memory.json", "w") as out:
        json.dump({"events": events, "segments": segments}, out)


def probe(name, batch, iterations, foreach, dump=None):
    torch.manual_seed(0)
    model, loss_of = build(name, batch)
    model = model.cuda().train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4,
                                 foreach=None if foreach == "default" else False)

    def iteration():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(model)
        loss.backward()
        optimizer.step()
        return loss

    iteration()  # the first iteration allocates optimizer state and warms up
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        loss = iteration()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    stats = {"allocated": torch.cuda.max_memory_allocated(),
             "reserved": torch.cuda.max_memory_reserved()}
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        iteration()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith("Memcpy") and not e.name.startswith("Memset")]
    if dump:
        dump_iteration(dump, name, kernels, iteration)
    kernel_us = sum(e.device_time for e in kernels) if kernels and hasattr(kernels[0], "device_time") \
        else sum(e.cuda_time for e in kernels)
    return {
        "model": name, "batch": batch, "foreach": foreach,
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameter_tensors": sum(1 for _ in model.parameters()),
        "peak_allocated_bytes": stats["allocated"], "peak_reserved_bytes": stats["reserved"],
        "kernels_per_iteration": len(kernels), "kernel_time_us": kernel_us,
        "iteration_ms_median": sorted(times)[len(times) // 2] * 1e3,
        "loss": float(loss),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2-small:1,bert-base:8,resnet50:32,vit-b:16,mobilenet:64",
                        help="NAME:BATCH,... (default: the fidelity matrix's)")
    parser.add_argument("--iterations", type=int, default=4, help="steady iterations timed")
    parser.add_argument("--foreach", choices=["default", "off"], default="default",
                        help="Adam's multi-tensor kernels (PyTorch's default) or one kernel per tensor")
    parser.add_argument("--dump", metavar="DIR",
                        help="also write each model's kernels and allocator events of one steady iteration")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_zoo_probe: no CUDA device; run it on the GPU machine")
    for item in args.models.split(","):
        name, _, batch = item.partition(":")
        result = probe(name, int(batch or 1), args.iterations, args.foreach, args.dump)
        print(json.dumps(result), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
