// gesummv: y = alpha * A * x + beta * B * x for N x N row-major float matrices (IterML Table 1,
// from PolyBench). A block of BLOCK_X x BLOCK_Y threads computes BLOCK_Y rows: the BLOCK_X
// threads of a row stride through its columns together (coalesced loads) and add up their
// partial sums in shared memory. BLOCK_X = 1 is one thread per row; BLOCK_X = 32, a warp per row.
// Small integer inputs and binary-fraction alpha, beta keep every sum exact in float, whatever
// the summation order: the result and the checksum do not depend on the configuration.
//
// Kernel mode (`annotune tune gesummv.cu`; `--mode program` runs the program
// instead) launches gesummv as main does, on generated inputs (uniform in [0, 1)) whose sums
// are rounded. BLOCK_X sets the order of each row's 8192 additions (1: one after another; the
// default 32: 32 strided partial sums, then a tree), so two legal configurations' outputs differ
// in their last bits: by up to 3.5e-6 relative between BLOCK_X = 1 and the default (float32 with
// fused multiply-adds emulated in numpy, every row, the inputs kernel mode makes under seed 0).
// Kernel mode's tolerance, 1e-5 relative, accepts them and still rejects a row that lost one
// of its 8192 terms (about 1e-4 relative).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/example.cuh"

// Problem size (not tuned).
#ifndef N
#define N 8192
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

// The column loop's unroll factor (nvcc does not macro-expand `#pragma unroll NAME`; _Pragma
// does).
#ifndef UNROLL
#define UNROLL 4 // @tune values(1, 2, 4, 8)
#endif

// The smallest power of two >= n: the first stride of a tree reduction over n values.
__host__ __device__ constexpr int pow2_ceil(int n) {
  return n <= 1 ? 1 : 2 * pow2_ceil((n + 1) / 2);
}

#pragma annotune kernel gesummv grid((N + BLOCK_Y - 1) / BLOCK_Y) block(BLOCK_X, BLOCK_Y) \
    args(in(N * N), in(N * N), in(N), out(N), ALPHA, BETA)
__global__ void gesummv(const float *__restrict__ a, const float *__restrict__ b,
                        const float *__restrict__ x, float *__restrict__ y, float alpha,
                        float beta) {
  __shared__ float part_a[BLOCK_Y][BLOCK_X], part_b[BLOCK_Y][BLOCK_X];
  const int lane = threadIdx.x, r = threadIdx.y;
  const int i = blockIdx.x * BLOCK_Y + r;
  float sum_a = 0.0f, sum_b = 0.0f;
  if (i < N) {
    const float *row_a = a + size_t(i) * N, *row_b = b + size_t(i) * N;
    AT_PRAGMA(unroll UNROLL)
    for (int j = lane; j < N; j += BLOCK_X) {
      sum_a += row_a[j] * x[j];
      sum_b += row_b[j] * x[j];
    }
  }
  part_a[r][lane] = sum_a;
  part_b[r][lane] = sum_b;
  __syncthreads();
  for (int s = pow2_ceil(BLOCK_X) / 2; s > 0; s /= 2) {
    if (lane < s && lane + s < BLOCK_X) {
      part_a[r][lane] += part_a[r][lane + s];
      part_b[r][lane] += part_b[r][lane + s];
    }
    __syncthreads();
  }
  if (lane == 0 && i < N) y[i] = alpha * part_a[r][0] + beta * part_b[r][0];
}

// A deterministic small integer in [-2, 2].
static float small_int(unsigned index, unsigned seed) {
  return float(((index * 2654435761u + seed * 40503u) >> 13) % 5) - 2.0f;
}

int main() {
  const size_t n2 = size_t(N) * N;
  const float alpha = ALPHA, beta = BETA;
  std::vector<float> a(n2), b(n2), x(N), y(N);
  for (size_t e = 0; e < n2; ++e) {
    a[e] = small_int(unsigned(e), 1);
    b[e] = small_int(unsigned(e), 2);
  }
  for (int j = 0; j < N; ++j) x[j] = small_int(unsigned(j), 3);
  float *da, *db, *dx, *dy;
  CUDA_CHECK(cudaMalloc(&da, n2 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&db, n2 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dx, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dy, N * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(da, a.data(), n2 * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, b.data(), n2 * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dx, x.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dy, 0, N * sizeof(float)));

  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((N + BLOCK_Y - 1) / BLOCK_Y);
  gesummv<<<grid, block>>>(da, db, dx, dy, alpha, beta);  // warm-up; fails on a bad block shape
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemset(dy, 0, N * sizeof(float)));

  ANNOTUNE_TIMER_START();
  gesummv<<<grid, block>>>(da, db, dx, dy, alpha, beta);
  ANNOTUNE_TIMER_STOP();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(y.data(), dy, N * sizeof(float), cudaMemcpyDeviceToHost));

  // Check every entry of y against a double-precision reference.
  for (int i = 0; i < N; ++i) {
    double sum_a = 0.0, sum_b = 0.0;
    for (int j = 0; j < N; ++j) {
      sum_a += double(a[size_t(i) * N + j]) * x[j];
      sum_b += double(b[size_t(i) * N + j]) * x[j];
    }
    const double want = alpha * sum_a + beta * sum_b;
    if (std::fabs(y[i] - want) > 1e-4 * std::fabs(want) + 1e-3) {
      std::fprintf(stderr, "gesummv: wrong y[%d] = %g, expected %g\n", i, y[i], want);
      return 1;
    }
  }
  double checksum = 0.0;
  for (int i = 0; i < N; ++i) checksum += y[i];
  annotune_report_check(checksum);
  for (float *p : {da, db, dx, dy}) CUDA_CHECK(cudaFree(p));
  return 0;
}
