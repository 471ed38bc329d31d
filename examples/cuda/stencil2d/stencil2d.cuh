// Tunables of stencil2d.cu. Guarded, so `-D` and a force-included header override them.
#pragma once

#ifndef BLOCK_X
#define BLOCK_X 32 // @tune pow2(1, 1024)
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8 // @tune pow2(1, 1024)
#endif
#ifndef ROWS_PER_THREAD
#define ROWS_PER_THREAD 1 // @tune values(1, 2, 4, 8)
#endif

#pragma annotune constraint BLOCK_X * BLOCK_Y <= 1024 && BLOCK_X * BLOCK_Y >= 32
