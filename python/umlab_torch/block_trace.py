"""PyTorch's caching allocator's block events, for umlab's live engine.

The pluggable allocator sees segments only; PyTorch keeps freed blocks in
its cache. DeepUM's invalidation needs the blocks: which bytes the
allocator holds free. PyTorch reports them to C++ trace trackers only
(c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker), so a small
extension is compiled against the installed PyTorch (torch.utils.
cpp_extension, cached after the first build) and forwards each event to
libumlab_torch's umlab_torch_block_event.
"""

_SOURCE = r"""
#include <dlfcn.h>
#include <string>
#include <c10/cuda/CUDACachingAllocator.h>

// Returns "" once attached, or why not.
std::string attach(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return std::string("libumlab_torch is not loaded: ") + dlerror();
  using Event = void (*)(int, unsigned long long, unsigned long long);
  auto event = reinterpret_cast<Event>(dlsym(handle, "umlab_torch_block_event"));
  if (event == nullptr) return "libumlab_torch has no umlab_torch_block_event";
  c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(
      [event](const c10::CachingDeviceAllocator::TraceEntry& entry) {
        event(static_cast<int>(entry.action_), entry.addr_, entry.size_);
      });
  return "";
}
"""


def attach(library_path):
    """Attaches the tracker; returns None, or why the blocks stay unseen."""
    try:
        from torch.utils.cpp_extension import load_inline
        extension = load_inline(name="umlab_torch_block_trace", cpp_sources=_SOURCE,
                                functions=["attach"], with_cuda=True, verbose=False)
    except Exception as error:  # no compiler or headers: run without the blocks
        return f"cannot build the block tracker: {str(error).splitlines()[0]}"
    problem = extension.attach(library_path)
    return problem or None
