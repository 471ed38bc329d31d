/* A program for `annotune check`: WAY picks one of two ways of doing the same work, and what
 * each way costs is read at run time from the file the program's argument names (cost.txt),
 * so a test can make the tuned way the slower one without touching a file the program is
 * built from: only `check --measure` can tell. work.h is a header it reads. */
#include <stdio.h>

#include "annotune_timing.h"
#include "work.h"

#ifndef WAY
#define WAY 0
#endif

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "cost.txt";
  long cost[2];
  FILE *file = fopen(path, "r");
  if (!file || fscanf(file, "%ld %ld", &cost[0], &cost[1]) != 2) {
    fprintf(stderr, "cannot read two costs from %s\n", path);
    return 1;
  }
  fclose(file);
  volatile double sum = 0.0;
  ANNOTUNE_TIMER_START();
  for (long i = 0; i < cost[WAY] * UNIT; i++) sum += 1.0 / (1.0 + (double)i);
  ANNOTUNE_TIMER_STOP();
  annotune_report_check(1.0); /* either way is the same answer */
  return 0;
}
