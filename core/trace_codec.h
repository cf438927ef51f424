// Byte-level encoding shared by TraceWriter and TraceReader: fixed-width
// little-endian integers, varints, the checksum, the frame headers, metadata
// and events. Keeping both directions here means the writer and the reader
// cannot drift apart. The layout itself is documented in core/trace_format.h.
//
// Decoders never read past the bytes they are given and never trust a
// length they have not checked; they return a short reason ("unknown event
// kind 0x2a") that the reader wraps with the file name and offset.
#ifndef UMLAB_CORE_TRACE_CODEC_H_
#define UMLAB_CORE_TRACE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/event.h"

namespace umlab {
namespace trace_internal {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// 64-bit FNV-1a. Not cryptographic; it only has to catch bit rot and cuts,
// and it needs no dependency.
uint64_t Fnv1a64(absl::string_view bytes);

void AppendFixed32(uint32_t value, std::string& out);
void AppendFixed64(uint64_t value, std::string& out);
uint32_t LoadFixed32(const char* bytes);
uint64_t LoadFixed64(const char* bytes);
void AppendVarint(uint64_t value, std::string& out);

// A bounds-checked cursor over a byte range it does not own.
class ByteCursor {
 public:
  explicit ByteCursor(absl::string_view bytes) : bytes_(bytes) {}

  size_t position() const { return position_; }
  size_t remaining() const { return bytes_.size() - position_; }
  bool done() const { return position_ == bytes_.size(); }

  // Each returns false, leaving the position unspecified, when the bytes run
  // out or (for varints) the encoding is longer than 10 bytes or overflows.
  bool ReadByte(uint8_t& value);
  bool ReadVarint(uint64_t& value) {
    // Inline fast path: most fields of most events fit in one byte.
    if (position_ < bytes_.size() && static_cast<uint8_t>(bytes_[position_]) < 0x80) {
      value = static_cast<uint8_t>(bytes_[position_++]);
      return true;
    }
    return ReadLongVarint(value);
  }
  bool ReadBytes(size_t count, absl::string_view& value);

 private:
  bool ReadLongVarint(uint64_t& value);

  absl::string_view bytes_;
  size_t position_ = 0;
};

struct ChunkHeader {
  uint32_t compressed_size = 0;
  uint32_t uncompressed_size = 0;
  uint32_t event_count = 0;
  uint64_t checksum = 0;

  // Appends the kChunkHeaderBytes header, tag included.
  void AppendTo(std::string& out) const;
  // Parses the kChunkHeaderBytes - 4 bytes that follow the tag.
  static ChunkHeader Parse(const char* bytes);
};

struct EndFrame {
  uint32_t chunk_count = 0;
  uint64_t event_count = 0;

  // Appends the kEndFrameBytes frame, tag included.
  void AppendTo(std::string& out) const;
  // Parses the kEndFrameBytes - 4 bytes that follow the tag.
  static EndFrame Parse(const char* bytes);
};

// The metadata block (without the fixed header fields that precede it).
// Encode checks the writer-side limits; Decode checks everything.
absl::Status EncodeMetadata(const Metadata& metadata, std::string& out);
absl::Status DecodeMetadata(absl::string_view block, Metadata& metadata);

// Whether `event` can be stored: a known kind and access type, a name within
// kMaxKernelNameBytes. InvalidArgument saying which field is wrong otherwise.
absl::Status ValidateEvent(const Event& event);

// Encodes the events of one chunk. Addresses and times are deltas against
// the previous event of the chunk; call Reset() when a new chunk starts.
class EventEncoder {
 public:
  void Reset() { *this = EventEncoder(); }
  // `event` must have passed ValidateEvent.
  void Append(const Event& event, std::string& out);

 private:
  uint64_t previous_address_ = 0;
  uint64_t previous_time_ = 0;
};

// The inverse of EventEncoder, one event at a time.
class EventDecoder {
 public:
  void Reset() { *this = EventDecoder(); }
  // Decodes the event at the cursor. On failure returns DataLoss whose
  // message is a short reason without location; `event` is then garbage.
  absl::Status Decode(ByteCursor& cursor, Event& event);

 private:
  uint64_t previous_address_ = 0;
  uint64_t previous_time_ = 0;
};

// The path as it should appear in a one-line message: control characters
// (a newline in a file name, say) are escaped.
std::string DisplayPath(absl::string_view path);

}  // namespace trace_internal
}  // namespace umlab

#endif  // UMLAB_CORE_TRACE_CODEC_H_
