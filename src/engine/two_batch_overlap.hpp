// Two-micro-batch overlap of communication with computation (DeepSeek-AI, "DeepSeek-V3
// Technical Report", 2024, §3.4: "we simultaneously process two micro-batches with similar
// computational workloads, overlapping the attention and MoE of one micro-batch with the
// dispatch and combine of another"; deepseek-ai/open-infra-index, DeepSeek-V3/R1 inference
// system overview: the same in prefill and decode; SGLang's --enable-two-batch-overlap).
//
// A forward pass's operators run as two micro-batches, A and B, of half the sequences each,
// on two streams of one GPU: a compute stream (every kernel that is not a collective) and a
// communication stream (the collectives). Each micro-batch is a chain: an operator starts when
// the one before it in its micro-batch has finished. Each stream runs one task at a time, in
// a fixed order: a step's operators, layers unrolled, are cut into segments (a run of
// computation, or of communication, between two of the other kind), and each stream takes A's
// k-th segment, then B's, then A's (k+1)-th of its kind: while A's dispatch is in flight the
// compute stream runs B's attention, and so on. The pass takes the makespan of that schedule;
// with one micro-batch (a GPU holding one sequence cannot split) it is the plain sum.
//
// The communication kernels may occupy some of the GPU's multiprocessors while they run: a
// kernel on the compute stream then progresses at `compute_rate` (the share of multiprocessors
// left to it) for as long as a communication task is in flight, and at full speed otherwise
// (two_batch_compute_rate says which collectives take how many). Not modelled: DeepSeek's
// decode refinement that splits attention into two stages to balance the segments, and its
// shared experts running beside their own micro-batch's all-to-all (here they follow the
// combine in the micro-batch's chain).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/parallel.hpp"

namespace streamspark::engine {

// One operator of a pass as the schedule sees it.
struct ScheduledOp {
  double seconds = 0;  // one instance (a layer's)
  bool communication = false;
  int32_t layer_kind = -1;  // Op::layer_kind
  int64_t repeat = 1;       // Op::repeat: instances per pass
};

// A segment of one micro-batch's pass on one stream.
struct StreamTask {
  double seconds = 0;
  bool communication = false;
};

// The segments of a pass whose operators are `ops`, in execution order: a run of operators of
// one layer kind is that kind's layer, unrolled as many times as the run's largest repeat (the
// kind's layer count); an operator with a smaller repeat runs in that many of those layers and
// is spread evenly over them (seconds x repeat / layers each). Operators outside layers run
// `repeat` times where they stand. Consecutive tasks of one stream merge. Writes into `out`.
void pass_segments(const std::vector<ScheduledOp>& ops, std::vector<StreamTask>& out);

// The makespan of micro-batches `a` and `b` (segments of the same operators, so their kinds
// alternate alike) on the two streams, in the order above, the compute stream at
// `compute_rate` (in (0, 1]) while communication runs; `b` empty: one micro-batch, the sum of
// `a`. Throws std::logic_error when the two do not match.
double two_batch_overlap_seconds(const std::vector<StreamTask>& a, const std::vector<StreamTask>& b,
                                 double compute_rate = 1.0);

// The share of a GPU's `multiprocessors` a kernel keeps while a collective of the overlap
// runs under `layout`: DeepEP's throughput ("normal") all-to-all kernels (attention data
// parallel, throughput mode) take 24 of them (DeepSeek's inference prefill profile,
// github.com/deepseek-ai/profile-data at 4496024, README figure assets/prefill.jpg:
// "Computation 108 SMs", "Communication 24 SMs" on the H800's 132; DeepEP's README example
// sets the same, Buffer.set_num_sms(24); the DeepSeek-V3 report's §3.2.2 gives 20 for
// training's all-to-all), its low-latency kernels none (the decode figure
// assets/decode.jpg: "Communication 0 SMs"; DeepEP README: "does not occupy any SM
// resource"), other collectives none (not modelled). 1 when the multiprocessors are not stated
// (0).
double two_batch_compute_rate(const ParallelLayout& layout, int64_t multiprocessors);
constexpr int64_t kThroughputAllToAllSms = 24;  // two_batch_compute_rate's, with its sources

// The sequences of micro-batch A of a pass of `sequences` under `layout`: half of them, the
// larger half, or under attention data parallelism the larger half of each GPU's share on every
// GPU (at most all of them); B runs the rest (none when a GPU holds a single sequence).
int64_t first_micro_batch(int64_t sequences, const ParallelLayout& layout);

}  // namespace streamspark::engine
