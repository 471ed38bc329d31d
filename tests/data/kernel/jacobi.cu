// Kernel-mode fixture: a 2D Jacobi step whose block shape is tuned.
#include <cstdio>
#include <cuda_fp16.h>
#include "params.cuh"

#define NX 300
#define NY 200
#define N 10000

#pragma annotune kernel jacobi_step grid((NX + BLOCK_X - 1) / BLOCK_X, \
                                         (NY + BLOCK_Y - 1) / BLOCK_Y) \
    block(BLOCK_X, BLOCK_Y) shared(BLOCK_X * BLOCK_Y * 4) args(in(CELLS), out(CELLS), NX, NY)

__global__ void jacobi_step(const float *__restrict__ in, float *__restrict__ out, int nx,
                            int ny) {
  extern __shared__ float tile[];
  int x = blockIdx.x * BLOCK_X + threadIdx.x;
  int y = blockIdx.y * BLOCK_Y + threadIdx.y;
  int t = threadIdx.y * BLOCK_X + threadIdx.x;
  tile[t] = (x < nx && y < ny) ? in[y * nx + x] : 0.0f;
  __syncthreads();
  if (x >= nx || y >= ny) return;
  if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
    out[y * nx + x] = tile[t];
    return;
  }
  out[y * nx + x] = 0.25f * (in[y * nx + x - 1] + in[y * nx + x + 1] + in[(y - 1) * nx + x] +
                             in[(y + 1) * nx + x]);
}

#include "axpy.cuh"

// Every element type kernel mode can generate, for the signature tests.
#pragma annotune kernel typed grid(1) block(1) args(out(1), out(2), out(3), out(4), out(5), \
                                                    out(6), 1.5, -1)
extern "C" __global__ void typed(double *d, int *i, unsigned *u, long long *l, __half *h,
                                 unsigned char *b, half s, int64_t j) {}

void host_only(float *x) { x[0] = 0.0f; }

int main() {
  std::printf("kernel-mode fixture\n");
  return 0;
}
