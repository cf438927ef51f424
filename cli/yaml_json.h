// YAML read as the JSON it stands for, so that a grid (cli/sweep_grid.h) may
// be written in either. Mappings keep their order; a plain scalar that reads
// as a whole number or a finite number becomes one; anything else (quoted
// scalars, true, 8GiB) stays a string.
#ifndef UMLAB_CLI_YAML_JSON_H_
#define UMLAB_CLI_YAML_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "cli/json_text.h"

namespace umlab::cli {

// InvalidArgument with the parser's one-line message (line and column).
absl::StatusOr<Json> YamlToJson(const std::string& text);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_YAML_JSON_H_
