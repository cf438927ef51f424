#include "cli/arguments.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace umlab::cli {

std::optional<std::string> Arguments::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::string Arguments::GetOr(const std::string& name, const std::string& fallback) const {
  return Get(name).value_or(fallback);
}

const std::vector<std::string>& Arguments::GetAll(const std::string& name) const {
  static const std::vector<std::string> kEmpty;
  auto it = values_.find(name);
  return it == values_.end() ? kEmpty : it->second;
}

absl::StatusOr<Arguments> ParseArguments(absl::Span<const std::string> args,
                                         absl::Span<const OptionSpec> specs,
                                         const std::string& command) {
  Arguments parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--") || arg == "--") {
      if (arg != "--") parsed.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& candidate : specs) {
      if (candidate.name == name) spec = &candidate;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown option --%s for '%s'; see '%s --help'", name, command, command));
    }
    if (spec->value_name.empty()) {
      if (value.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("option --%s of '%s' takes no value", name, command));
      }
      value = "true";
    } else if (!value.has_value()) {
      if (i + 1 >= args.size() || absl::StartsWith(args[i + 1], "--")) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "option --%s of '%s' needs a value: --%s=%s", name, command, name,
            spec->value_name));
      }
      value = args[++i];
    }
    std::vector<std::string>& values = parsed.values_[name];
    if (!spec->repeatable) values.clear();
    values.push_back(*value);
  }
  return parsed;
}

std::string FormatOptions(absl::Span<const OptionSpec> specs) {
  std::string out;
  for (const OptionSpec& spec : specs) {
    std::string left = absl::StrCat("  --", spec.name);
    if (!spec.value_name.empty()) absl::StrAppend(&left, "=", spec.value_name);
    std::string right = spec.help;
    if (!spec.default_text.empty()) absl::StrAppend(&right, " [default: ", spec.default_text, "]");
    if (spec.repeatable) absl::StrAppend(&right, " (repeatable)");
    if (left.size() < 28) {
      absl::StrAppend(&out, absl::StrFormat("%-28s%s\n", left, right));
    } else {
      absl::StrAppend(&out, left, "\n", std::string(28, ' '), right, "\n");
    }
  }
  return out;
}

}  // namespace umlab::cli
