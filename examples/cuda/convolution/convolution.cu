// convolution: a 2D convolution of an IMAGE_HEIGHT x IMAGE_WIDTH float image with a
// filter_height x filter_width filter. The input is the image with its border already added
// ((IMAGE_HEIGHT + filter_height - 1) x (IMAGE_WIDTH + filter_width - 1)), so every output point
// reads a full window: out[y][x] = sum over fy, fx of filter[fy][fx] * in[y + fy][x + fx].
//
// The tunables carry the names and values of the recorded convolution runs in
// ../shared/data/replay/convolution_*.json.gz, and the constraints are the ones those runs obey,
// so `annotune predict --transfer-from` can learn this space from them. Each thread computes
// tile_size_x x tile_size_y outputs, block_size_x and block_size_y apart. use_shmem stages the
// block's input window in shared memory (use_padding widens its rows by one to spread them over
// the banks); read_only reads the input through the read-only cache; the filter lives in
// constant memory (use_cmem, the only value recorded).
//
// Integer inputs and weights of k/64 make every sum exact in float: the checksum is the same for
// every configuration.
//
// Kernel mode (`annotune tune convolution.cu`; `--mode program` runs the program instead) launches
// convolution as main does on generated inputs (uniform in [0, 1)). Each output point is summed
// over fy, fx in the same order whatever the configuration (tiles, shared memory and the
// read-only path only change who computes it and where the inputs come from), so outputs agree
// bit for bit and the default tolerance holds.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "../common/example.cuh"

// Problem size (not tuned).
#ifndef IMAGE_WIDTH
#define IMAGE_WIDTH 4096
#endif
#ifndef IMAGE_HEIGHT
#define IMAGE_HEIGHT 4096
#endif

#ifndef block_size_x
#define block_size_x 16 // @tune values(16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256)
#endif
#ifndef block_size_y
#define block_size_y 16 // @tune values(1, 2, 4, 8, 16)
#endif
#ifndef tile_size_x
#define tile_size_x 1 // @tune values(1, 2, 3, 4)
#endif
#ifndef tile_size_y
#define tile_size_y 1 // @tune values(1, 2, 3, 4)
#endif
#ifndef read_only
#define read_only 0 // @tune values(0, 1)
#endif
#ifndef use_padding
#define use_padding 0 // @tune values(0, 1)
#endif
#ifndef use_shmem
#define use_shmem 1 // @tune values(0, 1)
#endif
#ifndef use_cmem
#define use_cmem 1 // @tune values(1)
#endif
#ifndef filter_height
#define filter_height 15 // @tune values(15)
#endif
#ifndef filter_width
#define filter_width 15 // @tune values(15)
#endif
#pragma annotune constraint block_size_x * block_size_y <= 1024
#pragma annotune constraint use_padding == 0 || (use_shmem == 1 && block_size_x % 32 != 0)
#pragma annotune constraint use_shmem == 0 || (block_size_x * tile_size_x + filter_width - 1) * (block_size_y * tile_size_y + filter_height - 1) * 4 <= 49152

#define INPUT_WIDTH (IMAGE_WIDTH + filter_width - 1)
#define INPUT_HEIGHT (IMAGE_HEIGHT + filter_height - 1)
#define WINDOW_WIDTH (block_size_x * tile_size_x + filter_width - 1)
#define WINDOW_HEIGHT (block_size_y * tile_size_y + filter_height - 1)
// The outputs one block computes in x and in y.
#define BLOCK_COLUMNS (block_size_x * tile_size_x)
#define BLOCK_ROWS (block_size_y * tile_size_y)

// The filter's weights, k/64 for k in [-8, 8].
__host__ __device__ constexpr float filter_weight(unsigned e) {
  return float(int((e * 40503u) % 17) - 8) / 64.0f;
}

#if use_cmem
// Initialized where it is defined, not copied in by main, so that kernel mode, which launches
// the kernel without main, convolves with these weights too (not with zeros).
struct Filter {
  float w[filter_height * filter_width];
};
__host__ __device__ constexpr Filter all_weights() {
  Filter all{};
  for (unsigned e = 0; e < filter_height * filter_width; ++e) all.w[e] = filter_weight(e);
  return all;
}
__constant__ Filter filter = all_weights();
#endif

#pragma annotune kernel convolution \
    grid((IMAGE_WIDTH + BLOCK_COLUMNS - 1) / BLOCK_COLUMNS, \
         (IMAGE_HEIGHT + BLOCK_ROWS - 1) / BLOCK_ROWS) \
    block(block_size_x, block_size_y) \
    args(out(IMAGE_HEIGHT * IMAGE_WIDTH), in(INPUT_HEIGHT * INPUT_WIDTH), \
         in(filter_height * filter_width))

__device__ __forceinline__ float load(const float *p) {
#if read_only
  return __ldg(p);
#else
  return *p;
#endif
}

__global__ void convolution(float *__restrict__ out, const float *__restrict__ in,
                            const float *__restrict__ filter_global) {
#if use_cmem
  const float *weights = filter.w;
  (void)filter_global;
#else
  const float *weights = filter_global;
#endif
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int x0 = blockIdx.x * block_size_x * tile_size_x;  // the block's first output column
  const int y0 = blockIdx.y * block_size_y * tile_size_y;
  float sum[tile_size_y][tile_size_x] = {};
#if use_shmem
  __shared__ float window[WINDOW_HEIGHT][WINDOW_WIDTH + use_padding];
  for (int i = ty; i < WINDOW_HEIGHT; i += block_size_y)
    for (int j = tx; j < WINDOW_WIDTH; j += block_size_x) {
      const int y = y0 + i, x = x0 + j;
      window[i][j] = (y < INPUT_HEIGHT && x < INPUT_WIDTH) ? load(in + size_t(y) * INPUT_WIDTH + x)
                                                          : 0.0f;
    }
  __syncthreads();
  for (int fy = 0; fy < filter_height; ++fy)
    for (int fx = 0; fx < filter_width; ++fx) {
      const float w = weights[fy * filter_width + fx];
#pragma unroll
      for (int ti = 0; ti < tile_size_y; ++ti)
#pragma unroll
        for (int tj = 0; tj < tile_size_x; ++tj)
          sum[ti][tj] += w * window[ty + ti * block_size_y + fy][tx + tj * block_size_x + fx];
    }
#else
  for (int fy = 0; fy < filter_height; ++fy)
    for (int fx = 0; fx < filter_width; ++fx) {
      const float w = weights[fy * filter_width + fx];
#pragma unroll
      for (int ti = 0; ti < tile_size_y; ++ti)
#pragma unroll
        for (int tj = 0; tj < tile_size_x; ++tj) {
          const int y = y0 + ty + ti * block_size_y + fy, x = x0 + tx + tj * block_size_x + fx;
          if (y < INPUT_HEIGHT && x < INPUT_WIDTH)
            sum[ti][tj] += w * load(in + size_t(y) * INPUT_WIDTH + x);
        }
    }
#endif
#pragma unroll
  for (int ti = 0; ti < tile_size_y; ++ti)
#pragma unroll
    for (int tj = 0; tj < tile_size_x; ++tj) {
      const int y = y0 + ty + ti * block_size_y, x = x0 + tx + tj * block_size_x;
      if (y < IMAGE_HEIGHT && x < IMAGE_WIDTH) out[size_t(y) * IMAGE_WIDTH + x] = sum[ti][tj];
    }
}

// The CPU reference of one output point.
static double reference(const std::vector<float> &in, const std::vector<float> &w, int y, int x) {
  double sum = 0.0;
  for (int fy = 0; fy < filter_height; ++fy)
    for (int fx = 0; fx < filter_width; ++fx)
      sum += double(w[fy * filter_width + fx]) * in[size_t(y + fy) * INPUT_WIDTH + x + fx];
  return sum;
}

int main() {
  const size_t in_points = size_t(INPUT_HEIGHT) * INPUT_WIDTH;
  const size_t out_points = size_t(IMAGE_HEIGHT) * IMAGE_WIDTH;
  std::vector<float> in(in_points), out(out_points), w(filter_height * filter_width);
  for (size_t e = 0; e < in_points; ++e) in[e] = float(((e * 2654435761u) >> 11) % 16);
  for (size_t e = 0; e < w.size(); ++e) w[e] = filter_weight(unsigned(e));
  float *d_in, *d_out, *d_filter;
  CUDA_CHECK(cudaMalloc(&d_in, in_points * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, out_points * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_filter, w.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_in, in.data(), in_points * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_filter, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_out, 0, out_points * sizeof(float)));

  const dim3 block(block_size_x, block_size_y);
  const dim3 grid((IMAGE_WIDTH + BLOCK_COLUMNS - 1) / BLOCK_COLUMNS,
                  (IMAGE_HEIGHT + BLOCK_ROWS - 1) / BLOCK_ROWS);
  convolution<<<grid, block>>>(d_out, d_in, d_filter);  // warm-up; fails on a bad block shape
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());

  ANNOTUNE_TIMER_START();
  convolution<<<grid, block>>>(d_out, d_in, d_filter);
  ANNOTUNE_TIMER_STOP();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(out.data(), d_out, out_points * sizeof(float), cudaMemcpyDeviceToHost));

  // Check the first and last row and column in full, and a scattered sample.
  std::vector<std::pair<int, int>> samples;
  for (int x = 0; x < IMAGE_WIDTH; ++x) {
    samples.emplace_back(0, x);
    samples.emplace_back(IMAGE_HEIGHT - 1, x);
  }
  for (int y = 0; y < IMAGE_HEIGHT; ++y) {
    samples.emplace_back(y, 0);
    samples.emplace_back(y, IMAGE_WIDTH - 1);
  }
  for (int s = 0; s < 1 << 14; ++s)
    samples.emplace_back(int((s * 7919ull) % IMAGE_HEIGHT), int((s * 104729ull) % IMAGE_WIDTH));
  for (const auto &[y, x] : samples) {
    const double want = reference(in, w, y, x), got = out[size_t(y) * IMAGE_WIDTH + x];
    if (got != want) {
      std::fprintf(stderr, "convolution: wrong out[%d][%d] = %g, expected %g\n", y, x, got, want);
      return 1;
    }
  }
  double checksum = 0.0;
  for (size_t e = 0; e < out_points; ++e) checksum += out[e];
  annotune_report_check(checksum);
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  CUDA_CHECK(cudaFree(d_filter));
  return 0;
}
