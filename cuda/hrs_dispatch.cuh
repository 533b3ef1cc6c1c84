/*-------------------------------------------------------------------------
 *
 * hrs_dispatch.cuh
 *	  Host dispatch of the hybrid radix sort for one key width: scratch
 *	  layout, the partitioning passes, the local sorts.
 *
 * A pass is three launches, histogram, plan and scatter (two in a small
 * pass, whose histogram plans), with grids that cover the key blocks and
 * buckets that the previous pass's plans created; those counts live on
 * the device, and the first block of each scatter writes them to pinned
 * host memory, where the host finds them while the scatter runs.  The local sorts are one launch per group of
 * configurations with the same block shape, and the copies one more.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_DISPATCH_CUH
#define HRS_DISPATCH_CUH

#include <stddef.h>
#include <string.h>

#include <atomic>

#include "hrs.h"
#include "hrs_kernels.cuh"

namespace hrs
{

/* what the host reads back */
struct Staging
{
	unsigned long long and_mask[4];
	unsigned long long or_mask[4];
	HostCounts	counts;			/* written by the device (see HostCounts) */
};

/* scratch layout, computed the same way for sizing and for running */
template <int KB>
struct Layout
{
	typedef Policy<KB> Pol;

	size_t		max_buckets,
				max_blocks,
				max_tasks,
				max_copies;
	size_t		off_counters,
				off_buckets[2],
				off_bucket_hist[2],
				off_bucket_mask[2],
				off_bucket_done[2],
				off_tracked,
				off_block_bucket[2],
				off_copy_block_range,
				off_sub_cursor,
				off_block_hist,
				off_tasks[MAX_LOCAL],
				off_copies,
				total;

	static size_t take(size_t &at, size_t bytes)
	{
		size_t		o = at;

		at += (bytes + 255) & ~(size_t) 255;
		return o;
	}

	explicit Layout(size_t n)
	{
		size_t		at = 0;

		/* every bucket of a pass is larger than LOCAL_LIMIT, and disjoint */
		max_buckets = n / Pol::LOCAL_LIMIT + 2;
		max_blocks = n / Pol::Partition::TILE + max_buckets + 1;
		/* two neighbouring tasks of one parent hold > MERGE_LIMIT keys */
		max_tasks = 2 * (n / Pol::MERGE_LIMIT) + (size_t) KB * max_buckets + 2;
		max_copies = max_buckets;

		off_counters = take(at, sizeof(Counters));
		for (int i = 0; i < 2; i++)
			off_buckets[i] = take(at, max_buckets * sizeof(Bucket));
		for (int i = 0; i < 2; i++)
			off_bucket_hist[i] = take(at, max_buckets * RADIX * sizeof(uint32_t));
		for (int i = 0; i < 2; i++)
			off_bucket_mask[i] = take(at, max_buckets * MASK_WORDS *
									  sizeof(unsigned long long));
		for (int i = 0; i < 2; i++)
			off_bucket_done[i] = take(at, max_buckets * sizeof(uint32_t));
		off_tracked = take(at, max_buckets * sizeof(Tracked));
		for (int i = 0; i < 2; i++)
			off_block_bucket[i] = take(at, max_blocks * sizeof(uint32_t));
		off_copy_block_range = take(at, max_blocks * sizeof(uint32_t));
		off_sub_cursor = take(at, max_buckets * RADIX * sizeof(uint32_t));
		off_block_hist = take(at, max_blocks * RADIX * sizeof(uint32_t));
		for (int i = 0; i < Pol::NUM_LOCAL; i++)
			off_tasks[i] = take(at, max_tasks * sizeof(Task));
		off_copies = take(at, max_copies * sizeof(CopyRange));
		total = at;
	}
};

#define HRS_TRY(call, what) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
			return cuda_status(e_, (what), errbuf, errlen); \
	} while (0)

/*
 * Launch a kernel that may overlap the one before it in the stream
 * (programmatic dependent launch; see hrs_kernels.cuh), or, with overlap
 * false, one that waits for it as usual.
 */
template <typename... Params, typename... Args>
static cudaError_t
launch_overlapping(bool overlap, void (*kernel) (Params...), unsigned grid,
				   unsigned threads, size_t smem, cudaStream_t stream,
				   Args... args)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr = {};

	cfg.gridDim = dim3(grid);
	cfg.blockDim = dim3(threads);
	cfg.dynamicSmemBytes = smem;
	cfg.stream = stream;
	attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
	attr.val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = &attr;
	cfg.numAttrs = overlap ? 1 : 0;
	return cudaLaunchKernelEx(&cfg, kernel, args...);
}

/* dynamic shared memory of launch group FIRST..LAST */
template <int KB, int FIRST, int LAST>
static constexpr size_t
group_smem()
{
	typedef typename LocalAt<typename Policy<KB>::A, LAST>::type LP;
	constexpr size_t m = sizeof(typename LocalSortAgent<KB, LP>::TempStorage);

	if constexpr (LAST > FIRST)
		return group_smem<KB, FIRST, LAST - 1>() > m ? group_smem<KB, FIRST, LAST - 1>() : m;
	else
		return m;
}

/*
 * Launch the local sorts from[c] .. tasks[c] - 1 of each configuration c
 * on stream, one launch per group of configurations (Policy::group_last)
 * starting at FIRST; single, when its size is not 0, is the only task.
 * *launched says whether a local sort is already the last kernel on the
 * stream (the next may then overlap it).
 */
template <int KB, int FIRST>
static gs_status
launch_locals(const SortArgs &a, cudaStream_t stream, const PassParams &p,
			  const uint32_t *from, const uint32_t *tasks, const Task &single,
			  bool *launched, char *errbuf, size_t errlen)
{
	if constexpr (FIRST < Policy<KB>::NUM_LOCAL)
	{
		constexpr int LAST = Policy<KB>::template group_last<FIRST>();
		typedef typename LocalAt<typename Policy<KB>::A, FIRST>::type LP;
		LocalGroup	g;
		uint32_t	total = 0;

		memset(&g, 0, sizeof(g));
		for (int c = LAST; c >= FIRST; c--)
		{
			g.tasks[c] = p.tasks[c] + from[c];
			g.first_block[c] = total;
			g.count[c] = tasks[c] - from[c];
			total += g.count[c];
		}
		if (total > 0)
		{
			const int	smem = (int) group_smem<KB, FIRST, LAST>();

			g.k0 = a.keys[0];
			g.k1 = a.keys[1];
			g.v0 = a.vals[0];
			g.v1 = a.vals[1];
			g.keys_out = a.keys_out;
			g.single = single;
			/*
			 * Once per kernel and device (the call costs the host about a
			 * microsecond, on the critical path of a small sort).
			 */
			static std::atomic<unsigned long long> smem_set(0);
			int			dev = 0;

			HRS_TRY(cudaGetDevice(&dev), "cudaGetDevice");
			if (dev >= 64 ||
				!(smem_set.load(std::memory_order_relaxed) & (1ull << dev)))
			{
				HRS_TRY(cudaFuncSetAttribute(local_sort_kernel<KB, FIRST, LAST>,
											 cudaFuncAttributeMaxDynamicSharedMemorySize,
											 smem), "cudaFuncSetAttribute");
				if (dev < 64)
					smem_set.fetch_or(1ull << dev, std::memory_order_relaxed);
			}
			HRS_TRY(launch_overlapping(*launched, local_sort_kernel<KB, FIRST, LAST>,
									   total, LP::THREADS, smem, stream, g),
					"local sort launch");
			*launched = true;
		}
		return launch_locals<KB, LAST + 1>(a, stream, p, from, tasks, single,
										   launched, errbuf, errlen);
	}
	return GS_OK;
}

/*
 * Local sorts started early on the side stream must end before the sort
 * returns, whichever way it returns: until the side stream is joined to
 * the main one, leaving the scope waits for it.
 */
struct SideGuard
{
	cudaStream_t side = NULL;

	~SideGuard()
	{
		if (side != NULL)
			(void) cudaStreamSynchronize(side);
	}
};

static inline int
iota_grid(size_t n, int threads, int sm_count)
{
	size_t		grid = (n + threads - 1) / threads;

	return (int) (grid > (size_t) sm_count * 8 ? (size_t) sm_count * 8 : grid);
}

/* the scratch's arrays, as the first pass sees them */
template <int KB>
static void
init_pass_params(const SortArgs &a, const Layout<KB> &L, char *base,
				 Counters *counters, PassParams &p)
{
	typedef Policy<KB> Pol;

	memset(&p, 0, sizeof(p));
	p.keys[0] = a.keys[0];
	p.keys[1] = a.keys[1];
	p.vals[0] = a.vals[0];
	p.vals[1] = a.vals[1];
	p.sub_cursor = (uint32_t *) (base + L.off_sub_cursor);
	p.block_hist = (uint32_t *) (base + L.off_block_hist);
	for (int i = 0; i < Pol::NUM_LOCAL; i++)
		p.tasks[i] = (Task *) (base + L.off_tasks[i]);
	p.copies = (CopyRange *) (base + L.off_copies);
	p.counters = counters;
	p.max_buckets = (uint32_t) L.max_buckets;
	p.max_tasks = (uint32_t) L.max_tasks;
	p.max_copies = (uint32_t) L.max_copies;
	p.pass = 0;
	p.write_iota = 0;
	p.buckets = (Bucket *) (base + L.off_buckets[0]);
	p.next_buckets = (Bucket *) (base + L.off_buckets[1]);
	p.bucket_hist = (uint32_t *) (base + L.off_bucket_hist[0]);
	p.next_bucket_hist = (uint32_t *) (base + L.off_bucket_hist[1]);
	p.bucket_mask = (unsigned long long *) (base + L.off_bucket_mask[0]);
	p.next_bucket_mask = (unsigned long long *) (base + L.off_bucket_mask[1]);
	p.bucket_done = (uint32_t *) (base + L.off_bucket_done[0]);
	p.next_bucket_done = (uint32_t *) (base + L.off_bucket_done[1]);
	p.tracked = (Tracked *) (base + L.off_tracked);
	p.block_bucket = (uint32_t *) (base + L.off_block_bucket[0]);
	p.next_block_bucket = (uint32_t *) (base + L.off_block_bucket[1]);
	p.copy_block_range = (uint32_t *) (base + L.off_copy_block_range);
	p.max_blocks = (uint32_t) L.max_blocks;
}

/*
 * The passes.  The counts a pass's plan made (buckets and key blocks
 * of the next pass, tasks, copies) come back while its scatter runs,
 * so the next pass is launched with exact grids, and the loop ends as
 * soon as no bucket is left, with the final counts in hand.
 *
 * Returns when no bucket is left, the digits ran out or a work list
 * overflowed; *final_counts says whether the counts in st are final.  The
 * local sorts launched early on the side stream are counted in started[]
 * (guard.side is set once the side stream is used).
 */
template <int KB>
static gs_status
run_passes(const SortArgs &a, const Layout<KB> &L, char *base, Staging *st,
		   PassParams &p, int varying, bool counted, uint32_t nblocks0,
		   uint32_t fused_limit, const Task &single,
		   uint32_t (&started)[MAX_LOCAL], bool *final_counts_out,
		   SideGuard &guard, char *errbuf, size_t errlen)
{
	typedef typename Policy<KB>::Partition Part;
	uint32_t	nb = 1,
				nblocks = nblocks0;
	bool		final_counts = false;
	uint32_t	side_upto[MAX_LOCAL];	/* local sorts to launch next on the side */
	bool		side_pending = false;
	gs_status	rc;

	for (int pass = 0; pass < varying && nb > 0; pass++)
	{
		const int	cur = pass & 1;

		p.pass = pass;
		p.buckets = (Bucket *) (base + L.off_buckets[cur]);
		p.next_buckets = (Bucket *) (base + L.off_buckets[cur ^ 1]);
		p.bucket_hist = (uint32_t *) (base + L.off_bucket_hist[cur]);
		p.next_bucket_hist = (uint32_t *) (base + L.off_bucket_hist[cur ^ 1]);
		p.bucket_mask = (unsigned long long *) (base + L.off_bucket_mask[cur]);
		p.next_bucket_mask = (unsigned long long *) (base + L.off_bucket_mask[cur ^ 1]);
		p.bucket_done = (uint32_t *) (base + L.off_bucket_done[cur]);
		p.next_bucket_done = (uint32_t *) (base + L.off_bucket_done[cur ^ 1]);
		p.block_bucket = (uint32_t *) (base + L.off_block_bucket[cur]);
		p.next_block_bucket = (uint32_t *) (base + L.off_block_bucket[cur ^ 1]);

		if (pass > 0 || !counted)
		{
			p.plan_in_histogram = nblocks <= fused_limit;
			HRS_TRY(launch_overlapping(true, histogram_kernel<KB>, nblocks,
									   Part::THREADS, 0, a.stream, p),
					"histogram launch");
			p.write_iota = 0;
		}
		if (!p.plan_in_histogram)
		{
			HRS_TRY(launch_overlapping(true, plan_kernel<KB>, nb, RADIX, 0,
									   a.stream, p), "plan launch");
		}
		HRS_TRY(launch_overlapping(true, scatter_kernel<KB>, nblocks,
								   Part::THREADS, 0, a.stream, p),
				"scatter launch");
		if (side_pending)
		{
			/* the previous pass's small buckets, on the side stream */
			bool		side_launched = false;

			HRS_TRY(cudaStreamWaitEvent(a.side, a.side_mark[0], 0),
					"cudaStreamWaitEvent");
			guard.side = a.side;
			rc = launch_locals<KB, 0>(a, a.side, p, started, side_upto, single,
									  &side_launched, errbuf, errlen);
			if (rc != GS_OK)
				return rc;
			memcpy(started, side_upto, sizeof(started));
			side_pending = false;
		}
		rc = wait_counts(&st->counts.seq, (uint32_t) pass + 1, a.stream,
						 a.cancel, a.cancel_arg, errbuf, errlen);
		/* on cancel: let the scatter end before returning */
		if (rc != GS_OK)
		{
			(void) cudaStreamSynchronize(a.stream);
			return rc;
		}
		if (st->counts.counters.overflow)
			break;
		nb = (uint32_t) (st->counts.counters.alloc[pass + 1] >> 32);
		nblocks = (uint32_t) st->counts.counters.alloc[pass + 1];
		final_counts = nb == 0;

		/*
		 * More passes to come: the buckets this pass finished small can be
		 * sorted beside them on the side stream (their ranges are not
		 * touched again).  The fork is marked here, after this pass's
		 * scatter; the launches wait until the next pass is enqueued, so
		 * that they do not delay it.
		 */
		if (a.side != NULL && nb > 0)
		{
			uint32_t	fresh = 0;

			memcpy(side_upto, st->counts.counters.tasks, sizeof(side_upto));
			for (int c = 0; c < MAX_LOCAL; c++)
				fresh += side_upto[c] - started[c];
			if (fresh > 0)
			{
				HRS_TRY(cudaEventRecord(a.side_mark[0], a.stream), "cudaEventRecord");
				side_pending = true;
			}
		}
	}
	*final_counts_out = final_counts;
	return GS_OK;
}

/*
 * After the passes: the final counts, the local sorts not launched yet and
 * the copies, and the main stream joined to the side stream.
 */
template <int KB>
static gs_status
finish_sort(const SortArgs &a, SortResult *res, const PassParams &p,
			Staging *st, Counters *counters, bool final_counts,
			const uint32_t *started, const Task &single, bool launched,
			SideGuard &guard, char *errbuf, size_t errlen)
{
	typedef typename Policy<KB>::Partition Part;
	gs_status	rc;

	if (!final_counts)
	{
		/* the loop ran out of digits or a list overflowed */
		HRS_TRY(cudaMemcpyAsync(&st->counts.counters, counters, sizeof(Counters),
								cudaMemcpyDeviceToHost, a.stream), "cudaMemcpyAsync");
		rc = wait_stream(a.stream, a.event, a.cancel, a.cancel_arg, errbuf, errlen);
		if (rc != GS_OK)
			return rc;
	}
	if (st->counts.counters.overflow)
	{
		snprintf(errbuf, errlen, "hybrid radix sort: a work list overflowed");
		return GS_ERR_INTERNAL;
	}
	for (int pass = 0; pass <= MAX_DIGITS; pass++)
		if ((st->counts.counters.alloc[pass] >> 32) != 0)
			res->passes = pass + 1;

	/* copy the counts: the staging buffer is the next sort's once we return */
	uint32_t	tasks[MAX_LOCAL];
	const uint32_t ncopy_blocks = (uint32_t) st->counts.counters.copy_alloc;

	memcpy(tasks, st->counts.counters.tasks, sizeof(tasks));
	rc = launch_locals<KB, 0>(a, a.stream, p, started, tasks, single,
							  &launched, errbuf, errlen);
	if (rc != GS_OK)
		return rc;
	if (ncopy_blocks > 0)
		HRS_TRY(launch_overlapping(launched, copy_kernel<KB>, ncopy_blocks,
								   Part::THREADS, 0, a.stream,
								   (const CopyRange *) p.copies,
								   (const uint32_t *) p.copy_block_range,
								   a.keys[0], a.vals[0],
								   (const uint32_t *) a.vals[1], a.keys_out),
				"copy launch");
	if (guard.side != NULL)
	{
		/* the main stream goes on only once the side stream's sorts are done */
		HRS_TRY(cudaEventRecord(a.side_mark[1], a.side), "cudaEventRecord");
		HRS_TRY(cudaStreamWaitEvent(a.stream, a.side_mark[1], 0),
				"cudaStreamWaitEvent");
		guard.side = NULL;
	}
	return GS_OK;
}

template <int KB>
static gs_status
sort_width(const SortArgs &a, SortResult *res, char *errbuf, size_t errlen)
{
	typedef Policy<KB> Pol;
	typedef typename Pol::Partition Part;
	static_assert(Pol::NUM_LOCAL <= MAX_LOCAL, "too many local configurations");
	const Layout<KB> L(a.n);
	char	   *base = (char *) a.temp;
	Staging    *st = (Staging *) a.staging;
	Counters   *counters = (Counters *) (base + L.off_counters);
	const int	iota_blocks = iota_grid(a.n, Pol::IOTA_THREADS, a.sm_count);
	Task		single;
	bool		launched = false;	/* a local sort or copy is launched */
	gs_status	rc;

	res->passes = 0;
	memset(&single, 0, sizeof(single));
	if (a.temp_bytes < L.total)
	{
		snprintf(errbuf, errlen, "scratch of %zu bytes is smaller than the %zu needed",
				 a.temp_bytes, L.total);
		return GS_ERR_INTERNAL;
	}
	if (a.n < 2)
	{
		/* nothing to order; vals[0] still needs the row index */
		if (a.n == 1)
			HRS_TRY(cudaMemsetAsync(a.vals[0], 0, sizeof(uint32_t), a.stream),
					"cudaMemsetAsync");
		return GS_OK;
	}

	PassParams	p;
	const uint32_t nblocks0 = (uint32_t) ((a.n + Part::TILE - 1) / Part::TILE);

	init_pass_params<KB>(a, L, base, counters, p);

	if (a.n <= Pol::LOCAL_LIMIT)
	{
		/* the whole input is one local sort, of row indexes made here */
		uint32_t	tasks[MAX_LOCAL] = {0};
		const uint32_t none[MAX_LOCAL] = {0};

		iota_kernel<KB><<<iota_blocks, Pol::IOTA_THREADS, 0, a.stream>>>(a.vals[0], a.n);
		HRS_TRY(cudaGetLastError(), "iota launch");
		single.size = (uint32_t) a.n;
		tasks[Pol::local_config(a.n)] = 1;
		return launch_locals<KB, 0>(a, a.stream, p, none, tasks, single,
									&launched, errbuf, errlen);
	}

	/*
	 * The whole input is the one bucket of pass 0, on digit 0.  A large
	 * sort first histograms it and reads back which digits vary anywhere,
	 * so that it starts at the first one that does (and an all-equal input
	 * costs one pass).  A small one cannot afford that round trip: its
	 * first pass starts at once, its histogram writes the row indexes (a
	 * bucket that is never scattered needs them), and the plan moves past
	 * constant digits as it does for every bucket.
	 */
	Bucket		seed;
	int			varying = KB;	/* passes at most */
	bool		counted = false;	/* pass 0's histogram is done */
	const unsigned long long alloc0 = (1ull << 32) | nblocks0;
	const uint32_t fused_limit = (uint32_t) a.sm_count * Pol::FUSED_PLAN_BLOCKS_PER_SM;

	memset(&seed, 0, sizeof(seed));
	seed.size = (uint32_t) a.n;
	{
		void	   *dev = NULL;

		HRS_TRY(cudaHostGetDevicePointer(&dev, a.staging, 0),
				"cudaHostGetDevicePointer");
		p.host = (HostCounts *) ((char *) dev + offsetof(Staging, counts));
	}
	st->counts.seq = 0;
	init_kernel<KB><<<1, Pol::INIT_THREADS, 0, a.stream>>>(p, seed, alloc0);
	HRS_TRY(cudaGetLastError(), "init launch");
	if (a.n > Pol::PRESCAN_ROWS)
	{
		int			first = -1;
		uint64_t	diff[4];

		p.plan_in_histogram = nblocks0 <= fused_limit;
		HRS_TRY(launch_overlapping(true, histogram_kernel<KB>, nblocks0,
								   Part::THREADS, 0, a.stream, p),
				"histogram launch");
		HRS_TRY(cudaMemcpyAsync(st->and_mask, p.bucket_mask, sizeof(st->and_mask),
								cudaMemcpyDeviceToHost, a.stream), "cudaMemcpyAsync");
		HRS_TRY(cudaMemcpyAsync(st->or_mask, p.bucket_mask + 4, sizeof(st->or_mask),
								cudaMemcpyDeviceToHost, a.stream), "cudaMemcpyAsync");
		rc = wait_stream(a.stream, a.event, a.cancel, a.cancel_arg, errbuf, errlen);
		if (rc != GS_OK)
			return rc;

		/* the digits that vary somewhere, in order */
		varying = 0;
		for (int j = 0; j < 4; j++)
			diff[j] = st->and_mask[j] ^ st->or_mask[j];
		for (int d = KB - 1; d >= 0; d--)
		{
			if (mask_byte<KB>(diff, d) != 0)
			{
				first = d;
				varying++;
			}
		}
		if (first < 0)
		{
			/* all keys equal: the identity permutation */
			iota_kernel<KB><<<iota_blocks, Pol::IOTA_THREADS, 0, a.stream>>>(a.vals[0], a.n);
			HRS_TRY(cudaGetLastError(), "iota launch");
			return GS_OK;
		}
		if (first != 0)
		{
			/* digit 0 is constant: count the first digit that is not */
			seed.digit = (uint8_t) first;
			init_kernel<KB><<<1, Pol::INIT_THREADS, 0, a.stream>>>(p, seed, alloc0);
			HRS_TRY(cudaGetLastError(), "init launch");
		}
		else
			counted = true;
	}
	else
		p.write_iota = 1;

	/* the passes, then the local sorts and copies */
	bool		final_counts = false;
	uint32_t	started[MAX_LOCAL] = {0};	/* local sorts launched early */
	SideGuard	guard;

	rc = run_passes<KB>(a, L, base, st, p, varying, counted, nblocks0,
						fused_limit, single, started, &final_counts, guard,
						errbuf, errlen);
	if (rc != GS_OK)
		return rc;
	return finish_sort<KB>(a, res, p, st, counters, final_counts, started,
						   single, launched, guard, errbuf, errlen);
}

template <int KB>
static size_t
temp_bytes_width(size_t n)
{
	return Layout<KB>(n).total;
}

}								/* namespace hrs */

#endif							/* HRS_DISPATCH_CUH */
