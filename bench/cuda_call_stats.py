#!/usr/bin/env python3
"""What the engine's calls did on the GPU, from a cuda backend run's logs.

  bench/cuda_call_stats.py CALLS.csv[.gz] [RECORDS.csv[.gz]]

CALLS is what `--backend=cuda:calls=FILE` writes, RECORDS what `records=FILE`
writes in the same run (docs/cuda.md); both are on CUPTI's clock since the
run began. Prints, per kind of call (prefetch, evict, discard):

- how many, how long the issuing thread spent in its calls and how long it
  waited in the queue (10th / 50th / 90th percentile, us), and how many
  carried discard spans;
- with RECORDS: how many moved data (a `user` transfer record of its block
  that began after the call did and before the block's next call, each
  record matched to one call), and how late that record began (ms);
- how much of the run the issuing thread was busy.

The sim models these calls as one lane the driver serves in order
(`sim:policy_from=user`, docs/fidelity.md); these figures are what it is
checked against.
"""
import argparse
import bisect
import collections

from cuda_logs import percentiles, read_log

BLOCK_SHIFT = 21


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("calls")
    parser.add_argument("records", nargs="?")
    args = parser.parse_args()
    calls = read_log(args.calls, {"id", "kind", "address", "discard_spans", "prefetch_bytes",
                              "submitted_ns", "begin_ns", "end_ns"}, "call log")
    # The user records of each (direction, block), in time order; each is
    # matched to the first call of its block that began before it.
    user = collections.defaultdict(list)
    if args.records:
        for r in read_log(args.records, {"kind", "cause", "address", "start_ns"}, "record log"):
            if r["cause"] == "user":
                user[(r["kind"], int(r["address"], 16) >> BLOCK_SHIFT)].append(int(r["start_ns"]))
        for starts in user.values():
            starts.sort()
    taken = collections.Counter()
    next_call = collections.defaultdict(list)
    for c in calls:
        if c["address"] != "0x0":
            next_call[int(c["address"], 16) >> BLOCK_SHIFT].append(int(c["begin_ns"]))
    for begins in next_call.values():
        begins.sort()

    print("| call | count | issuing us (p10 / p50 / p90) | queued us | with discards |"
          + (" moved data | record began ms after |" if args.records else ""))
    print("| --- | ---: | --- | --- | ---: |" + (" ---: | --- |" if args.records else ""))
    by_kind = collections.defaultdict(list)
    for c in calls:
        by_kind[c["kind"]].append(c)
    for kind, rows in sorted(by_kind.items()):
        issuing = [int(c["end_ns"]) - int(c["begin_ns"]) for c in rows]
        queued = [int(c["begin_ns"]) - int(c["submitted_ns"]) for c in rows]
        discards = sum(int(c["discard_spans"]) > 0 for c in rows)
        line = (f"| {kind} | {len(rows)} | {percentiles(issuing, 1e3)} | "
                f"{percentiles(queued, 1e3)} | {discards} |")
        if args.records:
            direction = {"prefetch": "h2d", "evict": "d2h"}.get(kind)
            lags = []
            for c in rows:
                if direction is None or int(c["prefetch_bytes"]) == 0:
                    continue
                block = int(c["address"], 16) >> BLOCK_SHIFT
                key = (direction, block)
                starts, begin = user.get(key, []), int(c["begin_ns"])
                # The block's next call, of any kind, bounds what this one moved.
                later = next_call[block]
                until = later[bisect.bisect_right(later, begin)] if later[-1] > begin else None
                i = bisect.bisect_left(starts, begin, lo=taken[key])
                if i < len(starts) and (until is None or starts[i] < until):
                    lags.append(starts[i] - begin)
                    taken[key] = i + 1
            line += f" {len(lags)} | {percentiles(lags, 1e6)} |"
        print(line)
    span = max(int(c["end_ns"]) for c in calls) - min(int(c["submitted_ns"]) for c in calls)
    busy = sum(int(c["end_ns"]) - int(c["begin_ns"]) for c in calls)
    print(f"\nthe issuing thread was busy {busy / 1e6:.0f} ms of the {span / 1e6:.0f} ms "
          f"from the first call's submission to the last one's end")


if __name__ == "__main__":
    main()
