#!/usr/bin/env python3
"""What the engine believes while the driver is full: reads the cuda
backend's memory logs (cuda:memory_log=FILE, docs/cuda.md) and prints, per
log and per part of the run, how many frames the engine's books had free
at the moments cudaMemGetInfo said the GPU was full.

    bench/memory_log_table.py LOG.csv[.gz] [LOG.csv[.gz] ...]

A sample counts as full when the GPU had at most FULL_MIB free (default 4:
under a balloon the driver keeps about 3.1 MiB, docs/cuda.md). "over" is
the engine holding more frames than the capacity.
"""
import os
import sys

from cuda_logs import read_log

FULL_MIB = 4
PARTS = [(0.0, 0.15), (0.15, 0.5), (0.5, 1.0)]


def bucket(free):
    if free < 0:
        return "over"
    if free <= 1:
        return str(free)
    return "2-9" if free < 10 else "10+"


def main(paths):
    if not paths:
        sys.exit("usage: bench/memory_log_table.py LOG.csv[.gz] [LOG.csv[.gz] ...]")
    print("| log | part of the run | samples with the GPU full | engine's free frames, mean "
          "| over | 0 | 1 | 2-9 | 10+ |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for path in paths:
        rows = read_log(path, {"time_ns", "engine_used_frames", "capacity_frames",
                               "gpu_free_bytes"}, "memory log", allow_empty=True)
        if not rows:
            print(f"| {os.path.basename(path)} | | 0 | | | | | | |")
            continue
        capacity = int(rows[0]["capacity_frames"])
        end = int(rows[-1]["time_ns"])
        for low, high in PARTS:
            free = [capacity - int(r["engine_used_frames"]) for r in rows
                    if low * end <= int(r["time_ns"]) < high * end
                    and int(r["gpu_free_bytes"]) <= FULL_MIB << 20]
            if not free:
                continue
            counts = {key: 0 for key in ("over", "0", "1", "2-9", "10+")}
            for value in free:
                counts[bucket(value)] += 1
            print(f"| {os.path.basename(path)} | {low:.2f}-{high:.2f} | {len(free)} "
                  f"| {sum(free) / len(free):.1f} | "
                  + " | ".join(str(counts[k]) for k in ("over", "0", "1", "2-9", "10+")) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
