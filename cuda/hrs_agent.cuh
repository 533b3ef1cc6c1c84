/*-------------------------------------------------------------------------
 *
 * hrs_agent.cuh
 *	  What the per-block agents of the hybrid MSD radix sort (Stehle &
 *	  Jacobsen, SIGMOD 2017) share: the work-list records (buckets, tasks,
 *	  copy ranges, counters), the parameters of a pass, and the device
 *	  helpers that write buckets, tasks and copies.  Each agent is what one
 *	  thread block does in one kernel; the kernels in hrs_kernels.cuh only
 *	  construct and run them.  The agents are in two files, which include
 *	  this one and not each other:
 *
 *	  hrs_agent_partition.cuh, the partitioning passes:
 *	  HistogramAgent  digit histogram of one key block of a bucket (and, in
 *	                  the first pass, which digits vary at all); in a small
 *	                  pass the last block of a bucket then plans it.
 *	  PlanAgent       one bucket: sub-bucket offsets, and what becomes of
 *	                  each sub-bucket (partitioned again, sorted locally,
 *	                  batched with its small neighbours, or finished).
 *	  ScatterAgent    one key block: partition it in shared memory, then
 *	                  write each sub-bucket's run with coalesced stores.
 *
 *	  hrs_agent_local.cuh, what writes the result:
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

}								/* namespace hrs */

#endif							/* HRS_AGENT_CUH */
