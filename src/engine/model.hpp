// A decoder-only language model as the engine sees it: embedding, a stack of layers of one or
// more kinds (attention, MLA, sliding-window, SSM or linear-attention mixers; dense or MoE
// feed-forward), final norm and lm head; and its exact parameter and KV/state sizes.
// Lecture letters: V vocab, D d_model, L layers, N query heads, K KV heads, H head dim, F MLP dim.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/enum_names.hpp"

namespace streamspark::engine {

// clang-format off
#define STREAMSPARK_MIXER_KINDS(X)                                                               \
  X(attention, "attention") X(mamba, "mamba") X(linear_attention, "linear_attention")
// clang-format on
STREAMSPARK_ENUM(MixerKind, STREAMSPARK_MIXER_KINDS)
// mla: multi-head latent attention (DeepSeek-V2): K/V compressed into a shared latent.
#define STREAMSPARK_ATTENTION_KINDS(X) X(mha, "mha") X(gqa, "gqa") X(mqa, "mqa") X(mla, "mla")
STREAMSPARK_ENUM(AttentionKind, STREAMSPARK_ATTENTION_KINDS)
#define STREAMSPARK_FFN_KINDS(X) X(dense, "mlp") X(moe, "moe") X(none, "none")
STREAMSPARK_ENUM(FfnKind, STREAMSPARK_FFN_KINDS)
// gated: gate, up, down (3 matrices); plain: up, down
#define STREAMSPARK_MLP_KINDS(X) X(gated, "gated") X(plain, "plain")
STREAMSPARK_ENUM(MlpKind, STREAMSPARK_MLP_KINDS)
#define STREAMSPARK_ACTIVATIONS(X) X(silu, "silu") X(gelu, "gelu") X(relu, "relu") X(relu2, "relu2")
STREAMSPARK_ENUM(Activation, STREAMSPARK_ACTIVATIONS)
// rmsnorm: scale only (D); layernorm: scale + bias
#define STREAMSPARK_NORM_KINDS(X) X(rmsnorm, "rmsnorm") X(layernorm, "layernorm")
STREAMSPARK_ENUM(NormKind, STREAMSPARK_NORM_KINDS)

// Multi-head latent attention dimensions (DeepSeek-V2, Liu et al. 2024, §2.1): queries through
// an optional low-rank bottleneck d_c' (q_lora_rank), keys and values through a shared latent
// d_c (kv_lora_rank) plus a decoupled RoPE key of d_h^R (qk_rope_head_dim) shared by all heads.
struct Mla {
  int64_t q_lora_rank = 0;       // d_c'; 0 = queries projected directly from D
  int64_t kv_lora_rank = 0;      // d_c
  int64_t qk_nope_head_dim = 0;  // d_h
  int64_t qk_rope_head_dim = 0;  // d_h^R
  int64_t v_head_dim = 0;
  // Cached elements per token per layer: d_c + d_h^R (DeepSeek-V2: 512 + 64 = 576).
  int64_t cached_elements() const { return kv_lora_rank + qk_rope_head_dim; }
};

struct Attention {
  AttentionKind kind = AttentionKind::mha;
  int64_t n_heads = 0;     // N
  int64_t n_kv_heads = 0;  // K; N is a multiple of K (G = N / K query heads per KV head)
  int64_t head_dim = 0;    // H; N*H need not equal D (the out projection maps N*H -> D)
  bool qkv_bias = false;   // a bias on the q, k and v projections (Qwen2 style)
  // RMSNorm over each query and each key head before RoPE, one weight vector of H per norm
  // shared by the heads (Qwen3: HF Qwen3Attention.q_norm / k_norm = Qwen3RMSNorm(head_dim)).
  bool qk_norm = false;
  bool rope = true;  // rotary position embedding on q and k (Jamba's attention has none)
  // Sliding window of local attention layers (tokens attended, including the current one);
  // used by layers of mixer "local", 0 when the model has none.
  int64_t window = 0;
  // Cross-layer attention (Brandon et al. 2024): groups of kv_share adjacent layers share one
  // KV cache; only the first layer of a group projects and stores K and V.
  int64_t kv_share = 1;
  Mla mla;  // kind == mla only
};

// Mamba (selective SSM, Gu & Dao 2023) mixer dimensions; d_inner = expand * D.
struct Mamba {
  int64_t d_state = 0;  // N_s, SSM state size per channel
  int64_t d_conv = 0;   // causal depthwise convolution width
  int64_t expand = 0;
  int64_t dt_rank = 0;
  bool conv_bias = true;
  bool inner_norms = false;  // RMSNorms on dt, B and C (Jamba)
};

// Linear attention (Katharopoulos et al. 2020; BASED, Arora et al. 2024; MiniMax-01's
// lightning attention): a recurrent state of feature_dim x head_dim per head replaces the KV
// cache. feature_dim is the size of the feature map phi(k) (key_dim for an identity map,
// 1 + d + d^2 for BASED's second-order Taylor map of d = key_dim).
struct LinearAttention {
  int64_t n_heads = 0;
  int64_t key_dim = 0;      // q/k projection width per head (input of the feature map)
  int64_t head_dim = 0;     // v width per head
  int64_t feature_dim = 0;  // phi(k) width per head
  bool normalizer = false;  // keeps sum(phi(k)) too (feature_dim more state per head)
  // MiniMax-01's lightning attention: the output is normalised (RMSNorm over N*head_dim) and
  // gated by sigmoid(x W_g), W_g a D x N*head_dim projection.
  bool output_gate = false;
};

struct Mlp {
  MlpKind kind = MlpKind::gated;
  int64_t d_ff = 0;  // F
  Activation activation = Activation::silu;
};

// Mixture of experts (Shazeer et al. 2017; Mixtral, Jiang et al. 2024; DeepSeekMoE, Dai et
// al. 2024): a router picks top_k of n_experts per token; shared experts see every token.
struct Moe {
  int64_t n_experts = 0;
  int64_t top_k = 0;
  int64_t d_ff = 0;  // per routed expert
  int64_t n_shared = 0;
  int64_t shared_d_ff = 0;  // per shared expert
  MlpKind kind = MlpKind::gated;
  Activation activation = Activation::silu;
  // Group-limited routing (DeepSeek-V2/V3's n_group, topk_group): the routed experts in
  // `groups` equal groups, a token's top_k chosen within its best `groups_per_token` groups.
  // 0: unlimited.
  int64_t groups = 0;
  int64_t groups_per_token = 0;
};

// Layers of one kind; a model is a stack of kinds with counts (their order does not change
// the cost). `label` names the kind in operator names of hybrid models, e.g. "local+mlp".
struct LayerKind {
  std::string label;
  int64_t count = 0;
  MixerKind mixer = MixerKind::attention;
  bool local = false;  // attention over a sliding window of attention.window tokens
  Attention attention;
  Mamba mamba;
  LinearAttention linear;
  FfnKind ffn = FfnKind::dense;
  Mlp mlp;
  Moe moe;
  // Gemma-2 style: norms after the mixer and the MLP as well as before (4 per layer, not 2).
  bool sandwich_norms = false;
};

// Diffusion language models (e.g. LLaDA, Nie et al. 2025) generate a block of tokens in
// parallel by iterative denoising: every step is a forward pass over the whole sequence with
// bidirectional attention (no KV cache).
struct Diffusion {
  int64_t block_length = 0;   // tokens generated per block
  int64_t steps = 0;          // denoising steps per block
  bool cache_prefix = false;  // block diffusion with a KV cache of the prefix (else LLaDA-style)
};

struct Model {
  std::string name;
  std::string source;
  int64_t vocab_size = 0;  // V
  int64_t d_model = 0;     // D
  NormKind norm = NormKind::rmsnorm;
  bool tied_embeddings = false;  // lm head shares the embedding matrix
  int64_t max_context = 0;
  std::vector<LayerKind> layers;  // at least one kind, each count > 0
  std::optional<Diffusion> diffusion;

  int64_t n_layers() const;
  bool is_hybrid() const { return layers.size() > 1; }
};

// Parameters of one norm over `width` features: width for RMSNorm, 2*width for LayerNorm.
int64_t norm_params(NormKind norm, int64_t width);
// d_inner of a Mamba mixer: expand * D.
int64_t mamba_inner_dim(const Model& m, const Mamba& mamba);

// One weight tensor of a layer kind. Matrices (rows = input features, cols = outputs) are
// what weight quantization applies to; vectors (norm scales, biases, SSM A and D, conv
// filters) and the MoE router stay in the activation format.
// How tensor parallelism splits a weight (Megatron-LM): over its outputs (column-parallel:
// QKV, gate and up projections and the vectors of their outputs), over its inputs
// (row-parallel: output and down projections), by KV head (K and V projections: K/tp heads,
// or one replicated head when K < tp), or not at all (norms, routers, MLA's down projections).
enum class TensorSplit { replicated, columns, rows, kv_heads };

struct WeightTensor {
  std::string_view name;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t copies = 1;  // per layer: experts
  int64_t layers = 0;  // layers holding it: the kind's count, or count / kv_share for K, V
  bool matrix = true;
  bool routed = false;  // a routed expert: a token uses top_k of its copies
  TensorSplit split = TensorSplit::replicated;
  bool attention = false;    // a projection of an attention mixer (q, k, v, o; MLA's down/up)
  int64_t elements() const;  // rows * cols * copies * layers
};
// Every weight tensor of a layer kind, with the source of each shape beside its code.
std::vector<WeightTensor> weight_tensors(const Model& m, const LayerKind& k);

// V*D embedding + V*D lm head unless tied + every layer tensor + final norm, exact.
// llama2-13b: 13,015,864,320.
int64_t total_params(const Model& m);
// Parameters a token uses: routed experts count top_k of n_experts; the convention of
// Mixtral's "12.9B active" (embedding and lm head included).
int64_t active_params(const Model& m);
// Parameters of one layer of a kind (cross-layer K/V shared: averaged over the group).
int64_t layer_params(const Model& m, const LayerKind& k);

// KV-cache or recurrent-state elements all layers of this kind keep per sequence holding
// `context` tokens: attention 2*K*H per token and layer (MLA d_c + d_h^R; a window caps the
// tokens at the window; cross-layer sharing keeps one cache per kv_share layers), Mamba its
// conv + SSM state, linear attention its feature_dim x head_dim state per head. Constant-size
// states do not depend on the context.
int64_t state_elements(const Model& m, const LayerKind& k, int64_t context);
// Elements of the whole model per sequence at `context` tokens.
int64_t state_elements(const Model& m, int64_t context);
// KV cache/state bytes of one sequence at `context` tokens.
int64_t state_bytes(const Model& m, int64_t context, DType kv);
// KV bytes each new token adds at long context (full-attention layers only; windows, SSM and
// linear-attention states do not grow). CS336 lecture (MHA, bf16): D*L*2*2 bytes.
int64_t kv_bytes_per_token(const Model& m, DType kv);
// Sliding-window ("local") attention layers: the KV bytes each token adds while their windows
// fill, and the largest window W (from W tokens on their caches stop growing); zeros without
// such layers. Mistral 7B v0.1 (bf16): 32 layers x 2 x 8 KV heads x 128 x 2 bytes, window 4096.
struct WindowedKv {
  int64_t bytes_per_token = 0;
  int64_t window = 0;
};
WindowedKv windowed_kv_bytes_per_token(const Model& m, DType kv);
// Contexts at which a layer's per-step cost stops growing linearly: W for each local layer
// kind of window W (from context W-1 on it reads W-1 past tokens, whatever the context).
// Sorted, without duplicates.
std::vector<int64_t> context_breakpoints(const Model& m);
// Causal attention pairs (query, key) per head and sequence when T new tokens follow P cached
// ones: query i sees P+i+1 keys, at most `window` (0: no window).
int64_t attention_pairs(int64_t new_tokens, int64_t past_tokens, int64_t window);
// The pairs a kernel computes that takes the T queries in tiles of `query_tile` rows (the last
// tile holds the rest), each tile multiplying every key from the first its first query sees
// to the last its last query sees (masking inside the tile, as blocked CPU kernels and
// FlashAttention's diagonal blocks do): a tile of r rows starting at query t0 computes
// r * (P + t0 + r - first key). query_tile <= 1 (or T = 1): attention_pairs.
int64_t computed_attention_pairs(int64_t new_tokens, int64_t past_tokens, int64_t window,
                                 int64_t query_tile);

}  // namespace streamspark::engine
