// Turns SIGINT into a flag for the length of a run, so that a real-time
// backend can unwind (join its threads, give device memory back) and report
// the interruption as an error instead of dying half-way.
#ifndef UMLAB_CORE_SIGINT_GUARD_H_
#define UMLAB_CORE_SIGINT_GUARD_H_

#include <signal.h>

namespace umlab {

class SigintGuard {
 public:
  // Installs the handler and clears the flag; the previous handler comes
  // back when the guard goes.
  SigintGuard();
  ~SigintGuard();
  SigintGuard(const SigintGuard&) = delete;
  SigintGuard& operator=(const SigintGuard&) = delete;

  // SIGINT arrived since the guard was made. Safe from any thread.
  static bool interrupted();

 private:
  struct sigaction previous_ = {};
};

}  // namespace umlab

#endif  // UMLAB_CORE_SIGINT_GUARD_H_
