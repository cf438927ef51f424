#!/usr/bin/env python3
"""Runs `umlab compare` on every DNN workload at its default (paper) batch
size and prints the table issue closing notes and docs/workloads.md quote:
footprint, kernels per iteration, steady faults and time per iteration for
each policy, the policy bounds of docs/policies.md, and the wall time of
each compare on this machine.

usage: bench/zoo_table.py [--umlab build/cli/umlab] [--capacity 0.5]
                          [--models gpt2-small,bert-base,...] [--json-dir DIR]

Steady means every iteration but the first, as in `umlab compare`. Wall
times are for the whole compare (all policies, --jobs=0) and depend on the
machine and its load; they are reported, not asserted.
"""
import argparse
import json
import os
import subprocess
import sys
import time

MODELS = ["gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "bert-base", "bert-large",
          "vit-b", "vit-l", "resnet50", "resnet152", "resnet200", "mobilenet", "dlrm"]
POLICIES = ["demand", "uvm-default", "deepum-prefetch", "deepum-preevict", "deepum", "ideal"]
ABLATION = ["demand", "deepum-prefetch", "deepum-preevict", "deepum"]


def steady(run, key):
    its = run["per_iteration"][1:] or run["per_iteration"]
    return sum(it[key] for it in its) / len(its)


def describe_kernels(umlab, model):
    """Kernels per iteration, from `umlab workloads --describe`."""
    out = subprocess.run([umlab, "workloads", "--describe", model], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "kernels" in line and "iteration" in line:
            for token in line.replace(",", "").split():
                if token.isdigit():
                    return int(token)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--umlab", default="build/cli/umlab")
    parser.add_argument("--capacity", default="0.5")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json-dir", help="keep each compare's JSON here")
    parser.add_argument("--timeout", type=int, default=1800,
                        help="seconds before a compare is abandoned (reported as such)")
    args = parser.parse_args()
    if not os.access(args.umlab, os.X_OK):
        sys.exit(f"zoo_table: {args.umlab} is not an executable; build umlab or pass --umlab")

    rows = []
    for model in args.models.split(","):
        command = [args.umlab, "compare", f"--workload={model}", f"--capacity={args.capacity}",
                   "--format=json", "--policies=" + ",".join(POLICIES)]
        start = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{model}: no result within {args.timeout} s", file=sys.stderr)
            rows.append((model, None, time.monotonic() - start))
            continue
        wall = time.monotonic() - start
        if done.returncode != 0:
            print(f"{model}: {done.stderr.strip()}", file=sys.stderr)
            rows.append((model, None, wall))
            continue
        result = json.loads(done.stdout)
        if args.json_dir:
            os.makedirs(args.json_dir, exist_ok=True)
            with open(os.path.join(args.json_dir, f"{model}.json"), "w") as f:
                f.write(done.stdout)
        result["kernels_per_iteration"] = describe_kernels(args.umlab, model)
        rows.append((model, result, wall))
        print(f"{model}: {wall:.1f} s", file=sys.stderr)

    print(f"capacity {args.capacity}, sim backend, default device; steady = all iterations "
          "but the first\n")
    print("| model | footprint | kernels/iter | demand faults/iter | best policy | its "
          "faults/iter | cut | deepum cut | time/iter: demand, uvm-default, deepum-prefetch, "
          "deepum-preevict, deepum, ideal (ms) | bounds | compare wall |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model, result, wall in rows:
        if result is None:
            print(f"| {model} | - | - | - | - | - | - | - | failed or timed out | - | "
                  f"{wall:.0f} s |")
            continue
        runs = {run["policy"]: run for run in result["runs"]}
        demand = runs["demand"]
        footprint = demand["footprint_bytes"] / 2**30
        demand_faults = steady(demand, "faults")
        candidates = [p for p in POLICIES if p not in ("demand", "ideal")]
        best = min(candidates, key=lambda p: steady(runs[p], "time_ns"))
        best_faults = steady(runs[best], "faults")
        deepum_cut = 1 - steady(runs["deepum"], "faults") / demand_faults
        times = [steady(runs[p], "time_ns") / 1e6 for p in POLICIES]
        ablation = [steady(runs[p], "time_ns") for p in ABLATION]
        checks = []
        checks.append("cut" if deepum_cut >= 0.95 else "CUT<95%")
        uvm = steady(runs["uvm-default"], "time_ns")
        checks.append("order" if steady(runs["deepum"], "time_ns") < uvm <
                      steady(demand, "time_ns") else "ORDER")
        checks.append("ablation" if all(b <= a for a, b in zip(ablation, ablation[1:]))
                      else "ABLATION")
        print(f"| {model} | {footprint:.1f} GiB | {result['kernels_per_iteration']} | "
              f"{demand_faults:,.0f} | {best} | {best_faults:,.0f} | "
              f"{1 - best_faults / demand_faults:.1%} | {deepum_cut:.1%} | "
              + ", ".join(f"{t:,.0f}" for t in times)
              + f" | {' '.join(checks)} | {wall:.0f} s |")


if __name__ == "__main__":
    main()
