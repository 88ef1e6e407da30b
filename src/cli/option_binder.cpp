// Typed option bindings: the text CLI11 parsed, converted into each field after parsing.
#include "cli/option_binder.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

namespace streamspark::cli {

namespace {

// "--models,--model,-m" -> "--models": the name errors use.
std::string long_name(const std::string& names) {
  size_t start = 0;
  while (start < names.size()) {
    const size_t comma = std::min(names.find(',', start), names.size());
    const std::string name = names.substr(start, comma - start);
    if (name.rfind("--", 0) == 0) return name;
    start = comma + 1;
  }
  return names.substr(0, names.find(','));
}

std::string join_integers(const std::vector<int64_t>& values) {
  return fmt::format("{}", fmt::join(values, ","));
}

// A default shown by --help must read back as the field's value: a mismatch is a defect of the
// declaration, found by any run that declares the options.
void check_default(bool same, const std::string& option, const std::string& text) {
  if (!same) {
    throw std::logic_error(option + ": the default shown, '" + text +
                           "', is not the request's default");
  }
}

}  // namespace

CLI::Option* OptionBinder::bind(const std::string& names, const std::string& default_text,
                                const std::string& help, Reader read) {
  Binding b;
  b.text = std::make_unique<std::string>();
  b.name = long_name(names);
  b.read = std::move(read);
  b.option = app_->add_option(names, *b.text, help);
  if (!default_text.empty()) b.option->default_str(default_text);
  bindings_.push_back(std::move(b));
  return bindings_.back().option;
}

CLI::Option* OptionBinder::repeatable(const std::string& names, Reader read,
                                      const std::string& help) {
  Binding b;
  b.texts = std::make_unique<std::vector<std::string>>();
  b.name = long_name(names);
  b.read = std::move(read);
  b.option = app_->add_option(names, *b.texts, help);
  bindings_.push_back(std::move(b));
  return bindings_.back().option;
}

void OptionBinder::conflicts(const std::string& option, const std::vector<std::string>& others,
                             const std::string& reason) {
  for (const std::string& n : others) (void)app_->get_option(n);  // throws when undeclared
  (void)app_->get_option(option);
  conflicts_.push_back({option, others, reason});
}

bool OptionBinder::given(const std::string& name) const {
  return app_->get_option(name)->count() > 0;
}

void OptionBinder::resolve() const {
  for (const Conflict& c : conflicts_) {
    if (!given(c.option)) continue;
    for (const std::string& other : c.others) {
      if (given(other)) throw UsageError(fmt::format("{} and {}: {}", c.option, other, c.reason));
    }
  }
  for (const Binding& b : bindings_) {
    if (b.option->count() == 0) continue;
    if (b.texts) {
      for (const std::string& t : *b.texts) b.read(t, b.name);
    } else {
      b.read(*b.text, b.name);
    }
  }
}

std::string OptionBinder::use_instead(const std::string& option, const std::string& text,
                                      const std::string& choices) {
  return fmt::format("{}: use {}, not '{}'", option, choices, text);
}

std::string OptionBinder::expected_got(const std::string& option, const std::string& text,
                                       const std::string& choices) {
  return fmt::format("{}: expected {}, got '{}'", option, choices, text);
}

CLI::Option* OptionBinder::text(const std::string& names, std::string& field,
                                const std::string& help) {
  // Given, a text is never empty: `--trace ''` or `--plot ''` would otherwise mean "none".
  return custom<std::string>(
      names, field, field,
      [](const std::string& t, const std::string& option) {
        if (t.empty()) throw UsageError(option + ": empty");
        return t;
      },
      help);
}

CLI::Option* OptionBinder::names(const std::string& names, std::vector<std::string>& field,
                                 const std::string& help) {
  return custom<std::vector<std::string>>(
      names, field, fmt::format("{}", fmt::join(field, ",")),
      [](const std::string& t, const std::string& option) { return parse_name_list(t, option); },
      help);
}

CLI::Option* OptionBinder::integer(const std::string& names, int64_t& field, int64_t min,
                                   const std::string& help) {
  return custom<int64_t>(
      names, field, std::to_string(field),
      [min](const std::string& t, const std::string& option) { return parse_int(t, option, min); },
      help);
}

CLI::Option* OptionBinder::integer(const std::string& names, std::optional<int64_t>& field,
                                   int64_t min, const std::string& help) {
  return custom<std::optional<int64_t>>(
      names, field, field ? std::to_string(*field) : "",
      [min](const std::string& t, const std::string& option) {
        return std::optional<int64_t>(parse_int(t, option, min));
      },
      help);
}

CLI::Option* OptionBinder::seed(const std::string& names, uint64_t& field,
                                const std::string& help) {
  return custom<uint64_t>(
      names, field, std::to_string(field),
      [](const std::string& t, const std::string& option) {
        return static_cast<uint64_t>(parse_int(t, option, 0));
      },
      help);
}

CLI::Option* OptionBinder::integers(const std::string& names, std::vector<int64_t>& field,
                                    const std::string& help, const std::string& default_text) {
  const std::string shown = default_text.empty() ? join_integers(field) : default_text;
  if (!default_text.empty()) {
    check_default(parse_int_list(default_text, long_name(names)) == field, long_name(names),
                  default_text);
  }
  return custom<std::vector<int64_t>>(
      names, field, shown,
      [](const std::string& t, const std::string& option) { return parse_int_list(t, option); },
      help);
}

CLI::Option* OptionBinder::real(const std::string& names, double& field, double min, RealMin bound,
                                const std::string& help) {
  return custom<double>(
      names, field, fmt::format("{}", field),
      [min, bound](const std::string& t, const std::string& option) {
        return parse_real(t, option, min, bound);
      },
      help);
}

CLI::Option* OptionBinder::fraction(const std::string& names, double& field, FractionRange range,
                                    const std::string& help) {
  return custom<double>(
      names, field, fmt::format("{}", field),
      [range](const std::string& t, const std::string& option) {
        return parse_fraction(t, option, range);
      },
      help);
}

CLI::Option* OptionBinder::fraction(const std::string& names, std::optional<double>& field,
                                    FractionRange range, const std::string& help) {
  return custom<std::optional<double>>(
      names, field, field ? fmt::format("{}", *field) : "",
      [range](const std::string& t, const std::string& option) {
        return std::optional<double>(parse_fraction(t, option, range));
      },
      help);
}

CLI::Option* OptionBinder::percent(const std::string& names, std::optional<double>& field,
                                   const std::string& help) {
  return custom<std::optional<double>>(
      names, field, "",
      [](const std::string& t, const std::string& option) {
        return std::optional<double>(parse_percent(t, option));
      },
      help);
}

CLI::Option* OptionBinder::quantity(const std::string& names, std::optional<double>& field,
                                    spec::Dimension d, const std::string& help) {
  return custom<std::optional<double>>(
      names, field, "",
      [d](const std::string& t, const std::string& option) {
        return std::optional<double>(parse_positive_quantity(t, d, option));
      },
      help);
}

CLI::Option* OptionBinder::quantity(const std::string& names, double& field, spec::Dimension d,
                                    const std::string& help, const std::string& default_text) {
  check_default(parse_positive_quantity(default_text, d, long_name(names)) == field,
                long_name(names), default_text);
  return custom<double>(
      names, field, default_text,
      [d](const std::string& t, const std::string& option) {
        return parse_positive_quantity(t, d, option);
      },
      help);
}

CLI::Option* OptionBinder::flag(const std::string& names, bool& field, const std::string& help) {
  return app_->add_flag(names, field, help);
}

void OptionBinder::switch_pair(const std::string& on, const std::string& off,
                               std::optional<bool>& field, const std::string& on_help,
                               const std::string& off_help) {
  app_->add_flag_callback(
      on, [&field] { field = true; }, on_help);
  app_->add_flag_callback(
      off, [&field] { field = false; }, off_help);
  conflicts(on, {off}, "give one");
}

CLI::Option* OptionBinder::negated_flag(const std::string& names, bool& field,
                                        const std::string& help) {
  return app_->add_flag_callback(
      names, [&field] { field = false; }, help);
}

}  // namespace streamspark::cli
