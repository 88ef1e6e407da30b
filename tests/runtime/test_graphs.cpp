// The decoder's graph path (captured decode steps, replayed with the metadata arrays' current
// values), checked on the CPU through a backend that records the kernels it is given while
// capturing and re-runs them on replay, reading host arrays at their recorded addresses as
// the CUDA backend's replay does: the logits must equal those of steps launched one by one,
// and a new batch shape must be captured again.
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "spec/model_spec.hpp"
#include "test_source_dir.hpp"

namespace rt = streamspark::runtime;

namespace {

class RecordingBackend final : public rt::Backend {
 public:
  explicit RecordingBackend(std::unique_ptr<rt::Backend> inner) : inner_(std::move(inner)) {}

  int captures = 0, replays = 0, drops = 0;

  std::string name() const override { return "recording"; }
  std::string dtype() const override { return inner_->dtype(); }
  int64_t element_bytes() const override { return inner_->element_bytes(); }
  int64_t attention_query_tile() const override { return inner_->attention_query_tile(); }
  int64_t available_bytes() const override { return inner_->available_bytes(); }
  rt::DeviceInfo device_info() const override { return inner_->device_info(); }
  float* allocate(int64_t count) override { return inner_->allocate(count); }
  void release(float* p) override { inner_->release(p); }
  void upload(float* d, const float* h, int64_t n) override { inner_->upload(d, h, n); }
  void download(float* h, const float* d, int64_t n) override { inner_->download(h, d, n); }
  void synchronize() override { inner_->synchronize(); }
  void copy(float* dst, const float* src, int64_t n) override {
    run([=, this] { inner_->copy(dst, src, n); });
  }
  int64_t mark() override { return inner_->mark(); }
  double seconds_between(int64_t a, int64_t b) override { return inner_->seconds_between(a, b); }
  void clear_marks() override { inner_->clear_marks(); }
  void flush_caches() override { inner_->flush_caches(); }
  void sample(const float* logits, int64_t rows, int64_t vocab, double temperature, double top_p,
              const double* uniforms, int32_t* tokens) override {
    REQUIRE_FALSE(capturing_);
    inner_->sample(logits, rows, vocab, temperature, top_p, uniforms, tokens);
  }

  bool supports_graphs() const override { return true; }
  void begin_graph() override {
    REQUIRE_FALSE(capturing_);
    capturing_ = true;
    current_.clear();
  }
  int64_t end_graph() override {
    capturing_ = false;
    graphs_.push_back(std::move(current_));
    ++captures;
    return static_cast<int64_t>(graphs_.size()) - 1;
  }
  void abort_graph() override {
    capturing_ = false;
    current_.clear();
  }
  void replay_graph(int64_t id) override {
    ++replays;
    for (auto& kernel : graphs_.at(static_cast<size_t>(id))) kernel();
  }
  void drop_graph(int64_t id) override {
    graphs_.at(static_cast<size_t>(id)).clear();  // ids stay unique: the slot stays
    ++drops;
  }

  // Kernels: recorded with their arguments (host arrays by address) while capturing.
  void embedding(const float* t, const int32_t* tokens, int64_t n, int64_t d, float* out) override {
    run([=, this] { inner_->embedding(t, tokens, n, d, out); });
  }
  void rmsnorm(const float* x, const float* w, int64_t rows, int64_t d, float eps,
               float* y) override {
    run([=, this] { inner_->rmsnorm(x, w, rows, d, eps, y); });
  }
  void linear(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* y) override {
    run([=, this] { inner_->linear(x, w, m, n, k, y); });
  }
  void rope(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t head_dim,
            const int64_t* positions, float theta) override {
    run([=, this] { inner_->rope(x, rows, stride, heads, head_dim, positions, theta); });
  }
  void kv_write(const float* qkv, int64_t stride, int64_t k_offset, int64_t kv_heads,
                int64_t head_dim, const rt::SequenceBatch& batch,
                const rt::KvCacheView& cache) override {
    run([=, this] { inner_->kv_write(qkv, stride, k_offset, kv_heads, head_dim, batch, cache); });
  }
  void attention(const float* qkv, int64_t stride, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, const rt::SequenceBatch& batch, const rt::KvCacheView& cache,
                 float* out) override {
    run([=, this] {
      inner_->attention(qkv, stride, heads, kv_heads, head_dim, batch, cache, out);
    });
  }
  void silu_mul(const float* g, const float* u, int64_t n, float* out) override {
    run([=, this] { inner_->silu_mul(g, u, n, out); });
  }
  void add(const float* a, const float* b, int64_t n, float* out) override {
    run([=, this] { inner_->add(a, b, n, out); });
  }

 private:
  void run(std::function<void()> kernel) {
    if (capturing_) {
      current_.push_back(std::move(kernel));
    } else {
      kernel();
    }
  }
  std::unique_ptr<rt::Backend> inner_;
  bool capturing_ = false;
  std::vector<std::function<void()>> current_;
  std::vector<std::vector<std::function<void()>>> graphs_;
};

}  // namespace

TEST_CASE("graphs: replayed decode steps give the logits of steps launched one by one") {
  const auto m =
      streamspark::spec::load_model(streamspark::test::source_dir() + "/model_zoo/tiny-test.yaml");
  const auto w = rt::random_weights(m, 9);
  RecordingBackend recording(rt::make_cpu_backend(1));
  auto plain = rt::make_cpu_backend(1);
  const int64_t S = 12, steps = 6;
  rt::Decoder graphed(recording, m, w, 4, S + 2 * steps);
  rt::Decoder launched(*plain, m, w, 4, S + 2 * steps);
  launched.set_graphs(false);
  for (const int64_t B : {int64_t{2}, int64_t{4}}) {
    CAPTURE(B);
    const auto prompts = rt::random_prompts(B, S, m.vocab_size, 5);
    std::vector<float> a = graphed.prefill(prompts, B, S), b = launched.prefill(prompts, B, S);
    REQUIRE(a == b);
    rt::Sampler greedy({});
    for (int64_t step = 0; step < steps; ++step) {
      std::vector<int32_t> next(static_cast<size_t>(B));
      for (int64_t s = 0; s < B; ++s) {
        next[static_cast<size_t>(s)] = greedy.sample(a.data() + s * m.vocab_size, m.vocab_size);
      }
      a = graphed.decode(next);
      b = launched.decode(next);
      REQUIRE(a == b);
    }
  }
  // One capture per batch shape (the second prefill grew the work buffers: the first graph is
  // dropped); every decode step a replay.
  CHECK(recording.captures == 2);
  CHECK(recording.drops == 1);
  CHECK(recording.replays == 2 * steps);
  // A timed step launches kernel by kernel (operators are timed between marks).
  rt::OpTimer timer;
  graphed.decode(std::vector<int32_t>(4, 1), &timer);
  CHECK(recording.replays == 2 * steps);
  const auto qkv = timer.seconds(streamspark::engine::OpId::qkv_proj);
  REQUIRE(qkv.has_value());
  CHECK(*qkv > 0);
}
