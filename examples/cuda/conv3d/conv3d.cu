// conv3d: a 3x3x3 convolution of an N x N x N float volume (IterML Table 1's 3dconv, from
// PolyBench). B[i][j][k] = sum over di, dj, dk in {-1, 0, 1} of W[di][dj][dk] * A[i+di][j+dj][k+dk]
// for the interior points; the faces of B stay 0. x walks k (contiguous, coalesced), y walks j;
// each thread computes PLANES_PER_THREAD consecutive planes i. Integer inputs and binary-fraction
// weights make every sum exact: the checksum is the same for every configuration.
//
// Kernel mode (`annotune tune conv3d.cu`; `--mode program` runs the program instead) launches
// conv3d as main does on generated inputs (uniform in [0, 1)). Each output point is the same
// 27-term sum in the same order whatever the configuration (planes per thread only change which
// thread computes it), so outputs agree bit for bit and the default tolerance holds.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/example.cuh"

// Problem size (not tuned): the volume is N^3.
#ifndef N
#define N 384
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

// Work per thread: consecutive planes i computed by each thread (grid.z = N / PLANES_PER_THREAD).
#ifndef PLANES_PER_THREAD
#define PLANES_PER_THREAD 1 // @tune values(1, 2, 4, 8, 16)
#endif

// The 27 weights, W[di+1][dj+1][dk+1] at index 9 * (di+1) + 3 * (dj+1) + (dk+1). The constant
// memory is initialized where it is defined, not copied in by main, so that kernel mode, which
// launches conv3d without main, convolves with them too (not with zeros).
__host__ __device__ constexpr float host_weight(int t) { return float((t * 5) % 9 - 4) * 0.125f; }
struct Weights {
  float w[27];
};
__host__ __device__ constexpr Weights all_weights() {
  Weights all{};
  for (int t = 0; t < 27; ++t) all.w[t] = host_weight(t);
  return all;
}
__constant__ Weights weights = all_weights();

#pragma annotune kernel conv3d grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y, \
                                    (N + PLANES_PER_THREAD - 1) / PLANES_PER_THREAD) \
    block(BLOCK_X, BLOCK_Y) args(in(N * N * N), out(N * N * N))

__global__ void conv3d(const float *__restrict__ a, float *__restrict__ b) {
  const int k = blockIdx.x * BLOCK_X + threadIdx.x;
  const int j = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (k < 1 || k >= N - 1 || j < 1 || j >= N - 1) return;
  const int plane = N * N;
  for (int p = 0; p < PLANES_PER_THREAD; ++p) {
    const int i = blockIdx.z * PLANES_PER_THREAD + p;
    if (i < 1 || i >= N - 1) continue;
    const float *centre = a + size_t(i) * plane + j * N + k;
    float sum = 0.0f;
#pragma unroll
    for (int t = 0; t < 27; ++t)
      sum += weights.w[t] * centre[(t / 9 - 1) * plane + (t / 3 % 3 - 1) * N + (t % 3 - 1)];
    b[size_t(i) * plane + j * N + k] = sum;
  }
}

// The CPU reference of one output point (0 on the faces).
static double reference(const std::vector<float> &a, int i, int j, int k) {
  if (i < 1 || i >= N - 1 || j < 1 || j >= N - 1 || k < 1 || k >= N - 1) return 0.0;
  double sum = 0.0;
  for (int t = 0; t < 27; ++t)
    sum += double(host_weight(t)) *
           a[(size_t(i + t / 9 - 1) * N + (j + t / 3 % 3 - 1)) * N + (k + t % 3 - 1)];
  return sum;
}

int main() {
  const size_t points = size_t(N) * N * N, bytes = points * sizeof(float);
  std::vector<float> a(points), b(points);
  for (size_t e = 0; e < points; ++e) a[e] = float(((e * 2654435761u) >> 11) % 16);
  float *da, *db;
  CUDA_CHECK(cudaMalloc(&da, bytes));
  CUDA_CHECK(cudaMalloc(&db, bytes));
  CUDA_CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(db, 0, bytes));

  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (N + BLOCK_Y - 1) / BLOCK_Y,
                  (N + PLANES_PER_THREAD - 1) / PLANES_PER_THREAD);
  conv3d<<<grid, block>>>(da, db);  // warm-up; fails here on a bad block shape
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());

  ANNOTUNE_TIMER_START();
  conv3d<<<grid, block>>>(da, db);
  ANNOTUNE_TIMER_STOP();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(b.data(), db, bytes, cudaMemcpyDeviceToHost));

  // Check the planes at both ends of each axis in full, and a scattered sample.
  int bad = 0;
  const auto check = [&](int i, int j, int k) {
    const double want = reference(a, i, j, k), got = b[(size_t(i) * N + j) * N + k];
    if (std::fabs(got - want) > 1e-4 * std::fabs(want) + 1e-3 && bad++ == 0)
      std::fprintf(stderr, "conv3d: wrong B[%d][%d][%d] = %g, expected %g\n", i, j, k, got, want);
  };
  const int ends[] = {0, 1, N - 2, N - 1};
  for (int e : ends)
    for (int u = 0; u < N; ++u)
      for (int v = 0; v < N; ++v) {
        check(e, u, v);
        check(u, e, v);
        check(u, v, e);
      }
  for (int s = 0; s < 1 << 18; ++s)
    check(int((s * 7919ull) % N), int((s * 104729ull) % N), int((s * 15485863ull) % N));
  if (bad) return 1;
  double checksum = 0.0;
  for (size_t e = 0; e < points; ++e) checksum += b[e];
  annotune_report_check(checksum);
  CUDA_CHECK(cudaFree(da));
  CUDA_CHECK(cudaFree(db));
  return 0;
}
