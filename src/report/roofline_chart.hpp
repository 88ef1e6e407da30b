// The roofline chart of `analyze --plot`: the device's memory ceilings (one per memory level)
// and compute ceilings (the matrix peak of the compute format, the fp32 vector peak), the ridge,
// and every operator of each phase at its arithmetic intensity and predicted FLOP/s.
#pragma once

#include <string>
#include <vector>

#include "engine/analysis.hpp"
#include "report/analysis_report.hpp"

namespace streamspark::report {

// SVG of the results' per-operator rows (results analysed with per_op). Operators with no FLOPs
// or no bytes (a gather, a KV write, a collective) have no place on the axes; the chart names
// them in its caption.
std::string roofline_svg(const AnalysisContext& ctx,
                         const std::vector<engine::WorkloadResult>& results);

}  // namespace streamspark::report
