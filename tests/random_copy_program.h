// Random copy programs (a fixed seed gives a fixed program) for the stress
// tests of copies on every backend (hum_stress_test on the sim,
// uffd_copy_test on the uffd backend): six device buffers at random offsets
// in kRandomCopyBlocks blocks (neighbours may share pages), four host
// buffers, and random steps: sync and async copies both ways, device
// kernels on random device buffers, host code on random host buffers, and
// syncs.
#ifndef UMLAB_TESTS_RANDOM_COPY_PROGRAM_H_
#define UMLAB_TESTS_RANDOM_COPY_PROGRAM_H_

#include <cstdint>
#include <random>
#include <vector>

#include "core/copy_command.h"
#include "core/memory_units.h"
#include "tests/program_builder.h"

namespace umlab::testing {

inline constexpr uint64_t kRandomCopyHost = 0x700000000000ull;
inline constexpr int kRandomCopyBlocks = 12;

struct RandomCopyProgram {
  ProgramBuilder program;
  uint64_t hidden_pages = 0;  // pages the host-to-device copies name
};

inline RandomCopyProgram MakeRandomCopyProgram(std::mt19937_64& rng, int steps) {
  struct Buffer {
    uint64_t address;
    uint64_t size;
  };
  constexpr Nanos kUs = 1000;
  RandomCopyProgram out;
  ProgramBuilder& p = out.program;
  p.Alloc(0, kRandomCopyBlocks);
  std::vector<Buffer> device;
  for (int i = 0; i < 6; ++i) {
    const uint64_t address =
        ProgramBuilder::BlockAddress(static_cast<int>(rng() % (kRandomCopyBlocks - 2))) +
        (rng() % kPagesPerBlock) * kPageSize + (rng() % 2) * (rng() % kPageSize);
    device.push_back({address, kPageSize + rng() % (2 * kBlockSize)});
  }
  const uint64_t host_stride = 8 * kBlockSize;
  uint32_t exec_id = 1;
  for (int step = 0; step < steps; ++step) {
    const Buffer& buffer = device[rng() % device.size()];
    const uint64_t host = kRandomCopyHost + (rng() % 4) * host_stride;
    switch (rng() % 6) {
      case 0:
      case 1:
        p.Copy(CopyDirection::kHostToDevice, buffer.address, host, buffer.size, rng() % 2 == 0);
        out.hidden_pages += PagesSpanned(buffer.address, buffer.size);
        break;
      case 2:
        p.Copy(CopyDirection::kDeviceToHost, buffer.address, host, buffer.size, rng() % 2 == 0);
        break;
      case 3: {
        p.Begin(exec_id, static_cast<Nanos>(10 + rng() % 90) * kUs);
        for (uint64_t n = 1 + rng() % 3; n > 0; --n) {
          const Buffer& touched = device[rng() % device.size()];
          p.Access(touched.address, touched.size, rng() % 2 == 0);
        }
        p.End(exec_id++);
        break;
      }
      case 4:
        p.OnHost(exec_id).Begin(exec_id, static_cast<Nanos>(10 + rng() % 90) * kUs);
        p.Access(host, kBlockSize, rng() % 2 == 0);
        p.End(exec_id++);
        break;
      case 5:
        p.Sync();
        break;
    }
  }
  return out;
}

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_RANDOM_COPY_PROGRAM_H_
