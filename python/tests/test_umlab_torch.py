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
