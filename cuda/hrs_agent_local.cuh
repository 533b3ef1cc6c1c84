/*-------------------------------------------------------------------------
 *
 * hrs_agent_local.cuh
 *	  The agents that write the hybrid radix sort's result into buffer 0:
 *	  the local sorts of small buckets (with the block sorts they use) and
 *	  the copies of finished all-equal ranges (see hrs_agent.cuh).
 *
 * They read the tasks and copy ranges the partitioning passes made, through
 * the records and helpers of hrs_agent.cuh; they use nothing of
 * hrs_agent_partition.cuh.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_AGENT_LOCAL_CUH
#define HRS_AGENT_LOCAL_CUH

#include <type_traits>
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_rank.cuh>
#include <cub/block/block_radix_sort.cuh>

#include "hrs_agent.cuh"

namespace hrs
{

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

	/*
	 * After the sort on the probed bits [probe_begin, end_bit): put right
	 * the neighbours that agree on those bits but differ below them (see
	 * above), leaving k and v sorted on all bits [begin_bit, end_bit).
	 */
	__device__ __forceinline__ static void
	fix_probe(TempStorage &s, Key (&k)[LP::ITEMS], uint32_t (&v)[LP::ITEMS],
			  const int n, const int probe_begin, const int begin_bit,
			  const int end_bit)
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
			fix_probe(s, k, v, n, probe_begin, begin_bit, end_bit);

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

#endif							/* HRS_AGENT_LOCAL_CUH */
