#include <cstdio>
#include <cuda_runtime.h>
#include "stencil.cuh"

#pragma annotune constraint BLOCK_X * BLOCK_Y <= 1024 && BLOCK_X * BLOCK_Y >= 64

__global__ void smooth(const float *in, float *out, int nx, int ny) {
  int x = blockIdx.x * BLOCK_X + threadIdx.x;
  int y = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (x <= 0 || y <= 0 || x >= nx - 1 || y >= ny - 1) return;
  float sum = 0.0f;
#pragma unroll 3 // @tune(UNROLL) values(1, 3)
  for (int d = -1; d <= 1; ++d)
    sum += in[(y + d) * nx + x - 1] + in[(y + d) * nx + x] + in[(y + d) * nx + x + 1];
  out[y * nx + x] = sum / 9.0f;
}

int main() {
  const int nx = 1024, ny = 1024;
  float *in, *out;
  cudaMalloc(&in, nx * ny * sizeof(float));
  cudaMalloc(&out, nx * ny * sizeof(float));
  dim3 block(BLOCK_X, BLOCK_Y);
  dim3 grid((nx + BLOCK_X - 1) / BLOCK_X, (ny + BLOCK_Y - 1) / BLOCK_Y);
  smooth<<<grid, block>>>(in, out, nx, ny);
  cudaDeviceSynchronize();
  printf("threads per block: %d\n", THREADS);
  return 0;
}
