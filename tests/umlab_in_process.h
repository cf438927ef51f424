// Runs `umlab ARGS...` in the test's own process, capturing what it prints:
// the commands end to end, without a child process.
#ifndef UMLAB_TESTS_UMLAB_IN_PROCESS_H_
#define UMLAB_TESTS_UMLAB_IN_PROCESS_H_

#include <fstream>
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

// A small mlp keeps tests quick: 2 layers of 512, 3 iterations.
inline const std::vector<std::string> kSmallMlp = {
    "--workload=mlp", "--workload-arg", "layers=2,hidden=512,batch=256,iterations=3"};

// `args` followed by kSmallMlp.
inline std::vector<std::string> WithSmallMlp(std::vector<std::string> args) {
  args.insert(args.end(), kSmallMlp.begin(), kSmallMlp.end());
  return args;
}

// Errors are one line, ending in a newline.
inline bool IsOneLine(const std::string& text) {
  return !text.empty() && text.find('\n') == text.size() - 1;
}

// The whole file ("" if it cannot be read).
inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_UMLAB_IN_PROCESS_H_
