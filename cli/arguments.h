// Command-line parsing for umlab's subcommands.
//
// Each subcommand declares its options once; the same table drives parsing
// and `--help`, so the help text cannot drift from what is accepted.
#ifndef UMLAB_CLI_ARGUMENTS_H_
#define UMLAB_CLI_ARGUMENTS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace umlab::cli {

struct OptionSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // empty for a boolean switch
  std::string help;
  std::string default_text;  // shown in --help; empty for none
  bool repeatable = false;
};

class Arguments {
 public:
  bool Has(const std::string& name) const { return values_.contains(name); }
  // The last value given, or nullopt.
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  const std::vector<std::string>& GetAll(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<Arguments> ParseArguments(absl::Span<const std::string>,
                                                  absl::Span<const OptionSpec>,
                                                  const std::string&);
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// Accepts --name=value, --name value, and --switch. `command` names the
// subcommand in errors ("umlab run").
absl::StatusOr<Arguments> ParseArguments(absl::Span<const std::string> args,
                                         absl::Span<const OptionSpec> specs,
                                         const std::string& command);

// The options part of a --help page.
std::string FormatOptions(absl::Span<const OptionSpec> specs);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_ARGUMENTS_H_
