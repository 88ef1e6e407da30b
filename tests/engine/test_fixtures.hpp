// Models and devices built in code for engine tests (no YAML): the lecture's examples.
#pragma once

#include "engine/hardware.hpp"
#include "engine/model.hpp"
#include "engine/ops.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace streamspark::test {

// A single-kind (attention + dense MLP) model.
engine::Model dense_model(std::string name, int64_t V, int64_t D, int64_t L,
                          engine::Attention attention, engine::Mlp mlp, int64_t max_context);
// Llama 2 13B as in the CS336 lecture: S=1024, D=5120, F=13824, N=K=40, H=128, L=40, V=32000.
engine::Model llama2_13b();
// The lecture's GQA variant of the same model: K = 8 KV heads.
engine::Model llama2_13b_gqa8();
// A small GQA model (D=256, L=4, N=8, K=2, H=32, F=688, V=4096).
engine::Model tiny_test();
// A GQA mixture-of-experts model: 8 layers, D 4096, 32 query and 8 KV heads of 128, 64 routed
// experts of 1024 (top 8, gated SiLU), V 32000.
engine::Model gqa_moe();
// H100 SXM as the lecture uses it: 989e12 FLOP/s bf16, 3.35e12 B/s, 80 GB; fp32 67e12.
engine::Hardware h100_lecture(double kernel_overhead_s = 0);

// The operators of one step of `model`, from its inventory with these settings.
std::vector<engine::Op> step_ops(const engine::Model& model, const engine::StepShape& shape,
                                 const engine::Precision& precision = {},
                                 engine::MlaForm mla_form = engine::MlaForm::automatic);

// How many times operator `id` runs in `ops` (its repeats summed).
int64_t count_ops(const std::vector<engine::Op>& ops, engine::OpId id);

// The operator named `name` in `ops` (fails the test when there is none).
const engine::Op& find_op(const std::vector<engine::Op>& ops, std::string_view name);

}  // namespace streamspark::test
