#include "core/transfer.h"

namespace umlab {

const char* TransferKindName(TransferKind kind) {
  switch (kind) {
    case TransferKind::kFaultMigration: return "fault";
    case TransferKind::kEviction: return "eviction";
    case TransferKind::kPrefetch: return "prefetch";
  }
  return "?";
}

}  // namespace umlab
