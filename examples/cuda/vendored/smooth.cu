// A stand-in for CUDA code you must not edit, whose block size is a template parameter: the
// host code picks the instance. annotune.toml beside it names the instance to tune instead,
// with a knob (BT) the source never mentions.
#include <cstdio>
#include <cstdlib>

#define N (1 << 20)

// A 3-point average through a shared tile: the result is the same for every block size.
template <typename T, int BLOCK>
__global__ void smooth(const T *in, T *out, int n) {
  __shared__ T tile[BLOCK + 2];
  int i = blockIdx.x * BLOCK + threadIdx.x;
  tile[threadIdx.x + 1] = i < n ? in[i] : T(0);
  if (threadIdx.x == 0) tile[0] = i > 0 && i - 1 < n ? in[i - 1] : T(0);
  if (threadIdx.x == BLOCK - 1) tile[BLOCK + 1] = i + 1 < n ? in[i + 1] : T(0);
  __syncthreads();
  if (i < n) out[i] = (tile[threadIdx.x] + tile[threadIdx.x + 1] + tile[threadIdx.x + 2]) / T(3);
}

int main() {
  float *in, *out;
  cudaMalloc(&in, N * sizeof(float));
  cudaMalloc(&out, N * sizeof(float));
  cudaMemset(in, 0, N * sizeof(float));
  smooth<float, 256><<<N / 256, 256>>>(in, out, N);
  cudaDeviceSynchronize();
  printf("done\n");
  cudaFree(in);
  cudaFree(out);
  return EXIT_SUCCESS;
}
