// umlab_room_probe: how many 2 MiB blocks of managed memory the UVM driver
// keeps on the GPU when a cudaMalloc balloon leaves it a given room, which
// is what `--backend=cuda:memory=driver --capacity=C` relies on: the engine
// budgets C / 2 MiB frames, and a policy that pre-evicts when the engine's
// books say the device is full (DeepUM, §5.1) never does so if the driver
// runs out a few blocks earlier and evicts by itself.
//
// For each room it:
//   1. allocates a managed region larger than the room and writes it on the
//      host (host data, as the replay's tensors are after their first
//      iteration);
//   2. inflates a balloon that leaves the room free (GpuBalloon, as the
//      cuda backend does);
//   3. prefetches the region to the GPU one 2 MiB block at a time, in
//      address order, each call waited for: the driver evicts the block
//      that arrived longest ago when it needs room, so the blocks still
//      resident afterwards are the last ones prefetched;
//   4. prefetches the blocks again from the last one backwards: a block
//      that is resident costs a call that moves nothing (a few us), the
//      first that is not costs a migration (over 100 us). The run of fast
//      calls is the number of blocks the driver held.
// It also reports cudaMemGetInfo's free bytes when the balloon is up and
// after the fill, and what the calls of steps 3 and 4 took on average.
//
// Usage: umlab_room_probe [ROOM_MIB ...]   (default: 512 2048 4080)
// Prints one JSON object. Needs a GPU with room for the largest region.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/cuda/cuda_call_check.h"
#include "backends/cuda/gpu_balloon.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBlock = size_t{2} << 20;
// A prefetch of a 2 MiB block that moves nothing returns in a few us; one
// that copies it into a full device also evicts a block first, 200 us or
// more on H100 and H200 (docs/devices.md). No-op calls of over 50 us were
// seen (once in about 10,000 on an H100), so the line is drawn higher.
constexpr double kMovedUs = 100;

constexpr umlab::cuda::CudaCallCheck Ok("umlab_room_probe");

// One prefetch of `bytes` at `address` to `location`, waited for; its us.
double TimedPrefetch(char* address, size_t bytes, cudaMemLocation location, cudaStream_t stream,
                     bool* ok) {
  const auto start = Clock::now();
  *ok = Ok(cudaMemPrefetchAsync(address, bytes, location, 0, stream), "cudaMemPrefetchAsync") &&
        Ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct RoomResult {
  size_t room_blocks = 0;
  size_t region_blocks = 0;
  size_t free_with_balloon = 0;
  size_t free_after_fill = 0;
  size_t resident_blocks = 0;
  double fill_us_per_call = 0;
  double resident_check_us_per_call = 0;
};

bool MeasureRoom(size_t room_bytes, int device, cudaStream_t stream, RoomResult* result) {
  const size_t room_blocks = room_bytes / kBlock;
  // Half as much again as the room: every block of the first third must be
  // evicted to make room for the rest.
  const size_t region_blocks = room_blocks + room_blocks / 2 + 8;
  const size_t region = region_blocks * kBlock;
  char* base = nullptr;
  if (!Ok(cudaMallocManaged(reinterpret_cast<void**>(&base), region), "cudaMallocManaged")) {
    return false;
  }
  std::memset(base, 1, region);
  const cudaMemLocation gpu{cudaMemLocationTypeDevice, device};
  bool ok = true;
  {
    absl::StatusOr<std::unique_ptr<umlab::cuda::GpuBalloon>> balloon =
        umlab::cuda::GpuBalloon::Inflate(room_blocks * kBlock);
    if (!balloon.ok()) {
      std::fprintf(stderr, "umlab_room_probe: %s\n",
                   std::string(balloon.status().message()).c_str());
      cudaFree(base);
      return false;
    }
    result->room_blocks = room_blocks;
    result->region_blocks = region_blocks;
    result->free_with_balloon = umlab::cuda::GpuFreeBytes().value_or(0);
    double fill_total = 0;
    for (size_t i = 0; i < region_blocks && ok; ++i) {
      fill_total += TimedPrefetch(base + i * kBlock, kBlock, gpu, stream, &ok);
    }
    if (!ok) {
      cudaFree(base);
      return false;
    }
    result->free_after_fill = umlab::cuda::GpuFreeBytes().value_or(0);
    result->fill_us_per_call = fill_total / double(region_blocks);
    double check_total = 0;
    size_t resident = 0;
    for (size_t i = region_blocks; i-- > 0;) {
      const double us = TimedPrefetch(base + i * kBlock, kBlock, gpu, stream, &ok);
      if (!ok || us > kMovedUs) break;
      check_total += us;
      ++resident;
    }
    result->resident_blocks = resident;
    result->resident_check_us_per_call = resident > 0 ? check_total / double(resident) : 0;
  }
  cudaFree(base);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> rooms_mib;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const unsigned long long mib = std::strtoull(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || mib < 64 || mib % 2 != 0) {
      std::fprintf(stderr,
                   "umlab_room_probe: '%s' is not a room in MiB; give even numbers of at least "
                   "64, e.g. umlab_room_probe 512 4080\n",
                   argv[i]);
      return 2;
    }
    rooms_mib.push_back(mib);
  }
  if (rooms_mib.empty()) rooms_mib = {512, 2048, 4080};
  const int device = 0;
  if (!Ok(cudaSetDevice(device), "cudaSetDevice")) return 1;
  cudaFree(nullptr);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  cudaStream_t stream;
  if (!Ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;
  std::printf("{\"gpu\":\"%s\",\"rooms\":[", prop.name);
  bool ok = true;
  for (size_t i = 0; i < rooms_mib.size() && ok; ++i) {
    RoomResult result;
    ok = MeasureRoom(rooms_mib[i] << 20, device, stream, &result);
    if (!ok) break;
    std::printf("%s\n {\"room_blocks\":%zu,\"region_blocks\":%zu,\"free_with_balloon\":%zu,"
                "\"free_after_fill\":%zu,\"resident_blocks\":%zu,"
                "\"short_blocks\":%lld,\"fill_us_per_call\":%.1f,"
                "\"resident_check_us_per_call\":%.1f}",
                i == 0 ? "" : ",", result.room_blocks, result.region_blocks,
                result.free_with_balloon, result.free_after_fill, result.resident_blocks,
                static_cast<long long>(result.room_blocks) -
                    static_cast<long long>(result.resident_blocks),
                result.fill_us_per_call, result.resident_check_us_per_call);
  }
  std::printf("]}\n");
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
