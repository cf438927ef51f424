// Copies and zero fills that bypass the CPU caches (non-temporal stores).
//
// Why: a migration writes 2 MiB that the CPU will not read back soon (the
// SM threads touch a few words of it, later). Ordinary stores first read
// every destination line into the cache (read for ownership) and evict
// useful lines; streaming stores write whole lines to memory directly. On
// the 2-vCPU test machine this copies into the device memfd at 8-10 GB/s
// where memcpy reaches 5-7 and the kernel's write(2) path 4 (docs/uffd.md,
// migration speed).
//
// Both functions want a 64-byte aligned destination and a length that is a
// multiple of 64 (pages are); anything else, and machines without x86
// streaming stores, take memcpy/memset. The stores are fenced before the
// functions return, so the bytes are visible to every thread that
// synchronizes with the caller afterwards.
#ifndef UMLAB_BACKENDS_EMU_STREAMING_COPY_H_
#define UMLAB_BACKENDS_EMU_STREAMING_COPY_H_

#include <cstdint>

namespace umlab {

void StreamingCopy(char* to, const char* from, uint64_t length);
void StreamingZero(char* to, uint64_t length);

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_STREAMING_COPY_H_
