// Parallel layouts: divisibility rules and the cost of collectives.
#include "engine/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/layers/layer_family.hpp"
#include "engine/model.hpp"
#include "engine/overflow.hpp"

namespace streamspark::engine {

std::string describe(const ParallelLayout& p) {
  if (p.gpus() == 1) return "1 GPU";
  if (p.attention_dp) {
    std::string out = "attention dp, ep " + std::to_string(p.ep);
    if (p.redundant_experts > 0) {
      out += " (+" + std::to_string(p.redundant_experts) + " redundant experts)";
    }
    if (p.replicas > 1) out += ", " + std::to_string(p.replicas) + " replicas";
    if (p.two_batch_overlap) out += ", two-batch overlap";
    return out + " (" + std::to_string(p.gpus()) + " GPUs)";
  }
  std::string out = "tp " + std::to_string(p.tp) + ", pp " + std::to_string(p.pp);
  if (p.ep > 1) out += ", ep " + std::to_string(p.ep);
  if (p.replicas > 1) out += ", " + std::to_string(p.replicas) + " replicas";
  if (p.two_batch_overlap) out += ", two-batch overlap";
  return out + " (" + std::to_string(p.gpus()) + " GPUs)";
}

int64_t kv_heads_per_gpu(int64_t kv_heads, int64_t tp) {
  return kv_heads >= tp ? kv_heads / tp : 1;
}

void check_layout(const Model& m, const ParallelLayout& p) {
  if (p.tp < 1 || p.pp < 1 || p.ep < 1 || p.replicas < 1 || p.microbatches < 0) {
    throw std::invalid_argument("tp, pp, ep and replicas must be >= 1 and micro-batches >= 0");
  }
  if (p.tp > 1024 || p.pp > 1024 || p.ep > 4096 || p.replicas > (int64_t{1} << 20)) {
    throw std::invalid_argument("tp and pp at most 1024, ep at most 4096, replicas at most 2^20");
  }
  if (p.attention_dp) {
    if (p.tp != 1 || p.pp != 1) {
      throw std::invalid_argument(
          "--attention-dp runs whole attention on each GPU: it needs --tp 1 and --pp 1 (attention "
          "tensor parallelism inside a data-parallel group is not modelled)");
    }
    if (p.ep < 2) throw std::invalid_argument("--attention-dp needs --ep of 2 or more GPUs");
  }
  if (p.two_batch_overlap) {
    if (p.pp != 1 || p.overlap_communication || (p.tp == 1 && p.ep == 1)) {
      throw std::invalid_argument(
          "--two-batch-overlap overlaps one micro-batch's communication with the other's "
          "computation: it needs --pp 1, a layout that communicates (--tp or --ep above 1) and "
          "not --overlap-communication (which hides all of it)");
    }
    if (m.diffusion) {
      throw std::invalid_argument(m.name + ": " +
                                  "--two-batch-overlap of diffusion denoising steps is not "
                                  "modelled");
    }
  }
  if (!p.attention_dp && (p.redundant_experts != 0 || p.expert_imbalance != 1.0 ||
                          p.all_to_all != AllToAllMode::throughput)) {
    throw std::invalid_argument(
        "--redundant-experts, --expert-imbalance and --all-to-all apply to --attention-dp "
        "layouts");
  }
  if (p.redundant_experts < 0 || !(p.expert_imbalance >= 1.0) ||
      p.expert_imbalance > static_cast<double>(std::max<int64_t>(1, p.ep))) {
    throw std::invalid_argument(
        "--redundant-experts must be >= 0 and --expert-imbalance (busiest GPU's routed tokens "
        "over the mean) between 1 and --ep (one GPU serving every routed token)");
  }
  const std::string name = m.name + ": ";
  bool moe = false;
  for (const LayerKind& k : m.layers) {
    const std::string kind = name + k.label + " layers: ";
    if (k.count % p.pp != 0) {
      throw std::invalid_argument(kind + does_not_divide("the layer count", k.count, "--pp", p.pp) +
                                  " (every stage holds the same layers of each kind)");
    }
    if (const std::string why = mixer_family(k).tensor_parallel_problem(m, k, p.tp); !why.empty()) {
      throw std::invalid_argument(kind + why);
    }
    if (const FeedForwardFamily* ffn = feed_forward_family(k)) {
      if (const std::string why = ffn->parallel_problem(k, p); !why.empty()) {
        throw std::invalid_argument(kind + why);
      }
    }
    moe = moe || k.ffn == FfnKind::moe;
  }
  if (p.ep > 1 && !moe) {
    throw std::invalid_argument(name + "--ep " + std::to_string(p.ep) +
                                " applies to mixture-of-experts layers; the model has none");
  }
  if (p.ep > 1 && p.ep != p.tp && !p.attention_dp) {
    throw std::invalid_argument("--ep " + std::to_string(p.ep) + " must equal --tp " +
                                std::to_string(p.tp) +
                                ": experts are spread over a stage's tensor-parallel GPUs");
  }
  if (m.diffusion && p.pp > 1) {
    throw std::invalid_argument(name +
                                "pipeline parallelism of diffusion generation is not "
                                "modelled (its denoising steps have no decode batch to "
                                "pipeline)");
  }
}

namespace {
// Bytes of one GPU's share of a layer tensor (all its layers in the model).
int64_t tensor_bytes_per_gpu(const WeightTensor& t, const Precision& p, const ParallelLayout& l,
                             const LayerKind& k) {
  int64_t rows = t.rows, cols = t.cols, copies = t.copies;
  if (t.routed && l.ep > 1) {
    // whole experts, E/ep of them ((E + redundant) / ep under attention data parallelism)
    copies = checked_add(copies, l.redundant_experts) / l.ep;
  } else {
    switch (t.split) {
      case TensorSplit::replicated:
        break;
      case TensorSplit::columns:
        cols /= l.tp;
        break;
      case TensorSplit::rows:
        rows /= l.tp;
        break;
      case TensorSplit::kv_heads: {
        const int64_t K = k.attention.n_kv_heads;
        cols = cols / K * kv_heads_per_gpu(K, l.tp);
        break;
      }
    }
  }
  const int64_t one = t.matrix ? matrix_bytes(matrix_format(p, t.attention), rows, cols)
                               : storage_bytes(checked_mul(rows, cols), stored_activations(p));
  return checked_mul(one, copies, t.layers);
}
}  // namespace

void check_sharded_groups(const Model& m, const Precision& p, int64_t tp) {
  const int64_t g = p.weights.group_size;
  if (g <= 0 || tp == 1) return;
  for (const LayerKind& k : m.layers) {
    for (const WeightTensor& t : weight_tensors(m, k)) {
      if (t.matrix && !(t.attention && p.attention_weights) && t.split == TensorSplit::rows &&
          (t.rows / tp) % g != 0) {
        throw std::invalid_argument("weight group size " + std::to_string(g) +
                                    " does not divide the " + std::to_string(t.rows / tp) +
                                    " input features one GPU holds of " + std::string(t.name) +
                                    " under --tp " + std::to_string(tp));
      }
    }
  }
}

int64_t embedding_table_bytes_per_gpu(const Model& m, const Precision& p, const ParallelLayout& l) {
  const int64_t rows = (m.vocab_size + l.tp - 1) / l.tp;
  return storage_bytes(checked_mul(rows, m.d_model), p.embedding);
}

int64_t weight_bytes_per_gpu(const Model& m, const Precision& p, const ParallelLayout& l) {
  int64_t layers = 0;
  for (const LayerKind& k : m.layers) {
    for (const WeightTensor& t : weight_tensors(m, k)) {
      layers = checked_add(layers, tensor_bytes_per_gpu(t, p, l, k));
    }
  }
  layers /= l.pp;  // every stage holds count / pp layers of each kind
  const int64_t table = embedding_table_bytes_per_gpu(m, p, l);
  const int64_t final_norm = storage_bytes(norm_params(m.norm, m.d_model), stored_activations(p));
  // A tied lm head shares the embedding on one stage; the last of several keeps its own copy.
  const int64_t head = m.tied_embeddings && l.pp == 1 ? 0 : table;
  const int64_t ends = l.pp == 1 ? checked_add(table, head, final_norm)
                                 : std::max(table, checked_add(head, final_norm));
  return checked_add(layers, ends);
}

int64_t state_bytes_per_gpu(const Model& m, int64_t context, DType kv, const ParallelLayout& l) {
  if (l.single_gpu()) return state_bytes(m, context, kv);
  int64_t elements = 0;
  for (const LayerKind& k : m.layers) {
    const int64_t e =
        mixer_family(k).state_elements_per_gpu(k, state_elements(m, k, context), l.tp);
    elements = checked_add(elements, e / l.pp);
  }
  return storage_bytes(elements, kv);
}

double collective_seconds(CollectiveKind kind, int64_t group, double bytes, const Link& link) {
  if (group <= 1 && kind != CollectiveKind::send) return 0;
  const double n = static_cast<double>(group);
  const double steps = n - 1;
  switch (kind) {
    case CollectiveKind::all_reduce:
      return 2 * steps / n * bytes / link.bandwidth + 2 * steps * link.latency_s;
    case CollectiveKind::all_gather:
    case CollectiveKind::all_to_all:
      return steps / n * bytes / link.bandwidth + steps * link.latency_s;
    case CollectiveKind::send:
      return bytes / link.bandwidth + link.latency_s;
  }
  return 0;
}

double expected_remote_nodes(int64_t nodes, int64_t top_k, GroupLimit routing) {
  const double N = static_cast<double>(nodes);
  const double k = static_cast<double>(std::max<int64_t>(1, top_k));
  const int64_t G = routing.groups, t = routing.groups_per_token;
  if (G <= 1 || t >= G || nodes <= 1) return (N - 1) * (1 - std::pow(1 - 1 / N, k));
  if (t < 1) throw std::invalid_argument("group-limited routing needs 1 <= groups_per_token");
  double choices = 1;  // C(G, t)
  for (int64_t i = 0; i < t; ++i) {
    choices = choices * static_cast<double>(G - i) / static_cast<double>(i + 1);
  }
  if (choices > 1e6) {
    throw std::invalid_argument("group-limited routing: more than 10^6 choices of " +
                                std::to_string(t) + " groups of " + std::to_string(G));
  }
  // Overlap of group g ([g/G, (g+1)/G) of the experts) with node n ([n/N, (n+1)/N)), as a
  // fraction of all experts.
  std::vector<double> overlap(static_cast<size_t>(G * nodes));
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t n = 0; n < nodes; ++n) {
      const double lo =
          std::max(static_cast<double>(g) / static_cast<double>(G), static_cast<double>(n) / N);
      const double hi = std::min(static_cast<double>(g + 1) / static_cast<double>(G),
                                 static_cast<double>(n + 1) / N);
      overlap[static_cast<size_t>(g * nodes + n)] = std::max(0.0, hi - lo);
    }
  }
  // Every t-subset of the groups, in lexicographic order.
  std::vector<int64_t> pick(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) pick[static_cast<size_t>(i)] = i;
  const double chosen_share = static_cast<double>(t) / static_cast<double>(G);
  double reached = 0;
  int64_t subsets = 0;
  while (true) {
    for (int64_t n = 0; n < nodes; ++n) {
      double share = 0;
      for (const int64_t g : pick) share += overlap[static_cast<size_t>(g * nodes + n)];
      reached += 1 - std::pow(1 - share / chosen_share, k);
    }
    ++subsets;
    int64_t i = t - 1;
    while (i >= 0 && pick[static_cast<size_t>(i)] == G - t + i) --i;
    if (i < 0) break;
    ++pick[static_cast<size_t>(i)];
    for (int64_t j = i + 1; j < t; ++j) {
      pick[static_cast<size_t>(j)] = pick[static_cast<size_t>(j - 1)] + 1;
    }
  }
  return (1 - 1 / N) * reached / static_cast<double>(subsets);
}

double expert_all_to_all_seconds(int64_t group, int64_t per_node, double bytes, int64_t top_k,
                                 AllToAllMode mode, const Link& intra, const Link& inter,
                                 GroupLimit routing) {
  if (group <= 1) return 0;
  const int64_t g = std::min(std::max<int64_t>(1, per_node), group);
  const int64_t nodes = (group + g - 1) / g;
  const double n = static_cast<double>(group);
  if (nodes == 1) {
    return (n - 1) / n * bytes / intra.bandwidth + intra.latency_s;
  }
  if (mode == AllToAllMode::low_latency) {
    return (n - 1) / n * bytes / inter.bandwidth + inter.latency_s;
  }
  const double k = static_cast<double>(std::max<int64_t>(1, top_k));
  const double remote_nodes = expected_remote_nodes(nodes, top_k, routing);
  const double network = bytes / k * remote_nodes;
  const double gd = static_cast<double>(g);
  const double nvlink = bytes * (gd - 1) / gd;
  return std::max(network / inter.bandwidth, nvlink / intra.bandwidth) + inter.latency_s +
         intra.latency_s;
}

}  // namespace streamspark::engine
