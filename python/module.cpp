// streamspark._core: the CLI's commands run in-process for the Python package. A call parses
// the same options with the same tables as `streamspark <command>`, runs the same service and
// formats the same report; its standard output and messages are captured instead of printed.
// The GIL is released while a command runs. A sweep's CSV is read into typed columns as it is
// produced.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "app/context.hpp"
#include "cli/command_runner.hpp"
#include "cli/output_file.hpp"
#include "spec/catalog.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using namespace streamspark;

// What one command run gives back.
struct CommandResult {
  int exit_code = 0;
  std::string output;                         // what it wrote to standard output
  std::vector<std::string> messages;          // the lines it printed beside its output
  std::vector<std::string> warnings;          // the service's warnings
  std::vector<std::string> error_lines;       // the failure as the CLI prints it
  std::vector<spec::Diagnostic> diagnostics;  // a spec file's problems, located
};

// The CSV a sweep writes, read into columns as it streams: each column starts as integers and
// widens to reals, then to booleans or text when a cell needs it; an empty cell (a skipped
// point's measures) is missing.
class CsvColumns {
 public:
  void feed(std::string_view data) {
    size_t i = 0;
    const size_t n = data.size();
    while (i < n) {
      if (in_quotes_) {
        const size_t q = data.find('"', i);
        if (q == std::string_view::npos) {
          cell_.append(data.substr(i));
          return;
        }
        cell_.append(data.substr(i, q - i));
        in_quotes_ = false;
        quote_pending_ = true;
        i = q + 1;
        continue;
      }
      const char c = data[i];
      if (c == '"') {
        if (quote_pending_) cell_ += '"';  // "" inside a quoted cell
        in_quotes_ = true;
        quote_pending_ = false;
        ++i;
        continue;
      }
      quote_pending_ = false;
      if (c == ',') {
        end_cell();
        ++i;
      } else if (c == '\n') {
        end_cell();
        end_row();
        ++i;
      } else if (c == '\r') {
        ++i;
      } else {
        size_t j = i + 1;
        while (j < n && data[j] != ',' && data[j] != '\n' && data[j] != '"' && data[j] != '\r') ++j;
        cell_.append(data.data() + i, j - i);
        i = j;
      }
    }
  }

  enum class Kind { integer, real, boolean, text };
  struct Column {
    std::string name;
    Kind kind = Kind::integer;
    bool any_value = false;
    std::vector<int64_t> integers;
    std::vector<double> reals;
    std::vector<int8_t> booleans;  // -1 missing
    // Text as codes into `dictionary` (a sweep's text columns hold few distinct values).
    std::vector<uint32_t> codes;
    std::vector<std::string> dictionary;
    std::unordered_map<std::string, uint32_t> index;
    std::vector<uint8_t> missing;
  };
  std::vector<Column>& columns() { return columns_; }
  int64_t rows() const { return rows_; }

 private:
  void end_cell() {
    if (header_) {
      columns_.push_back(Column{std::move(cell_)});
    } else {
      if (cell_index_ >= columns_.size()) {
        throw std::runtime_error("sweep CSV row " + std::to_string(rows_ + 1) +
                                 " has more cells than the header's " +
                                 std::to_string(columns_.size()));
      }
      add(columns_[cell_index_], cell_);
    }
    ++cell_index_;
    cell_.clear();
  }
  void end_row() {
    if (!header_) {
      if (cell_index_ != columns_.size()) {
        throw std::runtime_error("sweep CSV row " + std::to_string(rows_ + 1) + " has " +
                                 std::to_string(cell_index_) + " cells, the header " +
                                 std::to_string(columns_.size()));
      }
      ++rows_;
    }
    header_ = false;
    cell_index_ = 0;
  }

  static bool parse_integer(const std::string& s, int64_t& v) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size();
  }
  static bool parse_real(const std::string& s, double& v) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size();
  }
  static std::string shortest(double v) {
    char buf[64];
    const auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, p);
  }
  static uint32_t code_of(Column& c, const std::string& s) {
    // Neighbouring rows mostly repeat a text (the sweep's last axes vary fastest).
    if (!c.codes.empty() && c.dictionary[c.codes.back()] == s) return c.codes.back();
    const auto it = c.index.find(s);
    if (it != c.index.end()) return it->second;
    const auto code = static_cast<uint32_t>(c.dictionary.size());
    c.dictionary.push_back(s);
    c.index.emplace(s, code);
    return code;
  }

  // Every value so far as the CSV spelled it, as text.
  static void to_text(Column& c) {
    const size_t n = c.missing.size();
    c.codes.assign(n, code_of(c, ""));
    for (size_t i = 0; i < n; ++i) {
      if (c.missing[i]) continue;
      if (c.kind == Kind::integer) c.codes[i] = code_of(c, std::to_string(c.integers[i]));
      if (c.kind == Kind::real) c.codes[i] = code_of(c, shortest(c.reals[i]));
      if (c.kind == Kind::boolean) c.codes[i] = code_of(c, c.booleans[i] ? "true" : "false");
    }
    c.integers.clear(), c.reals.clear(), c.booleans.clear();
    c.kind = Kind::text;
  }

  // Widens the column so that it holds `s` (not empty).
  static void widen_for(Column& c, const std::string& s) {
    if (!c.any_value) {  // the first value decides where a column starts
      c.any_value = true;
      if (s == "true" || s == "false") {
        c.booleans.assign(c.missing.size(), -1);
        c.integers.clear();
        c.kind = Kind::boolean;
        return;
      }
    }
    int64_t i = 0;
    double d = 0;
    switch (c.kind) {
      case Kind::integer:
        if (parse_integer(s, i)) return;
        if (parse_real(s, d)) {
          c.reals.resize(c.integers.size());
          for (size_t k = 0; k < c.integers.size(); ++k) {
            c.reals[k] = c.missing[k] ? std::numeric_limits<double>::quiet_NaN()
                                      : static_cast<double>(c.integers[k]);
          }
          c.integers.clear();
          c.kind = Kind::real;
          return;
        }
        to_text(c);
        return;
      case Kind::real:
        if (!parse_real(s, d)) to_text(c);
        return;
      case Kind::boolean:
        if (s != "true" && s != "false") to_text(c);
        return;
      case Kind::text:
        return;
    }
  }

  static void add(Column& c, const std::string& s) {
    const bool missing = s.empty();
    if (!missing) widen_for(c, s);
    switch (c.kind) {
      case Kind::integer: {
        int64_t v = 0;
        if (!missing) parse_integer(s, v);
        c.integers.push_back(v);
        break;
      }
      case Kind::real: {
        double v = std::numeric_limits<double>::quiet_NaN();
        if (!missing) parse_real(s, v);
        c.reals.push_back(v);
        break;
      }
      case Kind::boolean:
        c.booleans.push_back(missing ? int8_t{-1} : int8_t{s == "true"});
        break;
      case Kind::text:
        c.codes.push_back(code_of(c, s));
        break;
    }
    c.missing.push_back(missing ? 1 : 0);
  }

  bool header_ = true;
  bool in_quotes_ = false;
  bool quote_pending_ = false;
  std::string cell_;
  size_t cell_index_ = 0;
  std::vector<Column> columns_;
  int64_t rows_ = 0;
};

// Runs one command with its output going to `output`; the GIL must not be held.
CommandResult run_captured(const std::vector<std::string>& args,
                           const std::vector<std::string>& data_roots,
                           const std::string& command_line,
                           std::function<void(std::string_view)> output) {
  CommandResult r;
  std::mutex warnings_lock;  // a service may warn from its worker threads
  const app::Context context{spec::Catalog(data_roots, spec::user_catalog_folders()), command_line,
                             [&](const std::string& line) {
                               std::lock_guard lock(warnings_lock);
                               r.warnings.push_back(line);
                             }};
  cli::OutputCapture capture{std::move(output),
                             [&](const std::string& line) { r.messages.push_back(line); }};
  cli::ScopedOutputCapture scope(&capture);
  cli::Failure f = cli::run_command(args, context);
  r.exit_code = f.exit_code;
  r.error_lines = std::move(f.lines);
  r.diagnostics = std::move(f.diagnostics);
  return r;
}

nb::dict result_dict(CommandResult& r) {
  nb::dict d;
  d["exit_code"] = r.exit_code;
  d["messages"] = nb::cast(r.messages);
  d["warnings"] = nb::cast(r.warnings);
  d["error_lines"] = nb::cast(r.error_lines);
  nb::list diagnostics;
  for (const spec::Diagnostic& x : r.diagnostics) {
    nb::dict e;
    e["file"] = x.file;
    e["line"] = x.line;
    e["column"] = x.column;
    e["key"] = x.key_path;
    e["message"] = x.message;
    diagnostics.append(e);
  }
  d["diagnostics"] = diagnostics;
  return d;
}

nb::dict run(const std::vector<std::string>& args, const std::vector<std::string>& data_roots) {
  CommandResult r;
  {
    nb::gil_scoped_release release;
    std::string out;
    r = run_captured(args, data_roots, cli::command_line(args),
                     [&out](std::string_view d) { out.append(d); });
    r.output = std::move(out);
  }
  nb::dict d = result_dict(r);
  d["output"] = nb::bytes(r.output.data(), r.output.size());
  return d;
}

// A column for Python: ("int64" | "float64", bytes) for numbers, ("bool" | "str", list) else;
// strings repeated across rows share one Python object.
nb::tuple column_object(CsvColumns::Column& c) {
  using Kind = CsvColumns::Kind;
  const size_t n = c.missing.size();
  bool any_missing = false;
  for (uint8_t m : c.missing) any_missing |= m != 0;
  if (c.kind == Kind::integer && !any_missing) {
    return nb::make_tuple("int64", nb::bytes(reinterpret_cast<const char*>(c.integers.data()),
                                             c.integers.size() * sizeof(int64_t)));
  }
  if (c.kind == Kind::integer || c.kind == Kind::real) {
    std::vector<double> values(n);
    for (size_t i = 0; i < n; ++i) {
      values[i] = c.missing[i]              ? std::numeric_limits<double>::quiet_NaN()
                  : c.kind == Kind::integer ? static_cast<double>(c.integers[i])
                                            : c.reals[i];
    }
    return nb::make_tuple("float64", nb::bytes(reinterpret_cast<const char*>(values.data()),
                                               values.size() * sizeof(double)));
  }
  nb::list list;
  if (c.kind == Kind::boolean) {
    for (size_t i = 0; i < n; ++i) {
      if (c.booleans[i] < 0) {
        list.append(nb::none());
      } else {
        list.append(nb::bool_(c.booleans[i] != 0));
      }
    }
    return nb::make_tuple("bool", list);
  }
  std::vector<nb::str> shared;  // one Python string per distinct text
  shared.reserve(c.dictionary.size());
  for (const std::string& t : c.dictionary) shared.emplace_back(t.c_str(), t.size());
  for (size_t i = 0; i < n; ++i) list.append(shared[c.codes[i]]);
  return nb::make_tuple("str", list);
}

// A sweep written as CSV, read into columns: {name: (kind, data)} in the CSV's column order.
nb::dict run_columns(const std::vector<std::string>& args,
                     const std::vector<std::string>& data_roots) {
  CommandResult r;
  CsvColumns table;
  std::string parse_error;
  {
    nb::gil_scoped_release release;
    r = run_captured(args, data_roots, cli::command_line(args), [&](std::string_view d) {
      if (!parse_error.empty()) return;
      try {
        table.feed(d);
      } catch (const std::exception& e) {
        parse_error = e.what();
      }
    });
  }
  if (!parse_error.empty()) throw std::runtime_error(parse_error);
  nb::dict d = result_dict(r);
  nb::dict columns;
  for (CsvColumns::Column& c : table.columns()) columns[c.name.c_str()] = column_object(c);
  d["columns"] = columns;
  d["rows"] = table.rows();
  return d;
}

// The options of a command as its --help shows them: names, help, default, and whether it is
// a flag, given several times, or required.
nb::list options(const std::string& command) {
  const cli::CommandEntry* entry = cli::find_command(command);
  if (!entry) throw nb::value_error(("unknown command '" + command + "'").c_str());
  const app::Context context{spec::Catalog({}), "", nullptr};
  CLI::App root{"streamspark"};
  const cli::Command c = entry->add(root, context);
  nb::list out;
  for (const CLI::Option* o : c.app->get_options()) {
    if (o->get_lnames().empty() || o->get_lnames().front() == "help") continue;
    nb::dict d;
    d["names"] = nb::cast(o->get_lnames());
    d["help"] = o->get_description();
    d["default"] = o->get_default_str();
    const int least = o->get_expected_min(), most = o->get_expected_max();
    d["flag"] = most == 0;
    d["values"] = least == most ? least : 1;  // 2: --emit STACK DIR
    d["repeatable"] = most > least;
    d["required"] = o->get_required();
    out.append(d);
  }
  return out;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "The StreamSpark commands, run in-process (use the streamspark package's functions)";
  cli::leave_signal_handlers_alone();  // Ctrl-C stays Python's KeyboardInterrupt
  m.def("run", &run, "args"_a, "data_roots"_a,
        "Runs `streamspark <args>`; returns exit_code, output (bytes), messages, warnings and "
        "error_lines.");
  m.def("run_columns", &run_columns, "args"_a, "data_roots"_a,
        "Runs a sweep that writes CSV; returns its columns as (kind, data) instead of output.");
  m.def("options", &options, "command"_a, "The options of a command, as its --help lists them.");
}
