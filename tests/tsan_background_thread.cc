// Starts ThreadSanitizer's background thread before any test runs, in the
// `-DUMLAB_SANITIZE=thread` build only (tests/CMakeLists.txt).
//
// TSan spawns its own helper thread at the process's first pthread_create.
// Tests that check teardown count /proc/self/task before and after a run
// (uffd_stress_test, uffd_test); when the run creates the process's first
// thread, the helper appears in between and looks like a leaked thread.
// Creating and joining one thread during static initialisation makes the
// helper part of every "before" count, so those assertions stay exact.
#include <thread>

namespace {

[[maybe_unused]] const bool kBackgroundThreadStarted = [] {
  std::thread([] {}).join();
  return true;
}();

}  // namespace
