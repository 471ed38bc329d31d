// Tunables for stencil.cu. BLOCK_X can be set with -D; BLOCK_Y cannot (no guard).
#pragma once

#ifndef BLOCK_X
#define BLOCK_X 32 // @tune pow2(8, 256)
#endif

#define BLOCK_Y 4 /* @tune values(1, 2, 4, 8, 16) */

#define THREADS (BLOCK_X * BLOCK_Y)
