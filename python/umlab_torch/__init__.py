"""umlab's PyTorch integration: a training script run on CUDA managed memory.

`python3 -m umlab_torch --capacity=0.5 -- train.py ARGS` runs the script with
every allocation of PyTorch's caching allocator drawn from CUDA managed
memory (libumlab_torch.so, through torch.cuda.MemPool and
CUDAPluggableAllocator), the GPU ballooned down to the capacity, and CUPTI
reading faults, traffic and every kernel launch (docs/torch.md). With
--policies, umlab's engine runs beside the training and the policy
prefetches, pre-evicts and discards while the UVM driver serves faults.

A script marks its iterations with `umlab_torch.mark_iteration()` (a no-op
when it runs without umlab), so the report splits faults and traffic by
iteration.
"""
import ctypes
import os

LIBRARY_ENV = "UMLAB_TORCH_LIBRARY"
_library = None


def library_path():
    """Where libumlab_torch.so is: $UMLAB_TORCH_LIBRARY, or beside this file."""
    return os.environ.get(LIBRARY_ENV) or os.path.join(os.path.dirname(__file__),
                                                       "libumlab_torch.so")


def load():
    """Loads the native library once (the same handle PyTorch's allocator gets)."""
    global _library
    if _library is None:
        _library = ctypes.CDLL(library_path(), mode=ctypes.RTLD_GLOBAL)
        _library.umlab_torch_start.argtypes = [ctypes.c_int, ctypes.c_ulonglong,
                                               ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_int,
                                               ctypes.c_char_p, ctypes.c_char_p]
        _library.umlab_torch_start.restype = ctypes.c_int
        _library.umlab_torch_error.restype = ctypes.c_char_p
        _library.umlab_torch_stop.restype = ctypes.c_char_p
    return _library


def mark_iteration():
    """The training's next iteration starts now. Call it after a
    torch.cuda.synchronize(), so the GPU has finished the previous one."""
    if _library is not None:
        _library.umlab_torch_mark_iteration()
