// Runs `umlab ARGS...` in the test's own process, capturing what it prints:
// the commands end to end, without a child process.
#ifndef UMLAB_TESTS_UMLAB_IN_PROCESS_H_
#define UMLAB_TESTS_UMLAB_IN_PROCESS_H_

#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace umlab::testing {

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

inline Outcome Umlab(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = cli::Main(args, out, err);
  return Outcome{code, out.str(), err.str()};
}

// Errors are one line, ending in a newline.
inline bool IsOneLine(const std::string& text) {
  return !text.empty() && text.find('\n') == text.size() - 1;
}

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_UMLAB_IN_PROCESS_H_
