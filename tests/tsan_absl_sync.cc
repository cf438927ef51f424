// Makes absl::Mutex and absl::CondVar visible to ThreadSanitizer in the
// `-DUMLAB_SANITIZE=thread` build. Linked only into that build's test
// executables (tests/CMakeLists.txt).
//
// Why it is needed: Abseil comes from a Debian package, built without TSan.
// Its Mutex is an atomic word plus futex syscalls, all inside the
// uninstrumented libabsl_synchronization.so, so TSan sees neither the lock
// nor the unlock and reports every access a Mutex guards as a race. An
// Abseil built with -fsanitize=thread tells TSan about each operation through
// the __tsan_mutex_* annotations (absl/base/internal/tsan_mutex_interface.h);
// this file adds exactly those annotations around the packaged library's
// functions. It defines the member functions our code calls (the executable's
// definition takes precedence over the shared library's), annotates, and
// calls the packaged one, found by its mangled name with dlsym(RTLD_NEXT).
//
// Covered: Lock, Unlock, TryLock, ReaderLock, ReaderUnlock, ReaderTryLock,
// ~Mutex, and CondVar::Wait / WaitWithTimeout / WaitWithDeadline with the
// mutex held in writer mode (umlab never waits holding a reader lock).
// Mutex::Await and LockWhen are not: they unlock and relock inside the
// library, and code that used them here would get loud TSan errors (an
// unlock of an unlocked mutex), not silence.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace {

#define UMLAB_STRINGIFY2(x) #x
#define UMLAB_STRINGIFY(x) UMLAB_STRINGIFY2(x)

// The packaged library's definition of `absl::<inline namespace>::<rest>`,
// where `rest` is the mangled tail (class, member, parameters).
template <typename Fn>
Fn Packaged(const char* rest) {
  const std::string ns = UMLAB_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(ns.size()) + ns + rest;
  void* symbol = dlsym(RTLD_NEXT, name.c_str());
  if (symbol == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found in the Abseil library: %s\n",
                 name.c_str(), dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(symbol);
}

using MutexFn = void (*)(absl::Mutex*);
using MutexTryFn = bool (*)(absl::Mutex*);
using CondVarWaitFn = void (*)(absl::CondVar*, absl::Mutex*);
using CondVarTimeoutFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Duration);
using CondVarDeadlineFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Time);

// CondVar waits release the mutex and take it back inside the library: tell
// TSan the same, around the call. The library's own calls between these
// functions come back here too (they go through the PLT, and the
// executable's definitions win: WaitWithTimeout calls WaitWithDeadline), so
// only the outermost call on a thread is annotated.
thread_local bool in_wait = false;

template <typename Wait>
auto WaitAnnotated(absl::Mutex* mu, Wait wait) {
  if (in_wait) return wait();
  in_wait = true;
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  auto result = wait();
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
  in_wait = false;
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

Mutex::~Mutex() {
  static const auto destroy = Packaged<MutexFn>("5MutexD2Ev");
  __tsan_mutex_destroy(this, 0);
  destroy(this);
}

void Mutex::Lock() {
  static const auto lock = Packaged<MutexFn>("5Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  lock(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  static const auto unlock = Packaged<MutexFn>("5Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  unlock(this);
  __tsan_mutex_post_unlock(this, 0);
}

bool Mutex::TryLock() {
  static const auto try_lock = Packaged<MutexTryFn>("5Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = try_lock(this);
  __tsan_mutex_post_lock(
      this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::ReaderLock() {
  static const auto lock = Packaged<MutexFn>("5Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  lock(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

void Mutex::ReaderUnlock() {
  static const auto unlock = Packaged<MutexFn>("5Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  unlock(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

bool Mutex::ReaderTryLock() {
  static const auto try_lock = Packaged<MutexTryFn>("5Mutex13ReaderTryLockEv");
  constexpr unsigned kFlags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, kFlags);
  const bool locked = try_lock(this);
  __tsan_mutex_post_lock(this, kFlags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void CondVar::Wait(Mutex* mu) {
  static const auto wait = Packaged<CondVarWaitFn>("7CondVar4WaitEPNS0_5MutexE");
  WaitAnnotated(mu, [&] {
    wait(this, mu);
    return 0;
  });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto wait =
      Packaged<CondVarTimeoutFn>("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return WaitAnnotated(mu, [&] { return wait(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto wait =
      Packaged<CondVarDeadlineFn>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return WaitAnnotated(mu, [&] { return wait(this, mu, deadline); });
}

ABSL_NAMESPACE_END
}  // namespace absl
