// The table of layer families: a layer kind's mixer and feed-forward to the family that costs
// them. A new family is one file beside these and one line here.
#include "engine/layers/layer_family.hpp"

namespace streamspark::engine {

const MixerFamily& attention_family();
const MixerFamily& mla_family();
const MixerFamily& mamba_family();
const MixerFamily& linear_attention_family();
const FeedForwardFamily& dense_mlp_family();
const FeedForwardFamily& moe_family();

const MixerFamily& mixer_family(const LayerKind& k) {
  switch (k.mixer) {
    case MixerKind::attention:
      return k.attention.kind == AttentionKind::mla ? mla_family() : attention_family();
    case MixerKind::mamba:
      return mamba_family();
    case MixerKind::linear_attention:
      return linear_attention_family();
  }
  return attention_family();
}

const FeedForwardFamily* feed_forward_family(const LayerKind& k) {
  switch (k.ffn) {
    case FfnKind::dense:
      return &dense_mlp_family();
    case FfnKind::moe:
      return &moe_family();
    case FfnKind::none:
      return nullptr;
  }
  return nullptr;
}

}  // namespace streamspark::engine
