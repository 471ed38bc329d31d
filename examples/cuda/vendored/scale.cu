// A stand-in for CUDA code you must not edit: no annotation in it. Its knob (TILE) and its
// kernel's launch are declared in annotune.toml beside it.
#include <cstdio>
#include <cstdlib>

#define N (1 << 20)
#define TILE 128

__global__ void scale(const float *in, float *out, int n, float a) {
  int i = blockIdx.x * TILE + threadIdx.x;
  if (i < n) out[i] = a * in[i];
}

int main() {
  float *in, *out;
  cudaMalloc(&in, N * sizeof(float));
  cudaMalloc(&out, N * sizeof(float));
  cudaMemset(in, 0, N * sizeof(float));
  scale<<<(N + TILE - 1) / TILE, TILE>>>(in, out, N, 2.0f);
  cudaDeviceSynchronize();
  printf("done\n");
  cudaFree(in);
  cudaFree(out);
  return EXIT_SUCCESS;
}
