#!/usr/bin/env python3
"""Replay pace at capacity 1.0: each steady iteration of a cuda run against
the program's compute, the gaps between its kernels, and the per-kernel cost
of a full grid.

    bench/pace_table.py DIR [GRID_PERIOD_US]

DIR holds full_W.json (`umlab compare --backend=cuda:kernels=DIR/kernels_W.csv
--capacity=1.0 --policies=ideal,demand --format=json`) and kernels_W.csv (or
.csv.gz) per workload. The kernel log is the last policy's (compare rewrites
it per policy), so the pace is that policy's. GRID_PERIOD_US is
umlab_cuda_calibrate's full_grid_kernel us_period; without it that column is
left out.
"""
import csv, glob, gzip, json, os, sys


def read_kernels(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return list(csv.DictReader(f))


def is_steady(iteration):
    """An iteration at capacity 1.0 is steady once nothing faults in it. The
    first iteration first-touches everything, and a later one can still
    fault where the caching allocator grows its pool (the zoo's
    transformers reserve one more segment in iteration 2 once Adam's state
    is live, as PyTorch's allocator does)."""
    return not iteration.get("faults")


def steady_pace(rows, run):
    """Sums over the steady iterations: time, compute, gaps between kernels,
    kernels, and how many iterations that was. The last iteration ends at the
    last kernel's end and each starts at a kernel's begin, so the bounds are
    found walking back from there."""
    times = [it["time_ns"] for it in run["per_iteration"]]
    bounds = [int(rows[-1]["end_ns"]) + 1]
    for t in reversed(times):
        bounds.insert(0, bounds[0] - t)
    total = [0, 0, 0, 0]
    steady = 0
    for i in range(1, len(times)):
        if not is_steady(run["per_iteration"][i]):
            continue
        steady += 1
        ks = [k for k in range(len(rows)) if bounds[i] <= int(rows[k]["begin_ns"]) < bounds[i + 1]]
        if not ks:
            continue
        following = ks[1:] + ([ks[-1] + 1] if ks[-1] + 1 < len(rows) else [])
        total[0] += times[i]
        total[1] += sum(int(rows[k]["compute_ns"]) for k in ks)
        total[2] += sum(int(rows[k]["begin_ns"]) - int(rows[k - 1]["end_ns"]) for k in following)
        total[3] += len(ks)
    return total, steady


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    directory = sys.argv[1]
    period = float(sys.argv[2]) * 1e3 if len(sys.argv) == 3 else None
    header = "| workload | policy | steady iterations | steady ms | compute ms | gaps ms | kernels | vs compute + gaps |"
    if period:
        header += " vs compute + kernels x grid period |"
    print(header)
    print("| --- " * (header.count("|") - 1) + "|")
    for log in sorted(glob.glob(os.path.join(directory, "kernels_*.csv*"))):
        workload = os.path.basename(log).split("kernels_")[1].split(".csv")[0]
        with open(os.path.join(directory, f"full_{workload}.json")) as f:
            run = json.load(f)["runs"][-1]
        (time, compute, gaps, kernels), n = steady_pace(read_kernels(log), run)
        if n == 0:
            sys.exit(f"{workload}: no iteration ran without faults; run more iterations "
                     "(--workload-arg iterations=N)")
        line = (f"| {workload} | {run['policy']} | {n} | {time / n / 1e6:.3f} | {compute / n / 1e6:.3f} | "
                f"{gaps / n / 1e6:.3f} | {kernels / n:.0f} | {time / (compute + gaps):.3f}x |")
        if period:
            line += f" {time / (compute + kernels * period):.3f}x |"
        print(line)


if __name__ == "__main__":
    main()
