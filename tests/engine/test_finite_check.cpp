// The last guard of "no inf or nan in any output": results are checked, each quantity named.
#include <doctest/doctest.h>

#include <limits>

#include "engine/finite_check.hpp"

using namespace streamspark::engine;

TEST_CASE("a result with a non-finite number names the quantity") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  WorkloadResult r;
  CHECK_NOTHROW(require_finite(r));  // all zeros: finite
  r.ttft_s = inf;
  CHECK_THROWS_WITH_AS(require_finite(r), "ttft_s is inf", NonFiniteError);
  r.ttft_s = 1;
  r.decode.time_s = nan;
  CHECK_THROWS_WITH_AS(require_finite(r), "decode.step_time_s is nan", NonFiniteError);
  r.decode.time_s = 1;
  r.sampling = SamplingComparison{};
  r.sampling->naive_time_s = -inf;
  CHECK_THROWS_WITH_AS(require_finite(r), "sampling.naive_time_s is -inf", NonFiniteError);
  r.sampling->naive_time_s = 1;
  OpRow row;
  row.op.id = OpId::mlp_up;
  row.cost.time_s = inf;
  r.decode_ops = {OpRow{}, row};
  CHECK_THROWS_WITH_AS(require_finite(r), "decode_ops[1] (mlp_up).time_s is inf", NonFiniteError);
}

TEST_CASE("a serving result with a non-finite number names the metric") {
  SimulationResult s;
  CHECK_NOTHROW(require_finite(s));
  s.metrics.tpot_s.p90 = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(require_finite(s), "tpot_s.p90 is nan", NonFiniteError);
  s.metrics.tpot_s.p90 = 0;
  s.metrics.kv_allocated_fraction = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(require_finite(s), "kv.allocated_fraction is nan", NonFiniteError);
}
