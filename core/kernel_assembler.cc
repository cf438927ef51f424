#include "core/kernel_assembler.h"

#include "absl/strings/str_format.h"
#include "core/copy_command.h"

namespace umlab {

bool KernelAssembler::Fail(const Event& event, absl::string_view what) {
  status_ = absl::InvalidArgumentError(absl::StrFormat(
      "malformed program: %s (at event %s, exec id %d); regenerate or re-record it", what,
      EventKindName(event.kind), event.exec_id));
  return false;
}

bool KernelAssembler::Next() {
  if (!status_.ok()) return false;
  is_kernel_ = false;
  kernel_.clear();
  while (program_.Next(event_)) {
    if (!event_.IsProgramEvent()) continue;
    if (kernel_.empty()) {
      switch (event_.kind) {
        case EventKind::kKernelBegin:
          kernel_.push_back(event_);
          continue;
        case EventKind::kAccess:
          return Fail(event_, "an access outside any kernel");
        case EventKind::kKernelEnd:
          return Fail(event_, "a kernel end with no kernel running");
        case EventKind::kKernelDefine:
          if (event_.cause > static_cast<uint8_t>(KernelPlace::kHost)) {
            return Fail(event_, absl::StrFormat("kernel %d is defined to run in place %d, "
                                                "which is neither the device (0) nor the host (1)",
                                                event_.exec_id, event_.cause));
          }
          if (event_.cause == static_cast<uint8_t>(KernelPlace::kHost)) {
            host_kernels_.insert(event_.exec_id);
          } else {
            host_kernels_.erase(event_.exec_id);
          }
          return true;
        case EventKind::kCopy:
          if (absl::StatusOr<CopyCommand> copy = CopyOf(event_); !copy.ok()) {
            return Fail(event_, copy.status().message());
          }
          return true;
        default:
          return true;
      }
    }
    switch (event_.kind) {
      case EventKind::kAccess:
        kernel_.push_back(event_);
        continue;
      case EventKind::kKernelEnd:
        if (event_.exec_id != kernel_.front().exec_id) {
          return Fail(event_, absl::StrFormat("a kernel end inside kernel %d",
                                              kernel_.front().exec_id));
        }
        kernel_.push_back(event_);
        is_kernel_ = true;
        return true;
      case EventKind::kKernelBegin:
        return Fail(event_, "a kernel begins inside another");
      default:
        // Backends run a kernel whole, after its end: an allocator or
        // iteration event in the middle would take effect out of order.
        return Fail(event_, absl::StrFormat("a %s event inside kernel %d",
                                            EventKindName(event_.kind),
                                            kernel_.front().exec_id));
    }
  }
  status_ = program_.status();
  if (status_.ok() && !kernel_.empty()) {
    return Fail(kernel_.front(), "the program ends inside a kernel");
  }
  return false;
}

}  // namespace umlab
