#!/usr/bin/env python3
"""Turns the output of bench/fidelity.sh into the tables of docs/fidelity.md.

  bench/fidelity_table.py OUT_DIR [--mode driver|engine ...]

For every workload and capacity it pairs the cuda backend's runs (measured)
with the sim's (predicted) and prints, per policy, time, h2d and d2h bytes
and faulted blocks with the prediction's error, whether the policies rank the
same way on both sides, and deepum's speedup over demand next to DeepUM's
published 3.06x. A summary line per mode gives the median and worst time
error. Errors are (predicted - measured) / measured.
"""
import argparse
import glob
import json
import os
import statistics
import sys

DEEPUM_PAPER_SPEEDUP = 3.06
# The JSON contract's major version this script reads (docs/json-contract.md).
CONTRACT_MAJOR = 1


def load(path):
    with open(path) as f:
        document = json.load(f)
    # A file without the field predates it: version 1.
    version = document.get("contract_version", "1.0")
    if int(str(version).split(".")[0]) > CONTRACT_MAJOR:
        sys.exit(f"{path}: JSON contract version {version} is newer than this script reads "
                 f"(up to {CONTRACT_MAJOR}.x); use the bench/ of the umlab that wrote it")
    return {run["policy"]: run for run in document["runs"]}


def error(predicted, measured):
    if measured == 0:
        return float("nan") if predicted else 0.0
    return (predicted - measured) / measured


def ranking(runs):
    return [p for p, _ in sorted(runs.items(), key=lambda item: item[1]["time_ns"])]


def acted(run):
    """Whether umlab did anything on the GPU beyond observing the driver."""
    return any(run.get(key, 0) for key in
               ("prefetch_requests", "prefetch_bytes", "pre_evictions", "invalidated_bytes")) \
        or run.get("evictions", 0) != run.get("device_evictions", 0) \
        or run.get("policy_stats", {}).get("pins", 0)


def distinguishable(measured):
    """The measured policies that are different experiments on the GPU.

    A policy under which umlab took no action on the GPU ran the driver alone,
    the same experiment as any other such policy (uvm-default and demand:
    the driver's own heuristics already do what uvm-default models). Their
    times differ only by the GPU's run-to-run spread, so of those only the
    first is ranked."""
    kept, driver_only = {}, None
    for policy, run in measured.items():
        if acted(run):
            kept[policy] = run
        elif driver_only is None:
            driver_only = policy
            kept[policy] = run
    return kept


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--mode", action="append", default=None,
                        help="cuda memory modes to report (default: driver and engine)")
    args = parser.parse_args()
    modes = args.mode or ["driver", "engine"]
    cases = sorted({os.path.basename(p)[len("sim_"):-len(".json")]
                    for p in glob.glob(os.path.join(args.out_dir, "sim_*.json"))})
    if not cases:
        sys.exit(f"fidelity_table: no sim_*.json in {args.out_dir}; run bench/fidelity.sh first")
    for mode in modes:
        time_errors = []
        agree = 0
        compared = 0
        print(f"\n### memory={mode}\n")
        print("| workload | capacity | policy | measured ms | predicted ms | time err | "
              "h2d err | d2h err | faulted blocks meas/pred |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        notes = []
        same_experiments = set()
        for case in cases:
            measured_path = os.path.join(args.out_dir, f"cuda-{mode}_{case}.json")
            if not os.path.exists(measured_path):
                continue
            predicted = load(os.path.join(args.out_dir, f"sim_{case}.json"))
            measured = load(measured_path)
            workload, capacity = case.rsplit("_", 1)
            for policy, real in measured.items():
                sim = predicted.get(policy)
                if sim is None:
                    continue
                e = error(sim["time_ns"], real["time_ns"])
                time_errors.append(abs(e))
                print(f"| {workload} | {capacity} | {policy} | {real['time_ns'] / 1e6:.0f} | "
                      f"{sim['time_ns'] / 1e6:.0f} | {e:+.0%} | "
                      f"{error(sim['h2d_bytes'], real['h2d_bytes']):+.0%} | "
                      f"{error(sim['d2h_bytes'], real['d2h_bytes']):+.0%} | "
                      f"{real['faulted_blocks']}/{sim['faulted_blocks']} |")
            ranked = distinguishable(measured)
            if len(ranked) < len(measured):
                same_experiments.add(" = ".join(p for p in measured if not acted(measured[p])))
            same = ranking(ranked) == ranking({p: predicted[p] for p in ranked if p in predicted})
            compared += 1
            agree += same
            if "deepum" in measured and "demand" in measured:
                real_speedup = measured["demand"]["time_ns"] / measured["deepum"]["time_ns"]
                sim_speedup = predicted["demand"]["time_ns"] / predicted["deepum"]["time_ns"]
                notes.append(f"| {workload} | {capacity} | {' < '.join(ranking(ranked))} | "
                             f"{'yes' if same else 'no'} | {real_speedup:.2f}x | "
                             f"{sim_speedup:.2f}x |")
        if not time_errors:
            print("(no runs)")
            continue
        print(f"\nmedian |time error| {statistics.median(time_errors):.0%}, "
              f"worst {max(time_errors):.0%}, over {len(time_errors)} runs; "
              f"ranking agrees in {agree} of {compared} cases\n")
        if same_experiments:
            print("Ranked as one policy (umlab took no action on the GPU under either, so "
                  "they ran the same experiment): " + "; ".join(sorted(same_experiments)) + "\n")
        print(f"| workload | capacity | measured ranking (fastest first) | sim agrees | "
              f"deepum over demand, measured | predicted (DeepUM paper: {DEEPUM_PAPER_SPEEDUP}x) |")
        print("| --- | --- | --- | --- | ---: | ---: |")
        print("\n".join(notes))


if __name__ == "__main__":
    main()
