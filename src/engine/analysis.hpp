// Per-phase analysis of one model on one device: prefill (TTFT), decode steps (TPOT),
// memory and throughput for a batch of sequences; for diffusion LMs, denoising steps.
//
// Timeline of a request with prompt S and G generated tokens: the prefill runs all S prompt
// tokens and yields token 1 (TTFT). The decode step that yields token g (g = 2..G) feeds token
// g-1 with S+g-2 tokens already cached, so decode contexts run S .. S+G-2 and the cache peaks
// at S+G-1 tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "engine/hardware.hpp"
#include "engine/memory.hpp"
#include "engine/model.hpp"
#include "engine/ops.hpp"
#include "engine/quantization.hpp"
#include "engine/roofline.hpp"
#include "engine/stack.hpp"
#include "engine/two_batch_overlap.hpp"

namespace streamspark::engine {

struct Workload {
  int64_t batch = 1;      // B sequences decoded together
  int64_t prompt = 1024;  // S prompt tokens per sequence
  int64_t generate = 1;   // G tokens generated per sequence (>= 1)
  // Sequences whose prompts run through one prefill pass; 0 = all B at once. Smaller values
  // bound prefill activation memory at the price of re-reading the weights once per pass.
  int64_t prefill_batch = 0;
  // Prompt tokens per sequence already in the KV cache (a prefix-cache hit): the prefill
  // computes the other prompt - cached_prompt tokens, attending to the cached ones.
  int64_t cached_prompt = 0;
};

// Diffusion generation settings (models with a `diffusion` section).
struct DiffusionOptions {
  int64_t block_length = 0;  // tokens denoised together
  int64_t steps = 0;         // denoising steps per block
  // false (LLaDA): every step is a forward over the whole sequence, prompt + all G positions;
  // true (block diffusion with a prefix cache): a forward over the current block only,
  // attending to the cached prompt and finished blocks.
  bool cache_prefix = false;
};

struct AnalysisOptions {
  Method method = Method::roofline;
  CostingConfig costing;        // formats and forms: what the operator inventory is built with
  bool per_op = false;          // keep the per-operator rows
  bool naive_sampling = false;  // also cost sampling without a KV cache
  std::optional<DiffusionOptions> diffusion;  // cost diffusion generation too
  // A serving stack's host costs (added to every pass unless the hardware file's calibration
  // measured them: stack_host_costs) and its per-request cost (in TTFT). The Analyzer costs the
  // batch it is given: CUDA-graph padding applies in the serving iteration cost only.
  StackExecution stack;
};

// Whether a stack's iteration and sequence host costs replace those of `rates`: where the rates
// carry none, or carry measured ones (a calibration's step or sequence overhead, from a profile)
// of another stack than `stack` (DeviceRates::host_stack, compared without case: a profile of
// vLLM's host code does not time SGLang's). Not where the rates' measured ones are of this
// stack, or of a stack they do not name, or where no stack is given: those stay.
bool stack_host_costs_apply(const DeviceRates& rates, const StackExecution& stack);
// Replaces them where they apply.
void apply_stack_host_costs(DeviceRates& rates, const StackExecution& stack);

struct PhaseResult {
  int64_t flops = 0;  // whole step, all layers
  Traffic bytes;
  double intensity = 0;  // FLOP/byte
  double time_s = 0;     // prefill: TTFT; decode: the step at context = prompt
  Bound bound = Bound::memory;
  // How the roofline time splits (bandwidth method: compute_s or memory_s only).
  double compute_bound_s = 0;  // time of ops limited by FLOPs
  double memory_bound_s = 0;   // time of ops limited by bytes
  double overhead_s = 0;       // kernel launches
  // Collectives of a parallel layout on their links; counted in time_s unless overlapped.
  double communication_s = 0;
  double communication_counted_s = 0;
  double communication_bytes = 0;  // as collective_seconds counts them
  int64_t kernel_launches = 0;
  int64_t passes = 1;              // forward passes (prefill in prefill_batch chunks)
  int64_t sequences_per_pass = 0;  // sequences in each full pass
  // Pipeline parallelism: micro-batches each pass (prefill) or step (decode) is split into,
  // sequences in each, and the bubble's share of the phase's time, (pp - 1) / (m + pp - 1)
  // for prefill (GPipe, Huang et al. 2019).
  int64_t microbatches = 1;
  int64_t sequences_per_microbatch = 0;
  double bubble_fraction = 0;
  // Two-batch overlap (ParallelLayout::two_batch_overlap): the micro-batches each pass or step
  // ran as, 2, or 1 where a GPU held a single sequence; 0 without it. communication_counted_s
  // is then the communication the schedule left exposed (its makespan less the computation).
  int64_t overlap_microbatches = 0;
};

struct OpRow {  // one operator of a phase, costed per instance (totals: times op.repeat)
  Op op;
  OpCost cost;
  int32_t microbatch = -1;  // two-batch overlap: 0 (A) or 1 (B); -1 without it
};

// Sampling G tokens for B sequences with and without a KV cache (CS336: without a cache each
// step recomputes the whole prefix, O(T^3) FLOPs in total; with one, O(T^2)). Sums can exceed
// 2^63 FLOPs, so they are doubles; both are computed in closed form, not by stepping.
struct SamplingComparison {
  double naive_flops = 0;
  double naive_time_s = 0;
  double kv_cache_flops = 0;
  double kv_cache_time_s = 0;  // = e2e_s
};

// Generating the same G tokens by diffusion (parallel denoising of blocks).
struct DiffusionResult {
  DiffusionOptions options;
  int64_t blocks = 0;       // ceil(G / block_length)
  int64_t total_steps = 0;  // blocks * steps
  double first_step_s = 0;  // one denoising step of the first block
  double ttft_s = 0;        // prefill (if cached) + the first block's steps
  double time_s = 0;        // all blocks
  double flops = 0;
  double tokens_per_s = 0;  // B * G / time_s
};

struct WorkloadResult {
  Workload workload;  // as given
  PhaseResult prefill;
  PhaseResult decode;  // the first decode step: context = prompt
  // The decode step that yields the first token where the stack's prompt pass stops one token
  // short (FirstTokenFrom::decode: prefill is then of prompt - 1 tokens); 0 otherwise.
  double first_decode_s = 0;
  double ttft_s = 0;  // prefill + first_decode_s + the stack's per-request cost
  double tpot_s = 0;  // mean over the G-1 decode steps (G = 1: the step at context = prompt)
  double e2e_s = 0;   // ttft + (G-1) * tpot
  double decode_throughput_tok_s = 0;      // B / tpot (one replica)
  int64_t gpus = 1;                        // of the deployment: replicas x tp x pp
  double deployment_throughput_tok_s = 0;  // replicas x B / tpot
  int64_t kv_bytes_per_sequence = 0;       // KV cache and state of one sequence at S+G-1 tokens
  MemoryFootprint memory;                  // of one GPU of the layout (the whole model on one)
  std::optional<SamplingComparison> sampling;
  std::optional<DiffusionResult> diffusion;
  std::vector<OpRow> prefill_ops;  // filled when options.per_op; one prefill pass
  std::vector<OpRow> decode_ops;
};

struct ModelFigures {
  int64_t params = 0;
  int64_t active_params = 0;         // per token (MoE: top_k of the routed experts)
  int64_t weight_bytes = 0;          // all parameters in the configured formats
  int64_t weight_bytes_per_gpu = 0;  // what one GPU of the layout holds (= weight_bytes alone)
  int64_t kv_bytes_per_token = 0;    // KV growth per token at long context (full attention)
};

// Weights + KV cache and state at prompt+generate-1 tokens + peak activations (the prefill
// pass or a decode step), for B sequences: the memory a run of this workload needs, with no
// device involved (runtimes check it against the memory they have).
int64_t estimate_memory_bytes(const OpInventory& inventory, const Workload& w);

// Evaluates workloads for one (model, hardware, options). Holds scratch buffers so repeated
// evaluation (sweeps) does not allocate; not thread-safe, use one per thread.
class Analyzer {
 public:
  // Throws std::invalid_argument when the device cannot compute in the requested precision
  // or the weight format does not fit the model.
  Analyzer(const Model& model, const Hardware& hardware, const AnalysisOptions& options);

  const Model& model() const { return inventory_.model(); }
  const OpInventory& inventory() const { return inventory_; }
  const Hardware& hardware() const { return hardware_; }
  const ModelFigures& model_figures() const { return figures_; }
  const DeviceRates& rates() const { return rates_; }
  const AnalysisOptions& options() const { return options_; }

  // Throws std::invalid_argument for a malformed workload and OverflowError when a count
  // exceeds 64 bits.
  WorkloadResult analyze(const Workload& w);

  // One decode step of `batch` sequences at `context` cached tokens (the engine's unit of
  // work in benchmarks).
  double decode_step_time(int64_t batch, int64_t context);

  // KV cache and recurrent state of one sequence at `context` tokens, in the KV format.
  int64_t state_bytes(int64_t context) const;

  // One forward pass of any shape (e.g. a speculative verification pass: k+1 new tokens per
  // sequence after P cached, logits for each), costed like a decode step by the configured
  // method, with `extra` operators that are not in the inventory (draft heads) run in the
  // same pass. One GPU or tensor parallelism only: throws std::invalid_argument under
  // pipeline parallelism, whose micro-batch schedule this single pass does not model.
  // `touched_since` bytes of other data (another model's pass) run since this step's data was
  // last used: the rates are those of the memory level holding both, where the step's data
  // then comes from.
  PhaseResult cost_step(const StepShape& shape, const std::vector<Op>& extra = {},
                        int64_t touched_since = 0);

 private:
  // Per op of a decode step: its time at the segment's first context and its growth per
  // cached token (both linear within a segment), plus counts for the overflow check.
  struct DecodeLine {
    double compute_s = 0;
    double compute_slope = 0;
    double memory_s = 0;
    double memory_slope = 0;
    double stall_s = 0;  // OpCost::stall_s + overlap_s, added outside the max
    double stall_slope = 0;
    double overhead_s = 0;
    int64_t flops = 0;
    int64_t flops_slope = 0;
    int64_t bytes = 0;
    int64_t bytes_slope = 0;
    int64_t repeat = 0;
    bool communication = false;
    int32_t layer_kind = -1;
  };
  // What a workload's results share with every other `generate` at the same batch, prompt and
  // prefill passes.
  struct StepState {
    bool valid = false;
    int64_t batch = 0;
    int64_t prompt = 0;
    int64_t per_pass = 0;
    int64_t cached = 0;
    int64_t decode_batch = 0;  // sequences of a decode micro-batch (the batch without PP)
    PhaseResult prefill;
    PhaseResult decode;  // at context = prompt; its ops are in decode_ops_
    int64_t prefill_activations = 0;
    int64_t decode_activations = 0;
    double step_weight_bytes = 0;  // bandwidth method: weights one decode step reads
    // Decode lines of the segments starting at these contexts (roofline), reused across
    // workloads that differ only in `generate`.
    std::vector<std::pair<int64_t, std::vector<DecodeLine>>> segments;
  };

  PhaseResult cost_phase(const std::vector<Op>& ops, Phase phase, int64_t batch, int64_t context,
                         std::vector<OpRow>* rows, int64_t touched_since = 0) const;
  // The work and time of `ops` at `rates`, without the per-pass host costs, added to `r`; each
  // op's row into *rows and its place in the schedule into *scheduled when given.
  void add_op_costs(const std::vector<Op>& ops, const DeviceRates& rates, PhaseResult& r,
                    std::vector<OpRow>* rows, int32_t microbatch,
                    std::vector<ScheduledOp>* scheduled) const;
  // Per-pass host costs: the step's and each of the GPU's sequences' (not the bandwidth
  // method's).
  double host_overhead_s(int64_t batch) const;
  // A pass of `shape` as two overlapped micro-batches (two_batch_overlap_seconds), `extra`
  // operators (draft heads) after them; as cost_step.
  PhaseResult cost_two_batches(const StepShape& shape, const std::vector<Op>& extra,
                               std::vector<OpRow>* rows, int64_t touched_since);
  bool two_batch_overlap() const { return options_.costing.parallel.two_batch_overlap; }
  double bandwidth_decode_time(int64_t batch, double step_weight_bytes, double state,
                               double bandwidth) const;
  // Contexts in [first, end) where the working set moves to another rate bucket (memory level
  // or 1 % of a measured curve), so that each segment is costed at constant rates.
  std::vector<int64_t> level_starts(int64_t first, int64_t end,
                                    const std::function<int64_t(int64_t)>& working_set);
  // Prefill of `batch` sequences of `tokens` in passes of `per_pass` sequences, `cached` of
  // each sequence's tokens already in the cache. Fills `rows` for one full pass and returns the
  // activation peak of a full pass in *activation_peak. `logit_tokens`: positions per sequence
  // the pass computes logits for (0 for a prompt pass that samples nothing:
  // FirstTokenFrom::decode).
  PhaseResult prefill(int64_t batch, int64_t tokens, int64_t per_pass, std::vector<OpRow>* rows,
                      int64_t* activation_peak, int64_t cached = 0, int64_t logit_tokens = 1);
  void prepare_step_state(int64_t batch, int64_t prompt, int64_t per_pass, WorkloadResult* rows,
                          int64_t cached = 0);
  // One prefill pass of `sequences` prompts (split into pipeline micro-batches under pp > 1).
  PhaseResult prefill_pass(int64_t sequences, int64_t tokens, std::vector<OpRow>* rows,
                           int64_t* activation_peak, int64_t cached = 0, int64_t logit_tokens = 1);
  // Sequences of a decode micro-batch: ceil(B / min(B, pp)).
  int64_t decode_microbatch(int64_t batch) const;
  // Sum of decode step times over contexts first .. first+count-1 of `batch` sequences.
  double sum_decode_steps(int64_t batch, int64_t first, int64_t count);
  double sum_decode_segment(int64_t batch, int64_t first, int64_t count);
  double sum_two_batch_decode_segment(int64_t batch, int64_t first, int64_t count);
  static void check_last_step_counts(const DecodeLine& line, int64_t count);
  const std::vector<DecodeLine>& decode_lines(int64_t batch, int64_t first);
  SamplingComparison compare_sampling(const Workload& w, int64_t per_pass, const WorkloadResult& r);
  // Sums over token counts n = first .. first+count-1 of a prefill pass of `sequences`
  // sequences over n tokens: adds FLOPs and roofline time to *flops and *time_s.
  void sum_prefill_passes(int64_t sequences, int64_t first, int64_t count, double* flops,
                          double* time_s);
  void sum_prefill_segment(int64_t sequences, int64_t first, int64_t count, double* flops,
                           double* time_s);
  // Token count from which routed-expert weight traffic of a pass of `sequences` sequences
  // no longer changes (0 without MoE).
  int64_t moe_saturation_tokens(int64_t sequences) const;
  DiffusionResult diffusion(const Workload& w, const DiffusionOptions& d,
                            const PhaseResult& prompt_prefill);

  OpInventory inventory_;  // holds a copy of the model: an Analyzer never dangles
  Hardware hardware_;
  AnalysisOptions options_;
  DeviceRates rates_;
  ModelFigures figures_;
  std::vector<int64_t> breakpoints_;  // contexts where a window stops a layer's growth
  StepState state_;
  std::vector<Op> scratch_ops_;
  std::vector<Op> scratch_ops2_;
  std::vector<Op> scratch_ops3_;
  std::vector<Op> decode_ops_;  // the decode step at context = prompt
  std::vector<DecodeLine> uncached_lines_;
  std::vector<Op> level_ops_;  // scratch for working-set probes
  // two-batch overlap scratch
  std::vector<ScheduledOp> scheduled_a_, scheduled_b_;
  double overlap_compute_rate_ = 1.0;  // two_batch_compute_rate of the layout and hardware
  std::vector<StreamTask> tasks_a_, tasks_b_;
};

}  // namespace streamspark::engine
