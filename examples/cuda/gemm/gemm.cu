// gemm: C = alpha * A * B + beta * C for N x N row-major float matrices (IterML Table 1, from
// PolyBench). One thread per entry of C: x walks the columns j (coalesced loads of B and C),
// y the rows i. The inputs are small integers and alpha, beta short binary fractions, so every
// sum is exact in float: the result, and the checksum, do not depend on the configuration.
//
// Kernel mode (`annotune tune gemm.cu`; `--mode program` runs the program instead) launches
// gemm as main does on generated inputs (uniform in [0, 1): sums are rounded). Every
// configuration sums each entry of C over k in the same order (blocks and unrolling change
// neither the order nor the fused multiply-adds), so outputs agree bit for bit and the default
// tolerance holds.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/example.cuh"

// Problem size (not tuned).
#ifndef N
#define N 2048
#endif
#define ALPHA 1.5f
#define BETA 1.25f

// Tunables, guarded so that `-D` and annotune's force-included header override them. The block
// shape is tuned as in the IterML paper: x and y from 1 to 1024 with x*y <= 1024 (7,262 legal
// shapes out of 1,048,576).
#ifndef BLOCK_X
#define BLOCK_X 32 // @tune range(1, 1024)
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8 // @tune range(1, 1024)
#endif
#pragma annotune constraint BLOCK_X * BLOCK_Y <= 1024

// The k loop's unroll factor. nvcc does not macro-expand `#pragma unroll NAME`; _Pragma does.
#ifndef UNROLL
#define UNROLL 4 // @tune values(1, 2, 4, 8)
#endif

#pragma annotune kernel gemm grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y) \
    block(BLOCK_X, BLOCK_Y) args(in(N * N), in(N * N), inout(N * N), ALPHA, BETA)
__global__ void gemm(const float *__restrict__ a, const float *__restrict__ b,
                     float *__restrict__ c, float alpha, float beta) {
  const int j = blockIdx.x * BLOCK_X + threadIdx.x;
  const int i = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (i >= N || j >= N) return;
  float sum = 0.0f;
  AT_PRAGMA(unroll UNROLL)
  for (int k = 0; k < N; ++k) sum += a[i * N + k] * b[k * N + j];
  c[i * N + j] = alpha * sum + beta * c[i * N + j];
}

// A deterministic small integer in [-2, 2].
static float small_int(unsigned index, unsigned seed) {
  return float(((index * 2654435761u + seed * 40503u) >> 13) % 5) - 2.0f;
}

int main() {
  const size_t n2 = size_t(N) * N, bytes = n2 * sizeof(float);
  const float alpha = ALPHA, beta = BETA;
  std::vector<float> a(n2), b(n2), c0(n2), c(n2);
  for (size_t e = 0; e < n2; ++e) {
    a[e] = small_int(unsigned(e), 1);
    b[e] = small_int(unsigned(e), 2);
    c0[e] = small_int(unsigned(e), 3);
  }
  float *da, *db, *dc;
  CUDA_CHECK(cudaMalloc(&da, bytes));
  CUDA_CHECK(cudaMalloc(&db, bytes));
  CUDA_CHECK(cudaMalloc(&dc, bytes));
  CUDA_CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dc, c0.data(), bytes, cudaMemcpyHostToDevice));

  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y);
  gemm<<<grid, block>>>(da, db, dc, alpha, beta);  // warm-up; fails here on a bad block shape
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(dc, c0.data(), bytes, cudaMemcpyHostToDevice));  // C is updated in place

  ANNOTUNE_TIMER_START();
  gemm<<<grid, block>>>(da, db, dc, alpha, beta);
  ANNOTUNE_TIMER_STOP();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));

  // Check the last row and column in full (partial blocks) and a scattered sample.
  for (int s = 0; s < 3 * N; ++s) {
    const int i = s < N ? N - 1 : s < 2 * N ? s - N : int((s * 37ull) % N);
    const int j = s < N ? s : s < 2 * N ? N - 1 : int((s * 101ull) % N);
    double sum = 0.0;
    for (int k = 0; k < N; ++k) sum += double(a[size_t(i) * N + k]) * b[size_t(k) * N + j];
    const double want = alpha * sum + beta * double(c0[size_t(i) * N + j]);
    const double got = c[size_t(i) * N + j];
    if (std::fabs(got - want) > 1e-4 * std::fabs(want) + 1e-3) {
      std::fprintf(stderr, "gemm: wrong C[%d][%d] = %g, expected %g\n", i, j, got, want);
      return 1;
    }
  }
  double checksum = 0.0;
  for (size_t e = 0; e < n2; ++e) checksum += c[e];
  annotune_report_check(checksum);
  CUDA_CHECK(cudaFree(da));
  CUDA_CHECK(cudaFree(db));
  CUDA_CHECK(cudaFree(dc));
  return 0;
}
