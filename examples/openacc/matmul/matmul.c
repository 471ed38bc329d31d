/* Tiled matrix multiply C = A * B in OpenACC. On a GPU the gang/vector sizes matter; run on the
 * host (gcc -fopenacc) the loop-blocking tiles decide how well the caches are used. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* annotune puts its timing header on the include path; built without annotune, time ourselves. */
#if defined(__has_include)
#if __has_include("annotune_timing.h")
#include "annotune_timing.h"
#endif
#endif

#ifndef N
#define N 512
#endif

#ifndef TILE_I
#define TILE_I 16 // @tune pow2(4, 128)
#endif
#ifndef TILE_J
#define TILE_J 16 // @tune pow2(4, 256)
#endif
#ifndef TILE_K
#define TILE_K 16 // @tune pow2(4, 256)
#endif
#pragma annotune constraint TILE_I * TILE_J <= 8192

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void multiply(const float *restrict a, const float *restrict b, float *restrict c) {
#ifndef VL
#define VL 128 // @tune pow2(32, 1024)
#endif
#pragma acc parallel loop collapse(2) vector_length(VL) copyin(a[0:N*N], b[0:N*N]) copy(c[0:N*N])
  for (int ii = 0; ii < N; ii += TILE_I)
    for (int jj = 0; jj < N; jj += TILE_J)
      for (int kk = 0; kk < N; kk += TILE_K)
        for (int i = ii; i < ii + TILE_I && i < N; ++i)
          for (int k = kk; k < kk + TILE_K && k < N; ++k) {
            const float aik = a[i * N + k];
            for (int j = jj; j < jj + TILE_J && j < N; ++j) c[i * N + j] += aik * b[k * N + j];
          }
}

int main(void) {
  float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N);
  float *c = calloc((size_t)N * N, sizeof(float));
  for (int i = 0; i < N * N; ++i) {
    a[i] = (float)((i * 7) % 13) / 13.0f;
    b[i] = (float)((i * 5) % 11) / 11.0f;
  }
  const double start = seconds();
#ifdef ANNOTUNE_TIMING_H
  ANNOTUNE_TIMER_START();
#endif
  multiply(a, b, c);
#ifdef ANNOTUNE_TIMING_H
  ANNOTUNE_TIMER_STOP();
#endif
  const double elapsed = seconds() - start;
  /* Check a sample of entries against a plain dot product. */
  for (int s = 0; s < 64; ++s) {
    const int i = (s * 37) % N, j = (s * 91) % N;
    double want = 0.0;
    for (int k = 0; k < N; ++k) want += (double)a[i * N + k] * b[k * N + j];
    if (fabs(want - c[i * N + j]) > 1e-3 * fabs(want) + 1e-3) {
      fprintf(stderr, "wrong result at (%d, %d): %f != %f\n", i, j, c[i * N + j], want);
      return 1;
    }
  }
  printf("time_ms %.3f\n", 1e3 * elapsed);
#ifdef ANNOTUNE_TIMING_H
  double checksum = 0.0;
  for (int i = 0; i < N * N; ++i) checksum += c[i];
  annotune_report_check(checksum);
#endif
  free(a);
  free(b);
  free(c);
  return 0;
}
