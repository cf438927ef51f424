#include "cli/sweep_slurm.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/file_text.h"
#include "core/memory_units.h"

namespace umlab::cli {
namespace {

// The sim's cost, measured with bench/sweeps/timed-umlab.sh (docs/sweeps.md
// has the table): 12-81 ns of CPU time per page access over the 13 DNN
// models under demand and deepum (dlrm and the ResNets under deepum are the
// costliest), and a resident set of a few MiB plus up to 5.5 KiB per 2 MiB
// block of footprint (uvm-default's per-block state, the largest). The
// constants cover every case measured.
constexpr double kStartSeconds = 0.1;
constexpr double kSecondsPerPageAccess = 100e-9;
constexpr uint64_t kBaseBytes = 16ull << 20;
constexpr uint64_t kBytesPerBlock = 8ull << 10;

// Requests leave room for a slower node and for policies costlier than the
// ones measured.
constexpr double kTimeMargin = 3;
constexpr double kMemoryMargin = 2;
constexpr int64_t kMinMib = 256;

int64_t PowerOfTwoAtLeast(double value) {
  int64_t p = 1;
  while (static_cast<double>(p) < value) p *= 2;
  return p;
}

}  // namespace

CaseCost EstimateCost(const ProgramSummary& program, const std::string& backend) {
  CaseCost cost;
  cost.seconds =
      kStartSeconds + kSecondsPerPageAccess * static_cast<double>(program.accessed_pages);
  const uint64_t blocks = (program.footprint_bytes + kBlockSize - 1) / kBlockSize;
  cost.bytes = kBaseBytes + kBytesPerBlock * blocks;
  if (backend != "sim") {
    // The real-memory backends hold the program's data in host memory, and
    // their time depends on the host and dilation: only a rough guess.
    cost.bytes += program.footprint_bytes;
    cost.seconds *= 10;
    cost.calibrated = false;
  }
  return cost;
}

SlurmRequest RequestFor(const CaseCost& cost) {
  SlurmRequest request;
  request.minutes = PowerOfTwoAtLeast(kTimeMargin * cost.seconds / 60);
  request.mib = std::max(
      kMinMib, PowerOfTwoAtLeast(kMemoryMargin * static_cast<double>(cost.bytes) / (1 << 20)));
  return request;
}

absl::StatusOr<std::vector<std::string>> WriteSlurmScripts(
    const std::string& dir, const std::vector<std::string>& jobs,
    const std::vector<SlurmRequest>& requests, const SlurmSettings& settings) {
  const std::filesystem::path slurm = std::filesystem::path(dir) / "slurm";
  std::error_code error;
  std::filesystem::create_directories(slurm / "logs", error);
  if (error) {
    return absl::UnavailableError(
        absl::StrFormat("cannot create %s: %s", (slurm / "logs").string(), error.message()));
  }
  // A rerun of a changed grid may have fewer arrays: drop the old ones.
  for (const auto& entry : std::filesystem::directory_iterator(slurm, error)) {
    if (entry.path().filename().string().starts_with("array-")) {
      std::filesystem::remove(entry.path(), error);
    }
  }
  // Cases in classes of equal requests; grid order within a class.
  std::map<SlurmRequest, std::vector<size_t>> classes;
  for (size_t i = 0; i < jobs.size(); ++i) {
    classes[settings.time.empty() && settings.mem.empty() ? requests[i] : SlurmRequest{}]
        .push_back(i);
  }
  std::vector<std::string> summary;
  std::string submit =
      "#!/bin/sh\n"
      "# Submits every job array of this sweep (written by umlab sweep); prints their ids.\n"
      "set -e\n"
      "cd \"$(dirname \"$0\")\"\n";
  int array = 0;
  for (const auto& [request, members] : classes) {
    for (size_t first = 0; first < members.size(); first += kMaxArrayTasks) {
      const size_t count = std::min<size_t>(kMaxArrayTasks, members.size() - first);
      const std::string stem = absl::StrCat("array-", array++);
      const std::string jobs_path = (slurm / (stem + ".jobs")).string();
      std::string list;
      for (size_t k = first; k < first + count; ++k) absl::StrAppend(&list, jobs[members[k]], "\n");
      if (absl::Status s = WriteFileAtomically(jobs_path, list); !s.ok()) return s;
      const std::string time =
          settings.time.empty() ? absl::StrCat(request.minutes) : settings.time;
      const std::string mem = settings.mem.empty() ? absl::StrCat(request.mib, "M") : settings.mem;
      std::string script = absl::StrFormat(
          "#!/bin/bash\n"
          "# umlab sweep: %d cases, line N+1 of %s.jobs for array task N.\n"
          "#SBATCH --job-name=umlab-sweep\n"
          "#SBATCH --array=0-%d%%%d\n"
          "#SBATCH --time=%s\n"
          "#SBATCH --mem=%s\n"
          "#SBATCH --cpus-per-task=1\n"
          "#SBATCH --output=%s\n",
          count, stem, count - 1, settings.max_running, time, mem,
          (slurm / "logs" / (stem + "_%a.out")).string());
      for (const std::string& arg : settings.args) absl::StrAppend(&script, "#SBATCH ", arg, "\n");
      absl::StrAppend(&script, "line=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" ",
                      ShellQuote(jobs_path), ")\n", "exec bash -c \"$line\"\n");
      const std::string script_path = (slurm / (stem + ".sbatch")).string();
      if (absl::Status s = WriteFileAtomically(script_path, script); !s.ok()) return s;
      absl::StrAppend(&submit, "sbatch --parsable ", stem, ".sbatch\n");
      summary.push_back(absl::StrFormat("%s: %d cases, --time=%s --mem=%s", script_path, count,
                                        time, mem));
    }
  }
  const std::string submit_path = (slurm / "submit.sh").string();
  if (absl::Status s = WriteFileAtomically(submit_path, submit); !s.ok()) return s;
  std::filesystem::permissions(submit_path, std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add, error);
  return summary;
}

}  // namespace umlab::cli
