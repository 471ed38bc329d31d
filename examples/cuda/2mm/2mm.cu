// 2mm: D = alpha * A * B * C + beta * D for N x N row-major float matrices (IterML Table 1, from
// PolyBench), as two kernels: T = alpha * A * B, then D = T * C + beta * D. Both use the same
// thread block, one thread per output entry: x walks the columns (coalesced), y the rows.
// Inputs in {-1, 0, 1} and binary-fraction alpha, beta keep every sum exact in float: the result
// and the checksum do not depend on the configuration.
//
// Kernel mode (`annotune tune 2mm.cu`; `--mode program` runs the program instead) launches one
// matmul: the second of main's two, D = T * C + beta * D, which also reads D. Both launches run
// the same code with the same grid and block, so what is fastest for one is for the other; a
// pragma is per kernel, and main's two differ only in their arguments. Inputs are generated
// (uniform in [0, 1): sums are rounded), but every configuration sums each entry over k in the
// same order (blocks and unrolling change neither the order nor the fused multiply-adds), so
// outputs agree bit for bit and the default tolerance holds.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/example.cuh"

// Problem size (not tuned).
#ifndef N
#define N 1024
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

// The k loops' unroll factor. nvcc does not macro-expand `#pragma unroll NAME`; _Pragma does.
#ifndef UNROLL
#define UNROLL 4 // @tune values(1, 2, 4, 8)
#endif

// out = scale * x * y + beta * out (beta == 0: out is only written).
#pragma annotune kernel matmul grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y) \
    block(BLOCK_X, BLOCK_Y) args(in(N * N), in(N * N), inout(N * N), 1.0f, BETA)
__global__ void matmul(const float *__restrict__ x, const float *__restrict__ y,
                       float *__restrict__ out, float scale, float beta) {
  const int j = blockIdx.x * BLOCK_X + threadIdx.x;
  const int i = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (i >= N || j >= N) return;
  float sum = 0.0f;
  AT_PRAGMA(unroll UNROLL)
  for (int k = 0; k < N; ++k) sum += x[i * N + k] * y[k * N + j];
  out[i * N + j] = beta == 0.0f ? scale * sum : scale * sum + beta * out[i * N + j];
}

// A deterministic value in {-1, 0, 1}.
static float unit_int(unsigned index, unsigned seed) {
  return float(((index * 2654435761u + seed * 40503u) >> 13) % 3) - 1.0f;
}

int main() {
  const size_t n2 = size_t(N) * N, bytes = n2 * sizeof(float);
  const float alpha = ALPHA, beta = BETA;
  std::vector<float> a(n2), b(n2), c(n2), d0(n2), d(n2);
  for (size_t e = 0; e < n2; ++e) {
    a[e] = unit_int(unsigned(e), 1);
    b[e] = unit_int(unsigned(e), 2);
    c[e] = unit_int(unsigned(e), 3);
    d0[e] = 2.0f * unit_int(unsigned(e), 4);
  }
  float *da, *db, *dc, *dd, *dt;
  for (float **p : {&da, &db, &dc, &dd, &dt}) CUDA_CHECK(cudaMalloc(p, bytes));
  CUDA_CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dc, c.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dd, d0.data(), bytes, cudaMemcpyHostToDevice));

  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y);
  matmul<<<grid, block>>>(da, db, dt, alpha, 0.0f);  // warm-up; fails here on a bad block shape
  CUDA_CHECK(cudaGetLastError());
  matmul<<<grid, block>>>(dt, dc, dd, 1.0f, beta);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(dd, d0.data(), bytes, cudaMemcpyHostToDevice));  // D is updated in place

  ANNOTUNE_TIMER_START();
  matmul<<<grid, block>>>(da, db, dt, alpha, 0.0f);
  matmul<<<grid, block>>>(dt, dc, dd, 1.0f, beta);
  ANNOTUNE_TIMER_STOP();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(d.data(), dd, bytes, cudaMemcpyDeviceToHost));

  // Check whole rows of D (the first, the last and some between; each row of D covers every
  // column block) against a double-precision reference.
  std::vector<double> t_row(N);
  const int rows[] = {0, 1, N / 3, N / 2, N / 2 + 1, N - 2, N - 1};
  for (int i : rows) {
    for (int k = 0; k < N; ++k) {
      double sum = 0.0;
      for (int l = 0; l < N; ++l) sum += double(a[size_t(i) * N + l]) * b[size_t(l) * N + k];
      t_row[k] = alpha * sum;
    }
    for (int j = 0; j < N; ++j) {
      double sum = 0.0;
      for (int k = 0; k < N; ++k) sum += t_row[k] * c[size_t(k) * N + j];
      const double want = sum + beta * double(d0[size_t(i) * N + j]), got = d[size_t(i) * N + j];
      if (std::fabs(got - want) > 1e-4 * std::fabs(want) + 1e-3) {
        std::fprintf(stderr, "2mm: wrong D[%d][%d] = %g, expected %g\n", i, j, got, want);
        return 1;
      }
    }
  }
  double checksum = 0.0;
  for (size_t e = 0; e < n2; ++e) checksum += d[e];
  annotune_report_check(checksum);
  for (float *p : {da, db, dc, dd, dt}) CUDA_CHECK(cudaFree(p));
  return 0;
}
