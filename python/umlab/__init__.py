"""umlab from Python: run and compare unified-memory policies, read traces.

    import umlab
    result = umlab.compare(workload="mlp", capacity=0.5, policies=["demand", "deepum"])
    for run in result["runs"]:
        print(run["policy"], run["time_ns"], run["faults"])

run, compare, record and replay take the options of the `umlab` command of
the same name as keyword arguments: `capacity=0.5` is `--capacity=0.5`,
an underscore is a dash (`check_invariants=True` is `--check-invariants`),
a list is comma-separated (`policies=["demand", "deepum"]`), and
`workload_args` and `device_params` take a dict ({"layers": 4} is
`--workload-arg layers=4`). Each returns the command's `--format=json`
document as a dict, key for key the contract of docs/json-contract.md; it is
the CLI's own JSON, produced in-process by the same code. Errors raise
umlab.Error with the one-line message the CLI prints.

read_trace(path) decodes a .umt trace in C++ into NumPy structured arrays
(events, faults, migrations, evictions, invalidations). policies(),
workloads(), devices() and backends() list what this build has, with each
one's parameters and defaults.

Build and use from a checkout (README.md): cmake --build build --target
umlab_python, then PYTHONPATH=build/python python3 ...
"""

import os

from . import _umlab
from ._umlab import Error, backends, devices, policies, workloads

__all__ = [
    "CONTRACT_VERSION", "TRACE_VERSION", "EVENT_KINDS", "Error", "backends", "compare", "devices", "inspect",
    "policies", "read_trace", "record", "replay", "run", "workloads",
]

# The JSON contract version this module reads and its runs carry ("1.4").
CONTRACT_VERSION = _umlab.CONTRACT_VERSION
TRACE_VERSION = _umlab.TRACE_VERSION  # the .umt format written (docs/trace-format.md)
# {kind byte: name} for the `kind` field of read_trace()'s events, e.g. {16: "fault"}.
EVENT_KINDS = _umlab.event_kinds()

# Keyword arguments whose flag is not the name with dashes: the repeatable
# K=V options take a dict.
_FLAG_NAMES = {"workload_args": "workload-arg", "device_params": "device-param"}


def _flags(command, options):
    """The command-line flags for keyword arguments, as the CLI takes them."""
    flags = []
    for name, value in options.items():
        if name == "format":
            raise TypeError(f"umlab.{command}() returns the JSON contract as a dict; "
                            "format= does not apply")
        flag = "--" + _FLAG_NAMES.get(name, name.replace("_", "-"))
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
        elif isinstance(value, dict):
            flags.extend(f"{flag}={key}={item}" for key, item in value.items())
        elif isinstance(value, (list, tuple)):
            if name in _FLAG_NAMES:
                flags.extend(f"{flag}={item}" for item in value)
            else:
                flags.append(f"{flag}={','.join(str(item) for item in value)}")
        else:
            flags.append(f"{flag}={value}")
    return flags


def _json_command(command, positional, options):
    return _umlab.json_command([command, *positional, *_flags(command, options), "--format=json"])


def run(**options):
    """`umlab run` (one policy, `policy=`) as the JSON contract's dict."""
    return _json_command("run", [], options)


def compare(**options):
    """`umlab compare` (`policies=[...]`, or every policy) as the JSON contract's dict."""
    return _json_command("compare", [], options)


def record(output, **options):
    """`umlab record --output=OUTPUT`: runs like run() and writes a .umt trace."""
    return _json_command("record", [], {"output": str(output), **options})


def replay(trace, **options):
    """`umlab replay TRACE`: a policy on the program a trace recorded."""
    return _json_command("replay", [str(trace)], options)


def read_trace(path):
    """A .umt trace as NumPy arrays (python/trace_arrays.h): a dict of version,
    metadata, kernel_names, events, faults, migrations, evictions, invalidations."""
    return _umlab.read_trace(os.fspath(path))


def inspect(trace):
    """`umlab inspect TRACE`: the trace checked end to end and summarised."""
    return _json_command("inspect", [str(trace)], {})
