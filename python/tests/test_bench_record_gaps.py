"""bench/record_gaps.py: what a record log is missing."""
import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
BLOCK = 2 << 20


def gaps(tmp_path, rows):
    log = tmp_path / "records.csv"
    log.write_text("kind,cause,address,program_address,value,start_ns,end_ns,delivered_ns,outcome\n" +
                   "".join(f"{kind},{cause},0x0,{address},{size},{start},0,0,\n"
                           for kind, cause, address, size, start in rows))
    return subprocess.run([sys.executable, os.path.join(BENCH, "record_gaps.py"), str(log)],
                          capture_output=True, text=True, check=True).stdout


def test_a_block_arriving_twice_and_a_silent_stretch_are_found(tmp_path):
    ms = 10**6
    out = gaps(tmp_path, [
        ("h2d", "coherence", 0, BLOCK, 1 * ms),
        ("d2h", "eviction", BLOCK, BLOCK, 2 * ms),   # another block leaves
        ("h2d", "prefetch", 0, BLOCK // 2, 5 * ms),  # half of block 0 again: 1 MiB unrecorded
        ("d2h", "eviction", 2 * BLOCK, BLOCK, 30 * ms),
    ])
    assert "pages recorded arriving while on the GPU by the records: 1.0 MB" in out
    assert "no write-back record: 1, 28 ms in all" in out
    assert "2.0-30.0 ms: 1 arrival records" in out


def test_a_complete_log_has_nothing_missing(tmp_path):
    ms = 10**6
    out = gaps(tmp_path, [
        ("h2d", "coherence", 0, BLOCK, 1 * ms),
        ("d2h", "eviction", 0, BLOCK, 2 * ms),
        ("h2d", "coherence", 0, BLOCK, 3 * ms),
    ])
    assert "by the records: 0.0 MB" in out
    assert "no write-back record: 0, 0 ms in all" in out
