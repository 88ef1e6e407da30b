// Options bound to typed fields where they are declared. CLI11 keeps each option's text as
// given; after parsing, resolve() converts every option that was given into its field, in the
// order declared, and an error names the option as the user spelled it ("--batch: values must
// be >= 1, got 0"). A field that was not given keeps its value, the request's default, which
// --help shows. One place says what an option is called, what it holds and how it is read.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/value_list.hpp"
#include "engine/enum_names.hpp"
#include "spec/quantity.hpp"

namespace streamspark::cli {

class OptionBinder {
 public:
  explicit OptionBinder(CLI::App* app) : app_(app) {}
  OptionBinder(const OptionBinder&) = delete;
  OptionBinder& operator=(const OptionBinder&) = delete;

  CLI::App* app() const { return app_; }

  // Text kept as given (names, paths, specifications parsed by the service); --help shows a
  // non-empty default.
  CLI::Option* text(const std::string& names, std::string& field, const std::string& help);
  // Comma-separated names ("llama2-7b,llama2-13b"), each non-empty.
  CLI::Option* names(const std::string& names, std::vector<std::string>& field,
                     const std::string& help);
  // One integer >= min.
  CLI::Option* integer(const std::string& names, int64_t& field, int64_t min,
                       const std::string& help);
  CLI::Option* integer(const std::string& names, std::optional<int64_t>& field, int64_t min,
                       const std::string& help);
  CLI::Option* seed(const std::string& names, uint64_t& field, const std::string& help);
  // Integers >= 1 as a list or ranges ("1,64,256", "1..512:x2", "128..4096:+128");
  // `default_text`, when given, is what --help shows and must read as the field's value.
  CLI::Option* integers(const std::string& names, std::vector<int64_t>& field,
                        const std::string& help, const std::string& default_text = "");
  // A finite number >= min (or > min).
  CLI::Option* real(const std::string& names, double& field, double min, RealMin bound,
                    const std::string& help);
  CLI::Option* fraction(const std::string& names, double& field, FractionRange range,
                        const std::string& help);
  CLI::Option* fraction(const std::string& names, std::optional<double>& field, FractionRange range,
                        const std::string& help);
  // "P" or "P%", >= 0.
  CLI::Option* percent(const std::string& names, std::optional<double>& field,
                       const std::string& help);
  // A quantity of dimension `d` with its unit ("2 ms", "64 GB/s"), > 0; `default_text` as for
  // integers().
  CLI::Option* quantity(const std::string& names, std::optional<double>& field, spec::Dimension d,
                        const std::string& help);
  CLI::Option* quantity(const std::string& names, double& field, spec::Dimension d,
                        const std::string& help, const std::string& default_text);
  CLI::Option* flag(const std::string& names, bool& field, const std::string& help);
  // Two flags for a setting that may be left unset: `on` sets it true, `off` false; given
  // together they are refused.
  void switch_pair(const std::string& on, const std::string& off, std::optional<bool>& field,
                   const std::string& on_help, const std::string& off_help);
  // A flag that turns `field` off ("--no-graphs" for graphs = true).
  CLI::Option* negated_flag(const std::string& names, bool& field, const std::string& help);

  // One of an enum's names (engine/enum_names.hpp). Anything else is refused naming the names
  // in table order: "<option>: unknown <noun> 'x'; expected a, b or c" by default, or the
  // wording `refusal` gives it from the option, the text and the names.
  using Refusal = std::function<std::string(const std::string& option, const std::string& text,
                                            const std::string& choices)>;
  template <typename E>
  CLI::Option* choice(const std::string& names, E& field, const std::string& noun,
                      const std::string& help, Refusal refusal = nullptr) {
    return custom<E>(
        names, field, std::string(enum_name(field)),
        [noun, refusal](const std::string& text, const std::string& option) {
          if (const auto v = ::streamspark::parse_enum<E>(text)) return *v;
          throw UsageError(refusal ? refusal(option, text, enum_choices<E>())
                                   : option + ": unknown " + noun + " '" + text + "'; expected " +
                                         enum_choices<E>());
        },
        help);
  }
  // The refusals some options word their own way: "--policy: use continuous or static, not
  // 'x'" and "--rows: expected hardware or all, got 'x'".
  static std::string use_instead(const std::string& option, const std::string& text,
                                 const std::string& choices);
  static std::string expected_got(const std::string& option, const std::string& text,
                                  const std::string& choices);

  // Any type: `parse(text, option name)` reads a given value; `default_text` is shown by --help
  // (none when empty).
  template <typename T>
  CLI::Option* custom(const std::string& names, T& field, const std::string& default_text,
                      std::function<T(const std::string&, const std::string&)> parse,
                      const std::string& help) {
    return bind(names, default_text, help,
                [&field, parse](const std::string& text, const std::string& option) {
                  field = parse(text, option);
                });
  }

  // An option that may be given several times, each text read by `read(text, option)` in the
  // order given (e.g. --price a=1 --price b=2,c=3).
  CLI::Option* repeatable(const std::string& names,
                          std::function<void(const std::string&, const std::string&)> read,
                          const std::string& help);

  // Options that mean nothing beside `option` (declared already, by name): given together,
  // resolve() refuses them, "--trace and --requests: <reason>".
  void conflicts(const std::string& option, const std::vector<std::string>& others,
                 const std::string& reason);

  // Whether an option (by name, declared) was given on the command line.
  bool given(const std::string& name) const;

  // Converts every given option into its field; throws UsageError.
  void resolve() const;

 private:
  using Reader = std::function<void(const std::string& text, const std::string& option)>;
  CLI::Option* bind(const std::string& names, const std::string& default_text,
                    const std::string& help, Reader read);

  struct Binding {
    CLI::Option* option = nullptr;
    std::unique_ptr<std::string> text;                // where CLI11 writes the value as given
    std::unique_ptr<std::vector<std::string>> texts;  // a repeatable option's
    std::string name;                                 // the first long name, for errors
    Reader read;
  };
  struct Conflict {
    std::string option;
    std::vector<std::string> others;
    std::string reason;
  };
  CLI::App* app_;
  std::vector<Binding> bindings_;
  std::vector<Conflict> conflicts_;
};

}  // namespace streamspark::cli
