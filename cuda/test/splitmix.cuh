/*-------------------------------------------------------------------------
 *
 * splitmix.cuh
 *	  The pseudo-random mixer the engine's test and benchmarks draw their
 *	  keys from (splitmix64's finalizer: fast, reproducible from a seed),
 *	  on the host and on the device.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GS_SPLITMIX_CUH
#define GS_SPLITMIX_CUH

#include <stdint.h>

__host__ __device__ __forceinline__ uint64_t
splitmix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

#endif							/* GS_SPLITMIX_CUH */
