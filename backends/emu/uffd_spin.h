// Bounded busy-waiting for the uffd emulator's thread hand-offs.
//
// Why: on a virtual machine whose idle vCPUs halt (the 2-core CI VM runs
// with guest halt-polling off), waking a thread that sleeps in a futex or in
// poll() is slow whenever its vCPU has halted: the interrupt that wakes it
// exits to the hypervisor. Measured there, the woken thread runs 20-40 us
// later and the waker itself loses 10-17 us in the wake-up call; the whole
// fault service is about 10 us of work. A thread that expects work within a
// few tens of microseconds therefore polls for it first, and blocks only
// when none came.
//
// Spinning must not take the core from threads that have work (the SM
// threads, the reader): the spinner yields every few microseconds, and stops
// for good as soon as a yield shows that another thread ran, i.e. that the
// core is wanted. So it only ever burns a core that would otherwise be
// idle, and for at most `budget`.
#ifndef UMLAB_BACKENDS_EMU_UFFD_SPIN_H_
#define UMLAB_BACKENDS_EMU_UFFD_SPIN_H_

#include <sched.h>

#include "backends/emu/pcie_throttle.h"

namespace umlab {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// How often a spinner offers its core to other runnable threads.
inline constexpr Nanos kSpinYieldEveryNanos = 4000;
// A yield that took longer than this ran another thread: stop spinning.
inline constexpr Nanos kSpinDisplacedNanos = 20000;

// Polls `ready` (cheap, lock-free) for up to `budget` ns. Returns whether it
// became true; false also when the core turned out to be wanted by another
// thread before the budget ran out. The caller then blocks as usual.
template <typename Ready>
bool SpinUntil(Nanos budget, Ready&& ready) {
  if (ready()) return true;
  if (budget <= 0) return false;
  const Nanos start = MonotonicNanos();
  Nanos last_yield = start;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      CpuRelax();
      if (ready()) return true;
    }
    const Nanos now = MonotonicNanos();
    if (now - start >= budget) return ready();
    if (now - last_yield >= kSpinYieldEveryNanos) {
      sched_yield();
      last_yield = MonotonicNanos();
      if (last_yield - now >= kSpinDisplacedNanos) return ready();
    }
  }
}

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_UFFD_SPIN_H_
