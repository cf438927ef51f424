// The one text-table renderer: rows of cells, the first row a header
// underlined with dashes, columns two spaces apart. The first
// `left_columns` columns (names) read left to right; the rest (numbers)
// line up on the right. Rows may be shorter than the header.
#ifndef UMLAB_CLI_TEXT_TABLE_H_
#define UMLAB_CLI_TEXT_TABLE_H_

#include <cstddef>
#include <string>
#include <vector>

namespace umlab::cli {

std::string RenderTextTable(const std::vector<std::vector<std::string>>& rows,
                            size_t left_columns = 1);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_TEXT_TABLE_H_
