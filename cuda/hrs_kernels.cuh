/*-------------------------------------------------------------------------
 *
 * hrs_kernels.cuh
 *	  The kernels of the hybrid radix sort: each one only gives its agent
 *	  shared memory and runs it (see hrs_agent.cuh and the agents in
 *	  hrs_agent_partition.cuh and hrs_agent_local.cuh).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_KERNELS_CUH
#define HRS_KERNELS_CUH

#include "hrs_agent_local.cuh"
#include "hrs_agent_partition.cuh"

namespace hrs
{

/*
 * Programmatic dependent launch (sm_90).  The pass kernels (histogram,
 * plan, scatter) wait for the kernel before them at their very start and
 * then let the next one launch: the next one's blocks are then ready the
 * moment this one ends, instead of being launched only then.  The local
 * sorts and copies at the end of a sort touch disjoint ranges, so each
 * lets the next kernel start as soon as all its own blocks have started,
 * and they overlap instead of each waiting for the previous one's slowest
 * block; each waits for the kernel before it only at its very end, so
 * that the last one completing still means all of them have.  Both are
 * no-ops for a kernel launched without the attribute.
 */
__device__ __forceinline__ void
let_next_kernel_start()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void
wait_for_previous_kernel()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

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

	wait_for_previous_kernel();
	let_next_kernel_start();
	HistogramAgent<KB>::run(p, s);
}

/* one bucket per block, in passes too large for the histogram to plan */
template <int KB>
__global__ void
__launch_bounds__(RADIX)
plan_kernel(const PassParams p)
{
	__shared__ typename PlanAgent<KB, RADIX>::TempStorage s;

	wait_for_previous_kernel();
	let_next_kernel_start();
	if (blockIdx.x < (uint32_t) (p.counters->alloc[p.pass] >> 32))
		PlanAgent<KB, RADIX>::run(p, blockIdx.x, s);
}

template <int KB>
__global__ void
__launch_bounds__(Policy<KB>::Partition::THREADS)
scatter_kernel(const PassParams p)
{
	__shared__ typename ScatterAgent<KB>::TempStorage s;

	wait_for_previous_kernel();
	let_next_kernel_start();
	if (blockIdx.x == 0 && threadIdx.x == 0)
	{
		/* the plans are done: the pass's counters go to the host now */
		const unsigned long long *src = (const unsigned long long *) p.counters;
		unsigned long long *dst = (unsigned long long *) &p.host->counters;

		for (int i = 0; i < (int) (sizeof(Counters) / sizeof(unsigned long long)); i++)
			dst[i] = src[i];
		__threadfence_system();
		*(volatile uint32_t *) &p.host->seq = (uint32_t) p.pass + 1;
	}
	ScatterAgent<KB>::run(p, s);
}

/* the state every sort starts from (one block of INIT_THREADS) */
template <int KB>
__global__ void
__launch_bounds__(Policy<KB>::INIT_THREADS)
init_kernel(const PassParams p, const Bucket seed, unsigned long long alloc0)
{
	for (int i = threadIdx.x; i < RADIX; i += blockDim.x)
		p.bucket_hist[i] = 0;
	for (int i = threadIdx.x; i < (int) (sizeof(Counters) / sizeof(uint32_t));
		 i += blockDim.x)
		((uint32_t *) p.counters)[i] = 0;
	if (threadIdx.x < MASK_WORDS)
		p.bucket_mask[threadIdx.x] = threadIdx.x < 4 ? ~0ull : 0ull;
	if (threadIdx.x == 0)
		p.bucket_done[0] = 0;
	__syncthreads();
	if (threadIdx.x == 0)
	{
		p.buckets[0] = seed;
		p.counters->alloc[0] = alloc0;
	}
}

/*
 * The local sorts of one launch group (Policy::group_last): configurations
 * FIRST..LAST share a block shape, and each block finds its configuration
 * and task from its index.  The larger configurations take the lower block
 * indexes, so that the longest sorts start first.  Dynamic shared memory:
 * the larger configurations need over 48 KB.
 */
struct LocalGroup
{
	const Task *tasks[MAX_LOCAL];
	uint32_t	first_block[MAX_LOCAL];	/* of each configuration's tasks */
	uint32_t	count[MAX_LOCAL];
	void	   *k0,
			   *k1;
	uint32_t   *v0,
			   *v1;
	bool		keys_out;
	Task		single;			/* size > 0: the launch's one task */
};

template <int KB, int C, int FIRST>
__device__ __forceinline__ void
run_local_group(const LocalGroup &g, unsigned char *smem)
{
	typedef typename LocalAt<typename Policy<KB>::A, C>::type LP;
	typedef typename LocalSortAgent<KB, LP>::TempStorage TS;
	const uint32_t rel = blockIdx.x - g.first_block[C];

	if (blockIdx.x >= g.first_block[C] && rel < g.count[C])
		LocalSortAgent<KB, LP>::run(g.single.size > 0 ? g.single : g.tasks[C][rel],
									g.k0, g.k1, g.v0, g.v1, g.keys_out,
									*reinterpret_cast<TS *>(smem));
	else if constexpr (C > FIRST)
		run_local_group<KB, C - 1, FIRST>(g, smem);
}

template <int KB, int FIRST, int LAST>
__global__ void
__launch_bounds__(LocalAt<typename Policy<KB>::A, FIRST>::type::THREADS,
				  LocalAt<typename Policy<KB>::A, FIRST>::type::MIN_BLOCKS)
local_sort_kernel(const LocalGroup g)
{
	extern __shared__ __align__(16) unsigned char smem[];

	let_next_kernel_start();
	run_local_group<KB, LAST, FIRST>(g, smem);
	wait_for_previous_kernel();
}

template <int KB>
__global__ void
__launch_bounds__(Policy<KB>::Partition::THREADS)
copy_kernel(const CopyRange *ranges, const uint32_t *block_range, void *k0,
			uint32_t *v0, const uint32_t *v1, bool keys_out)
{
	let_next_kernel_start();
	CopyAgent<KB>::run(ranges, block_range, k0, v0, v1, keys_out);
	wait_for_previous_kernel();
}

}								/* namespace hrs */

#endif							/* HRS_KERNELS_CUH */
