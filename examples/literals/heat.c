/* A 1-D heat solver written the way vendored code writes its knobs: literals in the OpenMP
 * clauses and a block size read from the command line. annotune.toml beside it names them;
 * nothing here mentions annotune. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 200000
#define STEPS 20

static double u[N], v[N];

int main(int argc, char **argv) {
  int block = 4096; /* -b BLOCK: how many points one task updates */
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "-b") == 0) block = atoi(argv[i + 1]);
  if (block < 1) block = 1;
  for (int i = 0; i < N; i++) u[i] = (i % 97) * 0.01;
  for (int step = 0; step < STEPS; step++) {
#pragma omp parallel for num_threads(2) schedule(dynamic, 1)
    for (int start = 1; start < N - 1; start += block) {
      int end = start + block < N - 1 ? start + block : N - 1;
      for (int i = start; i < end; i++) v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
    }
    memcpy(u + 1, v + 1, (N - 2) * sizeof(double));
  }
  double sum = 0;
  for (int i = 0; i < N; i++) sum += u[i];
  printf("checksum = %.6f\n", sum);
  printf("%s\n", sum > 0 ? "PASS" : "FAIL");
  return 0;
}
