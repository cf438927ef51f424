#!/usr/bin/env python3
"""What the driver's fault batches hold, fault by fault, in one cuda-backend run.

  bench/fault_batch_shapes.py MIGRATIONS_CSV [--window N]

MIGRATIONS_CSV is the run's migration log (cuda:migrations=FILE), whose
`fault_event` rows are every fault entry the driver serviced: its address,
when the GPU wrote it into the fault buffer, and its batch. Prints, over the
run's batches:

- how many entries a batch holds, how many of them repeat a page of the
  same batch (the driver's duplicates, whose share decides how its flush
  before the replay reads PUT), and how many blocks they fall in;
- how densely a batch's entries cover each of its blocks (entries over the
  span of pages between its lowest and highest);
- in what order the GPU wrote them: the share of consecutive entries, in
  the order written, whose page is higher than the one before (1.0: page
  order; about 0.5: none).

Then N batches from the middle of the run, one line each (default 40):
batch, entries, duplicates, the time between its first and last entry's
writes and, per block in address order, its entries and the lowest and
highest page index among them.
"""
import collections
import csv
import statistics
import sys

BLOCK_SHIFT = 21
PAGE_SHIFT = 12
PAGES_PER_BLOCK = 1 << (BLOCK_SHIFT - PAGE_SHIFT)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(name, values):
    return (f"{name}: mean {statistics.fmean(values):.2f}, median {percentile(values, 0.5)}, "
            f"10th {percentile(values, 0.1)}, 90th {percentile(values, 0.9)}, max {max(values)}")


def main():
    args = sys.argv[1:]
    window = 40
    if "--window" in args:
        at = args.index("--window")
        window = int(args[at + 1])
        del args[at:at + 2]
    if len(args) != 1:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    batches = collections.OrderedDict()  # batch -> [(written_ns, page)]
    with open(args[0]) as f:
        for row in csv.DictReader(f):
            if row["kind"] != "fault_event":
                continue
            batches.setdefault(int(row["batch"]), []).append(
                (int(row["start_ns"]), int(row["address"], 16) >> PAGE_SHIFT))
    if not batches:
        sys.exit(f"{args[0]}: no fault_event rows (run with cuda:migrations=FILE)")
    entries, duplicates, blocks, density, ascending = [], [], [], [], []
    for faults in batches.values():
        faults.sort()
        pages = [page for _, page in faults]
        entries.append(len(pages))
        duplicates.append(len(pages) - len(set(pages)))
        by_block = collections.defaultdict(set)
        for page in pages:
            by_block[page // PAGES_PER_BLOCK].add(page)
        blocks.append(len(by_block))
        for block_pages in by_block.values():
            density.append(len(block_pages) / (max(block_pages) - min(block_pages) + 1))
        if len(pages) > 1:
            ascending.append(sum(b > a for a, b in zip(pages, pages[1:])) / (len(pages) - 1))
    total = sum(entries)
    print(f"fault batches {len(batches)}, fault entries {total}")
    print(summary("entries per batch", entries))
    print(f"batches of 256 entries or more: {sum(n >= 256 for n in entries)}")
    print(summary("duplicates per batch", duplicates)
          + f"; batches with more than half duplicates {sum(2 * d > n for d, n in zip(duplicates, entries))}")
    print(summary("blocks per batch", blocks))
    print(f"entries per block of a batch: {total / sum(blocks):.1f}; "
          f"their density over the block's faulted span: mean {statistics.fmean(density):.2f}")
    print(f"raised in page order: mean share of ascending steps {statistics.fmean(ascending):.2f}")
    ids = list(batches)
    start = max(0, len(ids) // 2 - window // 2)
    print(f"-- batches {start} to {start + window - 1} of {len(ids)}")
    for batch in ids[start:start + window]:
        faults = batches[batch]
        pages = [page for _, page in faults]
        by_block = collections.defaultdict(list)
        for page in pages:
            by_block[page // PAGES_PER_BLOCK].append(page % PAGES_PER_BLOCK)
        spans = " ".join(f"[{block:x} n{len(p)} pg{min(p)}-{max(p)}]"
                         for block, p in sorted(by_block.items()))
        written = (faults[-1][0] - faults[0][0]) / 1e3
        print(f"{batch} n={len(pages)} dup={len(pages) - len(set(pages))} "
              f"raised over {written:.1f} us: {spans}")


if __name__ == "__main__":
    main()
