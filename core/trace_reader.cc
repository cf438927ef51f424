#include "core/trace_reader.h"

#include <sys/stat.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "core/trace_format.h"

namespace umlab {

using trace_internal::LoadFixed32;
using trace_internal::LoadFixed64;

void TraceReader::FileCloser::operator()(std::FILE* file) const { std::fclose(file); }
void TraceReader::DCtxDeleter::operator()(ZSTD_DCtx_s* context) const { ZSTD_freeDCtx(context); }

absl::StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path) {
  const std::string shown = trace_internal::DisplayPath(path);
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int error_number = errno;
    return absl::Status(absl::ErrnoToStatusCode(error_number),
                        absl::StrFormat("%s: cannot open the trace: %s; check the path", shown,
                                        std::strerror(error_number)));
  }
  struct stat info;
  if (::fstat(::fileno(file), &info) != 0) {
    const int error_number = errno;
    std::fclose(file);
    return absl::Status(absl::ErrnoToStatusCode(error_number),
                        absl::StrFormat("%s: cannot read the trace's size: %s; check the path",
                                        shown, std::strerror(error_number)));
  }
  // The reader bounds every length by the file's size, so it needs a size it
  // can trust: a regular file, not a pipe or a directory.
  if (!S_ISREG(info.st_mode)) {
    std::fclose(file);
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not a regular file; pass a .umt trace file", shown));
  }
  std::unique_ptr<TraceReader> reader(
      new TraceReader(shown, file, static_cast<uint64_t>(info.st_size)));
  if (reader->decompressor_ == nullptr) {
    return absl::ResourceExhaustedError("cannot allocate a zstd decompression context");
  }
  if (absl::Status status = reader->ReadHeader(); !status.ok()) return status;
  return reader;
}

TraceReader::TraceReader(std::string path, std::FILE* file, uint64_t file_size)
    : path_(std::move(path)),
      file_(file),
      file_size_(file_size),
      decompressor_(ZSTD_createDCtx()) {}

TraceReader::~TraceReader() = default;

std::string TraceReader::Metadata(absl::string_view key) const {
  for (const auto& [name, value] : metadata_) {
    if (name == key) return value;
  }
  return "";
}

absl::Status TraceReader::Corrupt(uint64_t offset, absl::string_view what) const {
  return absl::DataLossError(absl::StrFormat(
      "%s: corrupt at byte %d: %s; the file is damaged, re-record it or restore it from a copy",
      path_, offset, what));
}

absl::Status TraceReader::Truncated(uint64_t offset, absl::string_view what) const {
  return absl::DataLossError(absl::StrFormat(
      "%s: truncated at byte %d (%s); the recording or copy was cut off, re-record or copy it "
      "again",
      path_, offset, what));
}

absl::Status TraceReader::ReadExact(char* bytes, size_t count) {
  if (std::fread(bytes, 1, count, file_.get()) != count) {
    if (std::ferror(file_.get())) {
      const int error_number = errno;
      return absl::Status(
          absl::ErrnoToStatusCode(error_number),
          absl::StrFormat("%s: read error at byte %d: %s; check the disk, or copy the file again",
                          path_, offset_, std::strerror(error_number)));
    }
    return Truncated(offset_, "the file shrank while it was being read");
  }
  offset_ += count;
  return absl::OkStatus();
}

absl::Status TraceReader::ReadHeader() {
  char header[kFileHeaderBytes];
  if (file_size_ < sizeof(kTraceMagic)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: not a umlab trace (the file is %d bytes, shorter than the %d-byte magic); pass a "
        ".umt file written by umlab",
        path_, file_size_, sizeof(kTraceMagic)));
  }
  if (absl::Status status = ReadExact(header, sizeof(kTraceMagic)); !status.ok()) return status;
  if (std::memcmp(header, kTraceMagic, sizeof(kTraceMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: not a umlab trace (wrong magic number at byte 0); pass a .umt file written by umlab",
        path_));
  }

  // The version comes first and is checked alone: a newer version may lay
  // out everything after it differently.
  if (remaining() < 4) {
    return Truncated(offset_, absl::StrFormat("the version needs 4 bytes, %d remain", remaining()));
  }
  if (absl::Status status = ReadExact(header, 4); !status.ok()) return status;
  version_ = LoadFixed32(header);
  if (version_ == 0) return Corrupt(offset_ - 4, "format version 0 does not exist");
  // Versions grow by one per format change; a huge one is damage, not the
  // future, and asking the user to upgrade would send them the wrong way.
  constexpr uint32_t kPlausibleVersions = 1u << 16;
  if (version_ > kPlausibleVersions) {
    return Corrupt(offset_ - 4, absl::StrFormat("format version %d is not a plausible version",
                                                version_));
  }
  if (version_ > kTraceVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: trace format version %d is newer than this umlab reads (up to %d); upgrade umlab "
        "to read it",
        path_, version_, kTraceVersion));
  }

  constexpr size_t kRest = kFileHeaderBytes - sizeof(kTraceMagic) - 4;
  if (remaining() < kRest) {
    return Truncated(offset_, absl::StrFormat("the header needs %d more bytes, %d remain", kRest,
                                              remaining()));
  }
  if (absl::Status status = ReadExact(header, kRest); !status.ok()) return status;
  const uint32_t metadata_size = LoadFixed32(header);
  const uint64_t metadata_checksum = LoadFixed64(header + 4);
  if (metadata_size > kMaxMetadataBytes) {
    return Corrupt(offset_ - kRest,
                   absl::StrFormat("the header declares %d bytes of metadata, more than the "
                                   "limit of %d",
                                   metadata_size, kMaxMetadataBytes));
  }
  if (metadata_size > remaining()) {
    return Truncated(offset_, absl::StrFormat("the header declares %d bytes of metadata, %d remain",
                                              metadata_size, remaining()));
  }
  std::string block(metadata_size, '\0');
  const uint64_t block_offset = offset_;
  if (absl::Status status = ReadExact(block.data(), block.size()); !status.ok()) return status;
  if (trace_internal::Fnv1a64(block) != metadata_checksum) {
    return Corrupt(block_offset, "the metadata does not match its checksum");
  }
  if (absl::Status status = trace_internal::DecodeMetadata(block, metadata_); !status.ok()) {
    return Corrupt(block_offset, status.message());
  }
  return absl::OkStatus();
}

bool TraceReader::Fail(absl::Status status) {
  status_ = std::move(status);
  cursor_ = trace_internal::ByteCursor(absl::string_view());
  chunk_ = std::string();
  compressed_ = std::string();
  return false;
}

bool TraceReader::LoadNextFrame() {
  const uint64_t frame_offset = offset_;
  if (remaining() == 0) {
    return Fail(Truncated(
        offset_, absl::StrFormat("the end marker is missing after %d chunks and %d events",
                                 chunks_read_, events_read_)));
  }
  if (remaining() < 4) {
    return Fail(Truncated(
        offset_, absl::StrFormat("a frame tag needs 4 bytes, %d remain", remaining())));
  }
  char tag[4];
  if (absl::Status status = ReadExact(tag, sizeof(tag)); !status.ok()) return Fail(status);
  if (std::memcmp(tag, kChunkTag, sizeof(tag)) == 0) return LoadChunk(frame_offset);
  if (std::memcmp(tag, kEndTag, sizeof(tag)) == 0) return ReadEnd(frame_offset);
  return Fail(Corrupt(
      frame_offset,
      absl::StrFormat("expected chunk %d or the end marker, found the bytes %02x %02x %02x %02x",
                      chunks_read_, static_cast<uint8_t>(tag[0]), static_cast<uint8_t>(tag[1]),
                      static_cast<uint8_t>(tag[2]), static_cast<uint8_t>(tag[3]))));
}

bool TraceReader::LoadChunk(uint64_t frame_offset) {
  const uint32_t index = chunks_read_;
  char bytes[kChunkHeaderBytes - sizeof(kChunkTag)];
  if (remaining() < sizeof(bytes)) {
    return Fail(Truncated(offset_, absl::StrFormat("chunk %d's header needs %d more bytes, %d "
                                                   "remain",
                                                   index, sizeof(bytes), remaining())));
  }
  if (absl::Status status = ReadExact(bytes, sizeof(bytes)); !status.ok()) return Fail(status);
  const auto header = trace_internal::ChunkHeader::Parse(bytes);

  // Every declared size is bounded before anything is allocated for it.
  if (header.uncompressed_size > kMaxChunkBytes) {
    return Fail(Corrupt(frame_offset + 8,
                        absl::StrFormat("chunk %d declares %d uncompressed bytes, more than the "
                                        "limit of %d",
                                        index, header.uncompressed_size, kMaxChunkBytes)));
  }
  if (header.compressed_size == 0 || header.compressed_size > kMaxCompressedChunkBytes) {
    return Fail(Corrupt(frame_offset + 4,
                        absl::StrFormat("chunk %d declares %d compressed bytes; the limit is "
                                        "1..%d",
                                        index, header.compressed_size, kMaxCompressedChunkBytes)));
  }
  if (header.event_count == 0 || header.event_count > header.uncompressed_size) {
    return Fail(Corrupt(frame_offset + 12,
                        absl::StrFormat("chunk %d declares %d events in %d bytes", index,
                                        header.event_count, header.uncompressed_size)));
  }
  if (header.compressed_size > remaining()) {
    return Fail(Truncated(offset_, absl::StrFormat("chunk %d declares %d bytes, %d remain", index,
                                                   header.compressed_size, remaining())));
  }

  const uint64_t payload_offset = offset_;
  compressed_.resize(header.compressed_size);
  if (absl::Status status = ReadExact(compressed_.data(), compressed_.size()); !status.ok()) {
    return Fail(status);
  }
  chunk_.resize(header.uncompressed_size);
  const size_t size = ZSTD_decompressDCtx(decompressor_.get(), chunk_.data(), chunk_.size(),
                                          compressed_.data(), compressed_.size());
  if (ZSTD_isError(size)) {
    return Fail(Corrupt(payload_offset, absl::StrFormat("chunk %d does not decompress (zstd: %s)",
                                                        index, ZSTD_getErrorName(size))));
  }
  if (size != header.uncompressed_size) {
    return Fail(Corrupt(payload_offset,
                        absl::StrFormat("chunk %d decompresses to %d bytes but declares %d", index,
                                        size, header.uncompressed_size)));
  }
  if (trace_internal::Fnv1a64(chunk_) != header.checksum) {
    return Fail(Corrupt(payload_offset,
                        absl::StrFormat("chunk %d does not match its checksum", index)));
  }

  cursor_ = trace_internal::ByteCursor(chunk_);
  decoder_.Reset();
  chunk_offset_ = frame_offset;
  chunk_events_ = header.event_count;
  chunk_events_read_ = 0;
  ++chunks_read_;
  return true;
}

bool TraceReader::ReadEnd(uint64_t frame_offset) {
  char bytes[kEndFrameBytes - sizeof(kEndTag)];
  if (remaining() < sizeof(bytes)) {
    return Fail(Truncated(offset_, absl::StrFormat("the end marker needs %d more bytes, %d remain",
                                                   sizeof(bytes), remaining())));
  }
  if (absl::Status status = ReadExact(bytes, sizeof(bytes)); !status.ok()) return Fail(status);
  const auto end = trace_internal::EndFrame::Parse(bytes);
  if (end.chunk_count != chunks_read_ || end.event_count != events_read_) {
    return Fail(Corrupt(frame_offset,
                        absl::StrFormat("the end marker counts %d events in %d chunks, but the "
                                        "file holds %d events in %d chunks",
                                        end.event_count, end.chunk_count, events_read_,
                                        chunks_read_)));
  }
  if (remaining() != 0) {
    return Fail(Corrupt(offset_, absl::StrFormat("%d stray bytes follow the end marker",
                                                 remaining())));
  }
  finished_ = true;
  cursor_ = trace_internal::ByteCursor(absl::string_view());
  chunk_ = std::string();
  compressed_ = std::string();
  return false;
}

bool TraceReader::Next(Event& event) {
  if (finished_ || !status_.ok()) return false;
  while (cursor_.done()) {
    if (!LoadNextFrame()) return false;
  }
  const uint32_t index = chunks_read_ - 1;
  if (chunk_events_read_ == chunk_events_) {
    return Fail(Corrupt(chunk_offset_,
                        absl::StrFormat("chunk %d has %d bytes left after its %d declared events",
                                        index, cursor_.remaining(), chunk_events_)));
  }
  const size_t position = cursor_.position();
  if (absl::Status status = decoder_.Decode(cursor_, event); !status.ok()) {
    return Fail(Corrupt(chunk_offset_,
                        absl::StrFormat("chunk %d, event %d (byte %d of the decompressed chunk): %s",
                                        index, chunk_events_read_, position, status.message())));
  }
  ++chunk_events_read_;
  ++events_read_;
  if (cursor_.done() && chunk_events_read_ != chunk_events_) {
    return Fail(Corrupt(chunk_offset_,
                        absl::StrFormat("chunk %d holds %d events but declares %d", index,
                                        chunk_events_read_, chunk_events_)));
  }
  return true;
}

}  // namespace umlab
