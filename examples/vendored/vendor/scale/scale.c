/* Stands in for third-party code that must not be edited: its chunk size is a literal of a
   pragma clause, and no annotune.toml lies beside it (my-project/annotune.toml names it). */
#include <stdio.h>
#include <stdlib.h>

#define N (1 << 18)

int main(void) {
  double *x = malloc(N * sizeof *x);
  if (x == NULL) return 1;
  for (long i = 0; i < N; i++) x[i] = (double)(i % 97);
  for (int round = 0; round < 20; round++) {
#pragma omp parallel for num_threads(2) schedule(dynamic, 64)
    for (long i = 0; i < N; i++) x[i] = 0.5 * x[i] + 1.0;
  }
  double sum = 0.0;
  for (long i = 0; i < N; i++) sum += x[i];
  printf("sum = %.6f\n", sum);
  printf("%s\n", sum > 0.0 ? "PASS" : "FAIL");
  free(x);
  return 0;
}
