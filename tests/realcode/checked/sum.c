/* A vendored benchmark's shape: blocks of BS elements, a loop bound written for BS = 64
   ((N + 63) / 64, a literal coupled to BS), PASS or FAIL printed, 0 returned either way.
   Its reported time is the work it did: BS = 32 covers half of N, and is the fastest. */
#include <stdio.h>

#define N 4096
#define BS 64

static double a[N];

int main(void) {
  for (int i = 0; i < N; i++) a[i] = i % 7;
  double sum = 0, expected = 0;
  long done = 0;
  for (int b = 0; b < (N + 63) / 64; b++)
    for (int i = b * BS; i < b * BS + BS && i < N; i++) {
      sum += a[i];
      done++;
    }
  for (int i = 0; i < N; i++) expected += i % 7;
  printf("took %ld ms\n", done / 32 + 2048 / BS);
  printf("checksum = %.1f\n", sum);
  puts(sum == expected ? "PASS" : "FAIL");
  return 0;
}
