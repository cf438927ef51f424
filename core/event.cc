#include "core/event.h"

namespace umlab {

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kIterationBegin: return "iteration";
    case EventKind::kAlloc: return "alloc";
    case EventKind::kFree: return "free";
    case EventKind::kActivate: return "activate";
    case EventKind::kDeactivate: return "deactivate";
    case EventKind::kKernelDefine: return "kernel-define";
    case EventKind::kKernelBegin: return "kernel-begin";
    case EventKind::kAccess: return "access";
    case EventKind::kKernelEnd: return "kernel-end";
    case EventKind::kKernelFaultTimes: return "kernel-fault-times";
    case EventKind::kCopy: return "copy";
    case EventKind::kSync: return "sync";
    case EventKind::kFault: return "fault";
    case EventKind::kMigrate: return "migrate";
    case EventKind::kEvict: return "evict";
    case EventKind::kInvalidate: return "invalidate";
  }
  return "unknown";
}

}  // namespace umlab
