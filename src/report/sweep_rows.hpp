// A sweep's rows as CSV (the analyze CSV columns, status and reason; spec_* columns with
// speculative decoding) or JSON lines (analyze's result object with model, hardware, method,
// precision, parallel, status and reason; a "speculative" member with speculative decoding).
#pragma once

#include <string>

#include "app/sweep.hpp"
#include "report/format.hpp"

namespace streamspark::report {

class CsvSweepRows final : public app::SweepRowWriter {
 public:
  void header(std::string& out, bool speculative) const override;
  void row(std::string& out, const app::AnalysisContext& context,
           const engine::WorkloadResult& result,
           const engine::SpeculativeResult* speculative) const override;
  void skipped(std::string& out, const app::SkippedPoint& point, bool speculative) const override;
};

class JsonSweepRows final : public app::SweepRowWriter {
 public:
  void header(std::string&, bool) const override {}
  void row(std::string& out, const app::AnalysisContext& context,
           const engine::WorkloadResult& result,
           const engine::SpeculativeResult* speculative) const override;
  void skipped(std::string& out, const app::SkippedPoint& point, bool speculative) const override;
};

// The writer of a format (CSV, or JSON lines for json).
const app::SweepRowWriter& sweep_rows(Format format);

}  // namespace streamspark::report
