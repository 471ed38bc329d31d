// 3mm: G = (A * B) * (C * D) for N x N row-major float matrices (IterML Table 1, from PolyBench),
// as three kernels: E = A * B, F = C * D, G = E * F. All three use the same thread block, one
// thread per output entry: x walks the columns (coalesced), y the rows. Inputs in {-1, 0, 1}
// keep every sum exact in float (the largest |E| |F| sum is far below 2^24): the result and the
// checksum do not depend on the configuration.
//
// Kernel mode (`annotune tune 3mm.cu`; `--mode program` runs the program instead) launches
// matmul as main does three times, with the same grid, block and kinds of arguments. Inputs are
// generated (uniform in [0, 1): sums are rounded), but every configuration sums each entry over
// k in the same order (blocks and unrolling change neither the order nor the fused
// multiply-adds), so outputs agree bit for bit and the default tolerance holds.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/example.cuh"

// Problem size (not tuned).
#ifndef N
#define N 1024
#endif

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

// out = x * y
#pragma annotune kernel matmul grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y) \
    block(BLOCK_X, BLOCK_Y) args(in(N * N), in(N * N), out(N * N))
__global__ void matmul(const float *__restrict__ x, const float *__restrict__ y,
                       float *__restrict__ out) {
  const int j = blockIdx.x * BLOCK_X + threadIdx.x;
  const int i = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (i >= N || j >= N) return;
  float sum = 0.0f;
  AT_PRAGMA(unroll UNROLL)
  for (int k = 0; k < N; ++k) sum += x[i * N + k] * y[k * N + j];
  out[i * N + j] = sum;
}

// A deterministic value in {-1, 0, 1}.
static float unit_int(unsigned index, unsigned seed) {
  return float(((index * 2654435761u + seed * 40503u) >> 13) % 3) - 1.0f;
}

static bool agrees(double got, double want) {
  return std::fabs(got - want) <= 1e-4 * std::fabs(want) + 1e-3;
}

int main() {
  const size_t n2 = size_t(N) * N, bytes = n2 * sizeof(float);
  std::vector<float> a(n2), b(n2), c(n2), d(n2), e(n2), f(n2), g(n2);
  for (size_t x = 0; x < n2; ++x) {
    a[x] = unit_int(unsigned(x), 1);
    b[x] = unit_int(unsigned(x), 2);
    c[x] = unit_int(unsigned(x), 3);
    d[x] = unit_int(unsigned(x), 4);
  }
  float *da, *db, *dc, *dd, *de, *df, *dg;
  for (float **p : {&da, &db, &dc, &dd, &de, &df, &dg}) CUDA_CHECK(cudaMalloc(p, bytes));
  CUDA_CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dc, c.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dd, d.data(), bytes, cudaMemcpyHostToDevice));

  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y);
  matmul<<<grid, block>>>(da, db, de);  // warm-up; fails here on a bad block shape
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());

  ANNOTUNE_TIMER_START();
  matmul<<<grid, block>>>(da, db, de);
  matmul<<<grid, block>>>(dc, dd, df);
  matmul<<<grid, block>>>(de, df, dg);
  ANNOTUNE_TIMER_STOP();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(e.data(), de, bytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(f.data(), df, bytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(g.data(), dg, bytes, cudaMemcpyDeviceToHost));

  // Check whole rows of E and G and whole columns of F (the first, the last and some between)
  // against double-precision references; G's reference uses the device's F.
  const int lines[] = {0, 1, N / 3, N / 2, N / 2 + 1, N - 2, N - 1};
  std::vector<double> e_row(N);
  for (int l : lines) {
    for (int k = 0; k < N; ++k) {
      double ab = 0.0, cd = 0.0;
      for (int m = 0; m < N; ++m) {
        ab += double(a[size_t(l) * N + m]) * b[size_t(m) * N + k];
        cd += double(c[size_t(k) * N + m]) * d[size_t(m) * N + l];
      }
      e_row[k] = ab;
      if (!agrees(e[size_t(l) * N + k], ab) || !agrees(f[size_t(k) * N + l], cd)) {
        std::fprintf(stderr, "3mm: wrong E[%d][%d] or F[%d][%d]\n", l, k, k, l);
        return 1;
      }
    }
    for (int j = 0; j < N; ++j) {
      double want = 0.0;
      for (int k = 0; k < N; ++k) want += e_row[k] * f[size_t(k) * N + j];
      if (!agrees(g[size_t(l) * N + j], want)) {
        std::fprintf(stderr, "3mm: wrong G[%d][%d] = %g, expected %g\n", l, j,
                     g[size_t(l) * N + j], want);
        return 1;
      }
    }
  }
  double checksum = 0.0;
  for (size_t x = 0; x < n2; ++x) checksum += g[x];
  annotune_report_check(checksum);
  for (float *p : {da, db, dc, dd, de, df, dg}) CUDA_CHECK(cudaFree(p));
  return 0;
}
