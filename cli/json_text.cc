#include "cli/json_text.h"

namespace umlab::cli {

std::string JsonText(const Json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

std::string JsonTextListPerLine(const Json& object, const std::string& list_key) {
  std::string out = "{";
  bool first_key = true;
  for (const auto& [key, value] : object.items()) {
    out += first_key ? "" : ",";
    first_key = false;
    out += JsonText(key) + ":";
    if (key != list_key || !value.is_array()) {
      out += JsonText(value);
      continue;
    }
    out += "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i == 0 ? "\n  " : ",\n  ") + JsonText(value[i]);
    out += value.empty() ? "]" : "\n]";
  }
  return out + "}\n";
}

}  // namespace umlab::cli
