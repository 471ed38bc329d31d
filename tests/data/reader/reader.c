/* A program that reads a number from the file named by its first argument: where it runs
 * decides which file that is. */
#include <stdio.h>
#ifndef X
#define X 1 // @tune values(1, 2)
#endif
int main(int argc, char **argv) {
  int n = 0;
  FILE *input = fopen(argv[1], "r");
  if (!input || fscanf(input, "%d", &n) != 1) { perror(argv[1]); return 1; }
  printf("annotune-time-ms: %d\n", n + X);
  return 0;
}
