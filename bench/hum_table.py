#!/usr/bin/env python3
"""The per-program table of docs/hum.md: HUM against plain copies and plain UM.

Runs `umlab compare` on each copy program (workloads/hum/) with the policies
that stand for the thesis's schemes (§7.1): memcpy (CUDA, the original
program), uvm-default (CUDA-UM: copies removed, the driver faulting pages
in), hum, and hum:sched=false (HUM-no-sched), at a capacity that holds every
buffer, as the thesis's datasets fit in GPU memory. Times are the timed
region, the program's one iteration (per_iteration[0].time_ns). Prints a
Markdown table, with the geometric mean per suite and over all.

  bench/hum_table.py [--umlab=build/cli/umlab] [--device=v100-pcie3] [-- extra compare args]

With --threads, the thesis's Fig. 7.3 instead: hum with 1 to 16 copy threads,
the geometric-mean speedup per suite over one thread.
"""
import argparse
import json
import math
import subprocess
import sys

PROGRAMS = {
    "Parboil": ["parboil-sgemm", "parboil-spmv", "parboil-lbm", "parboil-tpacf"],
    "Rodinia": ["rodinia-cfd", "rodinia-srad", "rodinia-pathfinder"],
    "CUDA Samples": ["cuda-vectoradd", "cuda-matrixmul", "cuda-blackscholes"],
}
POLICIES = ["memcpy", "uvm-default", "hum", "hum:sched=false"]


THREADS = [1, 2, 4, 8, 16]


def run(umlab, workload, device, extra, policies=POLICIES):
    command = [umlab, "compare", f"--workload={workload}", f"--device={device}", "--capacity=1",
               "--policies=" + ",".join(policies), "--format=json", "--quiet"] + extra
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    runs = {r["policy"]: r for r in json.loads(out)["runs"]}
    return {p: runs[p] for p in policies}


def threads_sweep(args, extra):
    policies = [f"hum:threads={t}" for t in THREADS]
    print("| suite | " + " | ".join(f"{t} threads" for t in THREADS) + " |")
    print("| --- |" + " ---: |" * len(THREADS))
    for suite, programs in PROGRAMS.items():
        speedups = {t: [] for t in THREADS}
        for workload in programs:
            runs = run(args.umlab, workload, args.device, extra, policies)
            one = runs[policies[0]]["per_iteration"][0]["time_ns"]
            for t, policy in zip(THREADS, policies):
                speedups[t].append(one / runs[policy]["per_iteration"][0]["time_ns"])
        print(f"| {suite} | " + " | ".join(f"{geomean(speedups[t]):.2f}x" for t in THREADS) + " |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--umlab", default="build/cli/umlab")
    parser.add_argument("--device", default="v100-pcie3")
    parser.add_argument("--threads", action="store_true", help="the copy-thread sweep")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if args.threads:
        threads_sweep(args, extra)
        return
    print("| program | memcpy ms | uvm-default ms | hum ms | hum:sched=false ms | "
          "hum vs memcpy | hum vs uvm-default | no-sched vs memcpy | early launches |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    every = {"memcpy": [], "uvm-default": []}
    for suite, programs in PROGRAMS.items():
        suite_speedups = {"memcpy": [], "uvm-default": []}
        for workload in programs:
            runs = run(args.umlab, workload, args.device, extra)
            ms = {p: runs[p]["per_iteration"][0]["time_ns"] / 1e6 for p in POLICIES}
            over_copies = ms["memcpy"] / ms["hum"]
            over_um = ms["uvm-default"] / ms["hum"]
            suite_speedups["memcpy"].append(over_copies)
            suite_speedups["uvm-default"].append(over_um)
            print(f"| {workload} | {ms['memcpy']:.2f} | {ms['uvm-default']:.2f} | "
                  f"{ms['hum']:.2f} | {ms['hum:sched=false']:.2f} | {over_copies:.2f}x | "
                  f"{over_um:.2f}x | {ms['memcpy'] / ms['hum:sched=false']:.2f}x | "
                  f"{runs['hum']['early_launches']} |")
            sys.stdout.flush()
        for base in every:
            every[base] += suite_speedups[base]
        print(f"| *{suite}, geometric mean* | | | | | "
              f"*{geomean(suite_speedups['memcpy']):.2f}x* | "
              f"*{geomean(suite_speedups['uvm-default']):.2f}x* | | |")
    print(f"| *all, geometric mean* | | | | | *{geomean(every['memcpy']):.2f}x* | "
          f"*{geomean(every['uvm-default']):.2f}x* | | |")


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


if __name__ == "__main__":
    main()
