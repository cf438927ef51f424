#include "cli/sweep_merge.h"

#include <filesystem>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/exit_codes.h"
#include "cli/file_text.h"
#include "cli/json_contract.h"
#include "cli/json_text.h"
#include "cli/report.h"

namespace umlab::cli {
namespace {

namespace fs = std::filesystem;

enum class Status { kOk, kFailed, kMissing };

struct CaseResult {
  std::string name;
  Json grid;
  Status status = Status::kMissing;
  Json document;      // the case's whole result, when kOk
  std::string error;  // why, when kFailed or kMissing
};

// The last non-empty line of a failed run's stderr: umlab's one-line error.
std::string LastLine(const std::string& text) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) last = std::string(line);
  }
  return last.empty() ? "failed with no message (killed?)" : last;
}

CaseResult Collect(const fs::path& cases, const Json& entry) {
  CaseResult result;
  result.name = entry.value("name", "");
  result.grid = entry.contains("grid") ? entry["grid"] : Json::object();
  const std::string stem = (cases / result.name).string();
  if (absl::StatusOr<std::string> text = ReadFileText(stem + ".json"); text.ok()) {
    result.document = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
    const bool usable = !result.document.is_discarded() && result.document.is_object() &&
                        result.document.contains("runs") && result.document["runs"].is_array() &&
                        result.document["runs"].size() == 1 &&
                        result.document["runs"][0].is_object();
    result.status = usable ? Status::kOk : Status::kFailed;
    if (!usable) result.error = absl::StrCat(stem, ".json is not one run of umlab's JSON");
    if (absl::Status version = CheckJsonContractVersion(result.document, stem + ".json");
        usable && !version.ok()) {
      result.status = Status::kFailed;
      result.error = std::string(version.message());
    }
  } else if (absl::StatusOr<std::string> err = ReadFileText(stem + ".err"); err.ok()) {
    result.status = Status::kFailed;
    result.error = LastLine(*err);
  } else {
    result.error = "not run";
    std::error_code error;
    for (const auto& file : fs::directory_iterator(cases, error)) {
      if (file.path().filename().string().starts_with(result.name + ".json.part.")) {
        result.error = "started, not finished: still running, or killed (a time or memory limit?)";
      }
    }
  }
  return result;
}

// The runs one per line, as `umlab compare --format=json` prints them.
std::string MergedJson(const std::vector<CaseResult>& results) {
  Json merged = Json::object();
  for (const CaseResult& r : results) {
    if (r.status != Status::kOk) continue;
    for (const auto& [key, value] : r.document.items()) {
      if (key != "runs") merged[key] = value;
    }
    break;
  }
  Json runs = Json::array(), failed = Json::array(), missing = Json::array();
  for (const CaseResult& r : results) {
    if (r.status == Status::kFailed) {
      failed.push_back(Json{{"case", r.name}, {"grid", r.grid}, {"error", r.error}});
    } else if (r.status == Status::kMissing) {
      missing.push_back(Json{{"case", r.name}, {"grid", r.grid}, {"reason", r.error}});
    } else {
      Json& run = runs.emplace_back(Json{{"case", r.name}, {"grid", r.grid}});
      for (const auto& [key, value] : r.document["runs"][0].items()) run[key] = value;
    }
  }
  // Set once filled: ordered_json keeps its members in a vector, so a
  // reference to one would not survive the next insertion.
  merged["runs"] = std::move(runs);
  merged["failed"] = std::move(failed);
  merged["missing"] = std::move(missing);
  return JsonTextListPerLine(merged, "runs");
}

const char* StatusName(Status status) {
  switch (status) {
    case Status::kOk: return "ok";
    case Status::kFailed: return "failed";
    case Status::kMissing: return "missing";
  }
  return "";
}

std::string MergedCsv(const std::vector<std::string>& axes,
                      const std::vector<CaseResult>& results) {
  // The scalar keys of the first run name the columns; every run of one
  // umlab has the same.
  std::vector<std::string> keys;
  for (const CaseResult& r : results) {
    if (r.status != Status::kOk) continue;
    for (const auto& [key, value] : r.document["runs"][0].items()) {
      if (!value.is_structured()) keys.push_back(key);
    }
    break;
  }
  std::vector<std::string> header = {"case", "status"};
  // Prefixed, because an axis is often also a key of the run ("policy").
  for (const std::string& axis : axes) header.push_back("grid." + axis);
  header.insert(header.end(), keys.begin(), keys.end());
  header.push_back("error");
  std::vector<std::string> cells;
  for (const std::string& name : header) cells.push_back(CsvCell(name));
  std::string out = absl::StrCat(absl::StrJoin(cells, ","), "\n");
  for (const CaseResult& r : results) {
    cells = {CsvCell(r.name), CsvCell(StatusName(r.status))};
    for (const std::string& axis : axes) cells.push_back(CsvCell(r.grid.value(axis, "")));
    const Json* run = r.status == Status::kOk ? &r.document["runs"][0] : nullptr;
    for (const std::string& key : keys) {
      cells.push_back(run != nullptr && run->contains(key) ? CsvCell((*run)[key]) : "");
    }
    cells.push_back(r.status == Status::kOk ? "" : CsvCell(r.error));
    absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
  }
  return out;
}

}  // namespace

SweepOutcome MergeSweep(const std::string& dir, std::ostream& out) {
  const fs::path root(dir);
  absl::StatusOr<std::string> text = ReadFileText((root / "sweep.json").string());
  if (!text.ok()) {
    return {kExitUsage, absl::StrFormat("%s is not a sweep: it has no sweep.json (written by "
                                        "'umlab sweep')",
                                        dir)};
  }
  const Json manifest = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object() || !manifest.contains("cases") ||
      !manifest["cases"].is_array() || !manifest.contains("axes") ||
      !manifest["axes"].is_array()) {
    return {kExitUsage, absl::StrFormat("%s/sweep.json is damaged; run 'umlab sweep' again", dir)};
  }
  std::vector<std::string> axes;
  for (const Json& axis : manifest["axes"]) {
    if (axis.is_string()) axes.push_back(axis.get<std::string>());
  }
  std::vector<CaseResult> results;
  std::vector<std::string> failed, missing;
  for (const Json& entry : manifest["cases"]) {
    if (!entry.is_object()) continue;
    CaseResult& r = results.emplace_back(Collect(root / "cases", entry));
    if (r.status == Status::kFailed) failed.push_back(absl::StrCat(r.name, ": ", r.error));
    if (r.status == Status::kMissing) missing.push_back(absl::StrCat(r.name, ": ", r.error));
  }
  const std::string json_path = (root / "merged.json").string();
  const std::string csv_path = (root / "merged.csv").string();
  if (absl::Status s = WriteFileAtomically(json_path, MergedJson(results)); !s.ok()) {
    return {kExitFailure, std::string(s.message())};
  }
  if (absl::Status s = WriteFileAtomically(csv_path, MergedCsv(axes, results)); !s.ok()) {
    return {kExitFailure, std::string(s.message())};
  }
  out << absl::StrFormat("merged %d of %d cases into %s and %s\n",
                         results.size() - failed.size() - missing.size(), results.size(),
                         json_path, csv_path);
  for (const std::string& line : failed) out << "failed: " << line << "\n";
  for (const std::string& name : missing) out << "missing: " << name << "\n";
  if (failed.empty() && missing.empty()) return {kExitOk, ""};
  return {kExitFailure, absl::StrFormat("%d case(s) failed and %d missing; see the list above",
                                        failed.size(), missing.size())};
}

}  // namespace umlab::cli
