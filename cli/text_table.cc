#include "cli/text_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace umlab::cli {

std::string RenderTextTable(const std::vector<std::vector<std::string>>& rows,
                            size_t left_columns) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < rows[r].size(); ++c) {
      const int width = static_cast<int>(widths[c]);
      absl::StrAppend(&out, c == 0 ? "" : "  ",
                      c < left_columns ? absl::StrFormat("%-*s", width, rows[r][c])
                                       : absl::StrFormat("%*s", width, rows[r][c]));
    }
    out += "\n";
    if (r == 0) {
      size_t total = 0;
      for (size_t w : widths) total += w + 2;
      out += std::string(total - 2, '-') + "\n";
    }
  }
  return out;
}

}  // namespace umlab::cli
