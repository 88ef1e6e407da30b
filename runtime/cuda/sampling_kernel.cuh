// The CUDA sampling kernel: greedy and nucleus sampling by the rule of runtime/sampling.hpp.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "runtime/cuda/cuda_common.cuh"

namespace streamspark::runtime::cuda {

// ---- sampling ----
// One block per row (strided passes, then contiguous chunks per thread for the prefix sums and
// the walk); the rule is sample_row's (runtime/sampling.hpp), step by step:
// greedy: the largest logit, the first index among equal ones.
// nucleus: p_i = exp((logit_i - max) / temperature) (double, kept as float, into
// `probabilities`); the nucleus' smallest probability t is the largest value with
// sum(p_j >= t) >= top_p * sum(p) (a binary search on the bits of t: positive floats order as
// their bit patterns), then the k tokens at exactly t needed to reach top_p, in token order;
// the token is the first, in token order, where the nucleus' running sum reaches
// uniform * its sum (block-wide prefix sums over the chunks, then one walk per chunk).
// 512 threads with launch bounds: the kernel keeps many values live (about 100 registers
// unbounded), and 1024 such threads would not fit a multiprocessor's register file.
constexpr int kSampleThreads = 512;

struct ArgMax {
  float value;
  int64_t index;
};
struct ArgMaxOp {
  __device__ ArgMax operator()(const ArgMax& a, const ArgMax& b) const {
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
    return a.index < b.index ? a : b;
  }
};
struct MinOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a < b ? a : b; }
};
struct MaxOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};
struct SumOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a + b; }
};

template <typename T>
__global__ void __launch_bounds__(kSampleThreads)
    sample_kernel(const T* logits, int64_t vocab, double temperature, double top_p,
                  const double* uniforms, float* probabilities, int32_t* tokens) {
  using ArgMaxReduce = cub::BlockReduce<ArgMax, kSampleThreads>;
  using DoubleReduce = cub::BlockReduce<double, kSampleThreads>;
  using IntReduce = cub::BlockReduce<int64_t, kSampleThreads>;
  using DoubleScan = cub::BlockScan<double, kSampleThreads>;
  using IntScan = cub::BlockScan<int64_t, kSampleThreads>;
  __shared__ union {
    typename ArgMaxReduce::TempStorage argmax;
    typename DoubleReduce::TempStorage sum;
    typename IntReduce::TempStorage count;
    typename DoubleScan::TempStorage double_scan;
    typename IntScan::TempStorage int_scan;
  } temp;
  __shared__ ArgMax shared_argmax;
  __shared__ double shared_double;
  __shared__ int64_t shared_int;
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  const int64_t chunk = (vocab + kSampleThreads - 1) / kSampleThreads;
  const int64_t begin = threadIdx.x * chunk;
  const int64_t end = begin + chunk < vocab ? begin + chunk : vocab;
  // Block-wide sums and counts, broadcast to every thread (the temporary storage is shared,
  // so each collective is fenced by barriers).
  const auto sum = [&](double v) {
    const double total = DoubleReduce(temp.sum).Sum(v);
    if (threadIdx.x == 0) shared_double = total;
    __syncthreads();
    const double result = shared_double;
    __syncthreads();
    return result;
  };
  const auto reduce_int = [&](int64_t v, auto op) {
    const int64_t total = IntReduce(temp.count).Reduce(v, op);
    if (threadIdx.x == 0) shared_int = total;
    __syncthreads();
    const int64_t result = shared_int;
    __syncthreads();
    return result;
  };

  // Passes whose order does not matter stride over the row (coalesced); the prefix sums and
  // the walk need each thread's contiguous chunk.
  ArgMax best{-INFINITY, INT64_MAX};
  for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) {
    const float v = load(x + i);
    if (v > best.value) best = {v, i};
  }
  const ArgMax top = ArgMaxReduce(temp.argmax).Reduce(best, ArgMaxOp());
  if (threadIdx.x == 0) shared_argmax = top;
  __syncthreads();
  const ArgMax greedy = shared_argmax;
  __syncthreads();
  if (temperature <= 0) {
    if (threadIdx.x == 0)
      tokens[row] = static_cast<int32_t>(greedy.index == INT64_MAX ? 0 : greedy.index);
    return;
  }
  float* p = probabilities + row * vocab;
  double mass = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) {
    p[i] = static_cast<float>(exp(static_cast<double>(load(x + i) - greedy.value) / temperature));
    mass += p[i];
  }
  const double target = top_p * sum(mass);
  // The threshold: the largest t (as bits, 0 .. bits of 1.0f) with sum(p >= t) >= target.
  uint32_t lo = 0, hi = 0x3f800000u;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo + 1) / 2;
    const float t = __uint_as_float(mid);
    double above = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) above += p[i] >= t ? p[i] : 0.0;
    if (sum(above) >= target) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const float threshold = __uint_as_float(lo);
  double above = 0;
  int64_t above_count = 0, ties = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) {
    if (p[i] > threshold) {
      above += p[i];
      ++above_count;
    }
  }
  for (int64_t i = begin; i < end; ++i) ties += p[i] == threshold ? 1 : 0;
  const double mass_above = sum(above);
  const int64_t count_above = reduce_int(above_count, SumOp());
  // Ties at the threshold taken in token order: as many as reach the target (at least one
  // token in all); a zero threshold (top_p >= 1 or underflow) keeps every token.
  int64_t keep_ties = 0;
  int64_t ties_before = 0;
  IntScan(temp.int_scan).ExclusiveSum(ties, ties_before);
  __syncthreads();
  const int64_t all_ties = reduce_int(ties, SumOp());
  if (threshold > 0) {
    const double need = target - mass_above;
    keep_ties = need <= 0 ? 0 : static_cast<int64_t>(ceil(need / threshold));
    if (keep_ties > all_ties) keep_ties = all_ties;
    if (count_above + keep_ties == 0) keep_ties = 1;
  } else {
    keep_ties = all_ties;
  }
  const auto in_nucleus = [&](int64_t i, int64_t& tie_rank) {
    if (p[i] > threshold) return true;
    if (p[i] == threshold) return tie_rank++ < keep_ties;
    return false;
  };
  double chunk_mass = 0;
  int64_t rank = ties_before, last = -1;
  for (int64_t i = begin; i < end; ++i) {
    if (in_nucleus(i, rank)) {
      chunk_mass += p[i];
      last = i;
    }
  }
  double mass_before = 0;
  DoubleScan(temp.double_scan).ExclusiveSum(chunk_mass, mass_before);
  __syncthreads();
  const double kept = sum(chunk_mass);
  const double goal = uniforms[row] * kept;
  int64_t found = INT64_MAX;
  double running = mass_before;
  rank = ties_before;
  for (int64_t i = begin; i < end; ++i) {
    if (!in_nucleus(i, rank)) continue;
    running += p[i];
    if (running >= goal) {
      found = i;
      break;
    }
  }
  const int64_t first = reduce_int(found, MinOp());
  const int64_t last_kept = reduce_int(last, MaxOp());
  if (threadIdx.x == 0) {
    tokens[row] = static_cast<int32_t>(
        first != INT64_MAX ? first : (last_kept >= 0 ? last_kept : greedy.index));
  }
}

}  // namespace streamspark::runtime::cuda
