"""bench/fault_batches.py and bench/eviction_outcomes.py: what a logged cuda run says
about the driver's fault batches and its own write-backs."""
import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
BLOCK = 2 << 20
RECORDS_HEADER = "kind,cause,address,program_address,value,start_ns,end_ns,delivered_ns,outcome\n"
MIGRATIONS_HEADER = "kind,cause,address,bytes,start_ns,end_ns,batch\n"


def fault_event(address, written_ns, batch):
    """A migration log's row for one fault the driver serviced."""
    return f"fault_event,,{hex(address)},1,{written_ns},-1,{batch}\n"


def run(script, *paths):
    """The script's output with every run of spaces made one, so that the
    assertions do not depend on column widths."""
    out = subprocess.run([sys.executable, os.path.join(BENCH, script)] + [str(p) for p in paths],
                         capture_output=True, text=True, check=True).stdout
    return "\n".join(" ".join(line.split()) for line in out.splitlines())


def test_a_populated_block_beside_the_named_one_goes_unheard(tmp_path):
    migrations = tmp_path / "migrations.csv"
    migrations.write_text(
        MIGRATIONS_HEADER
        + fault_event(BLOCK, 100, 1)                       # batch 1: block 1, copied
        + f"h2d,coherence,{hex(BLOCK)},{BLOCK},150,160,\n"
        + fault_event(BLOCK + 4096, 200, 2)                # batch 2: block 1 again...
        + fault_event(2 * BLOCK, 201, 2))                  # ...and block 2, populated
    records = tmp_path / "records.csv"
    records.write_text(RECORDS_HEADER +
                       f"fault,,{hex(BLOCK)},{BLOCK},1,99,-1,0,\n"
                       f"fault,,{hex(BLOCK + 4096)},{BLOCK},2,199,-1,0,\n")
    out = run("fault_batches.py", migrations, records)
    assert "fault batches 2, CUPTI fault records 2, batches some record named 2" in out
    assert "new blocks per batch: mean 1.00; batches with one new block 2, with none 0" in out
    assert "new batch-blocks 2: copied 1, populated 1" in out
    assert "named by a record: 2, of them new 1, the batch's first block in the driver's order 2" \
        in out
    assert "populated and named 0, populated and not named 1" in out
    assert ("in batches of more than one block, named 1: the first in the driver's order 1, "
            "the lowest 1, the first the GPU raised 1") in out


def test_write_backs_are_told_apart_by_what_the_engine_asked_last(tmp_path):
    records = tmp_path / "records.csv"
    records.write_text(RECORDS_HEADER +
                       f"d2h,eviction,{hex(BLOCK)},{BLOCK},{BLOCK},100,110,0,applied\n"
                       f"d2h,eviction,{hex(2 * BLOCK)},{2 * BLOCK},1048576,300,310,0,not_resident\n"
                       f"d2h,eviction,{hex(3 * BLOCK)},{3 * BLOCK},{BLOCK},50,60,0,not_resident\n"
                       f"d2h,user,{hex(2 * BLOCK)},{2 * BLOCK},1048576,210,220,0,\n")
    calls = tmp_path / "calls.csv"
    calls.write_text("id,kind,address,discard_spans,discard_bytes,prefetch_spans,prefetch_bytes,"
                     "submitted_ns,begin_ns,end_ns\n"
                     f"1,evict,{hex(2 * BLOCK)},1,1048576,1,1048576,200,205,230\n"
                     f"2,evict,{hex(3 * BLOCK)},0,0,1,{BLOCK},40,70,90\n")
    out = run("eviction_outcomes.py", records, calls)
    assert "eviction,applied 1 2" in out
    assert "eviction,not_resident 2 3" in out
    assert "not_resident after evict call ended (with discard) 1 1 MB" in out
    assert "not_resident evict call queued (overtaken) 1 2 MB" in out


def test_fault_batch_shapes_counts_duplicates_blocks_and_order(tmp_path):
    migrations = tmp_path / "migrations.csv"
    page = 4096
    migrations.write_text(
        MIGRATIONS_HEADER
        # batch 1, in the order written: pages 3, 1, 3 of block 1, page 0 of block 2
        + fault_event(BLOCK + 3 * page, 100, 1)
        + fault_event(BLOCK + page, 120, 1)
        + fault_event(BLOCK + 3 * page, 140, 1)
        + fault_event(2 * BLOCK, 160, 1)
        + f"h2d,coherence,{hex(BLOCK)},{BLOCK},150,160,\n"
        # batch 2: two pages of block 2, in page order
        + fault_event(2 * BLOCK + page, 300, 2)
        + fault_event(2 * BLOCK + 2 * page, 320, 2))
    out = run("fault_batch_shapes.py", migrations, "--window", "2")
    assert "fault batches 2, fault entries 6" in out
    assert "duplicates per batch: mean 0.50" in out
    assert "blocks per batch: mean 1.50" in out
    # Steps up: batch 1 has 2 of 3 (1->3, 3->block 2), batch 2 1 of 1.
    assert "raised in page order: mean share of ascending steps 0.83" in out
    assert "1 n=4 dup=1 raised over 0.1 us: [1 n3 pg1-3] [2 n1 pg0-0]" in out
