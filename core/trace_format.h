// The `.umt` trace format: its constants and its byte layout, in one place.
//
// A trace is what a backend records while running a program: the program's
// events plus the faults, migrations and evictions it observed (core/event.h).
// Traces are large (hundreds of millions of events) and are shared between
// machines, so the format is compact, streamable, and defensive: a reader
// holds at most one chunk in memory and trusts no length field it has not
// bounded first. docs/trace-format.md is the user-facing description.
//
// Layout (every fixed-width integer is little-endian):
//
//   File header, 24 bytes + metadata
//     0   magic[8]        89 55 4D 54 0D 0A 1A 0A ("\x89UMT\r\n\x1a\n"). The
//                         high byte and CR/LF/^Z catch text-mode transfers and
//                         stop `cat` from dumping binary, as PNG's magic does.
//     8   u32 version     kTraceVersion (5; version 4 has no copies (kCopy,
//                         kSync, host_address), version 3 also no host
//                         kernels (a kKernelDefine's cause), version 2 also
//                         lacks `rereads`, version 1 also kKernelFaultTimes).
//     12  u32 meta_size   bytes of the metadata block, <= kMaxMetadataBytes.
//     16  u64 meta_hash   FNV-1a 64 of the metadata block.
//     24  metadata block  varint entry_count (<= kMaxMetadataEntries), then
//                         per entry: varint key_len, key, varint value_len,
//                         value. Keys are unique; order is kept.
//
//   Then any number of chunk frames, each a 24-byte header + payload
//     0   tag[4]          "UMTC"
//     4   u32 compressed_size    <= kMaxCompressedChunkBytes
//     8   u32 uncompressed_size  <= kMaxChunkBytes
//     12  u32 event_count        >= 1, <= uncompressed_size
//     16  u64 checksum           FNV-1a 64 of the uncompressed bytes
//     24  payload         one zstd frame holding the encoded events
//
//   Then exactly one end frame, 16 bytes, and nothing after it
//     0   tag[4]          "UMTE"
//     4   u32 chunk_count  chunks in the file
//     8   u64 event_count  events in the file
//   The end frame is what makes a cut at a chunk boundary detectable: every
//   proper prefix of a trace is an error, never a shorter valid trace.
//
//   Event encoding inside a chunk (LEB128 varints; "zz" = zigzag varint):
//     u8 kind             an EventKind value; anything else is corruption
//     varint field_mask   bit i set = field i present (kField* below)
//     then, in bit order, each present field:
//       address     zz delta from the previous present address in the chunk
//       size        varint
//       time_ns     zz delta from the previous present time_ns in the chunk
//       exec_id     varint, < 2^32
//       access      varint, 1 (write) or 2 (atomic)
//       sm          varint, < 2^32
//       cause       varint, < 2^8
//       iteration   varint
//       duration_ns zz
//       name        varint length (1..kMaxKernelNameBytes), then bytes
//       rereads     varint, < 2^32
//       host_address varint
//   A field is present exactly when it is non-zero (non-empty for name), so
//   an event stores only what its kind uses (Event's unused fields are zero)
//   and still round-trips bit-exactly if a producer sets more. Delta state
//   resets at each chunk so a chunk decodes on its own.
#ifndef UMLAB_CORE_TRACE_FORMAT_H_
#define UMLAB_CORE_TRACE_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace umlab {

inline constexpr char kTraceMagic[8] = {'\x89', 'U', 'M', 'T', '\r', '\n', '\x1a', '\n'};

// Bumped on any change a version-1 reader could misread: a new event kind or
// field, a new frame type. Readers accept every version up to their own.
// New metadata keys do not need a bump.
inline constexpr uint32_t kTraceVersion = 5;

inline constexpr size_t kFileHeaderBytes = 24;
inline constexpr char kChunkTag[4] = {'U', 'M', 'T', 'C'};
inline constexpr size_t kChunkHeaderBytes = 24;
inline constexpr char kEndTag[4] = {'U', 'M', 'T', 'E'};
inline constexpr size_t kEndFrameBytes = 16;

// Bounds a reader enforces before it allocates anything. They are far above
// what the writer produces, so they only ever reject damaged or hostile files.
inline constexpr uint32_t kMaxMetadataBytes = 1u << 20;
inline constexpr uint32_t kMaxMetadataEntries = 4096;
inline constexpr uint32_t kMaxChunkBytes = 16u << 20;
// ZSTD_COMPRESSBOUND(kMaxChunkBytes), spelled out so this header needs no
// zstd.h; trace_codec.cc static_asserts that the two agree.
inline constexpr uint32_t kMaxCompressedChunkBytes =
    kMaxChunkBytes + (kMaxChunkBytes >> 8) +
    ((kMaxChunkBytes < (128u << 10)) ? (((128u << 10) - kMaxChunkBytes) >> 11) : 0);
inline constexpr uint32_t kMaxKernelNameBytes = 4096;

// The writer closes a chunk once this many encoded bytes are buffered: big
// enough for zstd to find the repetition across iterations, small enough that
// a reader's working set stays around a megabyte.
inline constexpr uint32_t kDefaultChunkBytes = 1u << 20;

// Field presence bits of the event encoding, in encoding order.
enum TraceField : uint32_t {
  kFieldAddress = 1u << 0,
  kFieldSize = 1u << 1,
  kFieldTime = 1u << 2,
  kFieldExecId = 1u << 3,
  kFieldAccess = 1u << 4,
  kFieldSm = 1u << 5,
  kFieldCause = 1u << 6,
  kFieldIteration = 1u << 7,
  kFieldDuration = 1u << 8,
  kFieldName = 1u << 9,
  kFieldRereads = 1u << 10,
  kFieldHostAddress = 1u << 11,
};
inline constexpr uint32_t kAllTraceFields = (1u << 12) - 1;

// The most bytes one encoded event can take: kind, a 2-byte mask, six
// 10-byte 64-bit varints, three 5-byte 32-bit varints, access and cause, and
// the longest name with its length. The writer keeps chunks under
// kMaxChunkBytes by closing them before this much headroom is gone.
inline constexpr uint32_t kMaxEncodedEventBytes =
    1 + 2 + 6 * 10 + 3 * 5 + 1 + 2 + 2 + kMaxKernelNameBytes;

}  // namespace umlab

#endif  // UMLAB_CORE_TRACE_FORMAT_H_
