/* A blocked 1-D smoothing kernel over N points, repeated; reads its weights from a data file
 * named on the command line (relative to where it is run), as benchmark suites do. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tinyconf.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: smooth WEIGHTS\n");
    return 2;
  }
  FILE *in = fopen(argv[1], "r");
  if (!in) {
    fprintf(stderr, "cannot open %s\n", argv[1]);
    return 1;
  }
  double w[3];
  if (fscanf(in, "%lf %lf %lf", &w[0], &w[1], &w[2]) != 3) return 1;
  fclose(in);
  static double a[N + 2], b[N + 2];
  for (int i = 0; i < N + 2; i++) a[i] = (double)(i % 7);
  double started = now_ms();
  for (int rep = 0; rep < 50000; rep++) {
    for (int start = 1; start <= N; start += TILE) {
      int end = start + TILE <= N + 1 ? start + TILE : N + 1;
      for (int i = start; i < end; i++) b[i] = w[0] * a[i - 1] + w[1] * a[i] + w[2] * a[i + 1];
    }
    for (int i = 1; i <= N; i++) a[i] = b[i];
  }
  printf("kernel took %.6f s\n", (now_ms() - started) / 1e3);
  double sum = 0;
  for (int i = 1; i <= N; i++) sum += a[i];
  printf("checksum %.6f tile %d n %d\n", sum, TILE, N);
  return 0;
}
