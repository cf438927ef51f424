// `umlab torch [options] -- SCRIPT [ARGS...]`: a PyTorch training run under
// umlab (docs/torch.md). The work is python/umlab_torch's, which this
// starts with the package this umlab was built with on PYTHONPATH; its
// options pass through untouched.
#ifndef UMLAB_CLI_TORCH_COMMAND_H_
#define UMLAB_CLI_TORCH_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace umlab::cli {

// Replaces this process with `python3 -m umlab_torch ARGS`. Returns only
// when it cannot (no package beside this build, no python3), with the exit
// code, having written one line to `err`.
int RunTorchLauncher(const std::vector<std::string>& args, std::ostream& err);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_TORCH_COMMAND_H_
