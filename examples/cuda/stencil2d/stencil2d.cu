// 5-point Jacobi smoothing step on an NX x NY grid; each thread updates ROWS_PER_THREAD rows.
//
// Kernel mode (`annotune tune stencil2d.cu`; `--mode program` runs the program instead) launches
// jacobi_step as main does on generated inputs (uniform in [0, 1)); the border of `out`, which
// the kernel never writes, stays zero there (main copies the input into it). Each point is the
// same five-term expression whatever the configuration, so outputs agree bit for bit and the
// default tolerance holds.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "stencil2d.cuh"

#include "../common/example.cuh"

#ifndef NX
#define NX 4096
#endif
#ifndef NY
#define NY 4096
#endif

#pragma annotune kernel jacobi_step \
    grid((NX + BLOCK_X - 1) / BLOCK_X, \
         (NY + BLOCK_Y * ROWS_PER_THREAD - 1) / (BLOCK_Y * ROWS_PER_THREAD)) \
    block(BLOCK_X, BLOCK_Y) args(in(NX * NY), out(NX * NY))
__global__ void jacobi_step(const float *__restrict__ in, float *__restrict__ out) {
  const int x = blockIdx.x * BLOCK_X + threadIdx.x;
  const int y0 = (blockIdx.y * BLOCK_Y + threadIdx.y) * ROWS_PER_THREAD;
  if (x < 1 || x >= NX - 1) return;
  for (int r = 0; r < ROWS_PER_THREAD; ++r) {
    const int y = y0 + r;
    if (y >= NY - 1) return;
    if (y < 1) continue;  // the top border row; the thread's next rows are interior
    const int i = y * NX + x;
    out[i] = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - NX] + in[i + NX]);
  }
}

int main() {
  const size_t cells = size_t(NX) * NY;
  std::vector<float> host(cells), result(cells);
  for (size_t i = 0; i < cells; ++i) host[i] = float((i * 2654435761u) % 1000) / 1000.0f;
  float *in = nullptr, *out = nullptr;
  cudaMalloc(&in, cells * sizeof(float));
  cudaMalloc(&out, cells * sizeof(float));
  cudaMemcpy(in, host.data(), cells * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(out, host.data(), cells * sizeof(float), cudaMemcpyHostToDevice);

  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((NX + BLOCK_X - 1) / BLOCK_X,
                  (NY + BLOCK_Y * ROWS_PER_THREAD - 1) / (BLOCK_Y * ROWS_PER_THREAD));
  jacobi_step<<<grid, block>>>(in, out);  // warm-up
  ANNOTUNE_TIMER_START();
  jacobi_step<<<grid, block>>>(in, out);
  ANNOTUNE_TIMER_STOP();
  if (cudaGetLastError() != cudaSuccess) {
    std::fprintf(stderr, "kernel launch failed\n");
    return 1;
  }
  cudaMemcpy(result.data(), out, cells * sizeof(float), cudaMemcpyDeviceToHost);
  for (int y = 1; y < NY - 1; y += 97) {
    for (int x = 1; x < NX - 1; x += 89) {
      const size_t i = size_t(y) * NX + x;
      const float want = 0.2f * (host[i] + host[i - 1] + host[i + 1] + host[i - NX] + host[i + NX]);
      if (std::fabs(result[i] - want) > 1e-5f) {
        std::fprintf(stderr, "wrong result at (%d, %d)\n", x, y);
        return 1;
      }
    }
  }
  double checksum = 0.0;
  for (size_t i = 0; i < cells; ++i) checksum += result[i];
  annotune_report_check(checksum);
  cudaFree(in);
  cudaFree(out);
  return 0;
}
