/* A program whose "time" is a known function of its parameters, and which fails in every way a
 * variant can fail: X=5,Y=1 does not compile, X=6,Y=1 crashes, X=7,Y=1 hangs, X=8,Y=1 prints a
 * wrong answer. The best valid configuration is X=3, Y=2. Each run appends "X Y" to the file
 * named by ANNOTUNE_TEST_LOG, so tests can count how often a configuration ran. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "annotune_timing.h"

#ifndef X
#define X 1 // @tune range(1, 9)
#endif
#define Y 2 /* @tune values(1, 2, 3) */
#pragma annotune constraint X + Y != 12

#if X == 5 && Y == 1
#error "this configuration does not compile"
#endif

int main(void) {
  const char *log_path = getenv("ANNOTUNE_TEST_LOG");
  if (log_path) {
    FILE *log = fopen(log_path, "a");
    if (log) {
      fprintf(log, "%d %d\n", X, Y);
      fclose(log);
    }
  }
  if (X == 6 && Y == 1) abort();
  if (X == 7 && Y == 1) sleep(60);
  double answer = 42.0;
  if (X == 8 && Y == 1) answer = 41.0;
  printf("annotune-time-ms: %g\n", 10.0 + (X - 3) * (X - 3) + 0.5 * (Y - 2) * (Y - 2));
  annotune_report_check(answer);
  printf("X=%d Y=%d\n", X, Y);
  return 0;
}
