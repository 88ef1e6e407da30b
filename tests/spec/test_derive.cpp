// derive_from: a model file that starts from another and overrides keys (pruning, variants).
#include <doctest/doctest.h>

#include <string>

#include "engine/model.hpp"
#include "spec/diagnostics.hpp"
#include "spec/model_spec.hpp"

using namespace streamspark;
using namespace streamspark::spec;

namespace {
std::string file(const std::string& name) {
  return std::string(STREAMSPARK_TEST_DATA_DIR) + "/derive/" + name;
}
std::string error_of(const std::string& name) {
  try {
    (void)load_model(file(name));
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a derived model overrides keys and merges sections") {
  const engine::Model base = load_model(file("base.yaml"));
  const engine::Model pruned = load_model(file("pruned.yaml"));
  CHECK(pruned.name == "pruned");
  CHECK(pruned.n_layers() == 2);
  CHECK(pruned.layers[0].mlp.d_ff == 256);
  CHECK(pruned.layers[0].mlp.kind == engine::MlpKind::gated);  // kept from the base's mlp
  CHECK(pruned.layers[0].attention.kind == engine::AttentionKind::mla);
  CHECK(engine::total_params(pruned) < engine::total_params(base));
}

TEST_CASE("a null value removes the base's key") {
  const engine::Model m = load_model(file("to_gqa.yaml"));
  CHECK(m.layers[0].attention.kind == engine::AttentionKind::gqa);
  CHECK(m.layers[0].attention.n_kv_heads == 2);
}

TEST_CASE("derivation problems are diagnosed") {
  CHECK(error_of("cycle_a.yaml") ==
        file("cycle_a.yaml") + ":3:14: derive_from: base model " + file("cycle_b.yaml") +
            " is invalid: " + file("cycle_b.yaml") +
            ":3:14: derive_from: derivation cycle: cycle_a.yaml -> cycle_b.yaml -> cycle_a.yaml");
  CHECK(error_of("nested_duplicate.yaml") ==
        file("nested_duplicate.yaml") + ":4:18: mlp.d_ff: duplicate key (first given at line 4)");
  CHECK(error_of("typo.yaml") ==
        file("typo.yaml") + ":4:10: d_modle: unknown key 'd_modle'; did you mean 'd_model'?");
}
