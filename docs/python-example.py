#!/usr/bin/env python3
"""Demand paging against DeepUM on the mlp workload, plotted with matplotlib.

A notebook-style walk through the umlab Python module: each "# %%" block is a
cell. It needs the module built (README.md, "Python") and matplotlib, which
scripts/setup.sh does not install (Debian: apt-get install python3-matplotlib).
From the repository root:

    PYTHONPATH=build/python python3 docs/python-example.py [OUT.png]

writes OUT.png (default: policies.png): time and faults per iteration for
both policies, and when DeepUM's faults arrive within an iteration, read
from a recorded trace.
"""
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")  # a file, no display needed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import umlab  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "policies.png"

# %% Both policies on the same program, device and capacity: the dict is the
# JSON contract of docs/json-contract.md, one entry of "runs" per policy.
options = {"workload": "mlp", "capacity": 0.5, "device": "v100-pcie3"}
runs = umlab.compare(policies=["demand", "deepum"], **options)["runs"]
for run in runs:
    print(f"{run['policy']:8} {run['time_ns'] / 1e6:9.2f} ms  {run['faults']:7d} faults  "
          f"{run['h2d_bytes'] / 2**20:8.1f} MiB in")
print(f"deepum speedup over demand: {runs[0]['time_ns'] / runs[1]['time_ns']:.2f}x")

# %% Time and faults per iteration: the first iteration warms up, the rest
# are the steady state.
figure, (time_axis, fault_axis, trace_axis) = plt.subplots(1, 3, figsize=(15, 4))
for run in runs:
    iterations = np.arange(1, len(run["per_iteration"]) + 1)
    time_axis.plot(iterations, [it["time_ns"] / 1e6 for it in run["per_iteration"]],
                   marker="o", label=run["policy"])
    fault_axis.plot(iterations, [it["faults"] for it in run["per_iteration"]],
                    marker="o", label=run["policy"])
time_axis.set(title="time per iteration", xlabel="iteration", ylabel="ms")
fault_axis.set(title="faults per iteration", xlabel="iteration", ylabel="fault-buffer entries")
for axis in (time_axis, fault_axis):
    axis.set_xticks(iterations)
    axis.set_ylim(bottom=0)
    axis.legend()

# %% Record each policy and read the traces: NumPy arrays decoded by umlab's
# own reader. Faults are counted per 10 ms of the run.
with tempfile.TemporaryDirectory() as directory:
    for policy in ("demand", "deepum"):
        path = os.path.join(directory, policy + ".umt")
        umlab.record(path, policy=policy, **options)
        faults = umlab.read_trace(path)["faults"]
        milliseconds = faults["time_ns"] / 1e6
        bins = np.arange(0, milliseconds.max() + 10, 10)
        trace_axis.hist(milliseconds, bins=bins, histtype="step", label=policy)
trace_axis.set(title="when faults arrive", xlabel="time in the run (ms)",
               ylabel="faults per 10 ms")
trace_axis.legend()

figure.suptitle(f"mlp at half capacity on {runs[0]['device']} (umlab sim)")
figure.tight_layout()
figure.savefig(out, dpi=100)
print("wrote", out)
