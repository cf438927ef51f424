#include "core/trace_writer.h"

#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace umlab {

using trace_internal::AppendFixed32;
using trace_internal::AppendFixed64;
using trace_internal::DisplayPath;

void TraceWriter::CCtxDeleter::operator()(ZSTD_CCtx_s* context) const { ZSTD_freeCCtx(context); }

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Create(
    const std::string& path, std::vector<std::pair<std::string, std::string>> metadata,
    const TraceWriterOptions& options) {
  if (options.chunk_bytes == 0 || options.chunk_bytes > kMaxChunkBytes - kMaxEncodedEventBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "trace chunk size %d is out of range; use 1..%d bytes", options.chunk_bytes,
        kMaxChunkBytes - kMaxEncodedEventBytes));
  }
  if (options.compression_level < ZSTD_minCLevel() ||
      options.compression_level > ZSTD_maxCLevel()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("zstd compression level %d is out of range; use %d..%d",
                        options.compression_level, ZSTD_minCLevel(), ZSTD_maxCLevel()));
  }

  // Encode the header before touching the disk, so bad metadata leaves no file.
  std::string block;
  if (absl::Status status = trace_internal::EncodeMetadata(metadata, block); !status.ok()) {
    return status;
  }
  std::string header(kTraceMagic, sizeof(kTraceMagic));
  AppendFixed32(kTraceVersion, header);
  AppendFixed32(static_cast<uint32_t>(block.size()), header);
  AppendFixed64(trace_internal::Fnv1a64(block), header);
  header += block;

  const std::string temp_path = path + ".tmp";
  std::FILE* file = std::fopen(temp_path.c_str(), "wb");
  if (file == nullptr) {
    const int error_number = errno;
    return absl::Status(
        absl::ErrnoToStatusCode(error_number),
        absl::StrFormat("%s: cannot create the trace file: %s; check that the directory exists "
                        "and is writable",
                        DisplayPath(temp_path), std::strerror(error_number)));
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(path, file, options));
  if (writer->compressor_ == nullptr) {
    writer->closed_ = true;  // nothing worth keeping: drop the file
    std::fclose(writer->file_);
    writer->file_ = nullptr;
    std::remove(temp_path.c_str());
    return absl::ResourceExhaustedError("cannot allocate a zstd compression context");
  }
  if (absl::Status status = writer->Write(header); !status.ok()) {
    writer->Close().IgnoreError();  // removes the temporary file
    return status;
  }
  return writer;
}

TraceWriter::TraceWriter(std::string path, std::FILE* file, const TraceWriterOptions& options)
    : path_(std::move(path)),
      temp_path_(path_ + ".tmp"),
      file_(file),
      options_(options),
      compressor_(ZSTD_createCCtx()) {
  pending_.reserve(options_.chunk_bytes + kMaxEncodedEventBytes);
}

TraceWriter::~TraceWriter() { Close().IgnoreError(); }

absl::Status TraceWriter::Append(const Event& event) {
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: cannot append to a trace that is already closed", DisplayPath(path_)));
  }
  if (!io_status_.ok()) return io_status_;
  if (absl::Status status = trace_internal::ValidateEvent(event); !status.ok()) return status;

  encoder_.Append(event, pending_);
  ++pending_events_;
  ++events_written_;
  // Checked after appending, so a chunk may end one event past the target;
  // the create-time bound on chunk_bytes keeps that under kMaxChunkBytes.
  if (pending_.size() >= options_.chunk_bytes) return FlushChunk();
  return absl::OkStatus();
}

absl::Status TraceWriter::FlushChunk() {
  if (pending_events_ == 0) return absl::OkStatus();
  if (chunks_written_ == UINT32_MAX) {
    io_status_ = absl::ResourceExhaustedError(absl::StrFormat(
        "%s: the trace has reached the format's limit of %d chunks", DisplayPath(path_),
        UINT32_MAX));
    return io_status_;
  }

  const size_t bound = ZSTD_compressBound(pending_.size());
  frame_.resize(kChunkHeaderBytes + bound);
  const size_t compressed =
      ZSTD_compressCCtx(compressor_.get(), frame_.data() + kChunkHeaderBytes, bound,
                        pending_.data(), pending_.size(), options_.compression_level);
  if (ZSTD_isError(compressed)) {
    io_status_ = absl::InternalError(absl::StrFormat("%s: zstd failed to compress chunk %d: %s",
                                                     DisplayPath(path_), chunks_written_,
                                                     ZSTD_getErrorName(compressed)));
    return io_status_;
  }
  frame_.resize(kChunkHeaderBytes + compressed);

  trace_internal::ChunkHeader header;
  header.compressed_size = static_cast<uint32_t>(compressed);
  header.uncompressed_size = static_cast<uint32_t>(pending_.size());
  header.event_count = pending_events_;
  header.checksum = trace_internal::Fnv1a64(pending_);
  std::string header_bytes;
  header.AppendTo(header_bytes);
  std::memcpy(frame_.data(), header_bytes.data(), kChunkHeaderBytes);

  if (absl::Status status = Write(frame_); !status.ok()) return status;
  ++chunks_written_;
  pending_.clear();
  pending_events_ = 0;
  encoder_.Reset();
  return absl::OkStatus();
}

absl::Status TraceWriter::Write(const std::string& bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    io_status_ = IoError("cannot write", errno);
  }
  return io_status_;
}

absl::Status TraceWriter::IoError(absl::string_view what, int error_number) const {
  return absl::Status(absl::ErrnoToStatusCode(error_number),
                      absl::StrFormat("%s: %s: %s; check free disk space and permissions, then "
                                      "record again",
                                      DisplayPath(temp_path_), what, std::strerror(error_number)));
}

absl::Status TraceWriter::Close() {
  if (closed_) return close_status_;
  closed_ = true;

  absl::Status status = io_status_;
  if (status.ok()) status = FlushChunk();
  if (status.ok()) {
    std::string end;
    trace_internal::EndFrame{chunks_written_, events_written_}.AppendTo(end);
    status = Write(end);
  }
  // fsync before rename: otherwise a crash soon after can leave the new name
  // pointing at a file whose data never reached the disk.
  if (status.ok() && (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)) {
    status = IoError("cannot flush", errno);
  }
  if (std::fclose(file_) != 0 && status.ok()) status = IoError("cannot close", errno);
  file_ = nullptr;
  if (status.ok() && std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    status = IoError(absl::StrCat("cannot rename to ", DisplayPath(path_)), errno);
  }
  if (!status.ok()) std::remove(temp_path_.c_str());

  pending_ = std::string();
  frame_ = std::string();
  compressor_.reset();
  close_status_ = status;
  return close_status_;
}

}  // namespace umlab
