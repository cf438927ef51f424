"""The PyTorch launcher's argument handling (python/umlab_torch), without a
GPU or PyTorch: everything here is decided before a run starts. Skipped
where the build has no CUDA (the package is built beside the cuda backend)."""
import os
import subprocess
import sys

import pytest

umlab_torch_main = pytest.importorskip("umlab_torch.__main__")


def launcher(*args):
    return subprocess.run([sys.executable, "-m", "umlab_torch", *args], capture_output=True,
                          text=True, env=dict(os.environ))


def test_capacity_is_a_fraction_or_a_size():
    parse = umlab_torch_main.parse_capacity
    assert parse("0.5") == ("fraction", 0.5)
    assert parse("1.0") == ("fraction", 1.0)
    assert parse("6GiB") == ("bytes", 6 << 30)
    assert parse("512MiB") == ("bytes", 512 << 20)
    assert parse("1.5GiB") == ("bytes", 3 << 29)
    for bad in ("0", "1.5", "-0.5", "6GB", "lots", "6"):
        with pytest.raises(ValueError, match="fraction of the footprint"):
            parse(bad)


def test_a_bad_capacity_is_one_line_and_no_run():
    result = launcher("--capacity=2", "--", "train.py")
    assert result.returncode != 0
    assert result.stderr.strip() == ("umlab_torch: --capacity=2: give a fraction of the "
                                     "footprint in (0, 1] or a size such as 6GiB")


def test_an_empty_policy_list_is_one_line_and_no_run():
    result = launcher("--capacity=0.5", "--policies=,", "--", "train.py")
    assert result.returncode != 0
    assert result.stderr.strip() == ("umlab_torch: --policies is empty; name driver (the UVM "
                                     "driver alone) or a umlab policy such as deepum")


def test_the_script_comes_after_a_double_dash():
    result = launcher("--capacity=0.5", "train.py")
    assert result.returncode != 0
    assert result.stderr.strip().startswith("usage: python3 -m umlab_torch")
    result = launcher("--capacity=0.5", "--")
    assert result.returncode != 0
    assert result.stderr.strip() == "umlab_torch: name the training script after --"


def test_marking_an_iteration_without_a_session_does_nothing():
    import umlab_torch
    umlab_torch.mark_iteration()  # no library loaded: a no-op, not an error


def test_umlab_torch_passes_everything_to_the_launcher():
    """`umlab torch` runs this package's launcher (found beside the build)
    with the options untouched: its one-line errors come through."""
    import umlab_torch
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(umlab_torch.__file__))))
    umlab = os.path.join(build, "cli", "umlab")
    if not os.path.exists(os.path.join(os.path.dirname(umlab_torch.__file__), "libumlab_torch.so")):
        pytest.skip("the package is not built here")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # umlab torch sets it to the build's own package
    result = subprocess.run([umlab, "torch", "--capacity=2", "--", "train.py"],
                            capture_output=True, text=True, env=env)
    assert result.returncode != 0
    assert result.stderr.strip() == ("umlab_torch: --capacity=2: give a fraction of the "
                                     "footprint in (0, 1] or a size such as 6GiB")


def synthetic_report(policy, capacity_bytes, times_ns, h2d, engine=None):
    """A session report as libumlab_torch writes it, cut to what the
    contract reads."""
    records = {"faults": 10, "fault_records": 5, "h2d_bytes": h2d, "d2h_bytes": h2d,
               "h2d_by_cause": {"user": h2d // 4} if engine else {}, "thrashing_detections": 0,
               "throttled_ns": 0}
    return {"gpu": 0, "capacity_bytes": capacity_bytes, "peak_managed_bytes": 8 << 30,
            "kernels": 100, "dropped_records": 0, "records": records, "engine": engine,
            "policy": policy, "iterations": [
                {"time_ns": t, "records": dict(records, faults=2)} for t in times_ns]}


def test_runs_follow_the_json_contract_with_cupti_traffic():
    main = umlab_torch_main
    footprint = main.contract_run(synthetic_report("driver", 0, [300, 100, 100], 0),
                                  ["train.py"], 8 << 30, 100)
    assert footprint["capacity_bytes"] == 8 << 30  # no balloon: the footprint
    assert footprint["stall_ns"] == 200 and footprint["ideal_time_ns"] == 300
    deepum = main.contract_run(
        synthetic_report("deepum", 4 << 30, [900, 500, 400], 4000,
                         {"faulted_blocks": 7, "pre_evictions": 3, "policy_stats": {"x": 1}}),
        ["train.py", "--iterations", "3"], 8 << 30, 100)
    for key in ("policy", "backend", "workload", "device", "capacity_bytes", "footprint_bytes",
                "iterations", "faults", "faulted_pages", "faulted_in_flight_pages", "h2d_bytes",
                "d2h_bytes", "prefetch_bytes", "prefetch_useful_bytes", "time_ns", "stall_ns",
                "ideal_time_ns", "per_iteration", "policy_stats"):
        assert key in deepum, key
    assert deepum["backend"] == "torch" and deepum["workload"] == "train.py --iterations 3"
    assert deepum["prefetch_bytes"] == 1000  # what umlab's calls moved, by CUPTI
    assert deepum["faulted_blocks"] == 7 and deepum["policy_stats"] == {"x": 1}
    assert [it["stall_ns"] for it in deepum["per_iteration"]] == [800, 400, 300]
    assert deepum["steady_iteration_ns"] == 500  # median of iterations 2-3 by the marks
    table = main.runs_table([footprint, deepum]).splitlines()
    assert table[0].split()[:3] == ["policy", "capacity", "steady"]
    assert len(table) == 4


def test_without_pytorch_the_block_tracker_says_why_and_the_run_goes_on():
    pytest.importorskip("umlab_torch.block_trace")
    try:
        import torch  # noqa: F401
        pytest.skip("PyTorch is installed here: the tracker would really be built")
    except ImportError:
        pass
    from umlab_torch import block_trace
    reason = block_trace.attach("/nonexistent/libumlab_torch.so")
    assert reason.startswith("cannot build the block tracker: ")


def test_record_wants_a_umt_file_in_an_existing_directory():
    result = launcher("--record=run.json", "--", "train.py")
    assert result.returncode != 0
    assert result.stderr.strip() == "umlab_torch: --record=run.json: name a .umt file"
    result = launcher("--record=/nonexistent/dir/run.umt", "--", "train.py")
    assert result.returncode != 0
    assert result.stderr.strip() == ("umlab_torch: --record=/nonexistent/dir/run.umt: its "
                                     "directory does not exist")


def test_a_recorded_run_says_what_it_recorded_and_how_much_it_explains():
    report = synthetic_report("driver", 0, [300, 100, 100], 0)
    for iteration in report["iterations"]:
        iteration["kernels"] = 800
    report["recording"] = {"path": "/tmp/gpt2.umt", "written": "ok", "launches": 4000,
                           "timed_launches": 3990, "accesses": 15000,
                           "fault_records": 200, "fault_records_explained": 150}
    line = umlab_torch_main.summarise(report)
    assert "recorded 4000 launches (3990 timed), 15000 accesses" in line
    assert "fault records explained 75.0% of 200" in line
    assert line.endswith("-> /tmp/gpt2.umt (ok)")
