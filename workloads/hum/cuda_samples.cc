// CUDA Samples' programs as HUM's evaluation ran them (the DeepUM thesis,
// §7.1; docs/hum.md): each one's copies and kernels in the order its main()
// runs them, kernels timed by their roofline (copy_program.h).
//
//   cuda-vectoradd     vectorAdd.cu: A and B copied in, one kernel, C out.
//   cuda-matrixmul     matrixMul.cu: A and B copied in, a warm-up launch and
//                      300 timed ones, C out.
//   cuda-blackscholes  BlackScholes.cu: prices, strikes and years copied in,
//                      512 launches, calls and puts out.
//
// The thesis kept only programs whose kernels take over 1 ms (§7.1.1).
// vectorAdd's own 50,000 elements make a kernel of microseconds, so its
// default is the smallest power of two whose kernel takes over 1 ms on the
// thesis's V100 (v100-pcie3's roofline): 2^27 elements, 1.8 ms. The others
// keep the sample's sizes, which already cross it.
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "workloads/hum/copy_program.h"
#include "workloads/workload.h"

namespace umlab {
namespace {

absl::StatusOr<std::unique_ptr<Workload>> MakeVectorAdd(const ParamMap& params,
                                                        const ComputeSpec& spec) {
  const uint64_t elements = CountParam(params, "elements");
  const uint64_t bytes = elements * 4;
  CopyProgramBuilder p("cuda-vectoradd", spec);
  const int a = p.HostBuffer("A", bytes), b = p.HostBuffer("B", bytes);
  const int c = p.HostBuffer("C", bytes, /*filled=*/false);
  const int da = p.DeviceBuffer("d_A", bytes), db = p.DeviceBuffer("d_B", bytes);
  const int dc = p.DeviceBuffer("d_C", bytes);
  p.CopyIn(da, a);
  p.CopyIn(db, b);
  p.Sweep("vectorAdd", static_cast<double>(elements), {{da, kRead}, {db, kRead}, {dc, kWrite}});
  p.CopyOut(c, dc);
  return MakeCopyWorkload(
      absl::StrFormat("CUDA Samples vectorAdd, %d fp32 elements: A and B in, C = A + B, C out",
                      elements),
      p);
}

absl::StatusOr<std::unique_ptr<Workload>> MakeMatrixMul(const ParamMap& params,
                                                        const ComputeSpec& spec) {
  const uint64_t ha = CountParam(params, "ha"), wa = CountParam(params, "wa");
  const uint64_t wb = CountParam(params, "wb");
  const uint64_t launches = CountParam(params, "launches");
  CopyProgramBuilder p("cuda-matrixmul", spec);
  const int a = p.HostBuffer("h_A", ha * wa * 4), b = p.HostBuffer("h_B", wa * wb * 4);
  const int c = p.HostBuffer("h_C", ha * wb * 4, /*filled=*/false);
  const int da = p.DeviceBuffer("d_A", ha * wa * 4), db = p.DeviceBuffer("d_B", wa * wb * 4);
  const int dc = p.DeviceBuffer("d_C", ha * wb * 4);
  p.CopyIn(da, a);
  p.CopyIn(db, b);
  for (uint64_t launch = 0; launch < launches; ++launch) {
    p.Kernel("MatrixMulCUDA", 2.0 * ha * wb * wa, {{da, kRead}, {db, kRead}, {dc, kWrite}});
  }
  p.CopyOut(c, dc);
  return MakeCopyWorkload(
      absl::StrFormat("CUDA Samples matrixMul, A %dx%d times B %dx%d, %d launches: A and B "
                      "in, C out",
                      ha, wa, wa, wb, launches),
      p);
}

absl::StatusOr<std::unique_ptr<Workload>> MakeBlackScholes(const ParamMap& params,
                                                           const ComputeSpec& spec) {
  const uint64_t options = CountParam(params, "options"), launches = CountParam(params, "launches");
  const uint64_t bytes = options * 4;
  CopyProgramBuilder p("cuda-blackscholes", spec);
  const int price = p.HostBuffer("h_StockPrice", bytes);
  const int strike = p.HostBuffer("h_OptionStrike", bytes);
  const int years = p.HostBuffer("h_OptionYears", bytes);
  const int call = p.HostBuffer("h_CallResultGPU", bytes, /*filled=*/false);
  const int put = p.HostBuffer("h_PutResultGPU", bytes, /*filled=*/false);
  const int d_price = p.DeviceBuffer("d_StockPrice", bytes);
  const int d_strike = p.DeviceBuffer("d_OptionStrike", bytes);
  const int d_years = p.DeviceBuffer("d_OptionYears", bytes);
  const int d_call = p.DeviceBuffer("d_CallResult", bytes);
  const int d_put = p.DeviceBuffer("d_PutResult", bytes);
  p.CopyIn(d_price, price);
  p.CopyIn(d_strike, strike);
  p.CopyIn(d_years, years);
  // Bandwidth bound, as the sample itself reports it: five floats per
  // option.
  for (uint64_t launch = 0; launch < launches; ++launch) {
    p.Sweep("BlackScholesGPU", 0,
            {{d_price, kRead}, {d_strike, kRead}, {d_years, kRead}, {d_call, kWrite},
             {d_put, kWrite}});
  }
  p.CopyOut(call, d_call);
  p.CopyOut(put, d_put);
  return MakeCopyWorkload(
      absl::StrFormat("CUDA Samples BlackScholes, %d options, %d launches: three arrays in, "
                      "calls and puts out",
                      options, launches),
      p);
}

}  // namespace

UMLAB_REGISTER_WORKLOAD(
    cuda_vectoradd,
    {"cuda-vectoradd", "CUDA Samples vectorAdd as HUM ran it: two copies in, one kernel",
     {{"elements", ParamType::kInt, "134217728",
       "fp32 elements per vector (2^27: the first power of two whose kernel passes the "
       "thesis's 1 ms cut-off on a V100)",
       ParamRange::Closed(1, 1ll << 34)}},
     MakeVectorAdd});
UMLAB_REGISTER_WORKLOAD(
    cuda_matrixmul,
    {"cuda-matrixmul", "CUDA Samples matrixMul as HUM ran it: two copies in, 301 launches",
     {{"ha", ParamType::kInt, "320", "rows of A (the sample's 5 * 2 * 32)",
       ParamRange::Closed(1, 1 << 17)},
      {"wa", ParamType::kInt, "320", "columns of A, rows of B", ParamRange::Closed(1, 1 << 17)},
      {"wb", ParamType::kInt, "640", "columns of B (the sample's 5 * 4 * 32)",
       ParamRange::Closed(1, 1 << 17)},
      {"launches", ParamType::kInt, "301", "launches: one warm-up and nIter = 300",
       ParamRange::Closed(1, 1000000)}},
     MakeMatrixMul});
UMLAB_REGISTER_WORKLOAD(
    cuda_blackscholes,
    {"cuda-blackscholes", "CUDA Samples BlackScholes as HUM ran it: three copies in, 512 launches",
     {{"options", ParamType::kInt, "4000000", "options (the sample's OPT_N)",
       ParamRange::Closed(1, 1ll << 32)},
      {"launches", ParamType::kInt, "512", "launches (the sample's NUM_ITERATIONS)",
       ParamRange::Closed(1, 1000000)}},
     MakeBlackScholes});

}  // namespace umlab
