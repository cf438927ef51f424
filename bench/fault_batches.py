#!/usr/bin/env python3
"""The driver's fault batches in one cuda-backend run, and what CUPTI's
fault records name of them.

  bench/fault_batches.py MIGRATIONS_CSV RECORDS_CSV

MIGRATIONS_CSV is the run's migration log (cuda:migrations=FILE, which holds
every fault the driver serviced, with its batch, and every migration),
RECORDS_CSV its record log (cuda:records=FILE, with CUPTI's fault records).
Prints how many blocks each batch faulted on, and how many of them are new
to it (not in the batch before: the driver fetches faults raised again on a
block it has just served too); which new blocks the driver copied data into
and which it populated (no copy: a first touch, or after a discard), a
block's copy belonging to the last new batch of the block before it; and
which blocks CUPTI's fault records named: each record is matched to the
fault event of its block nearest in time. A populated block no record named
is one the engine's books never hear of under fault_records=cupti.
"""
import bisect
import collections
import csv
import statistics
import sys

BLOCK_SHIFT = 21


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    batch_blocks = collections.OrderedDict()  # batch -> blocks in the driver's order
    batch_first_time = {}
    faults_of_block = collections.defaultdict(list)  # block -> [(time, batch)]
    copies = []  # (block, time)
    with open(sys.argv[1]) as f:
        for row in csv.DictReader(f):
            block = int(row["address"], 16) >> BLOCK_SHIFT
            time = int(row["start_ns"])
            if row["kind"] == "fault_event":
                batch = int(row["batch"])
                blocks = batch_blocks.setdefault(batch, [])
                if block not in blocks:
                    blocks.append(block)
                batch_first_time[batch] = min(batch_first_time.get(batch, time), time)
                faults_of_block[block].append((time, batch))
            elif row["kind"] == "h2d" and row["cause"] != "user":
                first = int(row["address"], 16)
                last = first + int(row["bytes"]) - 1
                for b in range(first >> BLOCK_SHIFT, (last >> BLOCK_SHIFT) + 1):
                    copies.append((b, time))
    for events in faults_of_block.values():
        events.sort()
    times_of_block = {b: [t for t, _ in e] for b, e in faults_of_block.items()}

    def batch_at(block, time, nearest):
        events = faults_of_block.get(block)
        if not events:
            return None
        i = bisect.bisect_right(times_of_block[block], time)
        if nearest and i < len(events) and (i == 0 or events[i][0] - time < time - events[i - 1][0]):
            return events[i][1]
        return events[i - 1][1] if i > 0 else None

    # A block is new to a batch unless the batch before faulted on it too.
    new_pairs = set()
    previous = set()
    for batch, blocks in batch_blocks.items():
        new_pairs.update((batch, block) for block in blocks if block not in previous)
        previous = set(blocks)
    new_times = collections.defaultdict(list)  # block -> [(first fault time, batch)] of new pairs
    for block, events in faults_of_block.items():
        for time, batch in events:
            if (batch, block) in new_pairs and (not new_times[block] or new_times[block][-1][1] != batch):
                new_times[block].append((time, batch))
    copied = set()
    for block, time in copies:
        starts = new_times.get(block, [])
        i = bisect.bisect_right([t for t, _ in starts], time)
        if i > 0:
            copied.add((starts[i - 1][1], block))
    named = set()
    records = 0
    with open(sys.argv[2]) as f:
        for row in csv.DictReader(f):
            if row["kind"] != "fault" or row["program_address"] == "-1":
                continue
            records += 1
            block = int(row["address"], 16) >> BLOCK_SHIFT
            batch = batch_at(block, int(row["start_ns"]), nearest=True)
            if batch is not None:
                named.add((batch, block))
    sizes = [len(b) for b in batch_blocks.values()]
    new_sizes = [len([b for b in blocks if (batch, b) in new_pairs])
                 for batch, blocks in batch_blocks.items()]
    pairs = [(batch, block) for batch, blocks in batch_blocks.items() for block in blocks
             if (batch, block) in new_pairs]
    populated = [p for p in pairs if p not in copied]
    print("fault batches %d, CUPTI fault records %d, batches some record named %d" %
          (len(batch_blocks), records, len({b for b, _ in named})))
    print("blocks per batch: mean %.2f, median %d, 90th %d, max %d; batches of one block %d" %
          (statistics.mean(sizes), statistics.median(sizes),
           sorted(sizes)[int(0.9 * (len(sizes) - 1))], max(sizes), sizes.count(1)))
    print("new blocks per batch: mean %.2f; batches with one new block %d, with none %d" %
          (statistics.mean(new_sizes), new_sizes.count(1), new_sizes.count(0)))
    print("new batch-blocks %d: copied %d, populated %d" %
          (len(pairs), len(pairs) - len(populated), len(populated)))
    first = {(batch, blocks[0]) for batch, blocks in batch_blocks.items()}
    lowest = {(batch, min(blocks)) for batch, blocks in batch_blocks.items()}
    earliest = {}
    for block, events in faults_of_block.items():
        for time, batch in events:
            if batch not in earliest or time < earliest[batch][0]:
                earliest[batch] = (time, block)
    earliest = {(batch, block) for batch, (_, block) in earliest.items()}
    multi = {batch for batch, blocks in batch_blocks.items() if len(blocks) > 1}
    named_multi = {p for p in named if p[0] in multi}
    print("in batches of more than one block, named %d: the first in the driver's order %d, "
          "the lowest %d, the first the GPU raised %d" %
          (len(named_multi), len(named_multi & first), len(named_multi & lowest),
           len(named_multi & earliest)))
    print("named by a record: %d, of them new %d, the batch's first block in the driver's "
          "order %d" % (len(named), len(named & new_pairs), len(named & first)))
    unnamed_populated = [p for p in populated if p not in named]
    print("populated and named %d, populated and not named %d (%.0f MB at 2 MiB each), "
          "of which the batch's first block %d" %
          (len(populated) - len(unnamed_populated), len(unnamed_populated),
           len(unnamed_populated) * 2.097152, len([p for p in unnamed_populated if p in first])))


if __name__ == "__main__":
    main()
