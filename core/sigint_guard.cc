#include "core/sigint_guard.h"

#include <atomic>

namespace umlab {
namespace {

// The handler only raises a flag: nothing else is async-signal-safe.
std::atomic<int> g_interrupted{0};
extern "C" void OnSigint(int) { g_interrupted.store(1); }

}  // namespace

SigintGuard::SigintGuard() {
  g_interrupted.store(0);
  struct sigaction action = {};
  action.sa_handler = OnSigint;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_);
}

SigintGuard::~SigintGuard() { sigaction(SIGINT, &previous_, nullptr); }

bool SigintGuard::interrupted() { return g_interrupted.load() != 0; }

}  // namespace umlab
