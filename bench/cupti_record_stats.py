#!/usr/bin/env python3
"""What CUPTI's record log of a cuda backend run says about the instrument.

  bench/cupti_record_stats.py RECORDS.csv[.gz] [--early-ms 500]

RECORDS is what `--backend=cuda:records=FILE` writes (docs/cuda.md). Prints
the figures the sim's model of CUPTI (`sim:policy_from=user`,
backends/emu/cupti_record_stream.h) takes from such a log:

- bytes per transfer record by kind and cause (the records a copy or an
  eviction makes fill CUPTI's buffers);
- how late each kind of record reached the engine (delivered - start), in
  the first --early-ms of the run and after, at the 10th, 50th and 90th
  percentile;
- how many records each flush delivered, the largest first (a flush that
  is not forced hands over only full buffers);
- how fast each kind of copy ran: its bytes over the time its records
  were busy (the union of their start-end spans), and the same for the
  driver's fault path (h2d records caused by a fault or by the driver's
  prefetcher) taken together: the sim's `fault_gbps` (docs/devices.md);
- what the engine made of the driver's eviction records, by bytes
  (applied, not_resident: the engine did not hold those pages, stale,
  in_flight);
- of the driver's evictions, how many were of blocks that no transfer
  record had named since they last left (populated) and of those how many
  no fault record named either (never heard of). A block a policy's call
  populated is counted too, though the engine knows of it: its own call.
"""
import argparse
import collections

from cuda_logs import percentiles, read_log

BLOCK = 2 << 20


def busy_ns(spans):
    """The time covered by the union of (start, end) spans."""
    total, current = 0, None
    for start, end in sorted(spans):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    if current is not None:
        total += current[1] - current[0]
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records")
    parser.add_argument("--early-ms", type=float, default=500)
    args = parser.parse_args()
    rows = read_log(args.records, {"kind", "cause", "program_address", "value", "start_ns",
                                   "end_ns", "delivered_ns", "outcome"}, "record log")
    start = min(int(r["start_ns"]) for r in rows)
    early = args.early_ms * 1e6

    print("| kind | cause | records | bytes per record | records per 2 MiB |")
    print("| --- | --- | ---: | ---: | ---: |")
    count, size = collections.Counter(), collections.Counter()
    for r in rows:
        count[(r["kind"], r["cause"])] += 1
        size[(r["kind"], r["cause"])] += int(r["value"])
    for (kind, cause), n in sorted(count.items()):
        if kind == "fault":
            print(f"| {kind} | {cause or '-'} | {n} | - | - |")
        else:
            per = size[(kind, cause)] / n
            print(f"| {kind} | {cause or '-'} | {n} | {per:,.0f} | {BLOCK / per:.1f} |")

    print(f"\n| kind | delay ms, first {args.early_ms:g} ms (p10 / p50 / p90) | after |")
    print("| --- | --- | --- |")
    for kind in ("fault", "h2d", "d2h"):
        delays = [[], []]
        for r in rows:
            if r["kind"] == kind and int(r["delivered_ns"]) >= 0:
                late = int(r["start_ns"]) - start >= early
                delays[late].append(int(r["delivered_ns"]) - int(r["start_ns"]))
        print(f"| {kind} | {percentiles(delays[0], 1e6)} | {percentiles(delays[1], 1e6)} |")

    print("\n| copies | records | busy ms | GB/s |")
    print("| --- | ---: | ---: | ---: |")
    groups = collections.defaultdict(list)
    for r in rows:
        if r["kind"] in ("h2d", "d2h") and int(r["end_ns"]) > int(r["start_ns"]):
            span = (int(r["start_ns"]), int(r["end_ns"]), int(r["value"]))
            groups[f"{r['kind']} {r['cause']}"].append(span)
            if r["kind"] == "h2d" and r["cause"] in ("coherence", "prefetch"):
                groups["h2d fault path (coherence + prefetch)"].append(span)
    for name, spans in sorted(groups.items()):
        busy = busy_ns([(start, end) for start, end, _ in spans])
        moved = sum(value for _, _, value in spans)
        print(f"| {name} | {len(spans)} | {busy / 1e6:.0f} | {moved / busy:.2f} |")

    outcomes = collections.Counter()
    for r in rows:
        if r["kind"] == "d2h" and r["cause"] == "eviction":
            outcomes[r["outcome"] or "-"] += int(r["value"])
    if outcomes:
        total = sum(outcomes.values())
        print("\ndriver eviction records by bytes: " + ", ".join(
            f"{name} {moved / 1e9:.2f} GB ({moved / total:.0%})"
            for name, moved in outcomes.most_common()))

    flushes = collections.Counter(r["delivered_ns"] for r in rows)
    sizes = collections.Counter(flushes.values())
    print("\nrecords per flush (records: flushes):",
          ", ".join(f"{n}: {sizes[n]}" for n in sorted(sizes, key=lambda n: -sizes[n])[:8]))

    # Per block, in time order: was it named between two evictions?
    events = collections.defaultdict(list)
    for r in rows:
        events[int(r["program_address"]) // BLOCK].append(
            (int(r["start_ns"]), r["kind"], r["cause"]))
    evictions = populated = unheard = 0
    for block_events in events.values():
        block_events.sort()
        named_by_transfer = named_by_fault = False
        last_eviction = None
        for time, kind, cause in block_events:
            if kind == "d2h" and cause == "eviction":
                # One eviction comes as several records within a millisecond.
                if last_eviction is None or time - last_eviction >= 2_000_000:
                    evictions += 1
                    if not named_by_transfer:
                        populated += 1
                        unheard += not named_by_fault
                    named_by_transfer = named_by_fault = False
                last_eviction = time
            elif kind == "h2d":
                named_by_transfer = True
            elif kind == "fault":
                named_by_fault = True
    print(f"\ndriver evictions: {evictions}; of blocks no transfer record named since they "
          f"last left: {populated}; named by no record at all: {unheard}"
          + (f" ({unheard / evictions:.1%})" if evictions else ""))


if __name__ == "__main__":
    main()
