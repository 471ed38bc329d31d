// A kernel and its pragma in a local header; scalars of several sizes and a double inout array.
#include <cstddef>

#pragma annotune kernel axpy grid((N + BLOCK_X * BLOCK_Y - 1) / (BLOCK_X * BLOCK_Y)) \
    block(BLOCK_X * BLOCK_Y) args(N, 0.5, in(N), inout(N))

__global__ void axpy(size_t n, float a, const double *__restrict__ x, double *y) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
