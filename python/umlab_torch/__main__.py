"""python3 -m umlab_torch [options] -- SCRIPT [ARGS...]

Runs a PyTorch training script on CUDA managed memory under umlab and
reports, per iteration the script marks, its time, CUPTI's faults and the
bytes the UVM driver moved each way (with the driver's reason).

--capacity is the device memory left for managed memory: a fraction of the
training's footprint (its peak managed memory, measured first by a run
without a balloon) or a size such as 6GiB. Below 1.0 the GPU is ballooned
with cudaMalloc so that the driver runs out of memory by itself (real
oversubscription); the balloon is released on every way out.

--policies runs each capacity once per policy: `driver` is the UVM driver
alone; any other name is a umlab policy (e.g. deepum) whose engine runs
beside the training, hears of each kernel as the GPU reaches it (a stream
stamp before and after it, named by DeepUM's execution id) and of faults
and the driver's evictions through CUPTI, and prefetches, pre-evicts and
discards on a stream of its own while the driver serves the faults. The
caching allocator's blocks reach the engine through PyTorch's allocator
trace hook (docs/torch.md).

--record=FILE.umt records the training as a umlab program that the sim
replays with any policy (`umlab replay FILE.umt --policy=deepum`): every
kernel in launch order with its execution id and its time on the GPU, the
allocator's segments and blocks, and each kernel's access set, read off its
argument words. The run without a balloon writes the file (its kernel times
are compute, not fault stalls); every other run records too and reports how
many of CUPTI's fault records its access sets explain (docs/torch.md).
"""
import argparse
import json
import os
import re
import runpy
import subprocess
import sys
import tempfile

import umlab_torch

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB)?$")
_UNITS = {None: 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def parse_capacity(text):
    """('fraction', f) or ('bytes', n); raises ValueError with what to write."""
    try:
        value = float(text)
        if 0 < value <= 1:
            return ("fraction", value)
    except ValueError:
        pass
    match = _SIZE.match(text.strip())
    if match and match.group(2):
        return ("bytes", int(float(match.group(1)) * _UNITS[match.group(2)]))
    raise ValueError(f"--capacity={text}: give a fraction of the footprint in (0, 1] "
                     "or a size such as 6GiB")


def host_memory_bytes():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def child(args, script_argv):
    """One measured run, in this process: start the session, route PyTorch's
    allocations to managed memory, run the script, write the report."""
    import torch
    if not torch.cuda.is_available():
        sys.exit("umlab_torch: PyTorch sees no CUDA device; run it on a GPU machine")
    for name in ("_cuda_beginAllocateToPool", "_cuda_endAllocateToPool"):
        if not hasattr(torch._C, name):
            sys.exit(f"umlab_torch: this PyTorch ({torch.__version__}) lacks torch._C.{name}, "
                     "which routes every thread's allocations to one pool; PyTorch 2.5 or "
                     "later has it")
    library = umlab_torch.load()
    torch.cuda.set_device(args.gpu)
    policy = b"" if args.policy == "driver" else args.policy.encode()
    record_path = (args.record_path or "").encode()
    if library.umlab_torch_start(args.gpu, args.capacity_bytes, host_memory_bytes() // 2,
                                 policy, 1 if args.recording else 0, record_path,
                                 " ".join(script_argv).encode()) != 0:
        sys.exit(library.umlab_torch_error().decode())
    report = b""
    block_trace = "not asked (the driver alone)"
    if args.policy != "driver" or args.recording:
        from umlab_torch import block_trace as tracer
        block_trace = tracer.attach(umlab_torch.library_path()) or "attached"
    try:
        allocator = torch.cuda.memory.CUDAPluggableAllocator(umlab_torch.library_path(),
                                                             "umlab_malloc", "umlab_free")
        pool = torch.cuda.MemPool(allocator.allocator())
        # Every stream of the device, so autograd's backward thread allocates
        # there too (torch.cuda.use_mem_pool routes only the calling thread).
        torch._C._cuda_beginAllocateToPool(args.gpu, pool.id)
        try:
            sys.argv = script_argv
            runpy.run_path(script_argv[0], run_name="__main__")
        finally:
            torch._C._cuda_endAllocateToPool(args.gpu, pool.id)
            torch.cuda.synchronize()
    finally:
        report = library.umlab_torch_stop()
    detail = json.loads(report.decode())
    detail["block_trace"] = block_trace
    with open(args.report, "w") as out:
        json.dump(detail, out)


def run_once(args, script_argv, capacity_bytes, policy="driver", record_path=None):
    """Runs the script in a child process; returns (report, the script's JSON lines).
    Under --record every run records; the one given `record_path` writes it."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        report_path = handle.name
    command = [sys.executable, "-m", "umlab_torch", "--child", f"--gpu={args.gpu}",
               f"--capacity-bytes={capacity_bytes}", f"--policy={policy}",
               f"--report={report_path}"]
    if args.record:
        command.append("--recording")
    if record_path:
        command.append(f"--record-path={record_path}")
    command += ["--", *script_argv]
    try:
        completed = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        sys.stdout.write(completed.stdout)
        if completed.returncode != 0:
            sys.exit(f"umlab_torch: the script exited with {completed.returncode} "
                     f"(capacity {capacity_bytes or 'unlimited'} bytes, policy {policy})")
        with open(report_path) as report_file:
            report = json.load(report_file)
    finally:
        os.unlink(report_path)
    lines = []
    for line in completed.stdout.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    report["script_lines"] = lines
    return report


def summarise(report):
    iterations = report["iterations"][1:] or report["iterations"]  # steady: after the first
    if not iterations:
        return "no iterations marked (call umlab_torch.mark_iteration() in the script)"
    n = len(iterations)
    # The script's own timing where it prints it (from a synchronize to the
    # next); otherwise the time between umlab's marks.
    seconds = [line["seconds"] for line in report.get("script_lines", [])[1:] if "seconds" in line]
    times_ns = sorted(s * 1e9 for s in seconds) or sorted(i["time_ns"] for i in iterations)
    time_ms = times_ns[len(times_ns) // 2] / 1e6
    h2d = sum(i["records"]["h2d_bytes"] for i in iterations) / n / 1e9
    d2h = sum(i["records"]["d2h_bytes"] for i in iterations) / n / 1e9
    faults = sum(i["records"]["faults"] for i in iterations) / n
    line = (f"steady iteration {time_ms:9.1f} ms  faults {faults:10.0f}  "
            f"h2d {h2d:7.2f} GB  d2h {d2h:7.2f} GB  kernels {iterations[-1]['kernels']}")
    recording = report.get("recording")
    if recording:
        explained = recording["fault_records_explained"] / max(1, recording["fault_records"])
        line += (f"  recorded {recording['launches']} launches ({recording['timed_launches']} "
                 f"timed), {recording['accesses']} accesses, fault records explained "
                 f"{explained:.1%} of {recording['fault_records']}")
        if recording["path"]:
            line += f"  -> {recording['path']} ({recording['written']})"
    engine = report.get("engine")
    if engine:
        line += (f"  prefetched {engine['prefetch_bytes'] / 1e9:.2f} GB  "
                 f"pre-evictions {engine['pre_evictions']}")
        if engine["status"] != "ok":
            line += f"  engine: {engine['status']}"
    return line


CONTRACT_VERSION = "1.1"  # docs/json-contract.md


def steady_time_ns(report):
    """The median steady iteration (after the first), by the script's own
    clock where it prints one, else between umlab's marks."""
    iterations = report["iterations"][1:] or report["iterations"]
    seconds = [line["seconds"] for line in report.get("script_lines", [])[1:] if "seconds" in line]
    times = sorted(s * 1e9 for s in seconds) or sorted(i["time_ns"] for i in iterations)
    return times[len(times) // 2] if times else 0


def contract_run(report, script, footprint, ideal_iteration_ns):
    """One run of the JSON contract (docs/json-contract.md) from a session
    report. Faults and traffic are CUPTI's; the engine's counts, where a
    policy ran, are the engine's. Without an engine, what only it can count
    (faulted pages, prefetch usefulness) is 0. ideal_time_ns is the run's
    iterations at the footprint run's steady pace: the training with no
    memory pressure."""
    iterations = report["iterations"]
    engine = report.get("engine") or {}
    records = report["records"]
    time_ns = sum(i["time_ns"] for i in iterations)
    ideal = int(ideal_iteration_ns * len(iterations))
    run = {
        "policy": report.get("policy", "driver"), "backend": "torch",
        "workload": " ".join(script), "device": f"gpu {report['gpu']}",
        "capacity_bytes": report["capacity_bytes"] or footprint or 0,
        "footprint_bytes": footprint or report["peak_managed_bytes"],
        "iterations": len(iterations), "faults": records["faults"],
        "faulted_pages": engine.get("faulted_pages", 0),
        "faulted_in_flight_pages": engine.get("faulted_in_flight_pages", 0),
        "fault_batches": engine.get("fault_batches", 0),
        "faulted_blocks": engine.get("faulted_blocks", 0),
        "h2d_bytes": records["h2d_bytes"], "d2h_bytes": records["d2h_bytes"],
        # What umlab's own calls moved (CUPTI's cause "user").
        "prefetch_bytes": records["h2d_by_cause"].get("user", 0),
        "prefetch_useful_bytes": engine.get("prefetch_useful_bytes", 0),
        "evicted_bytes": engine.get("evicted_bytes", 0),
        "invalidated_bytes": engine.get("invalidated_bytes", 0),
        "time_ns": time_ns, "stall_ns": max(0, time_ns - ideal), "ideal_time_ns": ideal,
        "launch_ns": 0,
        "kernels": report["kernels"], "fault_records": records["fault_records"],
        "dropped_records": report["dropped_records"],
        "prefetch_requests": engine.get("prefetch_requests", 0),
        "pre_evictions": engine.get("pre_evictions", 0),
        "evictions": engine.get("evictions", 0),
        "device_evictions": engine.get("device_evictions", 0),
        "stale_eviction_records": engine.get("stale_eviction_records", 0),
        "thrashing_detections": records["thrashing_detections"],
        "throttled_ns": records["throttled_ns"],
        "steady_iteration_ns": steady_time_ns(report),
        "per_iteration": [{
            "faults": i["records"]["faults"], "time_ns": i["time_ns"],
            "h2d_bytes": i["records"]["h2d_bytes"], "d2h_bytes": i["records"]["d2h_bytes"],
            "stall_ns": max(0, i["time_ns"] - int(ideal_iteration_ns))} for i in iterations],
        "policy_stats": engine.get("policy_stats", {}),
    }
    return run


def runs_table(runs):
    """One row per run, as `umlab compare` prints them; speedup is against
    the driver alone at the same capacity."""
    baseline = {run["capacity_bytes"]: run["steady_iteration_ns"]
                for run in runs if run["policy"] == "driver"}
    width = max([len("policy")] + [len(run["policy"]) for run in runs])
    header = (f"{'policy':{width}s} {'capacity':>10s} {'steady iter':>12s} {'speedup':>8s} "
              f"{'faults/iter':>12s} {'h2d/iter':>10s} {'d2h/iter':>10s} {'umlab moved':>12s}")
    lines = [header, "-" * len(header)]
    for run in runs:
        n = max(1, run["iterations"])
        base = baseline.get(run["capacity_bytes"])
        speedup = f"{base / run['steady_iteration_ns']:.2f}x" if base and run[
            "steady_iteration_ns"] else "-"
        lines.append(
            f"{run['policy']:{width}s} {run['capacity_bytes'] / 2**30:>6.2f} GiB "
            f"{run['steady_iteration_ns'] / 1e6:>9.1f} ms {speedup:>8s} "
            f"{run['faults'] / n:>12.0f} {run['h2d_bytes'] / n / 2**30:>6.2f} GiB "
            f"{run['d2h_bytes'] / n / 2**30:>6.2f} GiB {run['prefetch_bytes'] / 2**30:>8.2f} GiB")
    return "\n".join(lines)


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: python3 -m umlab_torch [--capacity=C] [--policies=P] [--gpu=N] "
                 "[--output=FILE] -- SCRIPT [ARGS...]")
    split = argv.index("--")
    options, script_argv = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(prog="python3 -m umlab_torch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capacity", default="1.0",
                        help="fraction of the footprint in (0, 1], or a size such as 6GiB; "
                             "several, comma-separated, share one footprint run "
                             "(default 1.0: no balloon)")
    parser.add_argument("--policies", default="driver",
                        help="comma-separated: driver (the UVM driver alone) or umlab policy "
                             "names, each run at every capacity (default: driver)")
    parser.add_argument("--gpu", type=int, default=0, help="CUDA device ordinal")
    parser.add_argument("--policy", default="driver", help=argparse.SUPPRESS)
    parser.add_argument("--output", help="write the detailed JSON report here")
    parser.add_argument("--json", dest="contract",
                        help="write the runs as umlab's JSON contract here (docs/json-contract.md; "
                             "umlab report draws it)")
    parser.add_argument("--record", metavar="FILE.umt",
                        help="record the training as a umlab program the sim replays; the run "
                             "without a balloon writes it")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--recording", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--record-path", help=argparse.SUPPRESS)
    parser.add_argument("--capacity-bytes", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    args = parser.parse_args(options)
    if not script_argv:
        sys.exit("umlab_torch: name the training script after --")
    if args.child:
        child(args, script_argv)
        return
    try:
        capacities = [parse_capacity(item) for item in args.capacity.split(",")]
    except ValueError as error:
        sys.exit(f"umlab_torch: {error}")
    policies = [name.strip() for name in args.policies.split(",") if name.strip()]
    if not policies:
        sys.exit("umlab_torch: --policies is empty; name driver (the UVM driver alone) or a "
                 "umlab policy such as deepum")
    if args.record and not args.record.endswith(".umt"):
        sys.exit(f"umlab_torch: --record={args.record}: name a .umt file")
    if args.record and not os.path.isdir(os.path.dirname(os.path.abspath(args.record))):
        sys.exit(f"umlab_torch: --record={args.record}: its directory does not exist")
    record_path = os.path.abspath(args.record) if args.record else None
    result = {"script": script_argv, "capacity": args.capacity, "runs": []}
    footprint = None
    if any(kind == "fraction" for kind, _ in capacities) or record_path:
        # The footprint: the training's peak managed memory with no balloon,
        # and, under --record, the program with its kernels' compute times.
        full = run_once(args, script_argv, 0, record_path=record_path)
        full["label"] = "capacity 1.0 (footprint)"
        result["runs"].append(full)
        footprint = full["peak_managed_bytes"]
        result["footprint_bytes"] = footprint
        if footprint > host_memory_bytes() // 2:
            sys.exit(f"umlab_torch: the footprint ({footprint} bytes) is more than half of the "
                     "host's memory; managed memory that large is refused")
    for (kind, value), text in zip(capacities, args.capacity.split(",")):
        capacity_bytes = value if kind == "bytes" else int(value * footprint)
        for policy in policies:
            if kind == "fraction" and value >= 1 and policy == "driver":
                continue  # the footprint run was this one
            constrained = run_once(args, script_argv, capacity_bytes, policy)
            constrained["label"] = f"capacity {text}, {policy}"
            constrained["policy"] = policy
            result["runs"].append(constrained)
    for run in result["runs"]:
        print(f"umlab_torch: {run['label']:28s} {summarise(run)}", file=sys.stderr)
    footprint_run = next((r for r in result["runs"] if r["label"].endswith("(footprint)")), None)
    ideal_ns = steady_time_ns(footprint_run) if footprint_run else 0
    contract = [contract_run(run, script_argv, footprint, ideal_ns) for run in result["runs"]]
    print(runs_table(contract), file=sys.stderr)
    if args.contract:
        with open(args.contract, "w") as out:
            json.dump({"contract_version": CONTRACT_VERSION, "runs": contract}, out, indent=1)
    if args.output:
        with open(args.output, "w") as out:
            json.dump(result, out, indent=1)


if __name__ == "__main__":
    main()
