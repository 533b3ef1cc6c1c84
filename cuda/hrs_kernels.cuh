/*-------------------------------------------------------------------------
 *
 * hrs_kernels.cuh
 *	  The kernels of the hybrid radix sort: each one only gives its agent
 *	  shared memory and runs it (see hrs_agent.cuh).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_KERNELS_CUH
#define HRS_KERNELS_CUH

#include "hrs_agent.cuh"

namespace hrs
{

/* row index i into vals[i] (when no pass makes them) */
template <int KB>
__global__ void
__launch_bounds__(Policy<KB>::IOTA_THREADS)
iota_kernel(uint32_t *vals, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
		vals[i] = (uint32_t) i;
}

template <int KB>
__global__ void
__launch_bounds__(Policy<KB>::Partition::THREADS)
histogram_kernel(const PassParams p)
{
	__shared__ typename HistogramAgent<KB>::TempStorage s;

	HistogramAgent<KB>::run(p, s);
}

template <int KB>
__global__ void
__launch_bounds__(Policy<KB>::PLAN_THREADS)
plan_kernel(const PassParams p)
{
	__shared__ typename PlanAgent<KB>::TempStorage s;

	PlanAgent<KB>::run(p, s);
}

template <int KB>
__global__ void
__launch_bounds__(Policy<KB>::Partition::THREADS)
scatter_kernel(const PassParams p)
{
	__shared__ typename ScatterAgent<KB>::TempStorage s;

	ScatterAgent<KB>::run(p, s);
}

/* dynamic shared memory: the larger configurations need over 48 KB */
template <int KB, typename LP>
__global__ void
__launch_bounds__(LP::THREADS, LP::MIN_BLOCKS)
local_sort_kernel(const Task *tasks, void *k0, void *k1, uint32_t *v0,
				  uint32_t *v1, bool keys_out)
{
	extern __shared__ __align__(16) unsigned char smem[];
	typedef typename LocalSortAgent<KB, LP>::TempStorage TS;

	LocalSortAgent<KB, LP>::run(tasks, k0, k1, v0, v1, keys_out,
								*reinterpret_cast<TS *>(smem));
}

template <int KB>
__global__ void
__launch_bounds__(Policy<KB>::Partition::THREADS)
copy_kernel(const CopyRange *ranges, uint32_t nranges, void *k0, void *k1,
			uint32_t *v0, uint32_t *v1, bool keys_out)
{
	CopyAgent<KB>::run(ranges, nranges, k0, k1, v0, v1, keys_out);
}

}								/* namespace hrs */

#endif							/* HRS_KERNELS_CUH */
