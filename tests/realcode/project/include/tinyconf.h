/* A third-party configuration header, as vendored libraries ship them: unguarded block sizes
 * and problem sizes chosen by #if. Users must not edit it; annotune.toml declares its knobs. */
#ifndef TINYCONF_H
#define TINYCONF_H

#define TILE 8

#if defined(LARGE_PROBLEM)
#define N 2048
#else
#define N 256
#endif

#ifdef USE_WIDE_ROWS
#define ROW_STRIDE 64
#else
#define ROW_STRIDE 1
#endif

#endif
