// Plain-text table layout.
#include "report/table.hpp"

#include <algorithm>
#include <stdexcept>

namespace streamspark::report {

namespace {
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;  // count UTF-8 lead bytes only
  }
  return n;
}

void pad(std::string& out, const std::string& cell, size_t width, Align align) {
  const std::string spaces(width - display_width(cell), ' ');
  if (align == Align::right) out += spaces;
  out += cell;
  if (align == Align::left) out += spaces;
}
}  // namespace

void Table::add_column(std::string header, Align align) {
  columns_.push_back(Column{std::move(header), align});
}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns_.size()) {
    throw std::logic_error("table row has " + std::to_string(cells.size()) + " cells for " +
                           std::to_string(columns_.size()) + " columns");
  }
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = display_width(columns_[c].header);
    for (const auto& row : rows_) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += "  ";
      // The last left-aligned column is not padded: no trailing spaces.
      if (c + 1 == cells.size() && columns_[c].align == Align::left) {
        out += cells[c];
      } else {
        pad(out, cells[c], widths[c], columns_[c].align);
      }
    }
    return out + "\n";
  };
  std::vector<std::string> headers;
  for (const auto& col : columns_) headers.push_back(col.header);
  std::string out = line(headers);
  size_t total = 0;
  for (size_t c = 0; c < widths.size(); ++c) total += widths[c] + (c > 0 ? 2 : 0);
  out += std::string(total, '-') + "\n";
  for (const auto& row : rows_) out += line(row);
  return out;
}

}  // namespace streamspark::report
