// The version of the JSON umlab writes (docs/json-contract.md): every JSON
// document umlab emits (the runs of run/compare/replay/record, inspect's
// summary, a regression suite rewritten by --update) carries it as its first
// key, "contract_version": "MAJOR.MINOR", and every reader in umlab checks
// it, so a file from a newer umlab fails with one line instead of being
// misread.
//
// The minor version rises when keys are added (an older reader ignores
// them); the major version rises when a key is renamed or removed or changes
// meaning, which an older reader would misread, so it refuses the file.
#ifndef UMLAB_CLI_JSON_CONTRACT_H_
#define UMLAB_CLI_JSON_CONTRACT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cli/json_text.h"

namespace umlab::cli {

inline constexpr int kJsonContractMajor = 1;
inline constexpr int kJsonContractMinor = 4;
inline constexpr char kJsonContractKey[] = "contract_version";

// "1.0".
std::string JsonContractVersion();

// A new document: an object whose first key is the contract version.
Json VersionedJsonObject();

// OK when `document` carries a contract version this umlab reads (any minor
// of a major up to its own), or none at all (a document written before the
// field existed). Otherwise a one-line error naming `source` (a file path,
// "the output"): FailedPrecondition for a newer major version, with what to
// do; InvalidArgument for a version that is not "MAJOR.MINOR".
absl::Status CheckJsonContractVersion(const Json& document, absl::string_view source);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_JSON_CONTRACT_H_
