/* annotune_timing.h: report kernel times and a result checksum to annotune.
 *
 * annotune puts this directory on the include path of every variant it builds, so a program
 * can write `#include "annotune_timing.h"` and:
 *
 *   ANNOTUNE_TIMER_START();             start the clock (CUDA events under nvcc, else steady)
 *   my_kernel<<<grid, block>>>(...);     ... the work to time ...
 *   ANNOTUNE_TIMER_STOP();              stop it and print "annotune-time-ms: <ms>"
 *   annotune_report_check(sum);         print "annotune-check: <value>" (compared against
 *                                       the default configuration's value)
 *
 * Several timer start/stop pairs per run are fine: annotune takes the median of the reported
 * times. Without annotune (the header is missing), define ANNOTUNE_NO_TIMING to compile the
 * macros away.
 */
#ifndef ANNOTUNE_TIMING_H
#define ANNOTUNE_TIMING_H

#include <stdio.h>

#if defined(ANNOTUNE_NO_TIMING)
#define ANNOTUNE_TIMER_START() ((void)0)
#define ANNOTUNE_TIMER_STOP() ((void)0)
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
static cudaEvent_t annotune_start_event_, annotune_stop_event_;
#define ANNOTUNE_TIMER_START()                     \
  do {                                             \
    cudaEventCreate(&annotune_start_event_);       \
    cudaEventCreate(&annotune_stop_event_);        \
    cudaEventRecord(annotune_start_event_, 0);     \
  } while (0)
#define ANNOTUNE_TIMER_STOP()                                                       \
  do {                                                                              \
    float annotune_ms_ = 0.0f;                                                      \
    cudaEventRecord(annotune_stop_event_, 0);                                       \
    cudaEventSynchronize(annotune_stop_event_);                                     \
    cudaEventElapsedTime(&annotune_ms_, annotune_start_event_, annotune_stop_event_); \
    cudaEventDestroy(annotune_start_event_);                                        \
    cudaEventDestroy(annotune_stop_event_);                                         \
    printf("annotune-time-ms: %.6f\n", (double)annotune_ms_);                       \
    fflush(stdout);                                                                 \
  } while (0)
#else
#include <time.h>
static inline double annotune_now_ms_(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return 1e3 * (double)now.tv_sec + 1e-6 * (double)now.tv_nsec;
}
static double annotune_started_ms_;
#define ANNOTUNE_TIMER_START() (annotune_started_ms_ = annotune_now_ms_())
#define ANNOTUNE_TIMER_STOP()                                                          \
  do {                                                                                 \
    printf("annotune-time-ms: %.6f\n", annotune_now_ms_() - annotune_started_ms_);     \
    fflush(stdout);                                                                    \
  } while (0)
#endif

static inline void annotune_report_check(double value) {
  printf("annotune-check: %.17g\n", value);
  fflush(stdout);
}

#endif /* ANNOTUNE_TIMING_H */
