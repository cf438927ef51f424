#!/usr/bin/env python3
"""Traffic by three instruments: CUPTI's records, the ledger's bound on what
they missed, and NVML's PCIe counters, beside the sim's prediction.

  bench/pcie_table.py SIM_DIR PASS_DIR [PASS_DIR ...]

PASS_DIR is what bench/pcie_pass.sh wrote (run-W_C_P.json and
pcie-W_C_P.json per run), SIM_DIR a bench/fidelity.sh output holding
sim_W_C.json. NVML counts every byte on the link, headers and the program's
other traffic included, so its counts are scaled per workload and capacity
by demand's: the ratio of NVML's bytes to CUPTI's in demand runs whose
records the ledger found complete (unrecorded_d2h_bytes 0), the median over
the passes (where a case has no such run, over the workload's other
capacity, then over every workload; the scale column says which). A
policy's estimate is then its NVML bytes over that ratio.
Values are medians over the passes; errors are (predicted - estimate) /
estimate. docs/fidelity.md, "CUPTI's missing write-backs", says why.
"""
import collections
import glob
import json
import os
import statistics
import sys

# The runs of a JSON document, by policy, its contract version checked.
from fidelity_table import load


def read_pcie(path):
    """What bench/pcie_traffic.py printed."""
    with open(path) as f:
        return json.load(f)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    sim_dir, pass_dirs = sys.argv[1], sys.argv[2:]
    runs = collections.defaultdict(list)  # (workload, capacity, policy) -> [(run, pcie)]
    for directory in pass_dirs:
        for path in glob.glob(os.path.join(directory, "pcie-*.json")):
            case = os.path.basename(path)[len("pcie-"):-len(".json")]
            workload, capacity, policy = case.rsplit("_", 2)
            run_path = os.path.join(directory, f"run-{case}.json")
            if not os.path.exists(run_path):
                sys.exit(f"pcie_table: {run_path} is missing beside {path}")
            (run,) = load(run_path).values()
            pcie = read_pcie(path)
            runs[(workload, capacity, policy)].append((run, pcie))
    if not runs:
        sys.exit(f"pcie_table: no pcie-*.json in {' '.join(pass_dirs)}; run bench/pcie_pass.sh")

    def complete_demand(keep):
        return [(r, p) for (w, c, policy), pairs in runs.items() if policy == "demand" and keep(w, c)
                for r, p in pairs if r.get("unrecorded_d2h_bytes", 0) == 0]

    def ratios(workload, capacity):
        for scope, keep in (("case", lambda w, c: (w, c) == (workload, capacity)),
                            ("workload", lambda w, c: w == workload),
                            ("all", lambda w, c: True)):
            complete = complete_demand(keep)
            if complete:
                return (statistics.median(p["to_gpu_bytes"] / r["h2d_bytes"] for r, p in complete),
                        statistics.median(p["from_gpu_bytes"] / r["d2h_bytes"] for r, p in complete),
                        scope)
        return None

    print("| workload | capacity | policy | runs | scale | h2d GB: CUPTI / NVML est. / predicted | "
          "h2d err vs NVML | d2h GB: CUPTI / + unrecorded / NVML est. / predicted | "
          "d2h err vs CUPTI | d2h err vs NVML |")
    print("| --- | --- | --- | ---: | --- | --- | ---: | --- | ---: | ---: |")
    for (workload, capacity, policy) in sorted(runs):
        pairs = runs[(workload, capacity, policy)]
        sim_path = os.path.join(sim_dir, f"sim_{workload}_{capacity}.json")
        predicted = load(sim_path).get(policy) if os.path.exists(sim_path) else None
        scale = ratios(workload, capacity)
        median = lambda values: statistics.median(list(values))
        h2d = median(r["h2d_bytes"] for r, _ in pairs)
        d2h = median(r["d2h_bytes"] for r, _ in pairs)
        d2h_plus = median(r["d2h_bytes"] + r.get("unrecorded_d2h_bytes", 0) for r, _ in pairs)
        gb = lambda value: "-" if value is None else f"{value / 1e9:.2f}"
        err = lambda p, m: "-" if p is None or not m else f"{(p - m) / m:+.0%}"
        nvml_h2d = median(p["to_gpu_bytes"] for _, p in pairs) / scale[0] if scale else None
        nvml_d2h = median(p["from_gpu_bytes"] for _, p in pairs) / scale[1] if scale else None
        sim_h2d = predicted["h2d_bytes"] if predicted else None
        sim_d2h = predicted["d2h_bytes"] if predicted else None
        print(f"| {workload} | {capacity} | {policy} | {len(pairs)} | "
              f"{scale[2] if scale else '-'} | "
              f"{gb(h2d)} / {gb(nvml_h2d)} / {gb(sim_h2d)} | {err(sim_h2d, nvml_h2d)} | "
              f"{gb(d2h)} / {gb(d2h_plus)} / {gb(nvml_d2h)} / {gb(sim_d2h)} | "
              f"{err(sim_d2h, d2h)} | {err(sim_d2h, nvml_d2h)} |")


if __name__ == "__main__":
    main()
