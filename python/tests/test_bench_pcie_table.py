"""bench/pcie_table.py: NVML's counts scaled by demand's, against the sim."""
import json
import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
GB = 10**9


def write(path, document):
    with open(path, "w") as f:
        json.dump(document, f)


def run(policy, h2d, d2h, unrecorded):
    return {"runs": [{"policy": policy, "h2d_bytes": h2d, "d2h_bytes": d2h,
                      "unrecorded_d2h_bytes": unrecorded}]}


def pcie(to_gpu, from_gpu):
    return {"to_gpu_bytes": to_gpu, "from_gpu_bytes": from_gpu, "samples": 10}


def table(tmp_path):
    sim, one = tmp_path / "sim", tmp_path / "pass"
    sim.mkdir()
    one.mkdir()
    write(sim / "sim_mlp_0.5.json", {"runs": [
        {"policy": "demand", "h2d_bytes": 2 * GB, "d2h_bytes": 2 * GB},
        {"policy": "deepum", "h2d_bytes": 2 * GB, "d2h_bytes": 3 * GB}]})
    # Demand's records are complete: NVML counts 1.1x and 1.2x CUPTI's.
    write(one / "run-mlp_0.5_demand.json", run("demand", 2 * GB, 2 * GB, 0))
    write(one / "pcie-mlp_0.5_demand.json", pcie(int(2.2 * GB), int(2.4 * GB)))
    # deepum's records lost write-backs: CUPTI 1.5 GB, NVML 4.8 GB / 1.2.
    write(one / "run-mlp_0.5_deepum.json", run("deepum", 2 * GB, int(1.5 * GB), GB // 2))
    write(one / "pcie-mlp_0.5_deepum.json", pcie(int(2.2 * GB), int(4.8 * GB)))
    out = subprocess.run([sys.executable, os.path.join(BENCH, "pcie_table.py"), str(sim), str(one)],
                         capture_output=True, text=True, check=True).stdout
    return {line.split(" | ")[2]: line for line in out.splitlines() if line.startswith("| mlp")}


def test_a_policy_is_judged_against_nvml_scaled_by_demand(tmp_path):
    rows = table(tmp_path)
    assert "| case |" in rows["deepum"]
    assert "1.50 / 2.00 / 4.00 / 3.00" in rows["deepum"]  # CUPTI / + unrecorded / NVML / sim
    assert rows["deepum"].endswith("| +100% | -25% |")
    assert rows["demand"].endswith("| +0% | +0% |")


def test_no_passes_is_a_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, os.path.join(BENCH, "pcie_table.py"), str(tmp_path),
                           str(tmp_path)], capture_output=True, text=True)
    assert done.returncode != 0
    assert "run bench/pcie_pass.sh" in done.stderr


def test_a_run_from_a_newer_umlab_is_refused(tmp_path):
    table(tmp_path)
    write(tmp_path / "pass" / "run-mlp_0.5_deepum.json",
          dict(run("deepum", GB, GB, 0), contract_version="2.0"))
    done = subprocess.run([sys.executable, os.path.join(BENCH, "pcie_table.py"),
                           str(tmp_path / "sim"), str(tmp_path / "pass")],
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "newer than this script reads" in done.stderr
