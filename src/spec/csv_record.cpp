// CSV records (RFC 4180).
#include "spec/csv_record.hpp"

#include "engine/text.hpp"

namespace streamspark::spec {

bool split_csv_record(const std::string& line, std::vector<std::string>& fields,
                      std::vector<int>& columns) {
  fields.clear();
  columns.clear();
  std::string cell;
  bool quoted = false, in_quotes = false;
  int start = 1;
  for (size_t i = 0; i <= line.size(); ++i) {
    const char ch = i < line.size() ? line[i] : ',';
    if (in_quotes) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (ch == '"') {
        in_quotes = false;
      } else if (i == line.size()) {
        return false;
      } else {
        cell += ch;
      }
      continue;
    }
    if (ch == '"' && !quoted && cell.find_first_not_of(" \t") == std::string::npos) {
      quoted = in_quotes = true;
      cell.clear();
    } else if (ch == ',') {
      fields.push_back(quoted ? cell : std::string(engine::trim_blanks(cell)));
      columns.push_back(start);
      cell.clear();
      quoted = false;
      start = static_cast<int>(i) + 2;
    } else {
      cell += ch;
    }
  }
  return true;
}

}  // namespace streamspark::spec
