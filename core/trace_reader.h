// Streams the events of a `.umt` trace file (core/trace_format.h).
//
//   auto reader = TraceReader::Open("run.umt");
//   if (!reader.ok()) return reader.status();
//   Event event;
//   while ((*reader)->Next(event)) Consume(event);
//   return (*reader)->status();  // not OK for a corrupt or cut-off file
//
// The reader holds at most one decompressed chunk (kMaxChunkBytes) and its
// compressed bytes, never the whole file, and checks every length it reads
// against the format's limits and the file's size before allocating. Every
// error is one line naming the file, the byte offset, what is wrong and what
// to do. Not thread-safe.
#ifndef UMLAB_CORE_TRACE_READER_H_
#define UMLAB_CORE_TRACE_READER_H_

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
#include "core/event_source.h"
#include "core/trace_codec.h"

struct ZSTD_DCtx_s;

namespace umlab {

class TraceReader : public EventSource {
 public:
  // Opens `path` and reads its header and metadata. NotFound for a missing
  // file, InvalidArgument for a file that is not a trace, FailedPrecondition
  // for a trace of a newer format version, DataLoss for a damaged header.
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path);

  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;
  ~TraceReader() override;

  // The metadata as written, in order.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  // The value of the first entry named `key`; "" when there is none.
  std::string Metadata(absl::string_view key) const;
  // The format version the file was written with.
  uint32_t version() const { return version_; }

  // The next event, or false at the end of the trace or at the first error
  // (status() tells which). Events before a damaged chunk are delivered; no
  // event of a chunk whose checksum fails is.
  bool Next(Event& event) override;
  // OK after the end marker was read and checked; DataLoss (corruption or
  // truncation) or an I/O error otherwise. OK while reading is in progress.
  absl::Status status() const override { return status_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* file) const;
  };
  struct DCtxDeleter {
    void operator()(ZSTD_DCtx_s* context) const;
  };

  TraceReader(std::string path, std::FILE* file, uint64_t file_size);

  absl::Status ReadHeader();
  // Reads the frame at offset_: loads a chunk into chunk_ and returns true,
  // or checks the end marker (or fails) and returns false.
  bool LoadNextFrame();
  bool LoadChunk(uint64_t frame_offset);
  bool ReadEnd(uint64_t frame_offset);

  uint64_t remaining() const { return file_size_ - offset_; }
  // Reads exactly `count` bytes at offset_ (the caller has checked that the
  // file holds them) and advances offset_.
  absl::Status ReadExact(char* bytes, size_t count);

  // One-line errors: "<file>: <problem at byte N ...>; <what to do>".
  absl::Status Corrupt(uint64_t offset, absl::string_view what) const;
  absl::Status Truncated(uint64_t offset, absl::string_view what) const;
  bool Fail(absl::Status status);

  const std::string path_;  // as shown in messages
  std::unique_ptr<std::FILE, FileCloser> file_;
  const uint64_t file_size_;
  uint64_t offset_ = 0;  // bytes of the file consumed

  uint32_t version_ = 0;
  std::vector<std::pair<std::string, std::string>> metadata_;

  std::unique_ptr<ZSTD_DCtx_s, DCtxDeleter> decompressor_;
  std::string compressed_;  // the current chunk's payload as read
  std::string chunk_;       // the current chunk, decompressed
  trace_internal::ByteCursor cursor_{absl::string_view()};
  trace_internal::EventDecoder decoder_;
  uint64_t chunk_offset_ = 0;  // file offset of the current chunk's header
  uint32_t chunk_events_ = 0;  // events the current chunk declares
  uint32_t chunk_events_read_ = 0;

  uint32_t chunks_read_ = 0;
  uint64_t events_read_ = 0;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace umlab

#endif  // UMLAB_CORE_TRACE_READER_H_
