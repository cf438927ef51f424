// Whole text files, read and written. A file is written so that no reader
// ever sees half of it: the text goes to PATH.tmp, renamed over PATH only
// once it is complete, so a crash or a full disk leaves PATH as it was (old
// or absent), never truncated.
#ifndef UMLAB_CLI_FILE_TEXT_H_
#define UMLAB_CLI_FILE_TEXT_H_

#include <functional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace umlab::cli {

// NotFound when the file cannot be opened.
absl::StatusOr<std::string> ReadFileText(const std::string& path);

absl::Status WriteFileAtomically(const std::string& path, const std::string& text);

// The same for text that `write` streams out (a timeline can be tens of MB,
// better not held whole). Says which step failed, so that each command can
// word its own error; errno still holds the cause of kOpen.
enum class AtomicWriteFailure { kNone, kOpen, kWrite, kRename };
AtomicWriteFailure StreamFileAtomically(const std::string& path,
                                        const std::function<void(std::ostream&)>& write);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_FILE_TEXT_H_
