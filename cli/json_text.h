// The one JSON writer: every JSON umlab prints is an nlohmann::ordered_json
// document (keys in the order they were set, which docs/json-contract.md
// fixes) turned into text here, so escaping and number formatting are the
// same everywhere.
#ifndef UMLAB_CLI_JSON_TEXT_H_
#define UMLAB_CLI_JSON_TEXT_H_

#include <string>

#include "nlohmann/json.hpp"

namespace umlab::cli {

using Json = nlohmann::ordered_json;

// Compact (indent < 0) or indented text. Integers print as integers,
// doubles in the shortest form that reads back to the same value, strings
// with JSON escapes; bytes that are not UTF-8 (a file name, say) become
// U+FFFD instead of throwing.
std::string JsonText(const Json& value, int indent = -1);

// An object as compact JSON, except that the elements of its array
// `list_key` come one per line, so that a diff or a grep lines up element by
// element; ends in a newline.
std::string JsonTextListPerLine(const Json& object, const std::string& list_key);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_JSON_TEXT_H_
