#!/usr/bin/env python3
"""Runs a command while sampling the GPU's PCIe traffic through NVML.

  bench/pcie_traffic.py [--gpu N] [--period-ms MS] [--stdout FILE] -- COMMAND [ARGS...]

CUPTI's unified-memory records are the cuda backend's instrument, and the
driver drops some of them (docs/fidelity.md, "CUPTI's missing write-backs").
NVML counts the bytes that crossed the GPU's PCIe link, whatever moved them,
in its own throughput counter (nvmlDeviceGetPcieThroughput: KB/s over the
last 20 ms): this samples it every PERIOD_MS while COMMAND runs and prints
one JSON object with the integrated bytes each way ("to_gpu_bytes": RX,
"from_gpu_bytes": TX), the number of samples and COMMAND's exit status, which
it also exits with. With --stdout, COMMAND's own output goes to FILE. The integral is an estimate (each sample stands for its
period); compare it with a run whose traffic is known (demand paging)
before trusting a difference.
"""
import argparse
import ctypes
import json
import subprocess
import sys
import threading
import time

NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--period-ms", type=float, default=20.0)
    parser.add_argument("--stdout", metavar="FILE", help="where COMMAND's output goes")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        sys.exit("pcie_traffic: no command given; put it after --")
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        sys.exit(f"pcie_traffic: cannot load NVML ({e}); run it where the NVIDIA driver is")
    if nvml.nvmlInit_v2() != 0:
        sys.exit("pcie_traffic: nvmlInit failed; is an NVIDIA GPU visible here?")
    device = ctypes.c_void_p()
    if nvml.nvmlDeviceGetHandleByIndex_v2(args.gpu, ctypes.byref(device)) != 0:
        sys.exit(f"pcie_traffic: no GPU {args.gpu}")

    def read(counter):
        value = ctypes.c_uint()
        if nvml.nvmlDeviceGetPcieThroughput(device, counter, ctypes.byref(value)) != 0:
            return None
        return value.value * 1024  # bytes per second

    if read(NVML_PCIE_UTIL_TX_BYTES) is None:
        sys.exit("pcie_traffic: this GPU does not report PCIe throughput through NVML")
    totals = {"to_gpu_bytes": 0.0, "from_gpu_bytes": 0.0, "samples": 0}
    done = threading.Event()
    period = args.period_ms / 1e3

    def sample():
        last = time.monotonic()
        while not done.is_set():
            time.sleep(period)
            now = time.monotonic()
            tx, rx = read(NVML_PCIE_UTIL_TX_BYTES), read(NVML_PCIE_UTIL_RX_BYTES)
            if tx is not None and rx is not None:
                totals["from_gpu_bytes"] += tx * (now - last)
                totals["to_gpu_bytes"] += rx * (now - last)
                totals["samples"] += 1
            last = now

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        if args.stdout:
            with open(args.stdout, "w") as output:
                status = subprocess.call(command, stdout=output)
        else:
            status = subprocess.call(command)
    except OSError as e:
        sys.exit(f"pcie_traffic: cannot run {command[0]}: {e}")
    finally:
        done.set()
        sampler.join()
    nvml.nvmlShutdown()
    print(json.dumps({"to_gpu_bytes": int(totals["to_gpu_bytes"]),
                      "from_gpu_bytes": int(totals["from_gpu_bytes"]),
                      "samples": totals["samples"], "period_ms": args.period_ms,
                      "status": status}))
    sys.exit(status)


if __name__ == "__main__":
    main()
