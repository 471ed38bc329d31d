// Tunables of the kernel-mode fixture (guarded, so -D sets them).
#ifndef BLOCK_X
#define BLOCK_X 32 // @tune pow2(8, 128)
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 4 // @tune values(1, 2, 4, 8)
#endif
#define CELLS (NX * NY) // a macro using macros that are defined later
