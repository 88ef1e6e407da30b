// cuBLASLt matmul plans per shape: the matrix product of the CUDA backend (the row-major
// y = x W^T as column-major D = W^T-op x: A = W (k x n, transposed), B = x (k x m), C = D = y
// (n x m), fp32 accumulation).
#pragma once

#include <map>
#include <tuple>

#include "runtime/cuda/cuda_common.cuh"

namespace streamspark::runtime::cuda {

// A matmul description, its three layouts and the heuristic's algorithm, for one shape.
struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;
  void destroy() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};
// The plans of one cuBLASLt handle, by shape and element types: created on first use, kept.
class GemmPlans {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  GemmPlans() = default;
  GemmPlans(const GemmPlans&) = delete;
  GemmPlans& operator=(const GemmPlans&) = delete;
  ~GemmPlans() { clear(); }
  // Destroys every plan (before the handle they were made with).
  void clear() {
    for (auto& [key, plan] : plans_) plan.destroy();
    plans_.clear();
  }
  void set_handle(cublasLtHandle_t lt) { lt_ = lt; }

  // y (m, n) = x (m, k) W^T with W stored (n, k): inputs (A, B) of `in` and output (C, D) of
  // `out` elements.
  GemmPlan& get(int64_t m, int64_t n, int64_t k, cudaDataType_t in, cudaDataType_t out) {
    const auto key = std::make_tuple(m, n, k, static_cast<int>(in), static_cast<int>(out));
    const auto found = plans_.find(key);
    if (found != plans_.end()) return found->second;
    GemmPlan plan;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                            &transpose, sizeof transpose));
    STREAMSPARK_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
    if (in == CUDA_R_8F_E4M3) {
      // fp8 products accumulate in the tensor cores' fast mode, as fp8 inference runs them.
      const int8_t fast = 1;
      STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          plan.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, in, u(k), u(n), k));
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, in, u(k), u(m), k));
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, out, u(n), u(m), n));
    cublasLtMatmulPreference_t preference = nullptr;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const size_t workspace = kWorkspaceBytes;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
    // linear() accepts 16-byte aligned operands (checked there); the heuristic must not pick
    // an algorithm that needs the 256 bytes it assumes by default.
    const uint32_t alignment = 16;
    for (const auto attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute,
                                                                    &alignment, sizeof alignment));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found_algos = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        lt_, plan.op, plan.a, plan.b, plan.c, plan.c, preference, 1, &result, &found_algos);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status == CUBLAS_STATUS_SUCCESS && found_algos > 0) {
      plan.algo = result.algo;
      plan.has_algo = true;
    }
    return plans_.emplace(key, plan).first->second;
  }

 private:
  cublasLtHandle_t lt_ = nullptr;
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, GemmPlan> plans_;
};

}  // namespace streamspark::runtime::cuda
