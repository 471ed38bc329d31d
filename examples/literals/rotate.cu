// CUDA written the way vendored code writes its launches: a literal block size whose grid
// repeats it, and a dim3 of two numbers. annotune.toml beside it names them.
#include <cstdio>

__global__ void rotate(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = -x[i];
}

__global__ void clear(float *x, int width) {
  x[(blockIdx.y * blockDim.y + threadIdx.y) * width + blockIdx.x * blockDim.x + threadIdx.x] = 0;
}

int main() {
  const int n = 1 << 20, width = 1024;
  float *x;
  cudaMalloc(&x, n * sizeof(float));
  rotate<<<(n + 255) / 256, 256>>>(x, n);
  dim3 threads(32, 8);
  dim3 blocks(width / 32, width / 8);
  clear<<<blocks, threads>>>(x, width);
  cudaDeviceSynchronize();
  printf("PASS\n");
  cudaFree(x);
  return 0;
}
