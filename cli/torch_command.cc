#include "cli/torch_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cli/exit_codes.h"

namespace umlab::cli {

int RunTorchLauncher(const std::vector<std::string>& args, std::ostream& err) {
  // The package is built beside the cuda backend: BUILD/python/umlab_torch,
  // with this binary at BUILD/cli/umlab.
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::filesystem::path python = self.parent_path().parent_path() / "python";
  if (error || !std::filesystem::exists(python / "umlab_torch" / "libumlab_torch.so")) {
    err << "umlab torch: the PyTorch integration is not in this build (it is built where a "
           "CUDA toolkit is found; see docs/torch.md)\n";
    return kExitUsage;
  }
  std::string path = python.string();
  if (const char* existing = std::getenv("PYTHONPATH"); existing != nullptr && *existing) {
    path += ":";
    path += existing;
  }
  setenv("PYTHONPATH", path.c_str(), 1);
  std::vector<std::string> command = {"python3", "-m", "umlab_torch"};
  command.insert(command.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : command) argv.push_back(word.data());
  argv.push_back(nullptr);
  execvp("python3", argv.data());
  err << "umlab torch: cannot run python3 (" << std::strerror(errno)
      << "); install Python 3 with PyTorch\n";
  return kExitFailure;
}

}  // namespace umlab::cli
