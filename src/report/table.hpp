// Aligned plain-text tables for terminals. Column widths count UTF-8 code points.
#pragma once

#include <string>
#include <vector>

namespace streamspark::report {

enum class Align { left, right };

class Table {
 public:
  void add_column(std::string header, Align align = Align::right);
  void add_row(std::vector<std::string> cells);
  // Header, a rule, then the rows; columns separated by two spaces, lines end with '\n'.
  std::string render() const;

 private:
  struct Column {
    std::string header;
    Align align;
  };
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace streamspark::report
