// Parsing --speculative.
#include "cli/speculative_syntax.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "cli/value_list.hpp"

namespace streamspark::cli {

namespace {
[[noreturn]] void fail(const std::string& what) {
  throw UsageError("--speculative: " + what);
}

double parse_number(const std::string& key, const std::string& text) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) {
    fail(fmt::format("{}={} is not a number", key, text));
  }
  return v;
}

int64_t parse_count(const std::string& key, const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < min || v > max) {
    fail(fmt::format("{}={}: an integer in [{}, {}]", key, text, min, max));
  }
  return v;
}
}  // namespace

app::SpeculativeRequest parse_speculative(const std::string& text, bool runtime) {
  app::SpeculativeRequest o;
  o.text = text;
  bool have_draft = false, have_heads = false, have_k = false, have_noise = false;
  std::vector<std::string> keys;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      fail(fmt::format("'{}' is not KEY=VALUE (keys: draft, heads, k, acceptance, noise, max_k)",
                       item));
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    // The last of two k= would win silently: each key once.
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      fail("'" + key + "' is given twice");
    }
    keys.push_back(key);
    if (key == "draft") {
      have_draft = true;
      if (value == "self" || value.rfind("self:", 0) == 0) {
        o.self = true;
        if (value != "self") {
          const std::string rest = value.substr(5);
          if (rest.rfind("layers=", 0) != 0) fail("draft=self takes :layers=N, got " + value);
          o.layers = parse_count("layers", rest.substr(7), 1, 1 << 20);
        }
      } else {
        o.draft_name = value;
      }
    } else if (key == "heads") {
      have_heads = true;
      if (value == "medusa") {
        o.config.form = engine::DraftForm::medusa;
      } else if (value == "eagle" || value == "mtp") {
        o.config.form = engine::DraftForm::eagle;
      } else {
        fail("heads=" + value + ": use medusa, eagle or mtp");
      }
    } else if (key == "k") {
      have_k = true;
      o.config.k = parse_count("k", value, 1, 64);
    } else if (key == "max_k") {
      o.config.max_k = parse_count("max_k", value, 1, 64);
    } else if (key == "acceptance") {
      o.config.acceptance.clear();
      size_t from = 0;
      while (from <= value.size()) {
        const size_t colon = std::min(value.find(':', from), value.size());
        const double a = parse_number("acceptance", value.substr(from, colon - from));
        if (a < 0 || a > 1) fail(fmt::format("acceptance {} is outside [0, 1]", a));
        o.config.acceptance.push_back(a);
        from = colon + 1;
      }
    } else if (key == "noise") {
      have_noise = true;
      o.noise = parse_number("noise", value);
      if (o.noise < 0) fail("noise must be >= 0");
    } else {
      fail("unknown key '" + key + "' (keys: draft, heads, k, acceptance, noise, max_k)");
    }
  }
  if (have_draft == have_heads) fail("give one of draft=MODEL|self:layers=N or heads=medusa|eagle");
  if (!have_k) fail("k=K (draft tokens per pass) is required");
  if (o.config.max_k < o.config.k) o.config.max_k = o.config.k;
  if (have_noise && !o.self) fail("noise= perturbs a draft=self draft's weights only");
  o.config.draft_shares_weights = o.self;
  if (runtime) {
    if (have_heads) {
      fail(
          "the runtime has no Medusa or EAGLE heads (analyze, sweep and serve-sim cost them); "
          "use draft=MODEL or draft=self:layers=N");
    }
    if (!o.config.acceptance.empty()) {
      fail("acceptance= is what run and validate measure; leave it out");
    }
    return o;
  }
  if (have_noise) fail("noise= is for run and validate (it changes a runtime draft's weights)");
  if (o.config.acceptance.empty()) fail("acceptance=A (or A1:A2:... per depth) is required");
  if (o.self && o.layers == 0) fail("draft=self needs :layers=N for the cost model");
  if (o.config.acceptance.size() > 1 &&
      static_cast<int64_t>(o.config.acceptance.size()) < o.config.k) {
    fail(fmt::format("{} per-depth acceptance rates for k={} (give one, or at least k)",
                     o.config.acceptance.size(), o.config.k));
  }
  return o;
}

}  // namespace streamspark::cli
