"""Reading the CSV logs the cuda backend writes (docs/cuda.md: records=,
calls=), for the bench/ scripts that read them."""
import csv
import gzip
import os
import sys


def read_log(path, needed, what, allow_empty=False):
    """The rows of the log at `path` (.gz or plain), as dicts. Exits with a
    one-line error, naming the calling script, when it cannot be read or
    lacks a column of `needed` (it is then not a cuda backend `what`), or
    has no rows unless `allow_empty`."""
    tool = os.path.basename(sys.argv[0])
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            columns = set(reader.fieldnames or ())
    except (OSError, csv.Error, EOFError) as error:
        sys.exit(f"{tool}: cannot read {path}: {error}")
    if (not rows and not allow_empty) or not needed <= columns:
        sys.exit(f"{tool}: {path} is not a cuda backend {what} "
                 f"(needs the columns {', '.join(sorted(needed))})")
    return rows


def percentiles(values, scale):
    """The 10th, 50th and 90th percentile of `values` divided by `scale`, as
    "p10 / p50 / p90" with one decimal; "-" when there are none."""
    if not values:
        return "-"
    values = sorted(values)
    return " / ".join(f"{values[int(p * (len(values) - 1))] / scale:.1f}" for p in (0.1, 0.5, 0.9))
