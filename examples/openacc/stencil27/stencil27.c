/* A 27-point 3-D stencil in OpenACC: Jacobi sweeps for the Poisson problem -lap(u) = 1 on the
 * unit cube with u = 0 on the boundary, discretized with the compact 27-point Laplacian
 *
 *     lap(u) ~ (14 * faces + 3 * edges + 1 * corners - 128 * centre) / (30 h^2)
 *
 * so that one Jacobi sweep is the weighted sum  u' = (14 F + 3 E + C + 30 h^2 f) / 128  over the
 * 3x3x3 neighbourhood. Two grids are swapped after every sweep (double buffering).
 *
 * Tunables. On a GPU: the gang/worker/vector sizes of the sweep, whether its two block loops are
 * collapsed into one gang loop, and the tile of the update-norm kernel. On the host (gcc
 * -fopenacc, where the gang/worker/vector clauses change nothing): the cache blocks BLOCK_I x
 * BLOCK_J x BLOCK_K of the sweep. On both: ROWS, the rows each vector lane computes at once.
 * The sweeps are checked against a plain serial implementation in this file; the program exits
 * 1 on a mismatch. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* annotune puts its timing header on the include path; built without annotune, time ourselves. */
#if defined(__has_include)
#if __has_include("annotune_timing.h")
#include "annotune_timing.h"
#endif
#endif
#ifndef ANNOTUNE_TIMING_H
#include <time.h>
static double stencil_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}
static double stencil_started_ms;
#define ANNOTUNE_TIMER_START() (stencil_started_ms = stencil_now_ms())
#define ANNOTUNE_TIMER_STOP() printf("time_ms %.3f\n", stencil_now_ms() - stencil_started_ms)
#endif

/* The CPU time of this thread, printed beside the wall time: on a busy host it is the steadier
 * measure of host-run OpenACC (it leaves out the time other processes hold the core). */
#include <time.h>
static double thread_cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

/* Problem size: N^3 grid points including the boundary, SWEEPS Jacobi sweeps. */
#ifndef N
#define N 130
#endif
#ifndef SWEEPS
#define SWEEPS 8
#endif

/* Cache blocking of the sweep: a gang works on BLOCK_J x BLOCK_K rows, in pieces of BLOCK_I. */
#ifndef BLOCK_I
#define BLOCK_I 32 // @tune pow2(8, 256)
#endif
#ifndef BLOCK_J
#define BLOCK_J 8 // @tune pow2(1, 128)
#endif
#ifndef BLOCK_K
#define BLOCK_K 8 // @tune pow2(1, 128)
#endif

/* Work per vector lane: ROWS neighbouring rows at once, which share 6 of their 9 input rows in
 * each plane (loads reused from registers on the host, fewer lanes with more work on a GPU). */
#ifndef ROWS
#define ROWS 1 // @tune values(1, 2, 4)
#endif

/* GPU mapping: gangs over blocks, workers over the rows of a block, vector lanes along a row. */
#ifndef NUM_GANGS
#define NUM_GANGS 256 // @tune pow2(64, 2048)
#endif
#ifndef NUM_WORKERS
#define NUM_WORKERS 4 // @tune pow2(1, 32)
#endif
#ifndef VECTOR_LENGTH
#define VECTOR_LENGTH 128 // @tune pow2(32, 1024)
#endif
#ifndef COLLAPSE
#define COLLAPSE 2 // @tune values(1, 2)
#endif

/* Tile of the residual kernel (x along a row, y across rows). */
#ifndef TILE_X
#define TILE_X 32 // @tune pow2(8, 256)
#endif
#ifndef TILE_Y
#define TILE_Y 4 // @tune pow2(1, 32)
#endif

/* A thread block holds at most 1024 threads; every worker of a gang gets rows of its block; a
 * block's rows come in whole groups of ROWS. */
#pragma annotune constraint NUM_WORKERS * VECTOR_LENGTH <= 1024
#pragma annotune constraint BLOCK_J * BLOCK_K >= NUM_WORKERS * ROWS
#pragma annotune constraint BLOCK_J % ROWS == 0
#pragma annotune constraint TILE_X * TILE_Y <= 1024

/* Unroll the ROWS loop completely (gcc does not macro-expand `#pragma GCC unroll ROWS`). */
#define STENCIL_PRAGMA(x) _Pragma(#x)
#if defined(__GNUC__) && !defined(__NVCOMPILER)
#define STENCIL_UNROLL(n) STENCIL_PRAGMA(GCC unroll n)
#define UNROLL_ROWS STENCIL_UNROLL(ROWS)
#else
#define UNROLL_ROWS
#endif

#define CELLS ((size_t)N * N * N)
#define AT(i, j, k) (((size_t)(k) * N + (size_t)(j)) * N + (size_t)(i))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* The Jacobi update of point p (a pointer into the grid), shared by both implementations so the
 * arithmetic is the same, term by term. */
#pragma acc routine seq
static inline double jacobi27(const double *p, double rhs) {
  const ptrdiff_t y = N, z = (ptrdiff_t)N * N;
  const double faces = p[-1] + p[1] + p[-y] + p[y] + p[-z] + p[z];
  const double edges = p[-y - 1] + p[-y + 1] + p[y - 1] + p[y + 1] + p[-z - 1] + p[-z + 1] +
                       p[z - 1] + p[z + 1] + p[-z - y] + p[-z + y] + p[z - y] + p[z + y];
  const double corners = p[-z - y - 1] + p[-z - y + 1] + p[-z + y - 1] + p[-z + y + 1] +
                         p[z - y - 1] + p[z - y + 1] + p[z + y - 1] + p[z + y + 1];
  return (14.0 * faces + 3.0 * edges + corners + rhs) / 128.0;
}

/* One blocked sweep: out = jacobi(in) on the interior. A vector lane computes ROWS rows of a
 * block at once (in groups; leftover rows one by one). */
static void sweep(const double *restrict in, double *restrict out, double rhs) {
#pragma acc parallel loop gang collapse(COLLAPSE) num_gangs(NUM_GANGS) num_workers(NUM_WORKERS) \
    vector_length(VECTOR_LENGTH) present(in[0:CELLS], out[0:CELLS])
  for (int kb = 1; kb < N - 1; kb += BLOCK_K)
    for (int jb = 1; jb < N - 1; jb += BLOCK_J) {
      const int kend = MIN(kb + BLOCK_K, N - 1), jend = MIN(jb + BLOCK_J, N - 1);
      const int groups = (jend - jb) / ROWS, items = groups + (jend - jb) % ROWS;
#pragma acc loop worker collapse(2)
      for (int k = kb; k < kend; ++k)
        for (int g = 0; g < items; ++g)
          for (int ib = 1; ib < N - 1; ib += BLOCK_I) {
            const int iend = MIN(ib + BLOCK_I, N - 1);
            if (g < groups) {
              const int j = jb + g * ROWS;
#pragma acc loop vector
              for (int i = ib; i < iend; ++i) {
                UNROLL_ROWS
                for (int r = 0; r < ROWS; ++r)
                  out[AT(i, j + r, k)] = jacobi27(in + AT(i, j + r, k), rhs);
              }
            } else {
              const int j = jb + groups * ROWS + (g - groups);
#pragma acc loop vector
              for (int i = ib; i < iend; ++i) out[AT(i, j, k)] = jacobi27(in + AT(i, j, k), rhs);
            }
          }
    }
}

/* The 2-norm of the change one more sweep would make: how far the iteration is from converged. */
static double update_norm(const double *restrict u, double rhs) {
  double squares = 0.0;
#pragma acc parallel loop gang vector_length(VECTOR_LENGTH) reduction(+ : squares) \
    present(u[0:CELLS])
  for (int k = 1; k < N - 1; ++k) {
#pragma acc loop tile(TILE_X, TILE_Y) reduction(+ : squares)
    for (int j = 1; j < N - 1; ++j)
      for (int i = 1; i < N - 1; ++i) {
        const double change = jacobi27(u + AT(i, j, k), rhs) - u[AT(i, j, k)];
        squares += change * change;
      }
  }
  return sqrt(squares);
}

/* The same sweeps written plainly: the reference the OpenACC path must reproduce. */
static void reference(double *u, double *next, double rhs) {
  for (int s = 0; s < SWEEPS; ++s) {
    for (int k = 1; k < N - 1; ++k)
      for (int j = 1; j < N - 1; ++j)
        for (int i = 1; i < N - 1; ++i) next[AT(i, j, k)] = jacobi27(u + AT(i, j, k), rhs);
    double *swap = u;
    u = next;
    next = swap;
  }
}

int main(void) {
  const double h = 1.0 / (N - 1), rhs = 30.0 * h * h * 1.0; /* f = 1 */
  double *a = malloc(CELLS * sizeof(double)), *b = malloc(CELLS * sizeof(double));
  double *ra = malloc(CELLS * sizeof(double)), *rb = malloc(CELLS * sizeof(double));
  if (!a || !b || !ra || !rb) {
    fprintf(stderr, "stencil27: out of memory for N=%d\n", N);
    return 1;
  }
  /* u = 0 on the boundary; inside, a rough first guess for the sweeps to smooth. Writing every
   * page now keeps first-touch page faults out of the timed sweeps. */
  for (int k = 0; k < N; ++k)
    for (int j = 0; j < N; ++j)
      for (int i = 0; i < N; ++i) {
        const int inside = i > 0 && j > 0 && k > 0 && i < N - 1 && j < N - 1 && k < N - 1;
        const double guess = inside ? 0.01 * ((i * 7 + j * 13 + k * 29) % 17) : 0.0;
        a[AT(i, j, k)] = b[AT(i, j, k)] = ra[AT(i, j, k)] = rb[AT(i, j, k)] = guess;
      }
  double first = 0.0, last = 0.0, cpu_ms = 0.0;
  double *u = a, *next = b;
#pragma acc data copy(a[0:CELLS], b[0:CELLS])
  {
    first = update_norm(a, rhs);
    const double cpu_started = thread_cpu_ms();
    ANNOTUNE_TIMER_START();
    for (int s = 0; s < SWEEPS; ++s) {
      sweep(u, next, rhs);
      double *swap = u;
      u = next;
      next = swap;
    }
    ANNOTUNE_TIMER_STOP();
    cpu_ms = thread_cpu_ms() - cpu_started;
    last = update_norm(u, rhs);
  }

  /* Verify: the same numbers as the serial sweeps, and the iteration made progress. */
  reference(ra, rb, rhs);
  const double *want = SWEEPS % 2 ? rb : ra;
  double worst = 0.0, checksum = 0.0;
  for (size_t c = 0; c < CELLS; ++c) {
    worst = fmax(worst, fabs(u[c] - want[c]));
    checksum += u[c];
  }
  if (!(worst <= 1e-12)) {
    fprintf(stderr, "stencil27: wrong result: differs from the serial sweeps by %g\n", worst);
    return 1;
  }
  if (!(last < first)) {
    fprintf(stderr, "stencil27: the update norm did not fall (%g -> %g)\n", first, last);
    return 1;
  }
  printf("cpu_ms %.3f\n", cpu_ms);
  printf("stencil27: N=%d sweeps=%d update %.3e -> %.3e, sum %.10e, ok\n", N, SWEEPS, first, last,
         checksum);
#ifdef ANNOTUNE_TIMING_H
  annotune_report_check(checksum);
#endif
  free(a);
  free(b);
  free(ra);
  free(rb);
  return 0;
}
