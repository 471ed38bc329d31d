/* An OpenMP reduction whose thread count is tuned through the environment alone: the config
 * (annotune.toml) declares THREADS and sets OMP_NUM_THREADS to it; nothing here names it. */
#include <omp.h>
#include <stdio.h>

#ifndef N
#define N 20000000
#endif

int main(void) {
  double start = omp_get_wtime(), sum = 0.0;
#pragma omp parallel for reduction(+ : sum)
  for (long i = 0; i < N; i++) sum += 1.0 / (1.0 + (double)i);
  printf("threads %d\n", omp_get_max_threads());
  printf("sum %.6f\n", sum);
  printf("annotune-time-ms: %.3f\n", (omp_get_wtime() - start) * 1e3);
  return 0;
}
