// Serving workloads: request lengths drawn from their distributions, arrivals, shared prefixes.
#include "engine/serving.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/memory.hpp"
#include "engine/overflow.hpp"
#include "engine/random.hpp"
#include "engine/speculative.hpp"

namespace streamspark::engine {

namespace {

using Random = SplitMix64;

int64_t sample_length(const LengthDistribution& d, Random& rng) {
  double x = d.a;
  switch (d.kind) {
    case LengthKind::fixed:
      break;
    case LengthKind::uniform:
      x = std::floor(d.a + rng.uniform() * (d.b - d.a + 1));
      break;
    case LengthKind::lognormal:
      x = std::exp(std::log(d.a) + d.b * rng.normal());
      break;
  }
  auto n = std::max<int64_t>(1, std::llround(std::min(x, 1e18)));  // llround overflows past 2^63
  if (d.max > 0) n = std::min(n, d.max);
  return n;
}

}  // namespace

std::string describe(const LengthDistribution& d) {
  std::string s;
  switch (d.kind) {
    case LengthKind::fixed:
      s = "fixed " + std::to_string(std::llround(d.a));
      break;
    case LengthKind::uniform:
      s = "uniform " + std::to_string(std::llround(d.a)) + ".." + std::to_string(std::llround(d.b));
      break;
    case LengthKind::lognormal: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "lognormal median %g sigma %g", d.a, d.b);
      s = buf;
      break;
    }
  }
  if (d.max > 0) s += " (max " + std::to_string(d.max) + ")";
  return s;
}

int64_t longest_length(const LengthDistribution& d) {
  switch (d.kind) {
    case LengthKind::fixed:
      return std::llround(d.a);
    case LengthKind::uniform:
      return std::llround(d.b);
    case LengthKind::lognormal:
      return d.max;
  }
  return 0;
}

std::vector<Request> generate_requests(const WorkloadSpec& spec) {
  Random rng{spec.seed};
  std::vector<Request> out;
  out.reserve(static_cast<size_t>(spec.requests));
  double t = 0;
  struct Slot {
    int64_t group = 0;    // its conversation (0: none yet)
    int64_t turns = 0;    // turns of it so far
    int64_t context = 0;  // its tokens so far
  };
  std::vector<Slot> slots(static_cast<size_t>(std::max<int64_t>(0, spec.sessions)));
  int64_t conversations = 0;
  for (int64_t i = 0; i < spec.requests; ++i) {
    Request r;
    if (spec.rate > 0) {
      t = spec.arrivals == ArrivalProcess::poisson
              ? t - std::log(1.0 - rng.uniform()) / spec.rate  // exponential gaps
              : static_cast<double>(i) / spec.rate;
    }
    r.arrival_s = t;
    r.prompt = sample_length(spec.prompt, rng);
    r.output = sample_length(spec.output, rng);
    if (spec.prefix_tokens > 0 && rng.uniform() < spec.shared_prefix_fraction) {
      r.shared_prefix = spec.prefix_tokens;
      r.prompt = checked_add(r.prompt, spec.prefix_tokens);
      r.prefix_group = 0;  // the system prompt
      r.publish_tokens = spec.prefix_tokens;
    }
    if (!slots.empty()) {
      Slot& slot = slots[static_cast<size_t>(i % spec.sessions)];
      if (slot.group == 0 || slot.turns >= spec.session_turns) slot = {++conversations, 0, 0};
      r.prefix_group = slot.group;
      r.shared_prefix = slot.context;
      r.prompt = checked_add(r.prompt, slot.context);
      r.publish_tokens = checked_add(r.prompt, r.output);
      slot.context = r.publish_tokens;
      ++slot.turns;
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace streamspark::engine
