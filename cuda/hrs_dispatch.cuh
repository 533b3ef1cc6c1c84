/*-------------------------------------------------------------------------
 *
 * hrs_dispatch.cuh
 *	  Host dispatch of the hybrid radix sort for one key width: scratch
 *	  layout, the partitioning passes, the local sorts.
 *
 * A pass is three launches (histogram, plan, scatter) whose grids cover
 * the key blocks and buckets that the previous pass's plan created; those
 * counts live on the device, so a large sort reads them back once per pass
 * (overlapped with the scatter), and a small sort launches grids sized for
 * the worst case instead and looks only every other pass.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_DISPATCH_CUH
#define HRS_DISPATCH_CUH

#include <string.h>

#include "hrs.h"
#include "hrs_kernels.cuh"

namespace hrs
{

/* what the host reads back */
struct Staging
{
	unsigned long long and_mask[4];
	unsigned long long or_mask[4];
	Counters	counters;
	Bucket		seed_bucket;
	Task		seed_task;
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

template <int KB, typename LP>
static gs_status
launch_local(const SortArgs &a, const Task *tasks, uint32_t count,
			 char *errbuf, size_t errlen)
{
	typedef typename LocalSortAgent<KB, LP>::TempStorage TS;
	const int	smem = (int) sizeof(TS);

	if (count == 0)
		return GS_OK;
	HRS_TRY(cudaFuncSetAttribute(local_sort_kernel<KB, LP>,
								 cudaFuncAttributeMaxDynamicSharedMemorySize,
								 smem), "cudaFuncSetAttribute");
	local_sort_kernel<KB, LP><<<count, LP::THREADS, smem, a.stream>>>
		(tasks, a.keys[0], a.keys[1], a.vals[0], a.vals[1], a.keys_out);
	HRS_TRY(cudaGetLastError(), "local sort launch");
	return GS_OK;
}

/* launch local-sort configurations C .. NUM_LOCAL-1 */
template <int KB, int C>
static gs_status
launch_locals(const SortArgs &a, const PassParams &p, const Counters &c,
			  char *errbuf, size_t errlen)
{
	if constexpr (C < Policy<KB>::NUM_LOCAL)
	{
		gs_status	rc = launch_local<KB, typename LocalAt<Policy<KB>, C>::type>
			(a, p.tasks[C], c.tasks[C], errbuf, errlen);

		if (rc != GS_OK)
			return rc;
		return launch_locals<KB, C + 1>(a, p, c, errbuf, errlen);
	}
	return GS_OK;
}

template <int KB>
static gs_status
sort_width(const SortArgs &a, SortResult *res, char *errbuf, size_t errlen)
{
	typedef Policy<KB> Pol;
	typedef typename Pol::Partition Part;
	typedef KeyTraits<KB> T;
	static_assert(Pol::NUM_LOCAL <= MAX_LOCAL, "too many local configurations");
	const Layout<KB> L(a.n);
	char	   *t = (char *) a.temp;
	Staging    *st = (Staging *) a.staging;
	Counters   *counters = (Counters *) (t + L.off_counters);
	gs_status	rc;

	res->passes = 0;
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

	char	   *base = t;
	PassParams	p;
	const uint32_t nblocks0 = (uint32_t) ((a.n + Part::TILE - 1) / Part::TILE);

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
	p.buckets = (Bucket *) (base + L.off_buckets[0]);
	p.next_buckets = (Bucket *) (base + L.off_buckets[1]);
	p.bucket_hist = (uint32_t *) (base + L.off_bucket_hist[0]);
	p.next_bucket_hist = (uint32_t *) (base + L.off_bucket_hist[1]);
	p.bucket_mask = (unsigned long long *) (base + L.off_bucket_mask[0]);
	p.next_bucket_mask = (unsigned long long *) (base + L.off_bucket_mask[1]);

	/*
	 * The first histogram pass, on digit 0, also finds which digits vary
	 * anywhere.  The whole input is the one bucket of pass 0.
	 */
	HRS_TRY(cudaMemsetAsync(p.bucket_mask, 0xFF, 4 * sizeof(unsigned long long), a.stream),
			"cudaMemsetAsync");
	HRS_TRY(cudaMemsetAsync(p.bucket_mask + 4, 0, 4 * sizeof(unsigned long long), a.stream),
			"cudaMemsetAsync");
	HRS_TRY(cudaMemsetAsync(counters, 0, sizeof(Counters), a.stream),
			"cudaMemsetAsync");
	HRS_TRY(cudaMemsetAsync(p.bucket_hist, 0, RADIX * sizeof(uint32_t), a.stream),
			"cudaMemsetAsync");
	st->seed_bucket.begin = 0;
	st->seed_bucket.size = (uint32_t) a.n;
	st->seed_bucket.first_block = 0;
	st->seed_bucket.digit = 0;
	st->seed_bucket.buf = 0;
	st->seed_bucket.skip = 0;
	st->seed_bucket.pad = 0;
	st->counters.alloc[0] = (1ull << 32) | nblocks0;
	HRS_TRY(cudaMemcpyAsync(p.buckets, &st->seed_bucket, sizeof(Bucket),
							cudaMemcpyHostToDevice, a.stream), "cudaMemcpyAsync");
	HRS_TRY(cudaMemcpyAsync(&counters->alloc[0], &st->counters.alloc[0],
							sizeof(unsigned long long), cudaMemcpyHostToDevice,
							a.stream), "cudaMemcpyAsync");
	histogram_kernel<KB><<<nblocks0, Part::THREADS, 0, a.stream>>>(p);
	HRS_TRY(cudaGetLastError(), "histogram launch");
	HRS_TRY(cudaMemcpyAsync(st->and_mask, p.bucket_mask, sizeof(st->and_mask),
							cudaMemcpyDeviceToHost, a.stream), "cudaMemcpyAsync");
	HRS_TRY(cudaMemcpyAsync(st->or_mask, p.bucket_mask + 4, sizeof(st->or_mask),
							cudaMemcpyDeviceToHost, a.stream), "cudaMemcpyAsync");
	rc = wait_stream(a.stream, a.event, a.cancel, a.cancel_arg, errbuf, errlen);
	if (rc != GS_OK)
		return rc;

	/* the digits that vary somewhere, in order */
	int			first = -1,
				varying = 0;

	{
		uint64_t	diff[4];

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
	}

	/* no pass at all: the row indexes must be written here */
	if (first < 0 || a.n <= Pol::LOCAL_LIMIT)
	{
		size_t		grid = (a.n + Pol::IOTA_THREADS - 1) / Pol::IOTA_THREADS;

		if (grid > (size_t) a.sm_count * 8)
			grid = (size_t) a.sm_count * 8;
		iota_kernel<KB><<<(unsigned) grid, Pol::IOTA_THREADS, 0, a.stream>>>(a.vals[0], a.n);
		HRS_TRY(cudaGetLastError(), "iota launch");
	}
	if (first < 0)
		return GS_OK;			/* all keys equal: the identity permutation */

	bool		partitioned = false;

	if (a.n <= Pol::LOCAL_LIMIT)
	{
		/* the whole input is one local sort */
		int			c = Pol::local_config(a.n);

		st->seed_task.begin = 0;
		st->seed_task.size = (uint32_t) a.n;
		st->seed_task.buf = 0;
		st->seed_task.pad = 0;
		HRS_TRY(cudaMemcpyAsync(p.tasks[c], &st->seed_task, sizeof(Task),
								cudaMemcpyHostToDevice, a.stream), "cudaMemcpyAsync");
		st->counters.tasks[c] = 1;
		HRS_TRY(cudaMemcpyAsync(&counters->tasks[c], &st->counters.tasks[c],
								sizeof(uint32_t), cudaMemcpyHostToDevice, a.stream),
				"cudaMemcpyAsync");
	}
	else
	{
		uint32_t	nblocks = nblocks0;
		const bool	sync_free = a.n <= Pol::SYNC_FREE_ROWS;
		uint32_t	nb = 1;

		if (first != 0)
		{
			/* digit 0 is constant: count the first digit that is not */
			st->seed_bucket.digit = (uint8_t) first;
			HRS_TRY(cudaMemcpyAsync(p.buckets, &st->seed_bucket, sizeof(Bucket),
									cudaMemcpyHostToDevice, a.stream), "cudaMemcpyAsync");
			HRS_TRY(cudaMemsetAsync(p.bucket_hist, 0, RADIX * sizeof(uint32_t), a.stream),
					"cudaMemsetAsync");
		}
		partitioned = true;

		for (int pass = 0; pass < varying && nb > 0; pass++)
		{
			const int	cur = pass & 1;
			/* a small sort still looks every other pass whether work is left */
			const bool	check = !sync_free || (pass & 1) == 1;
			uint32_t	grid_blocks = sync_free ? (uint32_t) L.max_blocks : nblocks;
			uint32_t	grid_buckets = sync_free ? (uint32_t) L.max_buckets : nb;

			p.pass = pass;
			p.buckets = (Bucket *) (base + L.off_buckets[cur]);
			p.next_buckets = (Bucket *) (base + L.off_buckets[cur ^ 1]);
			p.bucket_hist = (uint32_t *) (base + L.off_bucket_hist[cur]);
			p.next_bucket_hist = (uint32_t *) (base + L.off_bucket_hist[cur ^ 1]);
			p.bucket_mask = (unsigned long long *) (base + L.off_bucket_mask[cur]);
			p.next_bucket_mask = (unsigned long long *) (base + L.off_bucket_mask[cur ^ 1]);

			if (pass > 0 || first != 0)
			{
				histogram_kernel<KB><<<grid_blocks, Part::THREADS, 0, a.stream>>>(p);
				HRS_TRY(cudaGetLastError(), "histogram launch");
			}
			plan_kernel<KB><<<grid_buckets, Pol::PLAN_THREADS, 0, a.stream>>>(p);
			HRS_TRY(cudaGetLastError(), "plan launch");
			if (check)
			{
				HRS_TRY(cudaMemcpyAsync(&st->counters, counters, sizeof(Counters),
										cudaMemcpyDeviceToHost, a.stream),
						"cudaMemcpyAsync");
				HRS_TRY(cudaEventRecord(a.event, a.stream), "cudaEventRecord");
			}
			scatter_kernel<KB><<<grid_blocks, Part::THREADS, 0, a.stream>>>(p);
			HRS_TRY(cudaGetLastError(), "scatter launch");
			if (check)
			{
				/* the plan's counts come back while the scatter runs */
				rc = wait_event(a.event, a.cancel, a.cancel_arg, errbuf, errlen);
				/* on cancel: let the scatter end before returning */
				if (rc != GS_OK)
				{
					(void) cudaStreamSynchronize(a.stream);
					return rc;
				}
				if (st->counters.overflow)
					break;
				nb = (uint32_t) (st->counters.alloc[pass + 1] >> 32);
				nblocks = (uint32_t) st->counters.alloc[pass + 1];
			}
		}
	}

	/* how the passes went, and what is left for local sorts and copies */
	HRS_TRY(cudaMemcpyAsync(&st->counters, counters, sizeof(Counters),
							cudaMemcpyDeviceToHost, a.stream), "cudaMemcpyAsync");
	rc = wait_stream(a.stream, a.event, a.cancel, a.cancel_arg, errbuf, errlen);
	if (rc != GS_OK)
		return rc;
	if (st->counters.overflow)
	{
		snprintf(errbuf, errlen, "hybrid radix sort: a work list overflowed");
		return GS_ERR_INTERNAL;
	}
	for (int pass = 0; partitioned && pass <= MAX_DIGITS; pass++)
		if ((st->counters.alloc[pass] >> 32) != 0)
			res->passes = pass + 1;

	rc = launch_locals<KB, 0>(a, p, st->counters, errbuf, errlen);
	if (rc != GS_OK)
		return rc;
	{
		uint32_t	nranges = (uint32_t) (st->counters.copy_alloc >> 32);
		uint32_t	nblocks = (uint32_t) st->counters.copy_alloc;

		if (nblocks > 0)
		{
			copy_kernel<KB><<<nblocks, Part::THREADS, 0, a.stream>>>
				(p.copies, nranges, a.keys[0], a.keys[1], a.vals[0], a.vals[1],
				 a.keys_out);
			HRS_TRY(cudaGetLastError(), "copy launch");
		}
	}
	return GS_OK;
}

template <int KB>
static size_t
temp_bytes_width(size_t n)
{
	return Layout<KB>(n).total;
}

}								/* namespace hrs */

#endif							/* HRS_DISPATCH_CUH */
