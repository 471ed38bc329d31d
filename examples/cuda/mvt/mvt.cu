// mvt: x1 = x1 + A * y1 and x2 = x2 + A^T * y2 for an N x N row-major float matrix A (IterML
// Table 1, from PolyBench), as two kernels with the same thread block. Both read A coalesced, in
// opposite roles: for A * y1 a block computes BLOCK_Y rows and the BLOCK_X threads of a row
// stride through its columns; for A^T * y2 a block computes BLOCK_X columns and the BLOCK_Y
// threads of a column stride through its rows. Partial sums meet in shared memory. Small integer
// inputs keep every sum exact in float, whatever the summation order: the result and the checksum
// do not depend on the configuration.
//
// Kernel mode launches one of the two kernels as main does, on generated inputs (uniform in
// [0, 1)) whose sums are rounded; name it: `annotune tune mvt.cu --kernel mvt_rows`
// (or `--kernel mvt_columns`; `--mode program` runs the program, both kernels, instead).
// Tuning one kernel tunes the block shape the two share for that one alone. BLOCK_X (mvt_rows)
// or BLOCK_Y (mvt_columns) sets the order of each sum's 8192 additions (1: one after another;
// the defaults 32 and 8: strided partial sums, then a tree), so two legal configurations'
// outputs differ in their last bits: by up to 4.2e-6 (mvt_rows) and 4.4e-6 (mvt_columns)
// relative between 1 and the default (float32 with fused multiply-adds emulated in numpy, every
// output, the inputs kernel mode makes under seed 0). Kernel mode's tolerance, 1e-5 relative,
// accepts them and still rejects a sum that lost one of its 8192 terms (about 1e-4 relative).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/example.cuh"

// Problem size (not tuned).
#ifndef N
#define N 8192
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

// The inner loops' unroll factor (nvcc does not macro-expand `#pragma unroll NAME`; _Pragma
// does).
#ifndef UNROLL
#define UNROLL 4 // @tune values(1, 2, 4, 8)
#endif

// The smallest power of two >= n: the first stride of a tree reduction over n values.
__host__ __device__ constexpr int pow2_ceil(int n) {
  return n <= 1 ? 1 : 2 * pow2_ceil((n + 1) / 2);
}

// x1[i] += sum_j A[i][j] * y1[j]: row i = blockIdx.x * BLOCK_Y + threadIdx.y.
#pragma annotune kernel mvt_rows grid((N + BLOCK_Y - 1) / BLOCK_Y) block(BLOCK_X, BLOCK_Y) \
    args(in(N * N), in(N), inout(N))
__global__ void mvt_rows(const float *__restrict__ a, const float *__restrict__ y1,
                         float *__restrict__ x1) {
  __shared__ float part[BLOCK_Y][BLOCK_X];
  const int lane = threadIdx.x, r = threadIdx.y;
  const int i = blockIdx.x * BLOCK_Y + r;
  float sum = 0.0f;
  if (i < N) {
    AT_PRAGMA(unroll UNROLL)
    for (int j = lane; j < N; j += BLOCK_X) sum += a[size_t(i) * N + j] * y1[j];
  }
  part[r][lane] = sum;
  __syncthreads();
  for (int s = pow2_ceil(BLOCK_X) / 2; s > 0; s /= 2) {
    if (lane < s && lane + s < BLOCK_X) part[r][lane] += part[r][lane + s];
    __syncthreads();
  }
  if (lane == 0 && i < N) x1[i] += part[r][0];
}

// x2[i] += sum_j A[j][i] * y2[j]: column i = blockIdx.x * BLOCK_X + threadIdx.x.
#pragma annotune kernel mvt_columns grid((N + BLOCK_X - 1) / BLOCK_X) block(BLOCK_X, BLOCK_Y) \
    args(in(N * N), in(N), inout(N))
__global__ void mvt_columns(const float *__restrict__ a, const float *__restrict__ y2,
                            float *__restrict__ x2) {
  __shared__ float part[BLOCK_Y][BLOCK_X];
  const int c = threadIdx.x, lane = threadIdx.y;
  const int i = blockIdx.x * BLOCK_X + c;
  float sum = 0.0f;
  if (i < N) {
    AT_PRAGMA(unroll UNROLL)
    for (int j = lane; j < N; j += BLOCK_Y) sum += a[size_t(j) * N + i] * y2[j];
  }
  part[lane][c] = sum;
  __syncthreads();
  for (int s = pow2_ceil(BLOCK_Y) / 2; s > 0; s /= 2) {
    if (lane < s && lane + s < BLOCK_Y) part[lane][c] += part[lane + s][c];
    __syncthreads();
  }
  if (lane == 0 && i < N) x2[i] += part[0][c];
}

// A deterministic small integer in [-2, 2].
static float small_int(unsigned index, unsigned seed) {
  return float(((index * 2654435761u + seed * 40503u) >> 13) % 5) - 2.0f;
}

int main() {
  const size_t n2 = size_t(N) * N, vec = N * sizeof(float);
  std::vector<float> a(n2), y1(N), y2(N), x1_0(N), x2_0(N), x1(N), x2(N);
  for (size_t e = 0; e < n2; ++e) a[e] = small_int(unsigned(e), 1);
  for (int i = 0; i < N; ++i) {
    y1[i] = small_int(unsigned(i), 2);
    y2[i] = small_int(unsigned(i), 3);
    x1_0[i] = small_int(unsigned(i), 4);
    x2_0[i] = small_int(unsigned(i), 5);
  }
  float *da, *dy1, *dy2, *dx1, *dx2;
  CUDA_CHECK(cudaMalloc(&da, n2 * sizeof(float)));
  for (float **p : {&dy1, &dy2, &dx1, &dx2}) CUDA_CHECK(cudaMalloc(p, vec));
  CUDA_CHECK(cudaMemcpy(da, a.data(), n2 * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dy1, y1.data(), vec, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dy2, y2.data(), vec, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dx1, x1_0.data(), vec, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dx2, x2_0.data(), vec, cudaMemcpyHostToDevice));

  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 row_grid((N + BLOCK_Y - 1) / BLOCK_Y), column_grid((N + BLOCK_X - 1) / BLOCK_X);
  mvt_rows<<<row_grid, block>>>(da, dy1, dx1);  // warm-up; fails here on a bad block shape
  CUDA_CHECK(cudaGetLastError());
  mvt_columns<<<column_grid, block>>>(da, dy2, dx2);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  // x1 and x2 are updated in place: start again from the same vectors.
  CUDA_CHECK(cudaMemcpy(dx1, x1_0.data(), vec, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dx2, x2_0.data(), vec, cudaMemcpyHostToDevice));

  ANNOTUNE_TIMER_START();
  mvt_rows<<<row_grid, block>>>(da, dy1, dx1);
  mvt_columns<<<column_grid, block>>>(da, dy2, dx2);
  ANNOTUNE_TIMER_STOP();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(x1.data(), dx1, vec, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(x2.data(), dx2, vec, cudaMemcpyDeviceToHost));

  // Check every entry of x1 and x2 against a double-precision reference.
  std::vector<double> want1(x1_0.begin(), x1_0.end()), want2(x2_0.begin(), x2_0.end());
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      want1[i] += double(a[size_t(i) * N + j]) * y1[j];
      want2[j] += double(a[size_t(i) * N + j]) * y2[i];
    }
  double checksum = 0.0;
  for (int i = 0; i < N; ++i) {
    if (std::fabs(x1[i] - want1[i]) > 1e-4 * std::fabs(want1[i]) + 1e-3 ||
        std::fabs(x2[i] - want2[i]) > 1e-4 * std::fabs(want2[i]) + 1e-3) {
      std::fprintf(stderr, "mvt: wrong x1[%d] = %g or x2[%d] = %g, expected %g and %g\n", i,
                   x1[i], i, x2[i], want1[i], want2[i]);
      return 1;
    }
    checksum += double(x1[i]) + x2[i];
  }
  annotune_report_check(checksum);
  for (float *p : {da, dy1, dy2, dx1, dx2}) CUDA_CHECK(cudaFree(p));
  return 0;
}
