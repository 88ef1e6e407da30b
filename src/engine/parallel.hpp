// Multi-GPU deployments: the parallel layout (tensor, pipeline, expert and data parallelism),
// how it shards a model (Megatron-LM style), and what its collectives cost on the hardware's
// links.
//
// A replica is tp x pp GPUs: pp pipeline stages of L/pp layers each, every stage split over tp
// GPUs (Shoeybi et al., "Megatron-LM", 2019: column-parallel QKV, gate and up projections,
// row-parallel output and down projections, an all-reduce after each row-parallel one;
// vocabulary-parallel embedding and lm head). Expert parallelism spreads a MoE layer's experts
// over the stage's tp GPUs (ep = tp; GShard, Lepikhin et al. 2020: tokens dispatched to their
// experts' GPUs and combined back by all-to-all). `replicas` copies of the replica serve equal
// shares of the load (data parallelism).
//
// Attention data parallelism with wide expert parallelism (DeepSeek-AI, "DeepSeek-V3 Technical
// Report", 2024, §3.4; SGLang's --enable-dp-attention): the replica is `ep` GPUs, possibly
// across nodes. Each GPU runs the whole attention, the dense layers, the shared experts, the
// embedding and the lm head (tp 1) for its own share of the replica's sequences, and holds
// (E + redundant_experts) / ep of the routed experts; every MoE layer dispatches the tokens to
// their experts' GPUs and combines the results with an all-to-all over the ep GPUs.
#pragma once

#include <cstdint>
#include <string>

#include "engine/quantization.hpp"

namespace streamspark::engine {

// How a wide expert-parallel all-to-all moves tokens (DeepSeek's DeepEP kernels, github
// deepseek-ai/DeepEP):
//  throughput:  "normal" kernels: a token crosses the network once per remote node that holds
//               any of its experts, and NVLink forwards it inside that node (the DeepSeek-V3
//               report's dispatch, §3.2.2); the two links work at once.
//  low_latency: every copy of a token goes straight to its expert's GPU over the network
//               (RDMA), no forwarding; what DeepSeek runs in decode.
#define STREAMSPARK_ALL_TO_ALL_MODES(X) X(throughput, "throughput") X(low_latency, "low-latency")
STREAMSPARK_ENUM(AllToAllMode, STREAMSPARK_ALL_TO_ALL_MODES)

struct ParallelLayout {
  int64_t tp = 1;        // tensor-parallel GPUs per pipeline stage
  int64_t pp = 1;        // pipeline stages
  int64_t ep = 1;        // expert-parallel GPUs (1: experts split by tp like dense layers)
  int64_t replicas = 1;  // data-parallel copies of the whole replica
  // Micro-batches a prefill pass is split into along the pipeline; 0: one per sequence.
  int64_t microbatches = 0;
  // Communication hidden behind computation (perfect overlap); by default it is not: every
  // collective adds its time to the step (vLLM and TensorRT-LLM run the TP all-reduce between
  // the layers' kernels).
  bool overlap_communication = false;
  // Two-micro-batch overlap (DeepSeek-V3 report §3.4, open-infra-index's inference system
  // overview; SGLang's --enable-two-batch-overlap): each forward pass runs as two micro-batches
  // of half the sequences, one's computation beside the other's communication, on one compute
  // and one communication stream (two_batch_overlap_seconds). Needs pp 1 and a layout with
  // communication; excludes overlap_communication (its perfect-overlap bound).
  bool two_batch_overlap = false;
  // Attention data parallel over the ep GPUs of a wide expert-parallel replica (tp 1, pp 1).
  bool attention_dp = false;
  // Extra copies of routed experts a load balancer places (DeepSeek's EPLB: 32 in prefill);
  // attention_dp only. Each GPU holds (E + redundant_experts) / ep experts.
  int64_t redundant_experts = 0;
  // Routed tokens of the busiest GPU over the mean (1: perfectly balanced); attention_dp only.
  double expert_imbalance = 1.0;
  AllToAllMode all_to_all = AllToAllMode::throughput;

  int64_t gpus_per_replica() const { return attention_dp ? ep : tp * pp; }
  int64_t gpus() const { return gpus_per_replica() * replicas; }
  // Sequences one GPU of the replica runs of `batch`: all of them, or its ceil(batch / ep)
  // share under attention data parallelism.
  int64_t sequences_per_gpu(int64_t batch) const {
    return attention_dp ? (batch + ep - 1) / ep : batch;
  }
  bool single_gpu() const { return tp == 1 && pp == 1 && ep == 1; }
  bool operator==(const ParallelLayout&) const = default;
};

// "tp 8, pp 2, ep 8, 2 replicas (32 GPUs)", "attention dp, ep 32 (32 GPUs)", or "1 GPU".
std::string describe(const ParallelLayout& p);

// Throws std::invalid_argument naming what does not divide: query heads by tp (KV heads either
// divide by tp or divide tp: fewer KV heads than tp are replicated, one per GPU, as vLLM and
// TensorRT-LLM do), each layer kind's count by pp, experts by ep, ep equal to tp when > 1
// (attention_dp: tp 1, pp 1, ep >= 2, E + redundant_experts by ep, an imbalance >= 1),
// Mamba's inner dimension and linear-attention heads by tp, the vocabulary by tp.
void check_layout(const Model& model, const ParallelLayout& layout);

// KV heads one GPU holds: K / tp, or 1 when K < tp (the K heads replicated tp / K times).
int64_t kv_heads_per_gpu(int64_t kv_heads, int64_t tp);

// Throws std::invalid_argument when a weight group size does not divide the input features
// one GPU holds of a row-parallel matrix (GPTQ and AWQ kernels need whole groups per GPU).
void check_sharded_groups(const Model& model, const Precision& precision, int64_t tp);

// Bytes of the weights one GPU holds (the stage that holds most: the first holds the
// embedding, the last the lm head and final norm, both under a single stage): its stage's
// layers' tensors split by TensorSplit over tp (routed experts: E/ep whole experts when ep > 1),
// ceil(V/tp) rows of the vocabulary-parallel embedding and lm head. Equals weight_bytes for a
// single GPU.
int64_t weight_bytes_per_gpu(const Model& model, const Precision& precision,
                             const ParallelLayout& layout);
// Bytes of the ceil(V/tp) rows of the vocabulary-parallel embedding table one GPU holds (an
// untied lm head holds as many).
int64_t embedding_table_bytes_per_gpu(const Model& model, const Precision& precision,
                                      const ParallelLayout& layout);

// KV cache and recurrent state one GPU holds for one sequence at `context` tokens: its stage's
// layers (count / pp of each kind), attention K and V for its KV heads (K/tp, or one when K <
// tp), MLA's latent whole (every GPU keeps it), Mamba and linear-attention states split tp
// ways. Equals state_bytes for a single GPU.
int64_t state_bytes_per_gpu(const Model& model, int64_t context, DType kv,
                            const ParallelLayout& layout);

// The link a collective crosses.
struct Link {
  double bandwidth = 0;  // bytes/s per GPU per direction
  double latency_s = 0;  // per message step
};

// clang-format off
#define STREAMSPARK_COLLECTIVE_KINDS(X)                                                          \
  X(all_reduce, "all-reduce") X(all_gather, "all-gather") X(all_to_all, "all-to-all")            \
  X(send, "send")
// clang-format on
STREAMSPARK_ENUM(CollectiveKind, STREAMSPARK_COLLECTIVE_KINDS)

// Seconds of a collective over `group` GPUs on `link`, `bytes` being the data each GPU holds
// (all-reduce, all-to-all), the gathered result (all-gather) or the message (send). The ring
// algorithms' costs (Thakur, Rabenseifner and Gropp, "Optimization of collective communication
// operations in MPICH", IJHPCA 2005; NCCL's bus-bandwidth convention):
//   all-reduce  2 (n-1)/n * bytes / bandwidth + 2 (n-1) * latency
//   all-gather    (n-1)/n * bytes / bandwidth +   (n-1) * latency
//   all-to-all    (n-1)/n * bytes / bandwidth +   (n-1) * latency
//   send                    bytes / bandwidth +           latency
// 0 for a group of one.
double collective_seconds(CollectiveKind kind, int64_t group, double bytes, const Link& link);

// Seconds of a wide expert-parallel dispatch or combine (attention_dp) over `group` GPUs,
// `per_node` of them to a node, each GPU sending `bytes`: its tokens' top_k copies of the
// hidden state. With N = ceil(group / per_node) nodes and g = min(per_node, group) GPUs to one:
//  - one node: (g-1)/g of the bytes over the intra-node link, + its latency;
//  - throughput mode: a token crosses the network once per remote node holding one of its
//    experts, (N-1) (1 - (1 - 1/N)^top_k) nodes in expectation under uniform routing, and
//    (g-1)/g of the copies are forwarded over NVLink in the destination node; the links work at
//    once: max(network bytes / network bandwidth, NVLink bytes / NVLink bandwidth) + both
//    latencies;
//  - low-latency mode: (group-1)/group of the bytes over the network, + its latency.
// Every message of the all-to-all is in flight at once (one latency per hop, not one per
// peer). 0 for a group of one. With group-limited routing (`routing`), the throughput mode's
// remote nodes are expected_remote_nodes'.
struct GroupLimit {
  int64_t groups = 0;  // 0: uniform routing over all experts
  int64_t groups_per_token = 0;
};
double expert_all_to_all_seconds(int64_t group, int64_t per_node, double bytes, int64_t top_k,
                                 AllToAllMode mode, const Link& intra_node, const Link& inter_node,
                                 GroupLimit routing = {});

// Remote nodes a token's top_k experts lie on, in expectation, over `nodes` nodes. Uniform
// routing: (N - 1)(1 - (1 - 1/N)^k). Group-limited: the experts laid out in order over the
// nodes (each node an N-th of them) and over the groups (each group a G-th): a token takes t
// of the G groups uniformly and its k experts uniformly from those groups' experts, so node n
// is reached with probability 1 - (1 - f_n)^k, f_n the chosen groups' share on node n; averaged
// over the C(G, t) choices and the token's own node (uniform): (1 - 1/N) x the expected nodes
// reached. Refused (std::invalid_argument) beyond 10^6 group choices.
double expected_remote_nodes(int64_t nodes, int64_t top_k, GroupLimit routing);

}  // namespace streamspark::engine
