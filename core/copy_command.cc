#include "core/copy_command.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace umlab {

Event CopyCommand::ToEvent() const {
  Event event;
  event.kind = EventKind::kCopy;
  event.cause = static_cast<uint8_t>(direction) | (async ? kCopyAsync : 0);
  event.address = device_address;
  event.host_address = host_address;
  event.size = size;
  return event;
}

absl::StatusOr<CopyCommand> CopyOf(const Event& event) {
  if (event.kind != EventKind::kCopy) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a %s event is not a copy", EventKindName(event.kind)));
  }
  if ((event.cause & ~(kCopyAsync | 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a copy with cause %d, which is neither a direction (0 host to device, 1 device to "
        "host) nor that plus %d (async)",
        event.cause, kCopyAsync));
  }
  if (event.size == 0) return absl::InvalidArgumentError("a copy of no bytes");
  if (event.address + event.size < event.address ||
      event.host_address + event.size < event.host_address) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a copy of %d bytes whose buffers wrap around the address space",
                        event.size));
  }
  CopyCommand copy;
  copy.direction = static_cast<CopyDirection>(event.cause & 1);
  copy.async = (event.cause & kCopyAsync) != 0;
  copy.device_address = event.address;
  copy.host_address = event.host_address;
  copy.size = event.size;
  return copy;
}

const char* CopyModeName(CopyMode mode) {
  switch (mode) {
    case CopyMode::kHostAccess: return "host access";
    case CopyMode::kDma: return "dma";
    case CopyMode::kHidden: return "hidden";
  }
  return "unknown";
}

}  // namespace umlab
