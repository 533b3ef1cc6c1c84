/*-------------------------------------------------------------------------
 *
 * hrs_agent.cuh
 *	  Per-block agents of the hybrid MSD radix sort (Stehle & Jacobsen,
 *	  SIGMOD 2017).  Each agent is what one thread block does in one
 *	  kernel; the kernels in hrs_kernels.cuh only construct and run them.
 *
 *	  HistogramAgent  digit histogram of one key block of a bucket (and, in
 *	                  the first pass, which digits vary at all); in a small
 *	                  pass the last block of a bucket then plans it.
 *	  PlanAgent       one bucket: sub-bucket offsets, and what becomes of
 *	                  each sub-bucket (partitioned again, sorted locally,
 *	                  batched with its small neighbours, or finished).
 *	  ScatterAgent    one key block: partition it in shared memory, then
 *	                  write each sub-bucket's run with coalesced stores.
 *	  LocalSortAgent  sort one small bucket (or batch) in shared memory.
 *	  CopyAgent       move a finished all-equal range to the output buffer.
 *
 * Buffers: keys and row indexes are double-buffered (buf 0 / buf 1).  A
 * partitioning pass reads a bucket from its buffer and writes the
 * sub-buckets to the other one; a bucket whose digit is the same for every
 * key is not moved at all.  Local sorts and copies always write buffer 0,
 * which therefore holds the result.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_AGENT_CUH
#define HRS_AGENT_CUH

#include <stdint.h>
#include <type_traits>
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_rank.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "hrs_key.cuh"
#include "hrs_policy.cuh"

namespace hrs
{

constexpr int RADIX = 256;
constexpr int MAX_DIGITS = 32;
constexpr int MAX_LOCAL = 8;	/* local-sort configurations, at most */

/* a bucket still to be partitioned in some pass */
struct Bucket
{
	uint32_t	begin;			/* first row (position in the buffers) */
	uint32_t	size;			/* rows */
	uint32_t	first_block;	/* its first key block in this pass */
	uint8_t		digit;			/* byte it is partitioned on */
	uint8_t		buf;			/* buffer holding it */
	uint8_t		skip;			/* set by PlanAgent: digit is constant */
	uint8_t		masked;			/* masks already complete (see Tracked) */
};

/*
 * The sub-bucket of a bucket that holds more than half its keys (a heavy
 * key of a skewed input, typically) is "tracked": the scatter that forms
 * it also takes the AND and OR of its keys into its masks, so that if all
 * its keys are equal, the next pass finishes it without reading them.
 */
struct Tracked
{
	uint32_t	digit;			/* NO_TRACK if none */
	uint32_t	child;			/* its index in the next pass's buckets */
};

constexpr uint32_t NO_TRACK = 0xFFFFFFFFu;

/* a range to be sorted by one block in shared memory */
struct Task
{
	uint32_t	begin;
	uint32_t	size;
	uint32_t	buf;
	uint32_t	pad;
};

/*
 * An all-equal range, finished, whose row indexes must move from buffer 1
 * to buffer 0; its key, known from masks, is written there, not copied.
 */
struct CopyRange
{
	uint32_t	begin;
	uint32_t	size;
	uint32_t	first_block;
	uint32_t	pad;
	uint64_t	key[4];			/* key words, as KeyTraits::word gives them */
};

/*
 * Counters in device memory.  alloc[p] packs (buckets << 32 | key blocks)
 * of pass p: one 64-bit atomic hands out a bucket index and its block range
 * together, so first_block grows with the bucket index and a block finds
 * its bucket by binary search.  copy_alloc does the same for copy ranges.
 */
struct Counters
{
	unsigned long long alloc[MAX_DIGITS + 1];
	unsigned long long copy_alloc;
	uint32_t	tasks[MAX_LOCAL];
	uint32_t	overflow;		/* a list ran out of room (can't happen) */
	uint32_t	pad;
};

/*
 * The counters as the host sees them: pinned host memory that the first
 * block of each scatter writes directly (unified addressing) from the
 * counters its pass's plans left, seq last.  The host reads them while the
 * scatter runs, with no copy in the stream between the plan and the
 * scatter.
 */
struct HostCounts
{
	Counters	counters;
	uint32_t	seq;			/* pass + 1 once counters are the pass's */
};

static_assert(sizeof(Counters) % sizeof(unsigned long long) == 0,
			  "Counters is copied in 8-byte words");

/* what every pass kernel needs; passed by value */
struct PassParams
{
	void	   *keys[2];
	uint32_t   *vals[2];
	Bucket	   *buckets;		/* this pass */
	Bucket	   *next_buckets;	/* filled for the next pass */
	uint32_t   *bucket_hist;	/* [bucket][256] of this pass */
	uint32_t   *next_bucket_hist;	/* zeroed for each next bucket */
	uint32_t   *sub_cursor;		/* [bucket][256] write cursors */
	uint32_t   *block_hist;		/* [block][256] */
	unsigned long long *bucket_mask;	/* [bucket][MASK_WORDS] of this pass */
	unsigned long long *next_bucket_mask;	/* reset for each next bucket */
	uint32_t   *block_bucket;	/* [key block] its bucket, this pass */
	uint32_t   *next_block_bucket;	/* filled for the next pass */
	uint32_t   *copy_block_range;	/* [copy block] its range */
	uint32_t   *bucket_done;	/* [bucket] key blocks histogrammed */
	uint32_t   *next_bucket_done;	/* zeroed for each next bucket */
	int			plan_in_histogram;	/* else plan_kernel follows */
	Tracked    *tracked;		/* [bucket] of this pass */
	HostCounts *host;			/* see HostCounts */
	Task	   *tasks[MAX_LOCAL];	/* local sort lists, one per config */
	CopyRange  *copies;
	Counters   *counters;
	uint32_t	max_buckets;
	uint32_t	max_tasks;
	uint32_t	max_copies;
	uint32_t	max_blocks;
	int			pass;
	int			write_iota;		/* pass 0 histogram also writes vals[0] */
};

/*
 * Per-bucket masks: the AND of every key word of the bucket in words 0..3,
 * the OR in words 4..7; their XOR has a one wherever the bucket's keys
 * differ.
 */
constexpr int MASK_WORDS = 8;

/* byte p (0 = most significant) of a key-shaped bit mask */
template <int KB>
__host__ __device__ __forceinline__ unsigned
mask_byte(const uint64_t *x, int p)
{
	if (KB == 4)
		return (unsigned) (x[0] >> (24 - 8 * p)) & 0xFFu;
	return (unsigned) (x[p >> 3] >> (56 - 8 * (p & 7))) & 0xFFu;
}

/* a key block's keys into registers, item it of a thread at it * THREADS + x */
template <typename Key, int THREADS, int ITEMS>
__device__ __forceinline__ void
load_block_keys(const Key *src, uint32_t count, Key (&k)[ITEMS])
{
#pragma unroll
	for (int it = 0; it < ITEMS; it++)
	{
		uint32_t	i = it * THREADS + threadIdx.x;

		if (i < count)
			k[it] = src[i];
	}
}

/*
 * Record that key blocks first .. first + count - 1 belong to item idx (a
 * bucket or copy range), so that a block finds its item with one load
 * rather than a binary search (eight dependent loads at 256 buckets).
 */
__device__ __forceinline__ void
map_blocks(uint32_t *map, uint32_t first, uint32_t count, uint32_t idx,
		   uint32_t max_blocks)
{
	for (uint32_t j = 0; j < count && first + j < max_blocks; j++)
		map[first + j] = idx;
}

template <int W>
__device__ __forceinline__ uint64_t
warp_or(uint64_t x)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		x |= __shfl_xor_sync(0xFFFFFFFFu, x, o);
	return x;
}

__device__ __forceinline__ uint64_t
warp_and(uint64_t x)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		x &= __shfl_xor_sync(0xFFFFFFFFu, x, o);
	return x;
}

/*
 * Fold one warp's AND (wa) and OR (wo) of key word j into a bucket's
 * masks.  Every warp of every block of a bucket reports to the same two
 * words, so an atomic is made only where it would change them (the masks
 * only lose AND bits and gain OR bits, so a stale read is safe).
 */
__device__ __forceinline__ void
merge_masks(uint64_t wa, uint64_t wo, unsigned long long *and_mask,
			unsigned long long *or_mask)
{
	wa = warp_and(wa);
	wo = warp_or<1>(wo);
	if ((threadIdx.x & 31) == 0)
	{
		unsigned long long ca = *(volatile unsigned long long *) and_mask;
		unsigned long long co = *(volatile unsigned long long *) or_mask;

		if ((ca & wa) != ca)
			atomicAnd(and_mask, (unsigned long long) wa);
		if ((co | wo) != co)
			atomicOr(or_mask, (unsigned long long) wo);
	}
}

/* do a bucket's masks say that all its keys are equal? */
template <int KB>
__device__ __forceinline__ bool
masks_equal(const unsigned long long *m)
{
	bool		equal = true;

#pragma unroll
	for (int j = 0; j < KeyTraits<KB>::WORDS; j++)
	{
		uint64_t	x = m[j] ^ m[4 + j];

		if (KB == 4)
			x &= 0xFFFFFFFFull;
		equal = equal && x == 0;
	}
	return equal;
}

/* ---------------------------------------------------------------------- */

/* where a key block of the current pass lies */
struct BlockSpan
{
	uint32_t	bucket;			/* index in this pass's bucket list */
	uint32_t	offset;			/* first row of the block in the buffer */
	uint32_t	count;			/* rows in the block */
	Bucket		b;
};

template <int TILE>
__device__ __forceinline__ bool
locate_block(const PassParams &p, uint32_t block, BlockSpan &s)
{
	unsigned long long a = p.counters->alloc[p.pass];
	uint32_t	nb = (uint32_t) (a >> 32);
	uint32_t	nblocks = (uint32_t) a;

	if (block >= nblocks || nb == 0)
		return false;
	s.bucket = nb == 1 ? 0 : p.block_bucket[block];
	s.b = p.buckets[s.bucket];
	uint32_t	rel = (block - s.b.first_block) * (uint32_t) TILE;

	s.offset = s.b.begin + rel;
	s.count = min((uint32_t) TILE, s.b.size - rel);
	return true;
}

/*
 * Bucket idx of the next pass, whose key blocks start at first_block: its
 * record, its blocks' map entries, and fresh masks and count (its
 * histogram is zeroed by the caller).
 */
__device__ __forceinline__ void
write_bucket(const PassParams &p, uint32_t idx, uint32_t begin, uint32_t size,
			 uint32_t first_block, uint32_t nblocks, int digit, uint32_t buf,
			 bool masked)
{
	Bucket		b;

	b.begin = begin;
	b.size = size;
	b.first_block = first_block;
	b.digit = (uint8_t) digit;
	b.buf = (uint8_t) buf;
	b.skip = 0;
	b.masked = masked;
	p.next_buckets[idx] = b;
	map_blocks(p.next_block_bucket, first_block, nblocks, idx, p.max_blocks);
	for (int i = 0; i < MASK_WORDS; i++)
		p.next_bucket_mask[(size_t) idx * MASK_WORDS + i] = i < 4 ? ~0ull : 0ull;
	p.next_bucket_done[idx] = 0;
}

/* a bucket for the next pass, with its key blocks (one thread) */
template <int KB>
__device__ __forceinline__ void
emit_bucket(const PassParams &p, uint32_t begin, uint32_t size, int digit,
			uint32_t buf)
{
	const uint32_t TILE = Policy<KB>::Partition::TILE;
	uint32_t	nblocks = (size + TILE - 1) / TILE;
	unsigned long long old = atomicAdd(&p.counters->alloc[p.pass + 1],
									   (1ull << 32) | nblocks);
	uint32_t	idx = (uint32_t) (old >> 32);

	if (idx >= p.max_buckets)
	{
		atomicExch(&p.counters->overflow, 1u);
		return;
	}
	write_bucket(p, idx, begin, size, (uint32_t) old, nblocks, digit, buf, false);

	uint4	   *h = (uint4 *) &p.next_bucket_hist[(size_t) idx * RADIX];

	for (int i = 0; i < RADIX / 4; i++)
		h[i] = make_uint4(0, 0, 0, 0);
}

/* a finished all-equal range; only one in buffer 1 needs moving */
template <int KB>
__device__ __forceinline__ void
emit_finished(const PassParams &p, uint32_t begin, uint32_t size, uint32_t buf,
			  const uint64_t *key)
{
	const uint32_t TILE = Policy<KB>::Partition::TILE;

	if (buf == 0)
		return;
	uint32_t	nblocks = (size + TILE - 1) / TILE;
	unsigned long long old = atomicAdd(&p.counters->copy_alloc,
									   (1ull << 32) | nblocks);
	uint32_t	idx = (uint32_t) (old >> 32);

	if (idx >= p.max_copies)
	{
		atomicExch(&p.counters->overflow, 1u);
		return;
	}
	CopyRange	c;

	c.begin = begin;
	c.size = size;
	c.first_block = (uint32_t) old;
	c.pad = 0;
	map_blocks(p.copy_block_range, c.first_block, nblocks, idx, p.max_blocks);
	for (int j = 0; j < 4; j++)
		c.key[j] = j < KeyTraits<KB>::WORDS ? key[j] : 0;
	p.copies[idx] = c;
}

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

/* ---------------------------------------------------------------------- */

/*
 * The block sorts a local sort can use (LocalPolicy::RANK).  Each takes
 * keys and row indexes from global memory into registers (load), and
 * sorts them stably on bits [begin_bit, end_bit) (sort).  in_pos(it) is
 * the position in the task of a thread's item it after load, out_pos(it)
 * after sort.
 *
 * CounterBlockSort: CUB's BlockRadixSort (per-thread digit counters and a
 * block-wide scan of them per pass; RADIX_BITS up to about 6 before the
 * counters outgrow shared memory).  Blocked in, striped out.
 */
template <int KB, typename LP>
struct CounterBlockSort
{
	typedef typename KeyTraits<KB>::Key Key;
	typedef KeyTraits<KB> T;
	typedef cub::BlockLoad<Key, LP::THREADS, LP::ITEMS,
						   cub::BLOCK_LOAD_WARP_TRANSPOSE> LoadKeys;
	typedef cub::BlockLoad<uint32_t, LP::THREADS, LP::ITEMS,
						   cub::BLOCK_LOAD_WARP_TRANSPOSE> LoadVals;
	typedef cub::BlockRadixSort<Key, LP::THREADS, LP::ITEMS, uint32_t,
								LP::RADIX_BITS> Sort;

	union TempStorage
	{
		typename LoadKeys::TempStorage load_keys;
		typename LoadVals::TempStorage load_vals;
		typename Sort::TempStorage sort;
	};

	__device__ __forceinline__ static int in_pos(int it)
	{
		return threadIdx.x * LP::ITEMS + it;
	}
	__device__ __forceinline__ static int out_pos(int it)
	{
		return it * LP::THREADS + threadIdx.x;
	}

	__device__ static void load(TempStorage &s, const Key *src,
								const uint32_t *vsrc, int n,
								Key (&k)[LP::ITEMS], uint32_t (&v)[LP::ITEMS])
	{
		LoadKeys(s.load_keys).Load(src, k, n, T::max_key());
		__syncthreads();
		LoadVals(s.load_vals).Load(vsrc, v, n, 0u);
	}

	__device__ static void sort(TempStorage &s, Key (&k)[LP::ITEMS],
								uint32_t (&v)[LP::ITEMS], int begin_bit,
								int end_bit)
	{
		if constexpr (T::NATIVE)
			Sort(s.sort).SortBlockedToStriped(k, v, begin_bit, end_bit);
		else
			Sort(s.sort).SortBlockedToStriped(k, v, typename T::Decomposer(),
											  begin_bit, end_bit);
	}
};

/*
 * MatchBlockSort: LSD passes of RADIX_BITS (8) bits, each ranking the
 * keys with CUB's match-based BlockRadixRankMatch (one digit histogram
 * per warp, peers found with a warp match; shared memory independent of
 * the thread count) and then exchanging keys and row indexes through
 * shared memory.  Items are warp-striped (warp w holds a contiguous run
 * of 32 * ITEMS positions, lane-interleaved), the order in which the
 * ranking counts, so every pass is stable.
 */
template <int KB, typename LP>
struct MatchBlockSort
{
	typedef typename KeyTraits<KB>::Key Key;
	typedef KeyTraits<KB> T;
	typedef cub::BlockRadixRankMatch<LP::THREADS, LP::RADIX_BITS, false> Rank;
	static_assert(LP::THREADS % 32 == 0, "whole warps");

	union TempStorage
	{
		typename Rank::TempStorage rank;
		Key			keys[LP::TILE];
		uint32_t	vals[LP::TILE];
	};

	/* bits [bit, bit + bits) of a key, CUB numbering */
	struct Digits
	{
		int			bit;
		uint32_t	mask;

		__device__ __forceinline__ uint32_t Digit(const Key &k) const
		{
			if constexpr (T::WORDS == 1)
				return (uint32_t) (T::word(k, 0) >> bit) & mask;
			else
			{
				const int	j = T::WORDS - 1 - (bit >> 6);
				const int	sh = bit & 63;
				uint64_t	x = T::word(k, j) >> sh;

				if (sh != 0 && j > 0)
					x |= T::word(k, j - 1) << (64 - sh);
				return (uint32_t) x & mask;
			}
		}
	};

	__device__ __forceinline__ static int in_pos(int it)
	{
		return (threadIdx.x >> 5) * (32 * LP::ITEMS) + it * 32 + (threadIdx.x & 31);
	}
	__device__ __forceinline__ static int out_pos(int it)
	{
		return in_pos(it);
	}

	__device__ static void load(TempStorage &, const Key *src,
								const uint32_t *vsrc, int n,
								Key (&k)[LP::ITEMS], uint32_t (&v)[LP::ITEMS])
	{
#pragma unroll
		for (int it = 0; it < LP::ITEMS; it++)
		{
			int			i = in_pos(it);

			k[it] = i < n ? src[i] : T::max_key();
			v[it] = i < n ? vsrc[i] : 0u;
		}
	}

	__device__ static void sort(TempStorage &s, Key (&k)[LP::ITEMS],
								uint32_t (&v)[LP::ITEMS], int begin_bit,
								int end_bit)
	{
		for (int bit = begin_bit; bit < end_bit; bit += LP::RADIX_BITS)
		{
			int			rank[LP::ITEMS];
			Digits		dg;

			dg.bit = bit;
			dg.mask = (1u << min(LP::RADIX_BITS, end_bit - bit)) - 1;
			Rank(s.rank).RankKeys(k, rank, dg);
			__syncthreads();
#pragma unroll
			for (int it = 0; it < LP::ITEMS; it++)
				s.keys[rank[it]] = k[it];
			__syncthreads();
#pragma unroll
			for (int it = 0; it < LP::ITEMS; it++)
				k[it] = s.keys[in_pos(it)];
			__syncthreads();
#pragma unroll
			for (int it = 0; it < LP::ITEMS; it++)
				s.vals[rank[it]] = v[it];
			__syncthreads();
#pragma unroll
			for (int it = 0; it < LP::ITEMS; it++)
				v[it] = s.vals[in_pos(it)];
			__syncthreads();
		}
	}
};

/*
 * LocalSortAgent: sort one task (a small bucket or a batch of neighbouring
 * ones) entirely in shared memory with a block radix sort, only over
 * the bits that vary within the task, and write it to buffer 0.  It sorts
 * first on only the top PROBE_BITS of those bits, which orders a small
 * bucket but for a few short runs of keys equal on those bits; such runs
 * are put right by insertion sort, and if a run is long the task is
 * sorted again on all its bits.  Tasks
 * shorter than the tile are padded with the largest key; the block sort is
 * stable and the padding sits last, so it stays behind real keys equal to
 * it.
 */
template <int KB, typename LP>
struct LocalSortAgent
{
	typedef Policy<KB> Pol;
	typedef KeyTraits<KB> T;
	static_assert(LP::TILE <= 65536, "stage.idx is 16-bit");
	typedef typename T::Key Key;
	typedef typename std::conditional<LP::RANK == RANK_MATCH,
									  MatchBlockSort<KB, LP>,
									  CounterBlockSort<KB, LP>>::type S;

	struct TempStorage
	{
		union
		{
			typename S::TempStorage sort;
			struct
			{
				union
				{
					Key			keys[LP::TILE];
					uint32_t	vals[LP::TILE];
				}			kv;
				uint16_t	idx[LP::TILE];
			}			stage;	/* the probe's check and fix-up */
		}			u;
		unsigned long long diff[T::WORDS];
	};

	/* highest and lowest bit (CUB numbering) where diff has a one */
	__device__ static void bit_range(const unsigned long long *diff,
									 int &begin_bit, int &end_bit)
	{
		begin_bit = 0;
		end_bit = 0;
#pragma unroll
		for (int j = 0; j < T::WORDS; j++)
		{
			uint64_t	x = diff[j];
			int			word_lsb = (T::WORDS - 1 - j) * T::WORD_BITS;

			if (x == 0)
				continue;
			if (end_bit == 0)
				end_bit = word_lsb + 64 - __clzll((long long) x);
			begin_bit = word_lsb + __ffsll((long long) x) - 1;
		}
	}

	/* do a and b agree on every bit at or above bit 'from' (CUB numbering)? */
	__device__ static bool same_above(const Key &a, const Key &b, int from)
	{
		bool		same = true;

#pragma unroll
		for (int j = 0; j < T::WORDS; j++)
		{
			int			word_lsb = (T::WORDS - 1 - j) * T::WORD_BITS;
			uint64_t	x = T::word(a, j) ^ T::word(b, j);

			if (word_lsb + T::WORD_BITS <= from)
				continue;
			if (from > word_lsb)
				x >>= (from - word_lsb);
			same = same && x == 0;
		}
		return same;
	}

	/* a < b, all words compared */
	__device__ static bool less(const Key &a, const Key &b)
	{
#pragma unroll
		for (int j = 0; j < T::WORDS; j++)
		{
			uint64_t	x = T::word(a, j),
						y = T::word(b, j);

			if (x != y)
				return x < y;
		}
		return false;
	}

	/* order idx[from .. to) by the keys they point at */
	__device__ static void insertion_sort(const Key *keys, uint16_t *idx,
										  int from, int to)
	{
		for (int i = from + 1; i < to; i++)
		{
			uint16_t	x = idx[i];
			int			j = i;

			while (j > from && less(keys[x], keys[idx[j - 1]]))
			{
				idx[j] = idx[j - 1];
				j--;
			}
			idx[j] = x;
		}
	}

	__device__ static void run(const Task t, void *k0, void *k1,
							   uint32_t *v0, uint32_t *v1, bool keys_out,
							   TempStorage &s)
	{
		const Key  *src = (const Key *) (t.buf ? k1 : k0) + t.begin;
		const uint32_t *vsrc = (t.buf ? v1 : v0) + t.begin;
		Key		   *dst = (Key *) k0 + t.begin;
		uint32_t   *vdst = v0 + t.begin;
		const int	n = (int) t.size;

		Key			k[LP::ITEMS];
		uint32_t	v[LP::ITEMS];

		if (threadIdx.x < T::WORDS)
			s.diff[threadIdx.x] = 0;
		S::load(s.u.sort, src, vsrc, n, k, v);
		__syncthreads();		/* diff is zeroed before any warp ORs into it */

		/* which bits vary within the task */
		const Key	first = src[0];
		uint64_t	x[T::WORDS];

#pragma unroll
		for (int j = 0; j < T::WORDS; j++)
			x[j] = 0;
#pragma unroll
		for (int it = 0; it < LP::ITEMS; it++)
		{
			if (S::in_pos(it) < n)
			{
#pragma unroll
				for (int j = 0; j < T::WORDS; j++)
					x[j] |= T::word(k[it], j) ^ T::word(first, j);
			}
		}
#pragma unroll
		for (int j = 0; j < T::WORDS; j++)
		{
			uint64_t	w = warp_or<1>(x[j]);

			if ((threadIdx.x & 31) == 0 && w != 0)
				atomicOr(&s.diff[j], (unsigned long long) w);
		}
		__syncthreads();
		int			begin_bit,
					end_bit;

		bit_range(s.diff, begin_bit, end_bit);
		if (end_bit == 0)
		{
			/* all keys equal: sorted already; a no-op sort on bit 0 */
			begin_bit = 0;
			end_bit = 1;
		}
		const int	probe_begin = max(begin_bit, end_bit - LP::PROBE_BITS);

		/*
		 * Sort on the top PROBE_BITS of the varying bits first; then find
		 * neighbours that agree on those bits but differ below them.
		 */
		S::sort(s.u.sort, k, v, probe_begin, end_bit);
		if (probe_begin > begin_bit)
		{
			bool		unresolved = false;
			bool		long_run = false;
			Key		   *sk = s.u.stage.kv.keys;
			uint16_t   *idx = s.u.stage.idx;

			__syncthreads();
#pragma unroll
			for (int it = 0; it < LP::ITEMS; it++)
				sk[S::out_pos(it)] = k[it];
			__syncthreads();
#pragma unroll
			for (int it = 0; it < LP::ITEMS; it++)
			{
				int			i = S::out_pos(it);

				if (i >= 1 && i < n &&
					same_above(sk[i - 1], k[it], probe_begin) &&
					!same_above(sk[i - 1], k[it], 0))
					unresolved = true;
				idx[i] = (uint16_t) i;
			}
			if (__syncthreads_or(unresolved))
			{
				/*
				 * Runs of keys equal on the probed bits: order each short one
				 * by insertion sort (on an index, in shared memory); any long
				 * one sends the whole task to a sort on all the bits.
				 */
#pragma unroll
				for (int it = 0; it < LP::ITEMS; it++)
				{
					int			i = S::out_pos(it);

					if (i < n && (i == 0 || !same_above(sk[i - 1], sk[i], probe_begin)))
					{
						int			e = i + 1;

						while (e < n && e - i <= Pol::LOCAL_RUN_MAX &&
							   same_above(sk[i], sk[e], probe_begin))
							e++;
						if (e - i > Pol::LOCAL_RUN_MAX)
							long_run = true;
						else
							insertion_sort(sk, idx, i, e);
					}
				}
				if (__syncthreads_or(long_run))
				{
					/* back to the input arrangement, so the padding stays last */
#pragma unroll
					for (int j = 0; j < LP::ITEMS; j++)
						k[j] = sk[S::in_pos(j)];
					__syncthreads();
#pragma unroll
					for (int it = 0; it < LP::ITEMS; it++)
						s.u.stage.kv.vals[S::out_pos(it)] = v[it];
					__syncthreads();
#pragma unroll
					for (int j = 0; j < LP::ITEMS; j++)
						v[j] = s.u.stage.kv.vals[S::in_pos(j)];
					__syncthreads();
					S::sort(s.u.sort, k, v, begin_bit, end_bit);
				}
				else
				{
					/* take keys and row indexes in the corrected order */
#pragma unroll
					for (int it = 0; it < LP::ITEMS; it++)
					{
						int			i = S::out_pos(it);

						if (i < n)
							k[it] = sk[idx[i]];
					}
					__syncthreads();
#pragma unroll
					for (int it = 0; it < LP::ITEMS; it++)
						s.u.stage.kv.vals[S::out_pos(it)] = v[it];
					__syncthreads();
#pragma unroll
					for (int it = 0; it < LP::ITEMS; it++)
					{
						int			i = S::out_pos(it);

						if (i < n)
							v[it] = s.u.stage.kv.vals[idx[i]];
					}
				}
			}
		}

#pragma unroll
		for (int it = 0; it < LP::ITEMS; it++)
		{
			int			i = S::out_pos(it);

			if (i < n)
			{
				if (keys_out)
					dst[i] = k[it];
				vdst[i] = v[it];
			}
		}
	}
};

/* ---------------------------------------------------------------------- */

/* CopyAgent: one key block of a finished range into buffer 0 */
template <int KB>
struct CopyAgent
{
	typedef KeyTraits<KB> T;
	typedef typename T::Key Key;
	typedef typename Policy<KB>::Partition P;

	__device__ static void run(const CopyRange *ranges,
							   const uint32_t *block_range, void *k0,
							   uint32_t *v0, const uint32_t *v1, bool keys_out)
	{
		const CopyRange c = ranges[block_range[blockIdx.x]];
		uint32_t	rel = (blockIdx.x - c.first_block) * (uint32_t) P::TILE;
		uint32_t	off = c.begin + rel;
		uint32_t	count = min((uint32_t) P::TILE, c.size - rel);
		const Key	key = T::from_words(c.key);
		Key		   *dst = (Key *) k0 + off;
		uint32_t	v[P::ITEMS];

		/* all loads first, so that each thread has ITEMS of them in flight */
#pragma unroll
		for (int it = 0; it < P::ITEMS; it++)
		{
			uint32_t	i = it * P::THREADS + threadIdx.x;

			if (i < count)
				v[it] = v1[off + i];
		}
#pragma unroll
		for (int it = 0; it < P::ITEMS; it++)
		{
			uint32_t	i = it * P::THREADS + threadIdx.x;

			if (i < count)
			{
				if (keys_out)
					dst[i] = key;
				v0[off + i] = v[it];
			}
		}
	}
};

}								/* namespace hrs */

#endif							/* HRS_AGENT_CUH */
