/* Lid-driven cavity in OpenACC: the incompressible Navier-Stokes equations in the unit square,
 * the top wall (the lid) moving at speed 1, the other walls at rest, Reynolds number RE.
 *
 * Chorin's projection method on a staggered (MAC) grid of N x N cells: u on the vertical faces,
 * v on the horizontal faces, p at the cell centres, one ghost layer for the wall conditions.
 * Each time step
 *   1. predicts u*, v* explicitly (advection by central differences, diffusion, forward Euler),
 *   2. solves the pressure Poisson equation  lap(p) = div(u*) / dt  (homogeneous Neumann walls)
 *      with SOR_ITERS red-black SOR iterations, warm-started from the last step's pressure,
 *   3. projects: u = u* - dt grad(p), which makes the velocity divergence-free.
 *
 * Tunables. On a GPU: the gang/worker/vector sizes of the SOR sweeps (where the time goes),
 * whether their two block loops are collapsed into one gang loop, and the tile of the predictor
 * and projection kernels. On the host (gcc -fopenacc): the blocks BLOCK_I x BLOCK_J of the SOR
 * sweeps (BLOCK_I points of one colour along a row, BLOCK_J rows).
 *
 * Verification (exit 1 on failure): the OpenACC path must reproduce a plain serial
 * implementation of the same scheme in this file; the projected velocity must be divergence-free
 * to a small fraction of the predicted velocity's divergence; and the velocity on the vertical
 * centre line must show the cavity's recirculation (flow along the lid near the top, a return
 * flow below); and, run to a steady state (t >= 15 at Re = 100), the centre line must match the
 * benchmark of Ghia et al. Build with -DPRINT_PROFILE to print that centre-line profile. */
#include <math.h>
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
static double ldc_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}
static double ldc_started_ms;
#define ANNOTUNE_TIMER_START() (ldc_started_ms = ldc_now_ms())
#define ANNOTUNE_TIMER_STOP() printf("time_ms %.3f\n", ldc_now_ms() - ldc_started_ms)
#endif

/* The CPU time of this thread, printed beside the wall time: on a busy host it is the steadier
 * measure of host-run OpenACC (it leaves out the time other processes hold the core). */
#include <time.h>
static double thread_cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}
static double solve_cpu_ms;

/* The problem: N x N cells, STEPS time steps of DT (t = STEPS * DT), Reynolds number RE. */
#ifndef N
#define N 96
#endif
#ifndef STEPS
#define STEPS 200
#endif
#ifndef DT
#define DT 0.0025
#endif
#ifndef RE
#define RE 100.0
#endif
#ifndef SOR_ITERS
#define SOR_ITERS 30
#endif
#ifndef OMEGA
#define OMEGA 1.8
#endif
#define LID 1.0

/* Blocking of the SOR sweeps: a gang works on BLOCK_J rows x BLOCK_I points of one colour. */
#ifndef BLOCK_I
#define BLOCK_I 8 // @tune pow2(4, 128)
#endif
#ifndef BLOCK_J
#define BLOCK_J 8 // @tune pow2(1, 128)
#endif

/* GPU mapping of the SOR sweeps: gangs over blocks, workers over rows, vector lanes along a row. */
#ifndef NUM_GANGS
#define NUM_GANGS 128 // @tune pow2(16, 2048)
#endif
#ifndef NUM_WORKERS
#define NUM_WORKERS 4 // @tune pow2(1, 32)
#endif
#ifndef VECTOR_LENGTH
#define VECTOR_LENGTH 64 // @tune pow2(32, 1024)
#endif
#ifndef COLLAPSE
#define COLLAPSE 2 // @tune values(1, 2)
#endif

/* Tile of the predictor and projection kernels (x along a row, y across rows). */
#ifndef TILE_X
#define TILE_X 32 // @tune pow2(8, 256)
#endif
#ifndef TILE_Y
#define TILE_Y 4 // @tune pow2(1, 32)
#endif

#pragma annotune constraint NUM_WORKERS * VECTOR_LENGTH <= 1024
#pragma annotune constraint BLOCK_J >= NUM_WORKERS
#pragma annotune constraint TILE_X * TILE_Y <= 1024

#define W (N + 2) /* a row: N cells or N + 1 faces, plus ghosts */
#define SIZE ((size_t)W * W)
#define AT(i, j) ((size_t)(j) * W + (size_t)(i))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Point updates shared by both implementations, so the arithmetic is the same term by term.
 * u(i, j) sits at x = i h, y = (j - 1/2) h; v(i, j) at x = (i - 1/2) h, y = j h; p(i, j) at the
 * centre of cell (i, j), i, j = 1..N. */
#pragma acc routine seq
static inline double predict_u(const double *u, const double *v, int i, int j) {
  const double h = 1.0 / N, nu = 1.0 / RE;
  const double c = u[AT(i, j)];
  const double vbar =
      0.25 * (v[AT(i, j)] + v[AT(i + 1, j)] + v[AT(i, j - 1)] + v[AT(i + 1, j - 1)]);
  const double dudx = (u[AT(i + 1, j)] - u[AT(i - 1, j)]) / (2.0 * h);
  const double dudy = (u[AT(i, j + 1)] - u[AT(i, j - 1)]) / (2.0 * h);
  const double lap =
      (u[AT(i + 1, j)] + u[AT(i - 1, j)] + u[AT(i, j + 1)] + u[AT(i, j - 1)] - 4.0 * c) / (h * h);
  return c + DT * (nu * lap - c * dudx - vbar * dudy);
}

#pragma acc routine seq
static inline double predict_v(const double *u, const double *v, int i, int j) {
  const double h = 1.0 / N, nu = 1.0 / RE;
  const double c = v[AT(i, j)];
  const double ubar =
      0.25 * (u[AT(i - 1, j)] + u[AT(i, j)] + u[AT(i - 1, j + 1)] + u[AT(i, j + 1)]);
  const double dvdx = (v[AT(i + 1, j)] - v[AT(i - 1, j)]) / (2.0 * h);
  const double dvdy = (v[AT(i, j + 1)] - v[AT(i, j - 1)]) / (2.0 * h);
  const double lap =
      (v[AT(i + 1, j)] + v[AT(i - 1, j)] + v[AT(i, j + 1)] + v[AT(i, j - 1)] - 4.0 * c) / (h * h);
  return c + DT * (nu * lap - ubar * dvdx - c * dvdy);
}

/* h^2 / dt * div(u*) of cell (i, j): the right-hand side of the Poisson equation times h^2. */
#pragma acc routine seq
static inline double poisson_rhs(const double *us, const double *vs, int i, int j) {
  const double h = 1.0 / N;
  return h / DT * (us[AT(i, j)] - us[AT(i - 1, j)] + vs[AT(i, j)] - vs[AT(i, j - 1)]);
}

/* One SOR update of cell (i, j); a wall neighbour drops out of the stencil (dp/dn = 0). */
#pragma acc routine seq
static inline double sor_point(const double *p, const double *f, int i, int j) {
  const double west = i > 1, east = i < N, south = j > 1, north = j < N;
  const double sum = west * p[AT(i - 1, j)] + east * p[AT(i + 1, j)] + south * p[AT(i, j - 1)] +
                     north * p[AT(i, j + 1)];
  const double c = p[AT(i, j)];
  return c + OMEGA * ((sum - f[AT(i, j)]) / (west + east + south + north) - c);
}

/* Ghost values: no slip on the walls, u = LID along the lid (the wall's value is the mean of the
 * two sides). The normal components on the walls are zero and never written. */
static void wall_conditions(double *restrict u, double *restrict v) {
#pragma acc parallel loop vector_length(VECTOR_LENGTH) present(u[0:SIZE], v[0:SIZE])
  for (int k = 0; k <= N; ++k) {
    u[AT(k, 0)] = -u[AT(k, 1)];
    u[AT(k, N + 1)] = 2.0 * LID - u[AT(k, N)];
    v[AT(0, k)] = -v[AT(1, k)];
    v[AT(N + 1, k)] = -v[AT(N, k)];
  }
}

static void predict(const double *restrict u, const double *restrict v, double *restrict us,
                    double *restrict vs) {
#pragma acc parallel loop tile(TILE_X, TILE_Y) vector_length(VECTOR_LENGTH) \
    present(u[0:SIZE], v[0:SIZE], us[0:SIZE], vs[0:SIZE])
  for (int j = 1; j <= N; ++j)
    for (int i = 1; i <= N; ++i) {
      if (i < N) us[AT(i, j)] = predict_u(u, v, i, j);
      if (j < N) vs[AT(i, j)] = predict_v(u, v, i, j);
    }
}

static void divergence(const double *restrict us, const double *restrict vs, double *restrict f) {
#pragma acc parallel loop tile(TILE_X, TILE_Y) vector_length(VECTOR_LENGTH) \
    present(us[0:SIZE], vs[0:SIZE], f[0:SIZE])
  for (int j = 1; j <= N; ++j)
    for (int i = 1; i <= N; ++i) f[AT(i, j)] = poisson_rhs(us, vs, i, j);
}

/* Half a red-black SOR iteration: the cells with (i + j) % 2 == colour, blocked. Cells of one
 * colour only read cells of the other, so the order of the blocks does not change the result. */
static void sor_sweep(double *restrict p, const double *restrict f, int colour) {
#pragma acc parallel loop gang collapse(COLLAPSE) num_gangs(NUM_GANGS) num_workers(NUM_WORKERS) \
    vector_length(VECTOR_LENGTH) present(p[0:SIZE], f[0:SIZE])
  for (int jb = 1; jb <= N; jb += BLOCK_J)
    for (int ib = 1; ib <= N; ib += 2 * BLOCK_I) {
      const int jend = MIN(jb + BLOCK_J, N + 1), iend = MIN(ib + 2 * BLOCK_I, N + 1);
#pragma acc loop worker
      for (int j = jb; j < jend; ++j) {
        const int first = ib + ((ib + j + colour) & 1);
#pragma acc loop vector
        for (int i = first; i < iend; i += 2) p[AT(i, j)] = sor_point(p, f, i, j);
      }
    }
}

static void project(const double *restrict us, const double *restrict vs, const double *restrict p,
                    double *restrict u, double *restrict v) {
  const double scale = DT * N; /* dt / h */
#pragma acc parallel loop tile(TILE_X, TILE_Y) vector_length(VECTOR_LENGTH) \
    present(us[0:SIZE], vs[0:SIZE], p[0:SIZE], u[0:SIZE], v[0:SIZE])
  for (int j = 1; j <= N; ++j)
    for (int i = 1; i <= N; ++i) {
      if (i < N) u[AT(i, j)] = us[AT(i, j)] - scale * (p[AT(i + 1, j)] - p[AT(i, j)]);
      if (j < N) v[AT(i, j)] = vs[AT(i, j)] - scale * (p[AT(i, j + 1)] - p[AT(i, j)]);
    }
}

/* The whole solver through the kernels above; arrays are host arrays, copied once. */
static void solve(double *u, double *v, double *us, double *vs, double *p, double *f) {
#pragma acc data copy(u[0:SIZE], v[0:SIZE], p[0:SIZE]) copyin(us[0:SIZE], vs[0:SIZE]) \
    create(f[0:SIZE])
  {
    const double cpu_started = thread_cpu_ms();
    ANNOTUNE_TIMER_START();
    for (int step = 0; step < STEPS; ++step) {
      wall_conditions(u, v);
      predict(u, v, us, vs);
      divergence(us, vs, f);
      for (int it = 0; it < SOR_ITERS; ++it) {
        sor_sweep(p, f, 0);
        sor_sweep(p, f, 1);
      }
      project(us, vs, p, u, v);
    }
    wall_conditions(u, v);
    ANNOTUNE_TIMER_STOP();
    solve_cpu_ms = thread_cpu_ms() - cpu_started;
#pragma acc update host(us[0:SIZE], vs[0:SIZE])
  }
}

/* The same scheme written as plain loops: the reference the OpenACC path must reproduce. */
static void solve_serial(double *u, double *v, double *us, double *vs, double *p, double *f) {
  const double scale = DT * N;
  for (int step = 0; step <= STEPS; ++step) {
    for (int k = 0; k <= N; ++k) {
      u[AT(k, 0)] = -u[AT(k, 1)];
      u[AT(k, N + 1)] = 2.0 * LID - u[AT(k, N)];
      v[AT(0, k)] = -v[AT(1, k)];
      v[AT(N + 1, k)] = -v[AT(N, k)];
    }
    if (step == STEPS) break;
    for (int j = 1; j <= N; ++j)
      for (int i = 1; i <= N; ++i) {
        if (i < N) us[AT(i, j)] = predict_u(u, v, i, j);
        if (j < N) vs[AT(i, j)] = predict_v(u, v, i, j);
      }
    for (int j = 1; j <= N; ++j)
      for (int i = 1; i <= N; ++i) f[AT(i, j)] = poisson_rhs(us, vs, i, j);
    for (int it = 0; it < SOR_ITERS; ++it)
      for (int colour = 0; colour < 2; ++colour)
        for (int j = 1; j <= N; ++j)
          for (int i = 1; i <= N; ++i)
            if ((i + j) % 2 == colour) p[AT(i, j)] = sor_point(p, f, i, j);
    for (int j = 1; j <= N; ++j)
      for (int i = 1; i <= N; ++i) {
        if (i < N) u[AT(i, j)] = us[AT(i, j)] - scale * (p[AT(i + 1, j)] - p[AT(i, j)]);
        if (j < N) v[AT(i, j)] = vs[AT(i, j)] - scale * (p[AT(i, j + 1)] - p[AT(i, j)]);
      }
  }
}

/* Largest |div| over the cells of the velocity (a, b), in units of 1/time. */
static double largest_divergence(const double *a, const double *b) {
  double largest = 0.0;
  for (int j = 1; j <= N; ++j)
    for (int i = 1; i <= N; ++i)
      largest = fmax(largest, fabs(N * (a[AT(i, j)] - a[AT(i - 1, j)] + b[AT(i, j)] -
                                        b[AT(i, j - 1)])));
  return largest;
}

static double largest_difference(const double *a, const double *b) {
  double largest = 0.0;
  for (size_t c = 0; c < SIZE; ++c) largest = fmax(largest, fabs(a[c] - b[c]));
  return largest;
}

int main(void) {
  enum { FIELDS = 12 };
  double *field[FIELDS];
  for (int k = 0; k < FIELDS; ++k) {
    field[k] = malloc(SIZE * sizeof(double));
    if (!field[k]) {
      fprintf(stderr, "ldc: out of memory for N=%d\n", N);
      return 1;
    }
    for (size_t c = 0; c < SIZE; ++c) field[k][c] = 0.0; /* the fluid starts at rest */
  }
  double *u = field[0], *v = field[1], *us = field[2], *vs = field[3], *p = field[4];
  double *f = field[5];
  double *ru = field[6], *rv = field[7], *rus = field[8], *rvs = field[9], *rp = field[10];
  double *rf = field[11];

  solve(u, v, us, vs, p, f);
  solve_serial(ru, rv, rus, rvs, rp, rf);

  const double du = largest_difference(u, ru), dv = largest_difference(v, rv);
  const double dp = largest_difference(p, rp);
  if (!(du <= 1e-10 && dv <= 1e-10 && dp <= 1e-8)) {
    fprintf(stderr, "ldc: wrong result: differs from the serial solver by u %g, v %g, p %g\n", du,
            dv, dp);
    return 1;
  }
  const double predicted = largest_divergence(us, vs), projected = largest_divergence(u, v);
  if (!(projected <= 0.05 * predicted)) {
    fprintf(stderr, "ldc: the projection left max |div u| = %g (predicted: %g)\n", projected,
            predicted);
    return 1;
  }
  /* The centre line x = 1/2 is the face column i = N/2. */
  double lowest = 0.0, lowest_y = 0.0;
  for (int j = 1; j <= N; ++j) {
    const double y = (j - 0.5) / N, value = u[AT(N / 2, j)];
    if (value < lowest) lowest = value, lowest_y = y;
#ifdef PRINT_PROFILE
    printf("centre-line y %.4f u %+.5f\n", y, value);
#endif
  }
  const double top = u[AT(N / 2, N)];
  if (!(top > 0.2 && lowest < -0.02 && lowest_y > 0.1 && lowest_y < 0.9)) {
    fprintf(stderr,
            "ldc: no recirculation on the centre line (u %g below the lid, min %g at y %g)\n",
            top, lowest, lowest_y);
    return 1;
  }
  /* Run long enough at Re = 100 (t >= 15: the flow is steady), the centre line must match the
   * benchmark solution of Ghia, Ghia & Shin (J. Comput. Phys. 48, 1982), Table I. */
  static const double ghia_y[] = {0.0547, 0.1016, 0.1719, 0.2813, 0.4531, 0.5,
                                  0.6172, 0.7344, 0.8516, 0.9531, 0.9766};
  static const double ghia_u[] = {-0.03717, -0.06434, -0.10150, -0.15662, -0.21090, -0.20581,
                                  -0.13641, 0.00332,  0.23151,  0.68717,  0.84123};
  if (STEPS * DT >= 15.0 && RE == 100.0) {
    double worst = 0.0;
    for (int k = 0; k < (int)(sizeof ghia_y / sizeof ghia_y[0]); ++k) {
      const int j = (int)(ghia_y[k] * N + 0.5); /* cell centres y_j <= ghia_y[k] < y_j+1 */
      const double y0 = (j - 0.5) / N, w = (ghia_y[k] - y0) * N;
      const double here = (1.0 - w) * u[AT(N / 2, j)] + w * u[AT(N / 2, j + 1)];
      worst = fmax(worst, fabs(here - ghia_u[k]));
    }
    if (!(worst <= 0.02)) {
      fprintf(stderr, "ldc: the centre line differs from Ghia et al. by up to %g\n", worst);
      return 1;
    }
    printf("ldc: centre line within %.4f of Ghia et al. (Re = 100)\n", worst);
  }
  double energy = 0.0;
  for (size_t c = 0; c < SIZE; ++c) energy += u[c] * u[c] + v[c] * v[c];
  printf("cpu_ms %.3f\n", solve_cpu_ms);
  printf("ldc: N=%d steps=%d t=%g Re=%g  max|div| %.2e (predicted %.2e)  centre line: u %.4f "
         "below the lid, min %.4f at y=%.4f  ok\n",
         N, STEPS, STEPS * DT, RE, projected, predicted, top, lowest, lowest_y);
#ifdef ANNOTUNE_TIMING_H
  annotune_report_check(energy);
#endif
  for (int k = 0; k < FIELDS; ++k) free(field[k]);
  return 0;
}
