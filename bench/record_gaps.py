#!/usr/bin/env python3
"""What a cuda backend run's record log is missing.

  bench/record_gaps.py RECORDS.csv[.gz] [--window-ms MS]

RECORDS is what `--backend=cuda:records=FILE` writes (docs/cuda.md). The
UVM driver drops some of its records before CUPTI has them, and CUPTI's
dropped-record count does not see it (docs/fidelity.md, "CUPTI's missing
write-backs"). This prints, per direction and cause, the bytes recorded;
the bytes of pages recorded arriving on the GPU while the records had them
there already (the run's unrecorded_d2h_bytes, counted again from the log);
and the stretches of at least MS (default 10) during which host-to-device
records kept coming but no device-to-host record began, though the GPU was
full: where write-backs went unrecorded.
"""
import argparse
import bisect
import collections

from cuda_logs import read_log

PAGE = 4096


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records")
    parser.add_argument("--window-ms", type=float, default=10.0)
    args = parser.parse_args()
    rows = read_log(args.records, {"kind", "cause", "program_address", "value", "start_ns"},
                    "record log")
    transfers = sorted((int(r["start_ns"]), r["kind"], r["cause"], int(r["program_address"]),
                        int(r["value"]))
                       for r in rows if r["kind"] in ("h2d", "d2h") and r["program_address"] != "-1")
    by_cause = collections.Counter()
    on_device = set()
    unrecorded = 0
    for _, kind, cause, address, size in transfers:
        by_cause[(kind, cause)] += size
        pages = range(address // PAGE, (address + size + PAGE - 1) // PAGE)
        if kind == "h2d":
            unrecorded += sum(PAGE for page in pages if page in on_device)
            on_device.update(pages)
        else:
            on_device.difference_update(pages)
    print("| direction | cause | recorded MB |")
    print("| --- | --- | ---: |")
    for (kind, cause), size in sorted(by_cause.items()):
        print(f"| {kind} | {cause} | {size / 1e6:.1f} |")
    print(f"\npages recorded arriving while on the GPU by the records: {unrecorded / 1e6:.1f} MB")
    out_starts = [t for t, kind, *_ in transfers if kind == "d2h"]
    in_starts = [t for t, kind, *_ in transfers if kind == "h2d"]
    window = args.window_ms * 1e6
    gaps = []
    # Between consecutive write-back records only: before the first one the
    # GPU may still have had room.
    for begin, end in zip(out_starts, out_starts[1:]):
        if end - begin >= window:
            arrivals = bisect.bisect_left(in_starts, end) - bisect.bisect_right(in_starts, begin)
            if arrivals > 0:
                gaps.append((begin, end, arrivals))
    print(f"stretches of {args.window_ms:g} ms or more with arrivals and no write-back record: "
          f"{len(gaps)}, {sum(e - b for b, e, _ in gaps) / 1e6:.0f} ms in all")
    for begin, end, arrivals in gaps:
        print(f"  {begin / 1e6:.1f}-{end / 1e6:.1f} ms: {arrivals} arrival records")


if __name__ == "__main__":
    main()
