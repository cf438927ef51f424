#include "cli/json_text.h"

namespace umlab::cli {

std::string JsonText(const Json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace umlab::cli
