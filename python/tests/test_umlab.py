"""The umlab Python module against the CLI and the documented contracts.

Runs a small mlp (2 layers of 512, a 12 MiB footprint, 2 iterations) so the whole file takes
seconds. PYTHONPATH must hold build/python (ctest sets it); UMLAB_BINARY_DIR
(the build tree, also set by ctest) lets the CLI comparison find build/cli/umlab.
"""
import json
import os
import pathlib
import re
import subprocess

import numpy as np
import pytest

import umlab

SMALL = {"workload": "mlp", "workload_args": {"layers": 2, "hidden": 512, "batch": 256,
                                              "iterations": 2}}
SMALL_FLAGS = ["--workload=mlp", "--workload-arg=layers=2", "--workload-arg=hidden=512",
               "--workload-arg=batch=256", "--workload-arg=iterations=2"]
DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def contract_keys():
    """The keys of the main table of docs/json-contract.md."""
    text = (DOCS / "json-contract.md").read_text()
    table = text.split("| key | meaning |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([a-z_0-9]+)` \|", table, re.MULTILINE)


def test_compare_returns_the_contract():
    result = umlab.compare(capacity=0.5, policies=["demand", "deepum"], **SMALL)
    assert list(result) == ["contract_version", "runs"]
    assert result["contract_version"] == umlab.CONTRACT_VERSION
    assert [run["policy"] for run in result["runs"]] == ["demand", "deepum"]
    keys = contract_keys()
    assert "faulted_in_flight_pages" in keys and "policy_stats" in keys
    for run in result["runs"]:
        assert set(keys) <= set(run), set(keys) - set(run)
        assert run["workload"] == "mlp" and run["iterations"] == 2
        assert len(run["per_iteration"]) == 2
        assert run["h2d_bytes"] == run["fault_migrated_bytes"] + run["prefetch_bytes"]
    # DeepUM prefetches, so it faults less than demand paging.
    demand, deepum = result["runs"]
    assert deepum["faults"] < demand["faults"]
    assert deepum["policy_stats"]["block_tables"] > 0 and demand["policy_stats"] == {}


def test_results_equal_the_cli_json():
    binary = pathlib.Path(os.environ.get("UMLAB_BINARY_DIR", "")) / "cli" / "umlab"
    if not binary.is_file():
        pytest.skip("UMLAB_BINARY_DIR/cli/umlab not found; ctest sets UMLAB_BINARY_DIR")
    cli = subprocess.run([str(binary), "compare", "--capacity=0.25", "--policies=demand,ideal",
                          "--format=json", *SMALL_FLAGS], capture_output=True, text=True,
                         check=True)
    assert cli.stderr == ""
    ours = umlab.compare(capacity=0.25, policies=["demand", "ideal"], **SMALL)
    assert ours == json.loads(cli.stdout)


def test_run_maps_keyword_arguments_to_flags():
    result = umlab.run(policy="deepum:rows=1024", device="h200", capacity="4MiB",
                       device_params={"h2d_gbps": 40}, check_invariants=True, **SMALL)
    (run,) = result["runs"]
    assert run["policy"] == "deepum:rows=1024"
    assert run["device"] == "h200"
    assert run["capacity_bytes"] == 4 << 20
    slower = umlab.run(policy="deepum:rows=1024", device="h200", capacity="4MiB",
                       device_params={"h2d_gbps": 4}, **SMALL)["runs"][0]
    assert slower["time_ns"] > run["time_ns"]


def test_errors_raise_the_cli_one_line_message():
    with pytest.raises(umlab.Error) as error:
        umlab.compare(policies=["no-such-policy"], **SMALL)
    message = str(error.value)
    assert message.startswith("umlab compare: unknown policy 'no-such-policy'; known: ")
    assert "\n" not in message
    with pytest.raises(umlab.Error, match="capacity"):
        umlab.run(capacity="lots", **SMALL)
    with pytest.raises(umlab.Error, match="no_such_option|no-such-option"):
        umlab.run(no_such_option=1)
    with pytest.raises(TypeError, match="format"):
        umlab.run(format="csv")
    assert issubclass(umlab.Error, RuntimeError)
    with pytest.raises(umlab.Error, match="no command given"):
        umlab._umlab.command([])


def test_read_trace_decodes_a_recording(tmp_path):
    trace = tmp_path / "small.umt"
    recorded = umlab.record(trace, policy="demand", capacity=0.5, **SMALL)["runs"][0]
    decoded = umlab.read_trace(trace)
    assert decoded["version"] == umlab.TRACE_VERSION  # the .umt format (docs/trace-format.md)
    assert decoded["metadata"]["workload"] == "mlp"
    assert decoded["metadata"]["policy"] == "demand"

    events, faults, migrations = decoded["events"], decoded["faults"], decoded["migrations"]
    assert events.dtype.names == ("kind", "access", "cause", "exec_id", "sm", "address", "size",
                                  "iteration", "duration_ns", "time_ns", "rereads",
                                  "host_address")
    kinds = {name: code for code, name in umlab.EVENT_KINDS.items()}
    assert kinds["fault"] == 16 and kinds["migrate"] == 17
    assert np.count_nonzero(events["kind"] == kinds["iteration"]) == recorded["iterations"]
    assert np.count_nonzero(events["kind"] == kinds["fault"]) == len(faults) > 0
    assert len(decoded["kernel_names"]) > 0
    # What the trace holds is what the run reported.
    summary = umlab.inspect(trace)
    assert summary["contract_version"] == umlab.CONTRACT_VERSION
    assert len(faults) == summary["faults"]
    assert int(migrations["size"].sum()) == summary["migrated_bytes"] == recorded["h2d_bytes"]
    prefetched = migrations["size"][migrations["cause"] == 1].sum()
    assert int(prefetched) == recorded["prefetch_bytes"]
    assert int(decoded["evictions"]["size"].sum()) == summary["written_back_bytes"]
    assert np.all(np.diff(faults["time_ns"]) >= 0)


def test_read_trace_errors_are_one_line(tmp_path):
    not_a_trace = tmp_path / "notes.umt"
    not_a_trace.write_text("hello")
    with pytest.raises(umlab.Error) as error:
        umlab.read_trace(not_a_trace)
    assert "not a umlab trace" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(umlab.Error, match="cannot open the trace"):
        umlab.read_trace(tmp_path / "missing.umt")


def test_catalogs_list_names_parameters_and_defaults():
    policies = {entry["name"]: entry for entry in umlab.policies()}
    assert {"demand", "deepum", "uvm-default", "ideal"} <= set(policies)
    rows = {param["name"]: param for param in policies["deepum"]["params"]}["rows"]
    assert rows["default"] == "2048" and rows["type"] == "int"
    workloads = {entry["name"]: entry for entry in umlab.workloads()}
    assert "mlp" in workloads and workloads["mlp"]["description"]
    devices = {entry["name"]: entry for entry in umlab.devices()}
    assert {"v100-pcie3", "h200"} <= set(devices)
    assert "h2d_gbps" in {param["name"] for param in devices["h200"]["params"]}
    assert "sim" in {entry["name"] for entry in umlab.backends()}
