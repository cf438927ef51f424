#include "workloads/hum/copy_program.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/byte_size.h"

namespace umlab {

CopyProgramBuilder::CopyProgramBuilder(std::string workload, const ComputeSpec& spec)
    : program_(std::make_shared<TensorProgram>()), build_(*program_, spec) {
  program_->workload = std::move(workload);
  program_->iterations = 1;  // the timed region runs once
  build_.IntoIteration();
  build_.IterationBegin();
}

int CopyProgramBuilder::DeviceBuffer(const std::string& name, uint64_t bytes) {
  build_.IntoSetup();
  const int tensor = build_.Tensor(name, bytes, TensorRole::kData);
  build_.Allocate(tensor);
  build_.IntoIteration();
  return tensor;
}

int CopyProgramBuilder::HostBuffer(const std::string& name, uint64_t bytes, bool filled) {
  build_.IntoSetup();
  const int tensor = build_.HostTensor(name, bytes);
  build_.Allocate(tensor);
  if (filled) {
    build_.LaunchOnHostThread("fill_" + name, static_cast<double>(bytes),
                              {{tensor, AccessType::kWrite}});
  }
  build_.IntoIteration();
  return tensor;
}

void CopyProgramBuilder::CopyIn(int device, int host, bool async) {
  build_.Copy(device, host, CopyDirection::kHostToDevice, async);
}

void CopyProgramBuilder::CopyOut(int host, int device, bool async) {
  build_.Copy(device, host, CopyDirection::kDeviceToHost, async);
}

void CopyProgramBuilder::Kernel(const std::string& name, double flops,
                                std::vector<KernelAccess> accesses, double bytes) {
  build_.Launch(name, flops, /*tensor_cores=*/false, std::move(accesses), bytes);
}

void CopyProgramBuilder::Sweep(const std::string& name, double flops,
                               const std::vector<KernelAccess>& accesses, double bytes) {
  uint64_t slices = 1;
  for (const KernelAccess& access : accesses) {
    const uint64_t size = program_->tensors[access.tensor].bytes;
    slices = std::max(slices, (size + kBlockSize - 1) / kBlockSize);
  }
  std::vector<KernelAccess> swept;
  for (uint64_t slice = 0; slice < slices; ++slice) {
    for (const KernelAccess& access : accesses) {
      const uint64_t size = program_->tensors[access.tensor].bytes;
      // Page-aligned cut points, so no page is in two slices.
      const uint64_t begin = size * slice / slices / kPageSize * kPageSize;
      const uint64_t end =
          slice + 1 == slices ? size : size * (slice + 1) / slices / kPageSize * kPageSize;
      if (end > begin) swept.push_back({access.tensor, access.access, begin, end - begin});
    }
  }
  const double moved = bytes >= 0 ? bytes : [&] {
    double sum = 0;
    for (const KernelAccess& access : accesses) {
      sum += static_cast<double>(program_->tensors[access.tensor].bytes);
    }
    return sum;
  }();
  build_.Launch(name, flops, /*tensor_cores=*/false, std::move(swept), moved);
}

void CopyProgramBuilder::HostCode(const std::string& name, double bytes,
                                  std::vector<KernelAccess> accesses) {
  build_.LaunchOnHostThread(name, bytes, std::move(accesses));
}

void CopyProgramBuilder::FreeHost(int host) {
  // free() touches no data: the shortest host code, writing the buffer.
  build_.LaunchOnHostThread("free_" + program_->tensors[host].name, 0,
                            {{host, AccessType::kWrite}});
}

absl::StatusOr<std::shared_ptr<const TensorProgram>> CopyProgramBuilder::Finish() {
  if (!build_.status().ok()) return build_.status();
  return std::shared_ptr<const TensorProgram>(program_);
}

std::string CopyWorkload::Describe() const {
  std::string text = absl::StrCat(program_->workload, ": ", summary_, "\n");
  absl::StatusOr<ProgramFootprint> f = MeasureFootprint(program_);
  if (!f.ok()) return absl::StrCat(text, "  cannot run: ", f.status().message(), "\n");
  int copies_in = 0, copies_out = 0, async = 0, kernels = 0, host_spans = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  Nanos kernel_ns = 0, host_ns = 0;
  for (const ProgramStep& step : program_->iteration) {
    if (step.kind == ProgramStep::Kind::kCopy) {
      const CopySpec& copy = program_->copies[step.index];
      const uint64_t bytes = program_->tensors[copy.device].bytes;
      if (copy.direction == CopyDirection::kHostToDevice) {
        ++copies_in;
        bytes_in += bytes;
      } else {
        ++copies_out;
        bytes_out += bytes;
      }
      async += copy.async ? 1 : 0;
    } else if (step.kind == ProgramStep::Kind::kLaunch) {
      const KernelSpec& kernel = program_->kernels[step.index];
      if (kernel.place == KernelPlace::kHost) {
        ++host_spans;
        host_ns += kernel.duration_ns;
      } else {
        ++kernels;
        kernel_ns += kernel.duration_ns;
      }
    }
  }
  absl::StrAppendFormat(&text, "  device buffers    %s reserved (the footprint)\n",
                        FormatBytes(f->peak_reserved_bytes));
  absl::StrAppendFormat(&text, "  host buffers      %s\n", FormatBytes(f->host_bytes));
  absl::StrAppendFormat(&text, "  copies            %d in (%s), %d out (%s), %d of them async\n",
                        copies_in, FormatBytes(bytes_in), copies_out, FormatBytes(bytes_out),
                        async);
  absl::StrAppendFormat(&text, "  kernels           %d, %.3f ms (roofline)\n", kernels,
                        static_cast<double>(kernel_ns) / 1e6);
  absl::StrAppendFormat(&text, "  host code         %d spans, %.3f ms (one thread)\n",
                        host_spans, static_cast<double>(host_ns) / 1e6);
  return text;
}

absl::StatusOr<std::unique_ptr<Workload>> MakeCopyWorkload(std::string summary,
                                                           CopyProgramBuilder& build) {
  absl::StatusOr<std::shared_ptr<const TensorProgram>> program = build.Finish();
  if (!program.ok()) return program.status();
  return std::unique_ptr<Workload>(new CopyWorkload(std::move(summary), *std::move(program)));
}

}  // namespace umlab
