#!/usr/bin/env python3
"""Turns the output of bench/fidelity.sh into the tables of docs/fidelity.md.

  bench/fidelity_table.py OUT_DIR [--mode driver|engine ...] [--repeat DIR ...]

For every workload and capacity it pairs the cuda backend's runs (measured)
with the sim's (predicted) and prints, per policy, time, h2d and d2h bytes
and faulted blocks with the prediction's error, what the policy's own calls
moved each way (`call_h2d_bytes`, `call_d2h_bytes`), the d2h error again
against the GPU's d2h plus what CUPTI left unrecorded (`unrecorded_d2h_bytes`,
a lower bound: docs/fidelity.md, "CUPTI's missing write-backs"; "-" for
runs written before umlab reported these), whether the policies rank the
same way on both sides, and deepum's speedup over demand next to DeepUM's
published 3.06x. A summary line per mode gives the median and worst time
error. Errors are (predicted - measured) / measured.

Measured traffic is the UVM driver's own byte counters (uvm_h2d_bytes,
uvm_d2h_bytes) where the runs have them, over those runs only, and CUPTI's
records (h2d_bytes, d2h_bytes) elsewhere; CUPTI's lose some
(docs/fidelity.md, "CUPTI's missing write-backs"). The last column says
which. --traffic=cupti uses CUPTI's throughout.

With --repeat, each further directory holds the same cuda runs again (the
sim's are taken from OUT_DIR). A measured quantity is then the median over
all runs, and two more columns give the GPU's own spread per case, (max -
min) / median of time and of d2h bytes: an error smaller than the spread is
within the GPU's noise.
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


# The measured quantities a table row uses, taken as the median over repeats.
MEASURED_FIELDS = ("time_ns", "h2d_bytes", "d2h_bytes", "faulted_blocks")
# Reported where the runs have them (JSON contract 1.4 on).
OPTIONAL_FIELDS = ("call_h2d_bytes", "call_d2h_bytes", "d2h_with_unrecorded")


def with_derived(run):
    """The run with d2h_with_unrecorded where it reports unrecorded_d2h_bytes."""
    if "unrecorded_d2h_bytes" in run:
        run = dict(run, d2h_with_unrecorded=run["d2h_bytes"] + run["unrecorded_d2h_bytes"])
    return run


def merge_repeats(runs_per_repeat, traffic="auto"):
    """One run per policy: the first run's, its MEASURED_FIELDS the medians
    over the repeats (traffic from the UVM counters where `traffic` allows
    and some repeat has them); plus each policy's spread of time and d2h
    bytes."""
    merged, spread = {}, {}
    for policy, first in runs_per_repeat[0].items():
        runs = [with_derived(repeat[policy]) for repeat in runs_per_repeat if policy in repeat]
        merged[policy] = dict(first)
        for field in MEASURED_FIELDS:
            merged[policy][field] = statistics.median(run[field] for run in runs)
        counted = [run for run in runs if run.get("uvm_h2d_bytes", 0) > 0]
        merged[policy]["traffic_source"] = "cupti"
        if traffic != "cupti" and counted:
            merged[policy]["h2d_bytes"] = statistics.median(r["uvm_h2d_bytes"] for r in counted)
            merged[policy]["d2h_bytes"] = statistics.median(r["uvm_d2h_bytes"] for r in counted)
            merged[policy]["traffic_source"] = f"uvm ({len(counted)})"
        for field in OPTIONAL_FIELDS:
            values = [run[field] for run in runs if field in run]
            merged[policy][field] = statistics.median(values) if values else None

        def relative_range(field):
            values = [run[field] for run in runs]
            middle = statistics.median(values)
            return (max(values) - min(values)) / middle if middle else 0.0
        spread[policy] = (relative_range("time_ns"), relative_range("d2h_bytes"))
    return merged, spread


def error(predicted, measured):
    if measured == 0:
        return float("nan") if predicted else 0.0
    return (predicted - measured) / measured


def error_against(sim, real, field):
    value = real.get(field)
    return "-" if value is None else f"{error(sim['d2h_bytes'], value):+.0%}"


def gigabytes(run, field):
    value = run.get(field)
    return "-" if value is None else f"{value / 1e9:.2f}"


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
    parser.add_argument("--traffic", choices=("auto", "cupti"), default="auto",
                        help="measured traffic: the UVM driver's counters where the runs have "
                             "them (auto), or CUPTI's records throughout")
    parser.add_argument("--repeat", action="append", default=[], metavar="DIR",
                        help="another directory with the same cuda runs; measured values "
                             "become medians and the GPU's spread is reported")
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
        repeats = 1 + len(args.repeat)
        spread_header = (" GPU time spread | GPU d2h spread |" if args.repeat else "")
        measured_label = f"measured ms (median of {repeats})" if args.repeat else "measured ms"
        print(f"| workload | capacity | policy | {measured_label} | predicted ms | time err | "
              f"h2d err | d2h err | d2h err, unrecorded added | faulted blocks meas/pred | "
              f"calls' h2d GB meas/pred | calls' d2h GB meas/pred |{spread_header} traffic from |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" +
              (" ---: | ---: |" if args.repeat else "") + " --- |")
        notes = []
        same_experiments = set()
        for case in cases:
            measured_path = os.path.join(args.out_dir, f"cuda-{mode}_{case}.json")
            if not os.path.exists(measured_path):
                continue
            predicted = load(os.path.join(args.out_dir, f"sim_{case}.json"))
            repeat_paths = [os.path.join(d, f"cuda-{mode}_{case}.json") for d in args.repeat]
            missing = [path for path in repeat_paths if not os.path.exists(path)]
            if missing:
                sys.exit(f"fidelity_table: {missing[0]} is missing; every --repeat directory "
                         f"needs the runs of {args.out_dir}")
            measured, spread = merge_repeats([load(measured_path)] +
                                             [load(path) for path in repeat_paths], args.traffic)
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
                      f"{error_against(sim, real, 'd2h_with_unrecorded')} | "
                      f"{real['faulted_blocks']:.0f}/{sim['faulted_blocks']} | "
                      f"{gigabytes(real, 'call_h2d_bytes')}/{gigabytes(sim, 'call_h2d_bytes')} | "
                      f"{gigabytes(real, 'call_d2h_bytes')}/{gigabytes(sim, 'call_d2h_bytes')} |" +
                      (f" {spread[policy][0]:.0%} | {spread[policy][1]:.0%} |"
                       if args.repeat else "") + f" {real['traffic_source']} |")
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
