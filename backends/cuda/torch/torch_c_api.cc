// The C functions python/umlab_torch calls through ctypes: one session per
// process, started before the training allocates and reported at its end.
#include <cstdint>
#include <memory>
#include <string>

#include "backends/cuda/torch/torch_session.h"

namespace {

std::unique_ptr<umlab::cuda::TorchSession> session;
std::string last_error;
std::string last_report;

}  // namespace

extern "C" {

// 0 on success; otherwise umlab_torch_error() says why, in one line.
// `policy` is a policy spec for the live engine, or "" for the driver alone.
int umlab_torch_start(int gpu, unsigned long long capacity_bytes,
                      unsigned long long host_limit_bytes, const char* policy) {
  if (session != nullptr) {
    last_error = "umlab_torch: a session is already running in this process";
    return 1;
  }
  umlab::cuda::TorchSessionOptions options;
  options.gpu = gpu;
  options.capacity_bytes = capacity_bytes;
  options.host_limit_bytes = host_limit_bytes;
  options.policy = policy == nullptr ? "" : policy;
  absl::StatusOr<std::unique_ptr<umlab::cuda::TorchSession>> started =
      umlab::cuda::TorchSession::Start(options);
  if (!started.ok()) {
    last_error = std::string(started.status().message());
    return 1;
  }
  session = std::move(*started);
  return 0;
}

const char* umlab_torch_error() { return last_error.c_str(); }

void umlab_torch_mark_iteration() {
  if (session != nullptr) session->MarkIteration();
}

// The report as JSON ("" without a session); ends the session, releasing the
// balloon.
const char* umlab_torch_stop() {
  if (session == nullptr) return "";
  last_report = session->Report();
  session.reset();
  return last_report.c_str();
}

}  // extern "C"
