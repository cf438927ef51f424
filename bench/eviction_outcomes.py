#!/usr/bin/env python3
"""Where the UVM driver's own write-backs went in one cuda-backend run.

  bench/eviction_outcomes.py RECORDS_CSV CALLS_CSV

RECORDS_CSV is the run's record log (cuda:records=FILE), CALLS_CSV its call
log (cuda:calls=FILE). Prints the bytes written back per cause and per what
the record did to the engine's books (its outcome: applied, not_resident,
stale, in_flight), and, for the driver's evictions the books did not take,
what the engine had last asked of the block before the eviction began: an
eviction call still queued (the driver overtook it) or running, one that had
ended (with a discard of part of the block, or a plain write-back), a
prefetch, or nothing. Blocks are 2 MiB of the managed address; the call log
names a call by its first span's address.
"""
import collections
import csv
import sys

BLOCK_SHIFT = 21


def calls_by_block(path):
    calls = collections.defaultdict(list)
    with open(path) as f:
        for row in csv.DictReader(f):
            calls[int(row["address"], 16) >> BLOCK_SHIFT].append(
                (int(row["submitted_ns"]), int(row["begin_ns"]), int(row["end_ns"]), row["kind"],
                 int(row["discard_bytes"])))
    for block_calls in calls.values():
        block_calls.sort()
    return calls


def last_request(calls, at_ns):
    """What the engine had asked of a block last before `at_ns`."""
    last = None
    for call in calls:
        if call[0] > at_ns:
            break
        last = call
    if last is None:
        return "no call before"
    _, begin, end, kind, discarded = last
    if kind == "evict":
        if begin > at_ns:
            return "evict call queued (overtaken)"
        if end > at_ns:
            return "evict call running"
        return "after evict call ended (%s)" % ("with discard" if discarded else "write-back")
    if kind == "prefetch":
        return "prefetch call running" if end > at_ns else "after prefetch call ended"
    return "after a %s call" % kind


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    calls = calls_by_block(sys.argv[2])
    count, volume = collections.Counter(), collections.Counter()
    why_count, why_volume = collections.Counter(), collections.Counter()
    with open(sys.argv[1]) as f:
        for row in csv.DictReader(f):
            if row["kind"] != "d2h":
                continue
            bytes_ = int(row["value"])
            key = (row["cause"], row["outcome"])
            count[key] += 1
            volume[key] += bytes_
            if row["cause"] != "eviction" or row["outcome"] == "applied":
                continue
            block = int(row["address"], 16) >> BLOCK_SHIFT
            why = (row["outcome"], last_request(calls.get(block, []), int(row["start_ns"])))
            why_count[why] += 1
            why_volume[why] += bytes_
    print("bytes written back, by cause and outcome: records, MB")
    for key in sorted(volume):
        print("  %-34s %7d %9.0f" % (",".join(key), count[key], volume[key] / 1e6))
    print("the driver's evictions the books did not take: outcome, the engine's last request")
    for key in sorted(why_volume, key=lambda k: -why_volume[k]):
        print("  %-14s %-34s %7d %9.0f MB" % (key[0], key[1], why_count[key], why_volume[key] / 1e6))


if __name__ == "__main__":
    main()
