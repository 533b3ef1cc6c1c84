/*-------------------------------------------------------------------------
 *
 * hrs_agent_partition.cuh
 *	  The agents of the hybrid radix sort's partitioning passes: histogram,
 *	  plan and scatter (see hrs_agent.cuh for the list and the buffers).
 *
 * They read a pass's buckets and write the next pass's, the local-sort
 * tasks and the copy ranges, through the helpers and records of
 * hrs_agent.cuh; they use nothing of hrs_agent_local.cuh.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_AGENT_PARTITION_CUH
#define HRS_AGENT_PARTITION_CUH

#include <cub/block/block_scan.cuh>

#include "hrs_agent.cuh"

namespace hrs
{

/*
 * PlanAgent: plans one bucket, its first RADIX threads one per digit value
 * (THREADS is the block's size): in plan_kernel, or in the last histogram
 * block of the bucket to finish (see HistogramAgent).  The exclusive scan
 * of the bucket's histogram gives the sub-bucket offsets (the scatter's
 * write cursors).  Then each sub-bucket is classified: empty; large
 * (partitioned again on the next varying digit); finished (no digit left
 * that varies: all its keys are equal); or small, in which case runs of
 * small neighbours are batched into local-sort tasks.  "Next varying
 * digit" is taken from the bucket's own masks.  A bucket whose digit is
 * the same for all keys is not scattered: it moves on to the next digit
 * where it lies; one whose keys are all equal is finished where it lies.
 */
template <int KB, int THREADS>
struct PlanAgent
{
	typedef Policy<KB> Pol;
	typedef cub::BlockScan<uint32_t, THREADS> Scan;

	enum
	{
		EMPTY = 0, LARGE, FINISHED, SMALL
	};

	typedef cub::BlockScan<unsigned long long, THREADS> Scan64;
	static_assert(THREADS >= RADIX, "one plan thread per digit value");

	struct MaxOp
	{
		__device__ __forceinline__ uint32_t operator() (uint32_t a, uint32_t b) const
		{
			return a > b ? a : b;
		}
	};

	struct TempStorage
	{
		typename Scan::TempStorage scan;
		typename Scan64::TempStorage scan64;
		unsigned long long child_base;
		/* the bucket's local-sort tasks: at most one per sub-bucket */
		uint32_t	task_begin[RADIX];
		uint32_t	task_size[RADIX];
		uint32_t	ntasks;
		uint32_t	config_count[MAX_LOCAL];
		uint32_t	config_base[MAX_LOCAL];
	};

	/*
	 * Emit the bucket's tasks (task_begin, task_size) with one global
	 * atomic per local configuration, not one per task: these atomics
	 * return values, and one thread paying a round trip to L2 for each of
	 * up to 256 tasks was most of a small sort.
	 */
	__device__ static void emit_tasks(const PassParams &p, TempStorage &s,
									  uint32_t buf)
	{
		const int	t = threadIdx.x;
		const uint32_t ntasks = s.ntasks;
		int			c = 0;
		uint32_t	local = 0;

		if (t < MAX_LOCAL)
			s.config_count[t] = 0;
		__syncthreads();
		if ((uint32_t) t < ntasks)
		{
			c = Pol::local_config(s.task_size[t]);
			local = atomicAdd(&s.config_count[c], 1u);
		}
		__syncthreads();
		if (t < MAX_LOCAL && s.config_count[t] > 0)
			s.config_base[t] = atomicAdd(&p.counters->tasks[t], s.config_count[t]);
		__syncthreads();
		if ((uint32_t) t < ntasks)
		{
			uint32_t	i = s.config_base[c] + local;

			if (i < p.max_tasks)
			{
				Task		task;

				task.begin = s.task_begin[t];
				task.size = s.task_size[t];
				task.buf = buf;
				task.pad = 0;
				p.tasks[c][i] = task;
			}
			else
				atomicExch(&p.counters->overflow, 1u);
		}
	}

	/*
	 * The large sub-buckets go to the next pass with one reservation for
	 * the whole bucket (bucket indexes and key blocks in digit order, so
	 * first_block still grows with the index); their histograms are then
	 * zeroed a row at a time by all threads.
	 */
	__device__ static void emit_children(const PassParams &p, TempStorage &s,
										 uint32_t bucket, uint32_t size,
										 bool large, uint32_t begin,
										 uint32_t cnt, int next, uint32_t buf)
	{
		const bool	heavy = large && cnt > size / 2;
		Tracked		none;

		none.digit = NO_TRACK;
		none.child = 0;
		if (threadIdx.x == 0)
			p.tracked[bucket] = none;
		__syncthreads();
		const uint32_t TILE = Pol::Partition::TILE;
		const unsigned long long mine =
			large ? (1ull << 32) | ((cnt + TILE - 1) / TILE) : 0;
		unsigned long long excl,
					total;

		Scan64(s.scan64).ExclusiveSum(mine, excl, total);
		if (total == 0)
			return;
		if (threadIdx.x == 0)
			s.child_base = atomicAdd(&p.counters->alloc[p.pass + 1], total);
		__syncthreads();

		const unsigned long long at = s.child_base + excl;
		const uint32_t first = (uint32_t) (s.child_base >> 32);
		const uint32_t nchildren = (uint32_t) (total >> 32);

		if (large)
		{
			uint32_t	idx = (uint32_t) (at >> 32);

			if (idx < p.max_buckets)
			{
				write_bucket(p, idx, begin, cnt, (uint32_t) at, (uint32_t) mine,
							 next, buf, heavy);
				if (heavy)
				{
					Tracked		t;

					t.digit = threadIdx.x;
					t.child = idx;
					p.tracked[bucket] = t;
				}
			}
			else
				atomicExch(&p.counters->overflow, 1u);
		}
		if (threadIdx.x < RADIX)
			for (uint32_t j = 0; j < nchildren && first + j < p.max_buckets; j++)
				p.next_bucket_hist[(size_t) (first + j) * RADIX + threadIdx.x] = 0;
	}

	/*
	 * Batch runs of small neighbouring sub-buckets into local-sort tasks,
	 * all digits at once.  A run is broken by a sub-bucket that is large,
	 * finished or more than half MERGE_LIMIT (that one is a task of its
	 * own), not by an empty one.  Within a run, a sub-bucket starts a new
	 * task if its keys span a multiple of MERGE_LIMIT / 2, counted from the
	 * run's start; a task then holds fewer than its first sub-bucket's
	 * keys plus MERGE_LIMIT / 2, i.e. under MERGE_LIMIT.
	 */
	__device__ static void make_tasks(const PassParams &p, TempStorage &s,
									  uint8_t cls, uint32_t begin,
									  uint32_t cnt, uint32_t buf)
	{
		const uint32_t HALF = Pol::MERGE_LIMIT / 2;
		const bool	small = cls == SMALL;
		const bool	merge = small && cnt <= HALF;
		const bool	breaks = cls != EMPTY && !merge;
		uint32_t	before,		/* keys of mergeable sub-buckets before */
					run_start,
					ord,
					ntasks;

		Scan(s.scan).ExclusiveSum(merge ? cnt : 0u, before);
		__syncthreads();
		Scan(s.scan).InclusiveScan(breaks ? before : 0u, run_start, MaxOp());
		__syncthreads();

		const uint32_t at = before - run_start;
		const bool	start = (small && !merge) ||
			(merge && (at + HALF - 1) / HALF * HALF < at + cnt);

		Scan(s.scan).InclusiveSum(start ? 1u : 0u, ord, ntasks);
		if (threadIdx.x < ntasks)
			s.task_size[threadIdx.x] = 0;
		if (threadIdx.x == 0)
			s.ntasks = ntasks;
		__syncthreads();
		if (small)
		{
			atomicAdd(&s.task_size[ord - 1], cnt);
			if (start)
				s.task_begin[ord - 1] = begin;
		}
		__syncthreads();
		emit_tasks(p, s, buf);
	}

	/*
	 * Plan bucket bi.  Its histogram and masks were summed by atomics of
	 * other blocks of this kernel: they are read from L2.
	 */
	__device__ static void run(const PassParams &p, uint32_t bi, TempStorage &s)
	{
		const Bucket b = p.buckets[bi];
		const int	d = threadIdx.x;
		const bool	active = d < RADIX;
		const unsigned long long *m = p.bucket_mask + (size_t) bi * MASK_WORDS;
		uint64_t	diff[4];
		bool		varies = false;
		int			next = -1;

		uint64_t	key[4];		/* of an all-equal bucket or sub-bucket */

#pragma unroll
		for (int j = 0; j < 4; j++)
		{
			key[j] = j < KeyTraits<KB>::WORDS ? __ldcg(&m[j]) : 0;
			diff[j] = j < KeyTraits<KB>::WORDS ? key[j] ^ __ldcg(&m[4 + j]) : 0;
			if (KB == 4)
				diff[j] &= 0xFFFFFFFFull;
			varies = varies || diff[j] != 0;
		}
		if (!varies)
		{
			/* all keys of the bucket are equal: finished where they lie */
			if (threadIdx.x == 0)
			{
				p.buckets[bi].skip = 1;
				emit_finished<KB>(p, b.begin, b.size, b.buf, key);
			}
			return;
		}
		/* the next digit that varies within this bucket */
		for (int q = b.digit + 1; q < KB; q++)
			if (mask_byte<KB>(diff, q) != 0)
			{
				next = q;
				break;
			}

		uint32_t	cnt = active ? __ldcg(&p.bucket_hist[(size_t) bi * RADIX + d]) : 0;
		uint32_t	excl;

		Scan(s.scan).ExclusiveSum(cnt, excl);
		int			nonzero = __syncthreads_count(cnt != 0);

		if (nonzero == 1)
		{
			/* constant digit: no scatter; same rows, next digit */
			if (cnt != 0)
			{
				p.buckets[bi].skip = 1;
				if (next < 0)
					emit_finished<KB>(p, b.begin, b.size, b.buf, key);
				else
					emit_bucket<KB>(p, b.begin, b.size, next, b.buf);
			}
			return;
		}

		const uint32_t child_buf = b.buf ^ 1u;
		const uint32_t begin = b.begin + excl;
		uint8_t		cls;

		if (active)
			p.sub_cursor[(size_t) bi * RADIX + d] = begin;
		if (cnt == 0)
			cls = EMPTY;
		else if (cnt <= Pol::LOCAL_LIMIT)
			cls = SMALL;
		else if (next < 0)
			cls = FINISHED;
		else
			cls = LARGE;
		if (cls == FINISHED)
		{
			/* only the bucket's digit varies: the key is the AND with it set */
			const int	sh = KB == 4 ? 24 - 8 * b.digit : 56 - 8 * (b.digit & 7);
			const int	w = KB == 4 ? 0 : b.digit >> 3;

			key[w] = (key[w] & ~((uint64_t) 0xFF << sh)) | ((uint64_t) d << sh);
			emit_finished<KB>(p, begin, cnt, child_buf, key);
		}
		emit_children(p, s, bi, b.size, cls == LARGE, begin, cnt, next, child_buf);
		make_tasks(p, s, cls, begin, cnt, child_buf);
	}
};

/*
 * HistogramAgent: count the digits of one key block in shared memory (one
 * histogram per warp, so skewed inputs contend less), store the block's
 * histogram for the scatter, and add it to its bucket's histogram.  It
 * also takes the AND and OR of all key words into its bucket's masks,
 * which tell which digits vary within the bucket: the plan moves each
 * sub-bucket straight to the next of those, and finishes a bucket whose
 * keys are all equal (a heavy key of a skewed input) after this one look
 * instead of histogramming it once per remaining digit.  In the first
 * pass the one bucket is the whole input: the host reads its masks to
 * learn which digits vary anywhere.
 */
template <int KB>
struct HistogramAgent
{
	typedef KeyTraits<KB> T;
	typedef typename T::Key Key;
	typedef typename Policy<KB>::Partition P;
	static constexpr int WARPS = P::THREADS / 32;

	typedef PlanAgent<KB, P::THREADS> Plan;

	union TempStorage
	{
		uint32_t	hist[WARPS][RADIX];
		typename Plan::TempStorage plan;
		uint32_t	last;
	};

	/* AND and OR of every key word, into the global masks */
	__device__ static void reduce_masks(const Key (&k)[P::ITEMS], uint32_t count,
										unsigned long long *and_mask,
										unsigned long long *or_mask)
	{
#pragma unroll
		for (int j = 0; j < T::WORDS; j++)
		{
			uint64_t	wa = ~(uint64_t) 0,
						wo = 0;

#pragma unroll
			for (int it = 0; it < P::ITEMS; it++)
			{
				if (it * P::THREADS + threadIdx.x < count)
				{
					wa &= T::word(k[it], j);
					wo |= T::word(k[it], j);
				}
			}
			merge_masks(wa, wo, &and_mask[j], &or_mask[j]);
		}
	}

	/* histogram one key block of span's bucket */
	__device__ static void count(const PassParams &p, TempStorage &s,
								 const BlockSpan &span)
	{
		const Key  *src = (const Key *) p.keys[span.b.buf] + span.offset;
		const int	warp = threadIdx.x >> 5;

		for (int i = threadIdx.x; i < WARPS * RADIX; i += P::THREADS)
			(&s.hist[0][0])[i] = 0;

		Key			k[P::ITEMS];

		load_block_keys<Key, P::THREADS>(src, span.count, k);
		__syncthreads();
#pragma unroll
		for (int it = 0; it < P::ITEMS; it++)
		{
			uint32_t	i = it * P::THREADS + threadIdx.x;

			if (i < span.count)
				atomicAdd(&s.hist[warp][T::digit(k[it], span.b.digit)], 1u);
		}
		if (p.write_iota)
		{
			/*
			 * Pass 0 of a sort whose host does not look first: a bucket
			 * that is never scattered still needs its row indexes.
			 */
#pragma unroll
			for (int it = 0; it < P::ITEMS; it++)
			{
				uint32_t	i = it * P::THREADS + threadIdx.x;

				if (i < span.count)
					p.vals[0][span.offset + i] = span.offset + i;
			}
		}
		reduce_masks(k, span.count,
					 p.bucket_mask + (size_t) span.bucket * MASK_WORDS,
					 p.bucket_mask + (size_t) span.bucket * MASK_WORDS + 4);
		__syncthreads();
		for (int d = threadIdx.x; d < RADIX; d += P::THREADS)
		{
			uint32_t	c = 0;

#pragma unroll
			for (int w = 0; w < WARPS; w++)
				c += s.hist[w][d];
			p.block_hist[(size_t) blockIdx.x * RADIX + d] = c;
			if (c)
				atomicAdd(&p.bucket_hist[(size_t) span.bucket * RADIX + d], c);
		}
	}

	__device__ static void run(const PassParams &p, TempStorage &s)
	{
		BlockSpan	span;

		if (!locate_block<P::TILE>(p, blockIdx.x, span))
			return;

		/*
		 * A tracked bucket whose scatter found all its keys equal needs no
		 * count: the plan finishes it from its masks.
		 */
		if (!span.b.masked ||
			!masks_equal<KB>(p.bucket_mask + (size_t) span.bucket * MASK_WORDS))
			count(p, s, span);

		/*
		 * In a pass of few key blocks, the last block of the bucket to get
		 * here plans it, saving the plan kernel's launch: the barrier and
		 * thread 0's fence order every thread's atomics before its count.
		 * A fence per block costs more than a launch in a large pass.
		 */
		if (!p.plan_in_histogram)
			return;
		__syncthreads();
		if (threadIdx.x == 0)
		{
			const uint32_t blocks = (span.b.size + P::TILE - 1) / P::TILE;

			__threadfence();
			s.last = atomicAdd(&p.bucket_done[span.bucket], 1u) == blocks - 1;
			__threadfence();
		}
		__syncthreads();
		if (!s.last)
			return;
		__syncthreads();
		Plan::run(p, span.bucket, s.plan);
	}
};

/* ---------------------------------------------------------------------- */

/*
 * ScatterAgent: partition one key block into its sub-buckets.  The block
 * reserves room for its keys in each sub-bucket with one atomic per digit,
 * places its keys in shared memory grouped by digit (shared-memory atomics;
 * the order within a digit is free, the sort need not be stable), then
 * writes each group as one contiguous run.  The row indexes follow the
 * same way.
 */
template <int KB>
struct ScatterAgent
{
	typedef KeyTraits<KB> T;
	typedef typename T::Key Key;
	typedef typename Policy<KB>::Partition P;
	typedef cub::BlockScan<uint32_t, P::THREADS> Scan;

	struct TempStorage
	{
		union
		{
			Key			keys[P::TILE];
			uint32_t	vals[P::TILE];
		}			stage;
		uint8_t		digit[P::TILE];
		uint32_t	cursor[RADIX];
		uint32_t	base[RADIX];	/* global position minus local offset */
		typename Scan::TempStorage scan;
	};

	__device__ static void run(const PassParams &p, TempStorage &s)
	{
		BlockSpan	span;

		if (!locate_block<P::TILE>(p, blockIdx.x, span) || span.b.skip)
			return;
		const Key  *src = (const Key *) p.keys[span.b.buf] + span.offset;
		const uint32_t *vsrc = p.vals[span.b.buf] + span.offset;
		Key		   *dst = (Key *) p.keys[span.b.buf ^ 1];
		uint32_t   *vdst = p.vals[span.b.buf ^ 1];

		Key			k[P::ITEMS];
		uint32_t	v[P::ITEMS];
		uint32_t	pos[P::ITEMS];

		load_block_keys<Key, P::THREADS>(src, span.count, k);
		/* pass 0 sorts the whole input, whose row indexes are positions */
#pragma unroll
		for (int it = 0; it < P::ITEMS; it++)
		{
			uint32_t	i = it * P::THREADS + threadIdx.x;

			if (i < span.count)
				v[it] = p.pass == 0 ? span.offset + i : vsrc[i];
		}

		/* local offsets and global reservations per digit */
		uint32_t	h = 0,
					excl;

		if (threadIdx.x < RADIX)
			h = p.block_hist[(size_t) blockIdx.x * RADIX + threadIdx.x];
		Scan(s.scan).ExclusiveSum(h, excl);
		if (threadIdx.x < RADIX)
		{
			uint32_t	g = 0;

			if (h)
				g = atomicAdd(&p.sub_cursor[(size_t) span.bucket * RADIX + threadIdx.x], h);
			s.cursor[threadIdx.x] = excl;
			s.base[threadIdx.x] = g - excl;
		}
		__syncthreads();

		/*
		 * Group the keys by digit in shared memory; the keys of a tracked
		 * sub-bucket also go into its masks.
		 */
		const Tracked tr = p.tracked[span.bucket];
		uint64_t	ta[T::WORDS],
					to[T::WORDS];

#pragma unroll
		for (int j = 0; j < T::WORDS; j++)
		{
			ta[j] = ~(uint64_t) 0;
			to[j] = 0;
		}
#pragma unroll
		for (int it = 0; it < P::ITEMS; it++)
		{
			uint32_t	i = it * P::THREADS + threadIdx.x;

			if (i < span.count)
			{
				unsigned	dg = T::digit(k[it], span.b.digit);

				pos[it] = atomicAdd(&s.cursor[dg], 1u);
				s.stage.keys[pos[it]] = k[it];
				s.digit[pos[it]] = (uint8_t) dg;
				if (dg == tr.digit)
				{
#pragma unroll
					for (int j = 0; j < T::WORDS; j++)
					{
						ta[j] &= T::word(k[it], j);
						to[j] |= T::word(k[it], j);
					}
				}
			}
		}
		__syncthreads();

		for (uint32_t i = threadIdx.x; i < span.count; i += P::THREADS)
			dst[s.base[s.digit[i]] + i] = s.stage.keys[i];
		if (tr.digit != NO_TRACK)
		{
			unsigned long long *m = p.next_bucket_mask + (size_t) tr.child * MASK_WORDS;

#pragma unroll
			for (int j = 0; j < T::WORDS; j++)
				merge_masks(ta[j], to[j], &m[j], &m[4 + j]);
		}
		__syncthreads();

		/* the row indexes take the same places */
#pragma unroll
		for (int it = 0; it < P::ITEMS; it++)
		{
			uint32_t	i = it * P::THREADS + threadIdx.x;

			if (i < span.count)
				s.stage.vals[pos[it]] = v[it];
		}
		__syncthreads();
		for (uint32_t i = threadIdx.x; i < span.count; i += P::THREADS)
			vdst[s.base[s.digit[i]] + i] = s.stage.vals[i];
	}
};

}								/* namespace hrs */

#endif							/* HRS_AGENT_PARTITION_CUH */
