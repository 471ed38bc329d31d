// Shared by the CUDA examples: error checking, and timing through annotune's header.
//
// annotune puts annotune_timing.h on the include path of every variant it builds; a plain build
// (without annotune) falls back to timing with CUDA events here and printing `time_ms X`.
#pragma once

#include <cstdio>
#include <cstdlib>

// A pragma whose numbers are macros: nvcc does not macro-expand `#pragma unroll NAME`, but it
// does expand the argument of a two-level _Pragma, so `AT_PRAGMA(unroll UNROLL)` works.
#define AT_PRAGMA_(...) _Pragma(#__VA_ARGS__)
#define AT_PRAGMA(...) AT_PRAGMA_(__VA_ARGS__)

#if defined(__has_include)
#if __has_include("annotune_timing.h")
#include "annotune_timing.h"
#endif
#endif

#define CUDA_CHECK(call)                                                                 \
  do {                                                                                   \
    const cudaError_t err_ = (call);                                                     \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                 \
                   cudaGetErrorString(err_));                                            \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

#ifndef ANNOTUNE_TIMING_H
static cudaEvent_t timer_start_, timer_stop_;
#define ANNOTUNE_TIMER_START()                 \
  do {                                         \
    CUDA_CHECK(cudaEventCreate(&timer_start_)); \
    CUDA_CHECK(cudaEventCreate(&timer_stop_));  \
    CUDA_CHECK(cudaEventRecord(timer_start_));  \
  } while (0)
#define ANNOTUNE_TIMER_STOP()                                               \
  do {                                                                      \
    float ms_ = 0.0f;                                                       \
    CUDA_CHECK(cudaEventRecord(timer_stop_));                               \
    CUDA_CHECK(cudaEventSynchronize(timer_stop_));                          \
    CUDA_CHECK(cudaEventElapsedTime(&ms_, timer_start_, timer_stop_));      \
    std::printf("time_ms %.4f\n", ms_);                                     \
  } while (0)
static void annotune_report_check(double value) { std::printf("checksum %.17g\n", value); }
#endif
