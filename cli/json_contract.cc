#include "cli/json_contract.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace umlab::cli {

std::string JsonContractVersion() {
  return absl::StrFormat("%d.%d", kJsonContractMajor, kJsonContractMinor);
}

Json VersionedJsonObject() {
  Json document = Json::object();
  document[kJsonContractKey] = JsonContractVersion();
  return document;
}

absl::Status CheckJsonContractVersion(const Json& document, absl::string_view source) {
  if (!document.is_object()) return absl::OkStatus();
  const auto it = document.find(kJsonContractKey);
  if (it == document.end()) return absl::OkStatus();
  const std::string text = it->is_string() ? it->get<std::string>() : it->dump();
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  int major = 0;
  int minor = 0;
  if (!it->is_string() || parts.size() != 2 || !absl::SimpleAtoi(parts[0], &major) ||
      !absl::SimpleAtoi(parts[1], &minor) || major < 0 || minor < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: \"%s\" is %s, not a string \"MAJOR.MINOR\" such as \"%s\"; the file is damaged",
        source, kJsonContractKey, text, JsonContractVersion()));
  }
  if (major > kJsonContractMajor) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: JSON contract version %s is newer than this umlab reads (up to %d.x); "
        "upgrade umlab to read it",
        source, text, kJsonContractMajor));
  }
  return absl::OkStatus();
}

}  // namespace umlab::cli
