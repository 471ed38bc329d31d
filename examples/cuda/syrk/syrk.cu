// syrk: C = alpha * A * A^T + beta * C, A N x M, C N x N, row-major floats (IterML Table 1, from
// PolyBench); the whole N x N matrix C is updated. One thread per entry of C: x walks the
// columns j, y the rows i. Thread (i, j) reads rows i and j of A, so the x neighbours in a warp
// read M floats apart: the block shape decides how much of each cache line is used.
// Small integer inputs and binary-fraction alpha, beta keep every sum exact in float: the result
// and the checksum do not depend on the configuration.
//
// Kernel mode (`annotune tune syrk.cu`; `--mode program` runs the program instead) launches
// syrk as main does on generated inputs (uniform in [0, 1): sums are rounded). Every
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
#define N 1024
#endif
#ifndef M
#define M 1024
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

#pragma annotune kernel syrk grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y) \
    block(BLOCK_X, BLOCK_Y) args(in(N * M), inout(N * N), ALPHA, BETA)
__global__ void syrk(const float *__restrict__ a, float *__restrict__ c, float alpha,
                     float beta) {
  const int j = blockIdx.x * BLOCK_X + threadIdx.x;
  const int i = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (i >= N || j >= N) return;
  float sum = 0.0f;
  AT_PRAGMA(unroll UNROLL)
  for (int k = 0; k < M; ++k) sum += a[i * M + k] * a[j * M + k];
  c[i * N + j] = alpha * sum + beta * c[i * N + j];
}

// A deterministic small integer in [-2, 2].
static float small_int(unsigned index, unsigned seed) {
  return float(((index * 2654435761u + seed * 40503u) >> 13) % 5) - 2.0f;
}

int main() {
  const size_t a_size = size_t(N) * M, c_size = size_t(N) * N;
  const float alpha = ALPHA, beta = BETA;
  std::vector<float> a(a_size), c0(c_size), c(c_size);
  for (size_t e = 0; e < a_size; ++e) a[e] = small_int(unsigned(e), 1);
  for (size_t e = 0; e < c_size; ++e) c0[e] = small_int(unsigned(e), 2);
  float *da, *dc;
  CUDA_CHECK(cudaMalloc(&da, a_size * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dc, c_size * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(da, a.data(), a_size * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dc, c0.data(), c_size * sizeof(float), cudaMemcpyHostToDevice));

  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y);
  syrk<<<grid, block>>>(da, dc, alpha, beta);  // warm-up; fails here on a bad block shape
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  // C is updated in place: start again from the same C.
  CUDA_CHECK(cudaMemcpy(dc, c0.data(), c_size * sizeof(float), cudaMemcpyHostToDevice));

  ANNOTUNE_TIMER_START();
  syrk<<<grid, block>>>(da, dc, alpha, beta);
  ANNOTUNE_TIMER_STOP();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(c.data(), dc, c_size * sizeof(float), cudaMemcpyDeviceToHost));

  // Check the last row and column in full (partial blocks), a few more rows, and a sample.
  for (int s = 0; s < 8 * N; ++s) {
    const int line = s / N, u = s % N;
    const int rows[] = {N - 1, 0, 1, N / 3, N / 2, N - 2};
    const int i = line < 6 ? rows[line] : line == 6 ? u : int((s * 37ull) % N);
    const int j = line < 6 ? u : line == 6 ? N - 1 : int((s * 101ull) % N);
    double sum = 0.0;
    for (int k = 0; k < M; ++k) sum += double(a[size_t(i) * M + k]) * a[size_t(j) * M + k];
    const double want = alpha * sum + beta * double(c0[size_t(i) * N + j]);
    const double got = c[size_t(i) * N + j];
    if (std::fabs(got - want) > 1e-4 * std::fabs(want) + 1e-3) {
      std::fprintf(stderr, "syrk: wrong C[%d][%d] = %g, expected %g\n", i, j, got, want);
      return 1;
    }
  }
  double checksum = 0.0;
  for (size_t e = 0; e < c_size; ++e) checksum += c[e];
  annotune_report_check(checksum);
  CUDA_CHECK(cudaFree(da));
  CUDA_CHECK(cudaFree(dc));
  return 0;
}
