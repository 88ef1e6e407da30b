// Parameter and KV-cache formulas for model variants, and storage rounding.
#include <doctest/doctest.h>

#include "engine/model.hpp"
#include "engine/overflow.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark;
using namespace streamspark::engine;

TEST_CASE("parameter count follows the architecture switches") {
  const Model base = test::tiny_test();
  // tiny-test: 4096*256*2 + 4*(512 + 256*384 + 256*256 + 3*256*688) + 256 = 4,868,352.
  CHECK(total_params(base) == 4'868'352);

  Model tied = base;
  tied.tied_embeddings = true;  // the lm head reuses the embedding: minus V*D = 1,048,576
  CHECK(total_params(tied) == 4'868'352 - 1'048'576);

  Model ln = base;
  ln.norm = NormKind::layernorm;  // 2D per norm instead of D: + (2*4 + 1) * 256
  CHECK(total_params(ln) == 4'868'352 + 9 * 256);

  Model plain = base;
  plain.layers[0].mlp.kind = MlpKind::plain;  // two matrices: minus D*F per layer = 4 * 176,128
  CHECK(total_params(plain) == 4'868'352 - 4 * 256 * 688);

  Model bias = base;
  bias.layers[0].attention.qkv_bias = true;  // + (N+2K)*H = 384 per layer
  CHECK(total_params(bias) == 4'868'352 + 4 * 384);

  Model sandwich = base;
  sandwich.layers[0].sandwich_norms = true;  // 4 norms per layer, not 2: + 4 * 2 * 256
  CHECK(total_params(sandwich) == 4'868'352 + 4 * 2 * 256);

  Model shared = base;
  shared.layers[0].attention.kv_share = 2;  // W_K, W_V in 2 of 4 layers: - 2 * 256 * 128
  CHECK(total_params(shared) == 4'868'352 - 2 * 256 * 128);
  CHECK(active_params(base) == total_params(base));
}

TEST_CASE("KV bytes per token scale with the KV dtype and K") {
  const Model m = test::tiny_test();
  // 2*K*H*L = 2*2*32*4 = 512 elements per token.
  CHECK(state_elements(m, 1) == 512);
  CHECK(kv_bytes_per_token(m, DType::fp32) == 2048);
  CHECK(kv_bytes_per_token(m, DType::bf16) == 1024);
  CHECK(kv_bytes_per_token(m, DType::fp8_e4m3) == 512);
  CHECK(kv_bytes_per_token(m, DType::int4) == 256);
}

TEST_CASE("storage bytes round sub-byte formats up") {
  CHECK(storage_bytes(3, DType::int4) == 2);
  CHECK(storage_bytes(4, DType::int4) == 2);
  CHECK(storage_bytes(3, DType::bf16) == 6);
  CHECK_THROWS_AS(storage_bytes(int64_t{1} << 62, DType::fp32), OverflowError);
}

TEST_CASE("dtype names round-trip, fp8 means e4m3") {
  for (DType t : kAllDTypes) CHECK(parse_enum<DType>(enum_name(t)) == t);
  CHECK(parse_enum<DType>("fp8") == DType::fp8_e4m3);
  CHECK_FALSE(parse_enum<DType>("fp12").has_value());
  CHECK(matrix_peak_class(DType::fp8_e5m2) == PeakClass::fp8);
  CHECK_FALSE(matrix_peak_class(DType::int3).has_value());  // storage only
  CHECK(dtype_bits(DType::int3) == 3);
}
