// Fuzzes the decoding of one chunk's events (EventDecoder over a ByteCursor,
// core/trace_codec.h) as TraceReader::Next does it, past the zstd and
// checksum layers a mutated file rarely gets through. Input: the bytes of a
// decompressed chunk. Also decodes the input as a metadata block.
//
// Every decoded event must be one the writer accepts (ValidateEvent), and
// re-encoding the decoded events must decode to the same events: the codec
// round-trips whatever the reader lets through.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/event.h"
#include "core/trace_codec.h"

namespace {

using umlab::trace_internal::ByteCursor;

std::vector<umlab::Event> DecodeAll(absl::string_view bytes) {
  std::vector<umlab::Event> events;
  ByteCursor cursor(bytes);
  umlab::trace_internal::EventDecoder decoder;
  umlab::Event event;
  while (!cursor.done()) {
    if (!decoder.Decode(cursor, event).ok()) break;
    events.push_back(event);
  }
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  umlab::trace_internal::Metadata metadata;
  (void)umlab::trace_internal::DecodeMetadata(bytes, metadata);

  const std::vector<umlab::Event> events = DecodeAll(bytes);
  std::string encoded;
  umlab::trace_internal::EventEncoder encoder;
  for (const umlab::Event& event : events) {
    if (!umlab::trace_internal::ValidateEvent(event).ok()) std::abort();
    encoder.Append(event, encoded);
  }
  if (DecodeAll(encoded) != events) std::abort();
  return 0;
}
