#include "cli/yaml_json.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "yaml-cpp/yaml.h"

namespace umlab::cli {
namespace {

Json Convert(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      Json object = Json::object();
      for (const auto& entry : node) object[entry.first.Scalar()] = Convert(entry.second);
      return object;
    }
    case YAML::NodeType::Sequence: {
      Json array = Json::array();
      for (const auto& element : node) array.push_back(Convert(element));
      return array;
    }
    case YAML::NodeType::Scalar: {
      const std::string& text = node.Scalar();
      if (node.Tag() == "!") return text;  // quoted: a string whatever it holds
      int64_t whole = 0;
      if (absl::SimpleAtoi(text, &whole)) return whole;
      double number = 0;
      if (absl::SimpleAtod(text, &number) && std::isfinite(number)) return number;
      return text;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<Json> YamlToJson(const std::string& text) {
  // yaml-cpp reports errors by exception; none leaves this function.
  try {
    return Convert(YAML::Load(text));
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "not valid YAML: %s (line %d, column %d)", error.msg, error.mark.line + 1,
        error.mark.column + 1));
  }
}

}  // namespace umlab::cli
