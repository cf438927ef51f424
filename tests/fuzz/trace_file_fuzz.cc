// Fuzzes the `.umt` reader on whole files (TraceReader, core/trace_reader.h):
// header, metadata, chunk frames (zstd, checksum) and the end frame. The
// input is written to an in-memory file (memfd) and opened by its
// /proc/self/fd path, so the reader runs exactly as it does on disk.
//
// Besides crashes, it checks the reader's promise that it never returns OK
// for a file it did not read to a checked end marker.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/event.h"
#include "core/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("umt_fuzz", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0) std::abort();
  if (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();

  auto reader = umlab::TraceReader::Open(path);
  if (!reader.ok()) return 0;
  (void)(*reader)->Metadata("workload");
  umlab::Event event;
  uint64_t events = 0;
  while ((*reader)->Next(event)) ++events;
  // After the end (or an error) Next stays false.
  if ((*reader)->Next(event)) std::abort();
  // The smallest valid trace is a header and an end frame: 24 + 1 + 16 bytes.
  if ((*reader)->status().ok() && size < 41) std::abort();
  return 0;
}
