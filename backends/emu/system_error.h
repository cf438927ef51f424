// One-line errors for failed system calls, in the emu backends' words.
#ifndef UMLAB_BACKENDS_EMU_SYSTEM_ERROR_H_
#define UMLAB_BACKENDS_EMU_SYSTEM_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace umlab {

// The C library's text for an errno value ("Operation not permitted").
std::string ErrnoText(int error);

// An internal error "<device>: <what>: <errno's text>", from errno as it is
// now: call it right after the failed call.
absl::Status ErrnoStatus(absl::string_view device, absl::string_view what);

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_SYSTEM_ERROR_H_
