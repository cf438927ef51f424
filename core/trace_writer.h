// Records a stream of events into a `.umt` trace file (core/trace_format.h).
//
//   auto writer = TraceWriter::Create("run.umt", {{"workload", "gpt2"}});
//   if (!writer.ok()) return writer.status();
//   for (const Event& e : events) if (auto s = (*writer)->Append(e); !s.ok()) return s;
//   return (*writer)->Close();
//
// The file is written as `path + ".tmp"` and renamed to `path` by Close(), so
// a recording that is interrupted never leaves a half file under the real
// name. Not thread-safe: one writer, one thread.
#ifndef UMLAB_CORE_TRACE_WRITER_H_
#define UMLAB_CORE_TRACE_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/event.h"
#include "core/trace_codec.h"
#include "core/trace_format.h"

struct ZSTD_CCtx_s;

namespace umlab {

struct TraceWriterOptions {
  // Encoded bytes buffered before a chunk is compressed and written. Tests
  // use tiny chunks to get many of them; 1..kMaxChunkBytes-kMaxEncodedEventBytes.
  uint32_t chunk_bytes = kDefaultChunkBytes;
  // zstd level. 3 (zstd's default) compresses a fault stream about 5x at
  // several hundred MB/s, so recording does not slow the backend down.
  int compression_level = 3;
};

class TraceWriter {
 public:
  // Creates `path + ".tmp"` and writes the header. `metadata` is ordered
  // key/value text (workload, device, policy, footprint_bytes, ...); keys
  // must be unique and non-empty, and it must fit kMaxMetadataEntries and
  // kMaxMetadataBytes.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Create(
      const std::string& path, std::vector<std::pair<std::string, std::string>> metadata,
      const TraceWriterOptions& options = TraceWriterOptions());

  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  // Closes the trace if Close() was not called; an error is then lost, so
  // call Close() yourself wherever the result matters.
  ~TraceWriter();

  // Buffers `event`; compresses and writes a chunk when the buffer is full.
  // InvalidArgument (and nothing recorded) for an event the format cannot
  // hold; after a write error every call returns that error.
  absl::Status Append(const Event& event);

  // Writes the last chunk and the end marker, then renames the file into
  // place. On failure the temporary file is removed. Idempotent: later calls
  // return the first call's result.
  absl::Status Close();

  // Events accepted by Append() so far, buffered ones included.
  uint64_t events_written() const { return events_written_; }

 private:
  struct CCtxDeleter {
    void operator()(ZSTD_CCtx_s* context) const;
  };

  TraceWriter(std::string path, std::FILE* file, const TraceWriterOptions& options);

  absl::Status FlushChunk();
  absl::Status Write(const std::string& bytes);
  absl::Status IoError(absl::string_view what, int error_number) const;

  const std::string path_;
  const std::string temp_path_;
  std::FILE* file_;
  const TraceWriterOptions options_;
  std::unique_ptr<ZSTD_CCtx_s, CCtxDeleter> compressor_;

  trace_internal::EventEncoder encoder_;
  std::string pending_;  // encoded events of the chunk being filled
  uint32_t pending_events_ = 0;
  std::string frame_;    // scratch: one compressed chunk frame
  uint32_t chunks_written_ = 0;
  uint64_t events_written_ = 0;

  absl::Status io_status_;  // the first write error; sticky
  bool closed_ = false;
  absl::Status close_status_;
};

}  // namespace umlab

#endif  // UMLAB_CORE_TRACE_WRITER_H_
