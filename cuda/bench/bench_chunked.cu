/*-------------------------------------------------------------------------
 *
 * bench_chunked.cu
 *	  Engine-level benchmark of a sort larger than the GPU budget (issue 4):
 *	  chunks sorted through the CUDA engine's public API, double-buffered
 *	  with sort_submit / sort_wait, then a parallel CPU k-way merge; against
 *	  a parallel CPU sort built on gpusort's CPU engine, on the same data.
 *
 * Usage: bench_chunked [--pairs N] [--budget-mb MB] [--threads T]
 *			[--encode-threads E] [--chunk-rows N] [--reps R] [--cpu-bits B]
 *			[--seed S] [--dist uniform|few] [--cpu-only] [--no-cpu-sort] [--no-ramp]
 *			[--merge VARIANT] [--merge-all] [--tile-rows N] [--out FILE.md] [--commit SHA]
 *
 * Data: N (default 8e9 / 12, i.e. 8 GB of u64 key + u32 row index pairs)
 * uniform random u64 keys (--dist few: 16 distinct keys, UINT64_MAX among
 * them, to test ties) in a pageable array, the "source".  The engine
 * sorts keys only (8 bytes a row up, 12 bytes a row down: the sorted keys
 * and the permutation).
 *
 * GPU path, as the extension will run it:
 *	 - chunk rows: the largest n whose two slots' device buffers (the
 *	   engine keeps one set per slot; hrs::temp_bytes gives the scratch)
 *	   fit in the budget (default 2048 MB), unless --chunk-rows says; the
 *	   first two and last two chunks are 1/4 and 1/2 of that (--no-ramp:
 *	   all equal), since nothing overlaps the first upload or last download;
 *	 - chunk k is "encoded": copied by E threads (default T - 1, leaving a
 *	   core to the engine's worker thread) from the source into its
 *	   own pinned keybuf (keybuf_alloc; the perm goes to a pinned keybuf
 *	   too), while chunks k-1 and k-2 are in the engine; then sort_wait for
 *	   chunk k-2 and sort_submit of chunk k (GS_SORT_KEYS_OUT);
 *	 - a CPU merge of the sorted chunks by T threads: the output is cut
 *	   into 2T slices at exact ranks (a multi-sequence selection by binary
 *	   search over the key value), by default cut again into tiles of about
 *	   256K rows that the threads take from a shared counter, two at a time,
 *	   each merged with a loser tree of 64-bit keys that prefetches its
 *	   runs, writing keys and global row indexes (--merge tiles64; --merge
 *	   picks another variant, see below;
 *	   --merge-all times each of them after the reps on the same sorted
 *	   chunks, checks each output, and adds a table with a row per variant,
 *	   and one for the default variant on T/2 threads).
 * Pinned buffers are allocated once, before the timed runs (the extension
 * would keep them too); the engine's device buffers are warm after the
 * first rep.  The source and the merge output are allocated with
 * MADV_HUGEPAGE and touched before the timings.  Times are medians over R reps (default 3).
 *
 * CPU sort: a parallel MSD pass on the top B varying bits (per-thread
 * histograms, stable scatter of key and row index), then each bucket
 * sorted by gpusort's CPU engine (src/engine_cpu/engine_cpu*.c, one bucket per call,
 * T threads taking buckets from a shared counter), whose permutation maps
 * the bucket's row indexes.
 *
 * Pinned PCIe bandwidth: cudaMemcpyAsync of 1 GB pinned <-> device, each
 * direction alone and both at once on two streams, median of 5.
 *
 * Checks: both outputs sorted, each row index a permutation of 0..N-1 with
 * source[index[i]] == key[i], and the two key arrays equal.  Exit status 1
 * on any mismatch.  --cpu-only (automatic without a device) sorts the
 * chunks with the CPU engine instead, so the merge and the CPU sort can be
 * tested anywhere.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "gpusort_engine.h"
#include "hrs.h"
#include "test/splitmix.cuh"

static int	nthreads;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* run f(t, lo, hi) on nt threads over [0, n) cut in equal ranges */
static void
parallel_for_n(int nt, size_t n, const std::function<void(int, size_t, size_t)> &f)
{
	std::vector<std::thread> th;

	for (int t = 0; t < nt; t++)
	{
		size_t		lo = n * t / nt,
					hi = n * (t + 1) / nt;

		th.emplace_back(f, t, lo, hi);
	}
	for (auto &x : th)
		x.join();
}

static void
parallel_for(size_t n, const std::function<void(int, size_t, size_t)> &f)
{
	parallel_for_n(nthreads, n, f);
}

/* the "encode": a memcpy by nt threads in whole pages */
static void
par_memcpy(int nt, void *dst, const void *src, size_t bytes)
{
	size_t		pages = bytes >> 12;

	if (pages == 0)
	{
		memcpy(dst, src, bytes);
		return;
	}
	parallel_for_n(nt, pages, [&](int, size_t lo, size_t hi) {
		size_t		a = lo << 12,
					b = hi == pages ? bytes : hi << 12;

		memcpy((char *) dst + a, (const char *) src + a, b - a);
	});
}

/*
 * A large array: 2 MB aligned and marked for transparent huge pages, so
 * that the merge's many streams do not each walk 4 kB page tables.
 */
static void *
big_alloc(size_t bytes)
{
	size_t		huge = 2u << 20;
	size_t		sz = (bytes + huge - 1) & ~(huge - 1);
	void	   *p = aligned_alloc(huge, sz > 0 ? sz : huge);

	if (p != NULL)
		(void) madvise(p, sz, MADV_HUGEPAGE);
	return p;
}

/* fill by T threads (first touch of fresh pages outside the timings) */
static void
par_memset(void *p, int c, size_t bytes)
{
	parallel_for_n(nthreads, bytes, [&](int, size_t lo, size_t hi) {
		memset((char *) p + lo, c, hi - lo);
	});
}

static double
median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

static void
die(const char *what, gs_status st, const char *errbuf)
{
	fprintf(stderr, "%s: %s: %s\n", what, gs_status_text(st), errbuf);
	exit(1);
}

/* ---------------------------------------------------------------------
 * k-way merge of sorted runs
 * --------------------------------------------------------------------- */

struct Run
{
	const uint64_t *keys;		/* sorted */
	const uint32_t *perm;		/* chunk-local row index of keys[i] */
	size_t		n;
	uint64_t	base;			/* global index of the chunk's row 0 */
};

/* rows of all runs that are <= v (le) or < v (!le) */
static size_t
count_rank(const std::vector<Run> &runs, uint64_t v, bool le, std::vector<size_t> *pos)
{
	size_t		total = 0;

	for (size_t r = 0; r < runs.size(); r++)
	{
		const uint64_t *b = runs[r].keys,
				   *e = b + runs[r].n;
		size_t		p = (le ? std::upper_bound(b, e, v) : std::lower_bound(b, e, v)) - b;

		if (pos)
			(*pos)[r] = p;
		total += p;
	}
	return total;
}

/* split positions per run such that the first `rank` merged rows are theirs */
static void
split_at(const std::vector<Run> &runs, size_t rank, std::vector<size_t> &pos)
{
	uint64_t	lo = 0,
				hi = UINT64_MAX;
	size_t		less,
				need;

	pos.assign(runs.size(), 0);
	if (rank == 0)
		return;
	/* smallest v with count(<= v) >= rank */
	while (lo < hi)
	{
		uint64_t	mid = lo + (hi - lo) / 2;

		if (count_rank(runs, mid, true, NULL) >= rank)
			hi = mid;
		else
			lo = mid + 1;
	}
	less = count_rank(runs, lo, false, &pos);
	need = rank - less;
	/* the rest are keys equal to lo, taken from the runs in order */
	for (size_t r = 0; r < runs.size() && need > 0; r++)
	{
		const uint64_t *b = runs[r].keys;
		size_t		eq = std::upper_bound(b + pos[r], b + runs[r].n, lo) - (b + pos[r]);
		size_t		take = std::min(eq, need);

		pos[r] += take;
		need -= take;
	}
}

/*
 * Merge of one output slice by a loser tree over the runs' head keys.  A
 * node is the key in the high 64 bits and the run number below it, so one
 * 128-bit compare orders by key, then run; an exhausted run's node is
 * UINT64_MAX with DONE in the run bits, after every real key (the counts
 * are exact, so it never wins).  The replay is branch-free; since it is one
 * long dependent chain per row, a thread merges two slices in lockstep so
 * that their chains overlap (measured 1.7x faster than one slice at a time
 * on 17 runs; four slices in lockstep were slower again).
 *
 * Variants (--merge; --merge-all times each on the same runs):
 *	 pair	   2T slices at exact ranks, two a thread in lockstep (the first
 *			   version);
 *	 pair-pf   the same, and each step prefetches its run's keys and perm a
 *			   few cache lines ahead: with 18 runs a thread reads 2 x 18 x 2
 *			   streams at once, more than the hardware prefetchers follow,
 *			   and the next key is on the dependent chain;
 *	 one-pf	   T slices, one a thread, with the prefetch;
 *	 tiles	   each of the 2T exact-rank slices cut again into tiles of
 *			   about --tile-rows rows (default 256K) at sampled splitter
 *			   keys (a lower bound per run), taken two at a time in
 *			   lockstep by the threads from a shared counter, with the
 *			   prefetch: no thread waits for a slow one at the end, and the
 *			   two tiles of a pair read neighbouring windows of each run;
 *	 tiles-nt  the same with non-temporal stores of the output (no reads
 *			   for ownership of the 8 GB written);
 *	 cascade   tiles of a quarter of that, each merged in two levels: groups
 *			   of at most 6 runs into a per-thread buffer (L2-sized), then
 *			   the groups; fewer streams at once, twice the stores;
 *	 tiles64   the tiles with 64-bit nodes (below); tiles64-nt: and
 *			   non-temporal stores.
 */
typedef unsigned __int128 Node;

#define DONE 0x80000000u
#define PF_KEYS 16				/* keys ahead to prefetch: two cache lines */
#define PF_PERM 32				/* perm entries ahead: two cache lines */

enum MergeVariant
{
	MV_PAIR,
	MV_PAIR_PF,
	MV_ONE_PF,
	MV_TILES,
	MV_TILES_NT,
	MV_CASCADE,
	MV_TILES64,
	MV_TILES64_NT,
	MV_COUNT
};

static const char *const merge_names[MV_COUNT] = {
	"pair", "pair-pf", "one-pf", "tiles", "tiles-nt", "cascade", "tiles64", "tiles64-nt"
};

static size_t tile_rows = 256 * 1024;

static int
merge_variant(const char *name)
{
	for (int i = 0; i < MV_COUNT; i++)
		if (strcmp(merge_names[i], name) == 0)
			return i;
	return -1;
}

static inline Node
make_node(uint64_t key, uint32_t run)
{
	return ((Node) key << 32) | run;
}

/* what both loser trees (Merge, Merge64) keep of their runs and output */
struct MergeRuns
{
	size_t		K2;				/* leaves, a power of two */
	size_t		count;			/* rows to write */
	uint64_t   *out_keys;
	uint32_t   *out_idx;
	std::vector<const uint64_t *> kp,	/* per run: next key, end */
				kend;
	std::vector<const uint32_t *> pp;	/* next perm entry */
	std::vector<uint64_t> base;

	/* K2 leaves for K runs, all empty, no rows yet; the output at ok, oi */
	void		reset(size_t K, uint64_t *ok, uint32_t *oi)
	{
		K2 = 1;
		while (K2 < K)
			K2 <<= 1;
		count = 0;
		out_keys = ok;
		out_idx = oi;
		kp.assign(K2, NULL);
		kend.assign(K2, NULL);
		pp.assign(K2, NULL);
		base.assign(K2, 0);
	}
};

struct Merge : MergeRuns
{
	Node		w;				/* the winner */
	std::vector<Node> loser;	/* nodes 1 .. K2-1 */
	std::vector<Node> win;		/* scratch of init */

	/* runs[0 .. K-1], rows lo[r] .. hi[r] - 1 of each */
	void		init(const Run *runs, size_t K, const size_t *lo, const size_t *hi,
					 uint64_t *ok, uint32_t *oi)
	{
		reset(K, ok, oi);
		loser.assign(K2, 0);
		win.assign(2 * K2, 0);
		for (size_t r = 0; r < K2; r++)
		{
			if (r < K)
			{
				kp[r] = runs[r].keys + lo[r];
				kend[r] = runs[r].keys + hi[r];
				pp[r] = runs[r].perm + lo[r];
				base[r] = runs[r].base;
				count += hi[r] - lo[r];
			}
			win[K2 + r] = kp[r] < kend[r] ? make_node(*kp[r], (uint32_t) r) :
				make_node(UINT64_MAX, (uint32_t) r | DONE);
		}
		for (size_t t = K2 - 1; t >= 1; t--)
		{
			Node		a = win[2 * t],
						b = win[2 * t + 1];

			win[t] = a < b ? a : b;
			loser[t] = a < b ? b : a;
		}
		w = win[1];
	}
};

/* write the winner w at *ok / *oi, replay its run's next key, return the new winner */
template <bool PF, bool NT>
static inline Node
merge_step(Node w, const uint64_t **kp, const uint64_t *const *kend,
		   const uint32_t **pp, const uint64_t *base, Node *L, size_t K2,
		   uint64_t *ok, uint32_t *oi)
{
	uint32_t	r = (uint32_t) w & ~DONE;
	const uint64_t *k = kp[r] + 1;
	const uint32_t *p = pp[r];
	uint64_t	key = (uint64_t) (w >> 32);
	uint32_t	idx = (uint32_t) (base[r] + *p);
	Node		x;

	if (NT)
	{
		_mm_stream_si64((long long *) ok, (long long) key);
		_mm_stream_si32((int *) oi, (int) idx);
	}
	else
	{
		*ok = key;
		*oi = idx;
	}
	pp[r] = p + 1;
	kp[r] = k;
	if (PF)
	{
		/* past a run's end this only names an address; it never faults */
		__builtin_prefetch(k + PF_KEYS);
		__builtin_prefetch(p + PF_PERM);
	}
	x = k < kend[r] ? make_node(*k, r) : make_node(UINT64_MAX, r | DONE);
	for (size_t t = (K2 + r) >> 1; t >= 1; t >>= 1)
	{
		Node		l = L[t];
		bool		sw = l < x;

		L[t] = sw ? x : l;
		x = sw ? l : x;
	}
	return x;
}

#define STEP(m, i) \
	merge_step<PF, NT>(m.w, m.kp.data(), m.kend.data(), m.pp.data(), m.base.data(), \
					   m.loser.data(), m.K2, m.out_keys + (i), m.out_idx + (i))

template <bool PF, bool NT>
static void
merge_one(Merge &a)
{
	for (size_t i = 0; i < a.count; i++)
		a.w = STEP(a, i);
}

/* merge slices a and b, in lockstep while both have rows left */
template <bool PF, bool NT>
static void
merge_pair(Merge &a, Merge &b)
{
	const uint64_t **kpa = a.kp.data(),
			  **kpb = b.kp.data();
	const uint64_t *const *kea = a.kend.data(),
			   *const *keb = b.kend.data();
	const uint32_t **ppa = a.pp.data(),
			  **ppb = b.pp.data();
	const uint64_t *ba = a.base.data(),
			   *bb = b.base.data();
	Node	   *La = a.loser.data(),
			   *Lb = b.loser.data();
	Node		wa = a.w,
				wb = b.w;
	size_t		K2a = a.K2,
				K2b = b.K2;
	size_t		both = std::min(a.count, b.count),
				i;

	for (i = 0; i < both; i++)
	{
		wa = merge_step<PF, NT>(wa, kpa, kea, ppa, ba, La, K2a, a.out_keys + i, a.out_idx + i);
		wb = merge_step<PF, NT>(wb, kpb, keb, ppb, bb, Lb, K2b, b.out_keys + i, b.out_idx + i);
	}
	for (size_t j = i; j < a.count; j++)
		wa = merge_step<PF, NT>(wa, kpa, kea, ppa, ba, La, K2a, a.out_keys + j, a.out_idx + j);
	for (size_t j = i; j < b.count; j++)
		wb = merge_step<PF, NT>(wb, kpb, keb, ppb, bb, Lb, K2b, b.out_keys + j, b.out_idx + j);
	a.w = wa;
	b.w = wb;
}

/* m[0], in lockstep with m[1] if cnt is 2 */
template <bool PF, bool NT>
static void
merge_some(Merge *m, size_t cnt)
{
	if (cnt == 2)
		merge_pair<PF, NT>(m[0], m[1]);
	else
		merge_one<PF, NT>(m[0]);
}

/* exact-rank cuts of the output into S slices: cuts[s] for s = 0 .. S */
static void
split_slices(const std::vector<Run> &runs, size_t n, int S,
			 std::vector<std::vector<size_t>> &cuts)
{
	cuts.assign(S + 1, std::vector<size_t>());
	parallel_for(S + 1, [&](int, size_t a, size_t b) {
		for (size_t s = a; s < b; s++)
			split_at(runs, n * s / S, cuts[s]);
	});
}

/* static slices: `per` (1 or 2) a thread */
template <bool PF>
static void
merge_static(const std::vector<Run> &runs, size_t n, int per, uint64_t *out_keys,
			 uint32_t *out_idx, double *split_ms)
{
	int			S = per * nthreads;
	size_t		K = runs.size();
	std::vector<std::vector<size_t>> cuts;
	double		t0 = now_ms();

	split_slices(runs, n, S, cuts);
	*split_ms = now_ms() - t0;
	parallel_for(nthreads, [&](int t, size_t, size_t) {
		Merge		m[2];

		for (int j = 0; j < per; j++)
		{
			size_t		s = (size_t) per * t + j;
			size_t		at = n * s / S;

			m[j].init(runs.data(), K, cuts[s].data(), cuts[s + 1].data(),
					  out_keys + at, out_idx + at);
		}
		merge_some<PF, false>(m, per);
	});
}

/*
 * Tiles: the 2T exact-rank slices (exact, so that ties of one key spread
 * over slices) cut again at splitter keys sampled evenly from every run's
 * window; a boundary is each run's lower bound of the splitter within its
 * window.  bnd holds the boundaries one after the other, K positions each;
 * tile i is bnd[i] .. bnd[i + 1], written at the sum of bnd[i]'s positions.
 */
static size_t
make_tiles(const std::vector<Run> &runs, size_t n, size_t rows_per_tile,
		   std::vector<size_t> &bnd)
{
	int			S = 2 * nthreads;
	size_t		K = runs.size();
	std::vector<std::vector<size_t>> cuts,
				inner(S);

	split_slices(runs, n, S, cuts);
	parallel_for(S, [&](int, size_t a, size_t b) {
		for (size_t s = a; s < b; s++)
		{
			size_t		rows = n * (s + 1) / S - n * s / S;
			size_t		m = (rows + rows_per_tile - 1) / rows_per_tile;
			std::vector<uint64_t> smp;

			if (m <= 1)
				continue;
			for (size_t r = 0; r < K; r++)
			{
				size_t		lo = cuts[s][r],
							win = cuts[s + 1][r] - lo;

				if (win == 0)
					continue;
				for (size_t j = 1; j < m; j++)
					smp.push_back(runs[r].keys[lo + win * j / m]);
			}
			std::sort(smp.begin(), smp.end());
			for (size_t j = 1; j < m; j++)
			{
				uint64_t	v = smp[smp.size() * j / m];

				for (size_t r = 0; r < K; r++)
				{
					const uint64_t *b0 = runs[r].keys;

					inner[s].push_back(std::lower_bound(b0 + cuts[s][r],
														b0 + cuts[s + 1][r], v) - b0);
				}
			}
		}
	});
	bnd.clear();
	for (int s = 0; s < S; s++)
	{
		bnd.insert(bnd.end(), cuts[s].begin(), cuts[s].end());
		bnd.insert(bnd.end(), inner[s].begin(), inner[s].end());
	}
	bnd.insert(bnd.end(), cuts[S].begin(), cuts[S].end());
	return bnd.size() / K - 1;
}

static size_t
tile_at(const size_t *b, size_t K)
{
	size_t		at = 0;

	for (size_t r = 0; r < K; r++)
		at += b[r];
	return at;
}

/* m (a Merge or a Merge64) set up for tile t, writing at its place in out_* */
template <typename M>
static void
init_tile(M &m, const std::vector<Run> &runs, const std::vector<size_t> &bnd, size_t t,
		  uint64_t *out_keys, uint32_t *out_idx)
{
	size_t		K = runs.size();
	const size_t *b = &bnd[t * K];
	size_t		at = tile_at(b, K);

	m.init(runs.data(), K, b, b + K, out_keys + at, out_idx + at);
}

/*
 * The frame of the tile variants: tiles of about `rows` rows (the time
 * make_tiles takes into *split_ms), taken two at a time from a shared
 * counter by the threads, each of which keeps a State across its tiles;
 * pair(state, bnd, i, cnt) merges tiles i .. i + cnt - 1 (cnt 1 or 2).
 * With sfence, each thread fences its non-temporal stores at the end.
 */
template <typename State, typename F>
static void
for_tile_pairs(const std::vector<Run> &runs, size_t n, size_t rows, bool sfence,
			   double *split_ms, const F &pair)
{
	std::vector<size_t> bnd;
	double		t0 = now_ms();
	size_t		ntiles = make_tiles(runs, n, rows, bnd);
	std::atomic<size_t> next(0);

	*split_ms = now_ms() - t0;
	parallel_for(nthreads, [&](int, size_t, size_t) {
		State		state;

		for (size_t i; (i = next.fetch_add(2)) < ntiles;)
			pair(state, bnd, i, std::min((size_t) 2, ntiles - i));
		if (sfence)
			_mm_sfence();
	});
}

/*
 * Two-level merge of a tile pair: runs in G groups of at most 6; tile j's
 * group g goes to tmp[j] (keys and global row indexes, a run of base 0),
 * the two tiles' group g in lockstep, then the G group runs of each tile
 * to the output.  A tile more than four times the planned size (many ties
 * of one key) is merged in one level instead.
 */
struct CascadeBuf
{
	std::vector<uint64_t> keys;
	std::vector<uint32_t> idx;
	std::vector<Run> gruns;
	std::vector<size_t> glo,
				ghi;
};

/* a thread's state in the cascade: its two tiles' merges and buffers */
struct CascadeState
{
	Merge		m[2];
	CascadeBuf	cb[2];
};

/* tiles i .. i + cnt - 1 (cnt 1 or 2): in two levels of G groups, or flat */
static void
cascade_pair(CascadeState &cs, const std::vector<Run> &runs, const std::vector<size_t> &bnd,
			 size_t i, size_t cnt, size_t G, size_t ctile, uint64_t *out_keys,
			 uint32_t *out_idx)
{
	size_t		K = runs.size();
	Merge	   *m = cs.m;
	CascadeBuf *cb = cs.cb;
	bool		flat = G < 2;

	for (size_t j = 0; j < cnt; j++)
	{
		const size_t *b = &bnd[(i + j) * K];

		if (tile_at(b + K, K) - tile_at(b, K) > 4 * ctile)
			flat = true;
	}
	if (flat)
	{
		for (size_t j = 0; j < cnt; j++)
			init_tile(m[j], runs, bnd, i + j, out_keys, out_idx);
		merge_some<true, false>(m, cnt);
		return;
	}
	/* level 1: group g of each tile into its buffer */
	for (size_t j = 0; j < cnt; j++)
	{
		const size_t *b = &bnd[(i + j) * K];
		size_t		rows = tile_at(b + K, K) - tile_at(b, K);

		if (cb[j].keys.size() < rows)
		{
			cb[j].keys.resize(rows);
			cb[j].idx.resize(rows);
		}
		cb[j].gruns.assign(G, Run());
		cb[j].glo.assign(G, 0);
		cb[j].ghi.assign(G, 0);
	}
	std::vector<size_t> off(cnt, 0);

	for (size_t g = 0; g < G; g++)
	{
		size_t		r0 = K * g / G,
					r1 = K * (g + 1) / G;

		for (size_t j = 0; j < cnt; j++)
		{
			const size_t *b = &bnd[(i + j) * K];
			size_t		rows = tile_at(b + K + r0, r1 - r0) - tile_at(b + r0, r1 - r0);

			m[j].init(runs.data() + r0, r1 - r0, b + r0, b + K + r0,
					  cb[j].keys.data() + off[j], cb[j].idx.data() + off[j]);
			cb[j].gruns[g] = {cb[j].keys.data() + off[j], cb[j].idx.data() + off[j],
				rows, 0};
			cb[j].ghi[g] = rows;
			off[j] += rows;
		}
		merge_some<true, false>(m, cnt);
	}
	/* level 2: the groups to the output */
	for (size_t j = 0; j < cnt; j++)
	{
		size_t		at = tile_at(&bnd[(i + j) * K], K);

		m[j].init(cb[j].gruns.data(), G, cb[j].glo.data(), cb[j].ghi.data(),
				  out_keys + at, out_idx + at);
	}
	merge_some<true, false>(m, cnt);
}

static void
merge_cascade(const std::vector<Run> &runs, size_t n, uint64_t *out_keys,
			  uint32_t *out_idx, double *split_ms)
{
	size_t		G = (runs.size() + 5) / 6;
	size_t		ctile = std::max(tile_rows / 4, (size_t) 4096);

	for_tile_pairs<CascadeState>(runs, n, ctile, false, split_ms,
								 [&](CascadeState &cs, const std::vector<size_t> &bnd,
									 size_t i, size_t cnt) {
		cascade_pair(cs, runs, bnd, i, cnt, G, ctile, out_keys, out_idx);
	});
}

/*
 * tiles64: the tiles with 64-bit nodes: the loser tree keeps keys and run
 * numbers in two arrays and compares keys only (ties in any order), so a
 * level costs one 64-bit compare and two moves instead of a 128-bit compare
 * and four.  An exhausted run's key is UINT64_MAX, which must never tie
 * with a real key: each run's rows with key UINT64_MAX (the end of its
 * window) are left out of the tree and copied after the merged rows
 * (count: the rows merged through the tree).
 */
struct Merge64 : MergeRuns
{
	uint64_t	wk;				/* the winner: key, run */
	uint32_t	wr;
	std::vector<uint64_t> lk;	/* losers 1 .. K2-1: keys, runs */
	std::vector<uint32_t> lr;
	std::vector<uint64_t> vk;	/* scratch of init */
	std::vector<uint32_t> vr;
	const Run  *runs;
	const size_t *hi;

	void		init(const Run *rs, size_t K, const size_t *lo, const size_t *h,
					 uint64_t *ok, uint32_t *oi)
	{
		runs = rs;
		hi = h;
		reset(K, ok, oi);
		lk.assign(K2, 0);
		lr.assign(K2, 0);
		vk.assign(2 * K2, UINT64_MAX);
		vr.assign(2 * K2, 0);
		for (size_t r = 0; r < K2; r++)
		{
			vr[K2 + r] = (uint32_t) r;
			if (r >= K)
				continue;
			kp[r] = rs[r].keys + lo[r];
			kend[r] = std::lower_bound(kp[r], rs[r].keys + h[r], UINT64_MAX);
			pp[r] = rs[r].perm + lo[r];
			base[r] = rs[r].base;
			count += kend[r] - kp[r];
			if (kp[r] < kend[r])
				vk[K2 + r] = *kp[r];
		}
		for (size_t t = K2 - 1; t >= 1; t--)
		{
			bool		a_wins = !(vk[2 * t + 1] < vk[2 * t]);
			size_t		wi = a_wins ? 2 * t : 2 * t + 1,
						li = a_wins ? 2 * t + 1 : 2 * t;

			lk[t] = vk[li];
			lr[t] = vr[li];
			vk[t] = vk[wi];
			vr[t] = vr[wi];
		}
		wk = vk[1];
		wr = vr[1];
	}

	/* after the tree: the rows with key UINT64_MAX, run by run */
	void		finish(size_t K)
	{
		size_t		i = count;

		for (size_t r = 0; r < K; r++)
		{
			const uint64_t *e = runs[r].keys + hi[r];

			for (const uint64_t *k = kend[r]; k < e; k++, i++)
			{
				out_keys[i] = UINT64_MAX;
				out_idx[i] = (uint32_t) (base[r] + *pp[r]);
				pp[r]++;
			}
		}
	}
};

template <bool NT>
struct Step64
{
	const uint64_t **kp;
	const uint64_t *const *kend;
	const uint32_t **pp;
	const uint64_t *base;
	uint64_t   *LK;
	uint32_t   *LR;
	size_t		K2;
	uint64_t   *ok;
	uint32_t   *oi;
	uint64_t	wk;
	uint32_t	wr;

	Step64(Merge64 &m) : kp(m.kp.data()), kend(m.kend.data()), pp(m.pp.data()),
		base(m.base.data()), LK(m.lk.data()), LR(m.lr.data()), K2(m.K2),
		ok(m.out_keys), oi(m.out_idx), wk(m.wk), wr(m.wr)
	{
	}

	inline void step(size_t i)
	{
		uint32_t	r = wr;
		const uint64_t *k = kp[r] + 1;
		const uint32_t *p = pp[r];
		uint64_t	xk;
		uint32_t	xr = r;

		if (NT)
		{
			_mm_stream_si64((long long *) (ok + i), (long long) wk);
			_mm_stream_si32((int *) (oi + i), (int) (base[r] + *p));
		}
		else
		{
			ok[i] = wk;
			oi[i] = (uint32_t) (base[r] + *p);
		}
		pp[r] = p + 1;
		kp[r] = k;
		__builtin_prefetch(k + PF_KEYS);
		__builtin_prefetch(p + PF_PERM);
		xk = k < kend[r] ? *k : UINT64_MAX;
		for (size_t t = (K2 + r) >> 1; t >= 1; t >>= 1)
		{
			/* masks, not ternaries: the compiler must not make this a branch */
			uint64_t	l = LK[t];
			uint32_t	lrr = LR[t];
			uint64_t	mk = (uint64_t) 0 - (uint64_t) (l < xk);
			uint64_t	dk = (l ^ xk) & mk;
			uint32_t	dr = (lrr ^ xr) & (uint32_t) mk;

			LK[t] = l ^ dk;
			LR[t] = lrr ^ dr;
			xk ^= dk;
			xr ^= dr;
		}
		wk = xk;
		wr = xr;
	}
};

template <bool NT>
static void
merge64_pair(Merge64 *a, Merge64 *b, size_t K)
{
	Step64<NT>	sa(*a);
	size_t		i = 0;

	if (b != NULL)
	{
		Step64<NT>	sb(*b);
		size_t		both = std::min(a->count, b->count);

		for (; i < both; i++)
		{
			sa.step(i);
			sb.step(i);
		}
		for (size_t j = i; j < b->count; j++)
			sb.step(j);
		b->finish(K);
	}
	for (; i < a->count; i++)
		sa.step(i);
	a->finish(K);
}

/* tiles' trees m[0 .. cnt - 1] (cnt 1 or 2, of K runs) merged, in lockstep */
template <bool NT>
static void
merge_tile_trees(Merge *m, size_t cnt, size_t)
{
	merge_some<true, NT>(m, cnt);
}

template <bool NT>
static void
merge_tile_trees(Merge64 *m, size_t cnt, size_t K)
{
	merge64_pair<NT>(&m[0], cnt == 2 ? &m[1] : NULL, K);
}

/* tiles (M: Merge) and tiles64 (M: Merge64); NT: non-temporal stores */
template <typename M, bool NT>
static void
merge_tiles(const std::vector<Run> &runs, size_t n, uint64_t *out_keys,
			uint32_t *out_idx, double *split_ms)
{
	typedef std::array<M, 2> State;

	for_tile_pairs<State>(runs, n, tile_rows, NT, split_ms,
						  [&](State &m, const std::vector<size_t> &bnd, size_t i, size_t cnt) {
		for (size_t j = 0; j < cnt; j++)
			init_tile(m[j], runs, bnd, i + j, out_keys, out_idx);
		merge_tile_trees<NT>(m.data(), cnt, runs.size());
	});
}

/* the merge of the sorted runs into out_*; *split_ms: the part spent cutting */
static void
parallel_merge(int variant, const std::vector<Run> &runs, size_t n,
			   uint64_t *out_keys, uint32_t *out_idx, double *split_ms)
{
	switch (variant)
	{
		case MV_PAIR:
			merge_static<false>(runs, n, 2, out_keys, out_idx, split_ms);
			break;
		case MV_PAIR_PF:
			merge_static<true>(runs, n, 2, out_keys, out_idx, split_ms);
			break;
		case MV_ONE_PF:
			merge_static<true>(runs, n, 1, out_keys, out_idx, split_ms);
			break;
		case MV_TILES:
			merge_tiles<Merge, false>(runs, n, out_keys, out_idx, split_ms);
			break;
		case MV_TILES_NT:
			merge_tiles<Merge, true>(runs, n, out_keys, out_idx, split_ms);
			break;
		case MV_CASCADE:
			merge_cascade(runs, n, out_keys, out_idx, split_ms);
			break;
		case MV_TILES64:
			merge_tiles<Merge64, false>(runs, n, out_keys, out_idx, split_ms);
			break;
		default:
			merge_tiles<Merge64, true>(runs, n, out_keys, out_idx, split_ms);
			break;
	}
}

/* ---------------------------------------------------------------------
 * the CPU sort: parallel MSD pass, then the CPU engine per bucket
 * --------------------------------------------------------------------- */

static void
cpu_sort(const uint64_t *src, size_t n, int bits, uint64_t *out_keys,
		 uint32_t *out_idx, uint64_t *tmp_keys, uint32_t *tmp_idx,
		 double *scatter_ms)
{
	const gs_engine_ops *cops = gpusort_cpu_engine(GS_ENGINE_ABI_VERSION);
	std::vector<uint64_t> ors(nthreads, 0);
	int			shift;
	size_t		B = (size_t) 1 << bits;
	std::vector<size_t> hist((size_t) nthreads * B, 0);
	std::vector<size_t> bstart(B + 1, 0);
	double		t0 = now_ms();

	if (n == 0)
		return;

	/*
	 * The CPU engine mallocs its workspace per call: keep such blocks in
	 * the heap (no mmap, no trim) so that bucket after bucket reuses warm
	 * pages instead of faulting fresh ones in.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);	/* glibc's largest */
	mallopt(M_TRIM_THRESHOLD, 1 << 30);

	/* the bits that vary */
	parallel_for(n, [&](int t, size_t lo, size_t hi) {
		uint64_t	o = 0,
					k0 = src[0];

		for (size_t i = lo; i < hi; i++)
			o |= src[i] ^ k0;
		ors[t] = o;
	});
	uint64_t	o = 0;

	for (uint64_t x : ors)
		o |= x;
	{
		int			top = o ? 64 - __builtin_clzll(o) : 0;

		shift = top > bits ? top - bits : 0;
	}
	uint64_t	dmask = B - 1;

	parallel_for(n, [&](int t, size_t lo, size_t hi) {
		size_t	   *h = &hist[(size_t) t * B];

		for (size_t i = lo; i < hi; i++)
			h[(src[i] >> shift) & dmask]++;
	});
	/* bucket d, thread t writes from bstart[d] + sum of earlier threads' counts */
	{
		size_t		sum = 0;

		for (size_t d = 0; d < B; d++)
		{
			bstart[d] = sum;
			for (int t = 0; t < nthreads; t++)
			{
				size_t		c = hist[(size_t) t * B + d];

				hist[(size_t) t * B + d] = sum;
				sum += c;
			}
		}
		bstart[B] = sum;
	}
	parallel_for(n, [&](int t, size_t lo, size_t hi) {
		size_t	   *h = &hist[(size_t) t * B];

		for (size_t i = lo; i < hi; i++)
		{
			uint64_t	k = src[i];
			size_t		p = h[(k >> shift) & dmask]++;

			tmp_keys[p] = k;
			tmp_idx[p] = (uint32_t) i;
		}
	});
	*scatter_ms = now_ms() - t0;

	/* buckets to the CPU engine, largest-first is not needed for uniform data */
	std::atomic<size_t> next(0);
	std::atomic<int> failed(0);

	parallel_for(nthreads, [&](int, size_t, size_t) {
		gs_engine  *ce;
		char		errbuf[GS_ERRBUF_SIZE];
		std::vector<uint32_t> perm;

		if (cops->create(&ce, errbuf, sizeof(errbuf)) != GS_OK)
		{
			failed = 1;
			return;
		}
		for (size_t d; (d = next.fetch_add(1)) < B;)
		{
			size_t		a = bstart[d],
						m = bstart[d + 1] - a;
			gs_status	st;

			if (m == 0)
				continue;
			if (perm.size() < m)
				perm.resize(m);
			st = cops->sort(ce, tmp_keys + a, m, 8, perm.data(), GS_SORT_KEYS_OUT,
							NULL, NULL, NULL, errbuf, sizeof(errbuf));
			if (st != GS_OK)
			{
				fprintf(stderr, "CPU engine: %s\n", errbuf);
				failed = 1;
				break;
			}
			memcpy(out_keys + a, tmp_keys + a, m * sizeof(uint64_t));
			for (size_t i = 0; i < m; i++)
				out_idx[a + i] = tmp_idx[a + perm[i]];
		}
		cops->destroy(ce);
	});
	if (failed)
	{
		fprintf(stderr, "the CPU sort failed\n");
		exit(1);
	}
}

/* ---------------------------------------------------------------------
 * checks
 * --------------------------------------------------------------------- */

static bool
check_sorted(const char *what, const uint64_t *src, size_t n,
			 const uint64_t *keys, const uint32_t *idx)
{
	std::vector<uint64_t> seen((n + 63) / 64 + 1, 0);
	std::atomic<size_t> bad(0);
	std::atomic<size_t> first_bad(SIZE_MAX);

	parallel_for(n, [&](int, size_t lo, size_t hi) {
		size_t		b = 0;

		for (size_t i = lo; i < hi; i++)
		{
			uint32_t	x = idx[i];
			bool		ok = x < n && src[x] == keys[i] &&
				(i == 0 || keys[i - 1] <= keys[i]);

			if (ok)
			{
				uint64_t	bit = 1ull << (x & 63);
				uint64_t	old = __atomic_fetch_or(&seen[x >> 6], bit, __ATOMIC_RELAXED);

				ok = (old & bit) == 0;
			}
			if (!ok)
			{
				if (b++ == 0)
				{
					size_t		f = first_bad.load();

					while (i < f && !first_bad.compare_exchange_weak(f, i))
						;
				}
			}
		}
		bad += b;
	});
	if (bad)
	{
		size_t		i = first_bad;

		printf("FAIL %s: %zu bad rows, first at %zu (key %llu, index %u)\n", what,
			   (size_t) bad, i, (unsigned long long) keys[i], idx[i]);
		return false;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * main
 * --------------------------------------------------------------------- */

struct Measure
{
	double		h2d_gbs,
				d2h_gbs,
				bidir_gbs;
};

/* GB/s of one copy of bytes on stream s, timed by the events e[0], e[1] */
static double
timed_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
		   cudaStream_t s, cudaEvent_t *e)
{
	float		ms;

	cudaEventRecord(e[0], s);
	cudaMemcpyAsync(dst, src, bytes, kind, s);
	cudaEventRecord(e[1], s);
	cudaEventSynchronize(e[1]);
	cudaEventElapsedTime(&ms, e[0], e[1]);
	return bytes / (ms * 1e6);
}

static Measure
measure_pcie(void *pinned, size_t bytes)
{
	void	   *dev;
	cudaStream_t s[2];
	cudaEvent_t e[4];
	std::vector<double> up,
				down,
				both;
	Measure		m;

	if (cudaMalloc(&dev, 2 * bytes) != cudaSuccess)
	{
		fprintf(stderr, "cudaMalloc for the bandwidth test failed\n");
		exit(1);
	}
	for (int i = 0; i < 2; i++)
		cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking);
	for (int i = 0; i < 4; i++)
		cudaEventCreate(&e[i]);
	for (int rep = 0; rep < 6; rep++)
	{
		double		h2d = timed_copy(dev, pinned, bytes, cudaMemcpyHostToDevice, s[0], e),
					d2h = timed_copy(pinned, dev, bytes, cudaMemcpyDeviceToHost, s[0], e);

		if (rep > 0)
		{
			up.push_back(h2d);
			down.push_back(d2h);
		}
		/* both directions at once: half the buffer each way */
		{
			double		t0 = now_ms();

			cudaMemcpyAsync((char *) dev + bytes, pinned, bytes / 2,
							cudaMemcpyHostToDevice, s[0]);
			cudaMemcpyAsync((char *) pinned + bytes / 2, dev, bytes / 2,
							cudaMemcpyDeviceToHost, s[1]);
			cudaStreamSynchronize(s[0]);
			cudaStreamSynchronize(s[1]);
			if (rep > 0)
				both.push_back(bytes / ((now_ms() - t0) * 1e6));
		}
	}
	m.h2d_gbs = median(up);
	m.d2h_gbs = median(down);
	m.bidir_gbs = median(both);
	for (int i = 0; i < 2; i++)
		cudaStreamDestroy(s[i]);
	for (int i = 0; i < 4; i++)
		cudaEventDestroy(e[i]);
	cudaFree(dev);
	return m;
}

/* device bytes the engine takes for one sort of n u64 keys (one slot) */
static size_t
slot_bytes(size_t n)
{
	auto		al = [](size_t x) { return (x + 255) & ~(size_t) 255; };

	return 2 * al(n * 8) + 2 * al(n * 4) + al(hrs::temp_bytes(8, n));
}

/* the command line (see the header comment), with its defaults */
struct Options
{
	size_t		n = 8000000000ull / 12;
	size_t		budget = 2048ull << 20;
	size_t		chunk_rows = 0; /* 0: the most that fit the budget */
	int			reps = 3;
	int			cpu_bits = 10;
	uint64_t	seed = 42;
	bool		cpu_only = false;
	bool		no_cpu_sort = false;
	bool		ramp = true;
	int			enc_threads = 0;	/* default: T - 1, a core left to the engine's worker */
	int			few = 0;		/* --dist few: 16 distinct keys, UINT64_MAX among them */
	int			variant = MV_TILES64;
	bool		merge_all = false;
	const char *out = NULL;
	const char *commit = "unknown";
};

/* *o from the command line (nthreads and tile_rows too); false: exit with 2 */
static bool
parse_options(int argc, char **argv, Options *o)
{
	nthreads = (int) std::thread::hardware_concurrency();
	if (nthreads < 1)
		nthreads = 1;
	for (int i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--pairs") == 0 && v)
			o->n = (size_t) atof(v), i++;
		else if (strcmp(a, "--budget-mb") == 0 && v)
			o->budget = (size_t) (atof(v) * (1 << 20)), i++;
		else if (strcmp(a, "--threads") == 0 && v)
			nthreads = atoi(v), i++;
		else if (strcmp(a, "--chunk-rows") == 0 && v)
			o->chunk_rows = (size_t) atof(v), i++;
		else if (strcmp(a, "--reps") == 0 && v)
			o->reps = atoi(v), i++;
		else if (strcmp(a, "--cpu-bits") == 0 && v)
			o->cpu_bits = atoi(v), i++;
		else if (strcmp(a, "--seed") == 0 && v)
			o->seed = strtoull(v, NULL, 10), i++;
		else if (strcmp(a, "--out") == 0 && v)
			o->out = v, i++;
		else if (strcmp(a, "--commit") == 0 && v)
			o->commit = v, i++;
		else if (strcmp(a, "--cpu-only") == 0)
			o->cpu_only = true;
		else if (strcmp(a, "--no-cpu-sort") == 0)
			o->no_cpu_sort = true;
		else if (strcmp(a, "--no-ramp") == 0)
			o->ramp = false;
		else if (strcmp(a, "--encode-threads") == 0 && v)
			o->enc_threads = atoi(v), i++;
		else if (strcmp(a, "--tile-rows") == 0 && v)
			tile_rows = (size_t) atof(v), i++;
		else if (strcmp(a, "--merge-all") == 0)
			o->merge_all = true;
		else if (strcmp(a, "--merge") == 0 && v && merge_variant(v) >= 0)
			o->variant = merge_variant(v), i++;
		else if (strcmp(a, "--dist") == 0 && v && (strcmp(v, "uniform") == 0 ||
													strcmp(v, "few") == 0))
			o->few = strcmp(v, "few") == 0, i++;
		else
		{
			fprintf(stderr,
					"usage: %s [--pairs N] [--budget-mb MB] [--threads T] [--encode-threads E]\n"
					"          [--chunk-rows N] [--reps R] [--cpu-bits B] [--seed S] [--dist uniform|few]\n"
					"          [--cpu-only] [--no-cpu-sort] [--no-ramp]\n"
					"          [--merge pair|pair-pf|one-pf|tiles|tiles-nt|cascade|tiles64|tiles64-nt] [--merge-all]\n"
					"          [--tile-rows N] [--out FILE.md] [--commit SHA]\n", argv[0]);
			return false;
		}
	}
	if (o->enc_threads <= 0)
		o->enc_threads = nthreads > 1 ? nthreads - 1 : 1;
	if (nthreads < 1 || o->reps < 1 || o->cpu_bits < 1 || o->cpu_bits > 20 || o->n < 1 ||
		o->n > GS_MAX_ROWS || tile_rows < 1024)
	{
		fprintf(stderr, "bad option value\n");
		return false;
	}
	return true;
}

/* chunk rows: the most whose two slots' device buffers fit in the budget */
static size_t
fit_chunk_rows(size_t n, size_t budget)
{
	size_t		lo = 1,
				hi = n;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo + 1) / 2;

		if (2 * slot_bytes(mid) <= budget)
			lo = mid;
		else
			hi = mid - 1;
	}
	/* whole 4 KB pages of keys per chunk, for the copies */
	if (lo > 4096 && lo < n)
		lo &= ~(size_t) 511;
	return lo;
}

/*
 * Chunk sizes.  With --ramp (the default) the first two chunks are a
 * quarter and a half of the full size c, and so are the last two: the
 * first chunk's encode and upload and the last one's download overlap
 * nothing, so they should be short.  coff: where each chunk starts.
 */
static void
plan_chunks(size_t n, size_t c, bool ramp, std::vector<size_t> &crows,
			std::vector<size_t> &coff)
{
	size_t		left = n;
	bool		r = ramp && c >= 4 && n > 3 * c;

	if (r)
	{
		crows.push_back(c / 4);
		crows.push_back(c / 2);
		left -= c / 4 + c / 2;
	}
	while (left > c + c / 2 + c / 4)
	{
		crows.push_back(c);
		left -= c;
	}
	if (r && left > c / 2 + c / 4)
	{
		crows.push_back(left - c / 2 - c / 4);
		crows.push_back(c / 2);
		crows.push_back(c / 4);
	}
	else
	{
		while (left > c)
		{
			crows.push_back(c);
			left -= c;
		}
		crows.push_back(left);
	}
	for (size_t i = 0, at = 0; i < crows.size(); at += crows[i], i++)
		coff.push_back(at);
}

/* the source keys and the merge's output */
struct Data
{
	uint64_t   *src;
	uint64_t   *gkeys;
	uint32_t   *gidx;
};

/* *d allocated, the source generated, the output touched; false: out of memory */
static bool
make_data(const Options &o, Data *d)
{
	size_t		n = o.n;
	uint64_t   *src;

	d->src = src = (uint64_t *) big_alloc(n * 8);
	d->gkeys = (uint64_t *) big_alloc(n * 8);
	d->gidx = (uint32_t *) big_alloc(n * 4);
	if (!d->src || !d->gkeys || !d->gidx)
		return false;
	parallel_for(n, [&](int, size_t lo, size_t hi) {
		for (size_t i = lo; i < hi; i++)
		{
			uint64_t	x = splitmix64(o.seed * 0x1000003ull + i);

			if (o.few)
				x = x % 16 == 15 ? UINT64_MAX : splitmix64(x % 16);
			src[i] = x;
		}
	});
	par_memset(d->gkeys, 0, n * 8);
	par_memset(d->gidx, 0, n * 4);
	return true;
}

/* the engine and each chunk's rows and pinned buffers */
struct Chunks
{
	const gs_engine_ops *ops;
	gs_engine  *eng;
	gs_device_info info;
	size_t		count;
	std::vector<size_t> rows,
				off;
	std::vector<uint64_t *> keys;
	std::vector<uint32_t *> perm;
};

/* ch's engine created (false: ABI mismatch) and its chunks' buffers allocated */
static bool
open_chunks(const Options &o, Chunks *ch)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;
	const gs_engine_ops *ops;

	ch->eng = NULL;
	ch->ops = ops = o.cpu_only ? gpusort_cpu_engine(GS_ENGINE_ABI_VERSION) :
		gpusort_cuda_engine(GS_ENGINE_ABI_VERSION);
	if (ops == NULL)
	{
		fprintf(stderr, "engine ABI mismatch\n");
		return false;
	}
	st = ops->create(&ch->eng, errbuf, sizeof(errbuf));
	if (st != GS_OK)
		die("create", st, errbuf);
	st = ops->device_info(ch->eng, &ch->info, errbuf, sizeof(errbuf));
	if (st != GS_OK)
		die("device_info", st, errbuf);

	ch->keys.resize(ch->count);
	ch->perm.resize(ch->count);
	for (size_t c = 0; c < ch->count; c++)
	{
		void	   *p;

		st = ops->keybuf_alloc(ch->eng, ch->rows[c] * 8, &p, errbuf, sizeof(errbuf));
		if (st != GS_OK)
			die("keybuf_alloc", st, errbuf);
		ch->keys[c] = (uint64_t *) p;
		st = ops->keybuf_alloc(ch->eng, ch->rows[c] * 4, &p, errbuf, sizeof(errbuf));
		if (st != GS_OK)
			die("keybuf_alloc", st, errbuf);
		ch->perm[c] = (uint32_t *) p;
		/* touch: pinned pages are resident already, pageable ones not */
		memset(ch->keys[c], 0, ch->rows[c] * 8);
		memset(ch->perm[c], 0, ch->rows[c] * 4);
	}
	return true;
}

static void
close_chunks(Chunks *ch)
{
	for (size_t c = 0; c < ch->count; c++)
	{
		ch->ops->keybuf_free(ch->eng, ch->keys[c], ch->rows[c] * 8);
		ch->ops->keybuf_free(ch->eng, ch->perm[c], ch->rows[c] * 4);
	}
	ch->ops->destroy(ch->eng);
}

/* pinned PCIe bandwidth through a keybuf of up to 1 GB, printed */
static Measure
pinned_bandwidth(const Options &o, const Chunks &ch)
{
	size_t		bytes = std::min(o.n * 8, (size_t) 1 << 30);
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;
	void	   *p;
	Measure		bw;

	st = ch.ops->keybuf_alloc(ch.eng, bytes, &p, errbuf, sizeof(errbuf));
	if (st != GS_OK)
		die("keybuf_alloc", st, errbuf);
	memset(p, 1, bytes);
	bw = measure_pcie(p, bytes);
	ch.ops->keybuf_free(ch.eng, p, bytes);
	printf("pinned PCIe, %zu MB: H2D %.1f GB/s, D2H %.1f GB/s, both at once %.1f GB/s total\n",
		   bytes >> 20, bw.h2d_gbs, bw.d2h_gbs, bw.bidir_gbs);
	fflush(stdout);
	return bw;
}

/* the chunked sort's times: per rep, and the engine's sums of the last rep */
struct Timings
{
	std::vector<double> chunked,
				merge,
				whole,
				encode,
				stall,
				split;
	double		sum_up,
				sum_sort,
				sum_down;
};

/* wait for a submitted chunk sort; the wait into *stall, its times into *t */
static void
wait_chunk(const Chunks &ch, gs_ticket tk, double *stall, Timings *t)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_sort_stats ss;
	gs_status	st;
	double		a = now_ms();

	st = ch.ops->sort_wait(ch.eng, tk, NULL, NULL, &ss, errbuf, sizeof(errbuf));
	if (st != GS_OK)
		die("sort_wait", st, errbuf);
	*stall += now_ms() - a;
	t->sum_up += ss.upload_ms;
	t->sum_sort += ss.sort_ms;
	t->sum_down += ss.download_ms;
}

/*
 * One rep of the chunked sort: each chunk encoded into its keybuf and
 * submitted while the two before it are in the engine (or, CPU only,
 * sorted at once), then the sorted runs merged into d's output.
 */
static void
chunked_rep(int rep, const Options &o, const Data &d, const Chunks &ch,
			std::vector<Run> &runs, Timings *t)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;
	size_t		nchunks = ch.count;
	std::vector<gs_ticket> tk(nchunks, 0);
	double		enc = 0,
				stall = 0;
	double		ts = now_ms();

	t->sum_up = t->sum_sort = t->sum_down = 0;
	for (size_t c = 0; c < nchunks; c++)
	{
		double		a = now_ms();

		par_memcpy(o.enc_threads, ch.keys[c], d.src + ch.off[c], ch.rows[c] * 8);
		enc += now_ms() - a;
		if (o.cpu_only)
		{
			st = ch.ops->sort(ch.eng, ch.keys[c], ch.rows[c], 8, ch.perm[c], GS_SORT_KEYS_OUT,
							  NULL, NULL, NULL, errbuf, sizeof(errbuf));
			if (st != GS_OK)
				die("sort", st, errbuf);
			continue;
		}
		if (c >= 2)
			wait_chunk(ch, tk[c - 2], &stall, t);
		st = ch.ops->sort_submit(ch.eng, ch.keys[c], ch.rows[c], 8, ch.perm[c],
								 GS_SORT_KEYS_OUT, &tk[c], errbuf, sizeof(errbuf));
		if (st != GS_OK)
			die("sort_submit", st, errbuf);
	}
	if (!o.cpu_only)
	{
		for (size_t c = nchunks >= 2 ? nchunks - 2 : 0; c < nchunks; c++)
			wait_chunk(ch, tk[c], &stall, t);
	}
	double		tc = now_ms();

	for (size_t c = 0; c < nchunks; c++)
		runs[c] = {ch.keys[c], ch.perm[c], ch.rows[c], (uint64_t) ch.off[c]};
	double		split_ms;

	parallel_merge(o.variant, runs, o.n, d.gkeys, d.gidx, &split_ms);

	double		te = now_ms();

	t->split.push_back(split_ms);

	t->chunked.push_back(tc - ts);
	t->merge.push_back(te - tc);
	t->whole.push_back(te - ts);
	t->encode.push_back(enc);
	t->stall.push_back(stall);
	printf("rep %d: chunked %.1f ms (encode %.1f, waits %.1f), merge %.1f ms (%s; cuts %.1f), whole %.1f ms\n",
		   rep + 1, tc - ts, enc, stall, te - tc, merge_names[o.variant], split_ms, te - ts);
	fflush(stdout);
}

/*
 * --merge-all: every merge variant R times on the runs of the last rep,
 * into the same (already touched) output, which is first filled with
 * ones so that a row a variant fails to write cannot pass the check.
 * The rows of the table go to mtable; false if any output failed.
 */
static bool
merge_all_table(const Options &o, const Data &d, const std::vector<Run> &runs,
				char *mtable, size_t size)
{
	size_t		n = o.n;
	int			mlen = 0;
	bool		ok = true;

	mlen += snprintf(mtable + mlen, size - mlen,
					 "\n| merge variant (%zu runs, %d threads) | median ms | min / max ms | of it cuts ms | ns/row/thread | check |\n"
					 "| --- | --- | --- | --- | --- | --- |\n", runs.size(), nthreads);
	/* the last row: the default variant on half the threads (hyperthreads?) */
	for (int row = 0; row <= MV_COUNT; row++)
	{
		int			mv = row < MV_COUNT ? row : o.variant;
		int			saved = nthreads;
		std::vector<double> tm,
					tsp;
		bool		mok;
		char		name[64];

		if (row == MV_COUNT)
		{
			if (nthreads < 2)
				break;
			nthreads /= 2;
			snprintf(name, sizeof(name), "%s on %d threads", merge_names[mv], nthreads);
		}
		else
			snprintf(name, sizeof(name), "%s%s", merge_names[mv],
					 mv == o.variant ? " (default)" : "");

		par_memset(d.gkeys, 0xff, n * 8);
		par_memset(d.gidx, 0xff, n * 4);
		for (int rep = 0; rep < o.reps; rep++)
		{
			double		split_ms,
						a = now_ms();

			parallel_merge(mv, runs, n, d.gkeys, d.gidx, &split_ms);
			tm.push_back(now_ms() - a);
			tsp.push_back(split_ms);
		}
		std::sort(tm.begin(), tm.end());
		mlen += snprintf(mtable + mlen, size - mlen,
						 "| %s | %.1f | %.1f / %.1f | %.1f | %.1f |",
						 name, median(tm), tm.front(), tm.back(), median(tsp),
						 median(tm) * 1e6 * nthreads / n);
		nthreads = saved;
		mok = check_sorted(name, d.src, n, d.gkeys, d.gidx);
		ok &= mok;
		mlen += snprintf(mtable + mlen, size - mlen, " %s |\n",
						 mok ? "ok" : "FAIL");
		printf("merge %s: %.1f ms (min %.1f, max %.1f; cuts %.1f)%s\n", name,
			   median(tm), tm.front(), tm.back(), median(tsp), mok ? "" : " FAILED");
		fflush(stdout);
	}
	return ok;
}

/*
 * The CPU sort of the source, timed into *cpu_ms (*scatter_ms of it the
 * MSD pass), checked and compared with the chunked sort's keys; false on
 * a mismatch.
 */
static bool
cpu_sort_phase(const Options &o, const Data &d, double *cpu_ms, double *scatter_ms)
{
	size_t		n = o.n;
	bool		ok;
	uint64_t   *ckeys_out = (uint64_t *) big_alloc(n * 8);
	uint32_t   *cidx_out = (uint32_t *) big_alloc(n * 4);
	uint64_t   *tk = (uint64_t *) big_alloc(n * 8);
	uint32_t   *ti = (uint32_t *) big_alloc(n * 4);

	if (!ckeys_out || !cidx_out || !tk || !ti)
	{
		fprintf(stderr, "out of memory for the CPU sort\n");
		exit(1);
	}
	/* first touch outside the timing, as for the GPU path's buffers */
	parallel_for(n, [&](int, size_t lo, size_t hi) {
		memset(ckeys_out + lo, 0, (hi - lo) * 8);
		memset(tk + lo, 0, (hi - lo) * 8);
		memset(cidx_out + lo, 0, (hi - lo) * 4);
		memset(ti + lo, 0, (hi - lo) * 4);
	});
	double		a = now_ms();

	cpu_sort(d.src, n, o.cpu_bits, ckeys_out, cidx_out, tk, ti, scatter_ms);
	*cpu_ms = now_ms() - a;
	printf("CPU sort: %.1f ms (MSD pass on %d bits %.1f ms, CPU engine on the buckets %.1f ms)\n",
		   *cpu_ms, o.cpu_bits, *scatter_ms, *cpu_ms - *scatter_ms);
	fflush(stdout);
	ok = check_sorted("CPU sort", d.src, n, ckeys_out, cidx_out);
	if (memcmp(ckeys_out, d.gkeys, n * 8) != 0)
	{
		printf("FAIL the two sorts' keys differ\n");
		ok = false;
	}
	free(ckeys_out);
	free(cidx_out);
	free(tk);
	free(ti);
	return ok;
}

/* what the report tells besides the options and the chunks */
struct Results
{
	Measure		bw;
	Timings		t;
	double		cpu_ms;
	bool		ok;
	char		mtable[4096];	/* --merge-all's table, or empty */
};

/* the Markdown report, printed and written to --out; false: not written */
static bool
report(const Options &o, const Chunks &ch, const Results &r)
{
	size_t		n = o.n;
	size_t		nchunks = ch.count;
	double		key_gb = n * 8 / 1e9;
	double		chunked = median(r.t.chunked),
				merge = median(r.t.merge),
				whole = median(r.t.whole);
	double		thr = key_gb / (chunked / 1e3);
	char		table[8192];
	int			len = 0;

#define ROW(...) len += snprintf(table + len, sizeof(table) - len, __VA_ARGS__)
	ROW("\n| engine-level chunked sort (%s) | value |\n| --- | --- |\n",
		o.cpu_only ? "CPU engine, --cpu-only" : ch.info.name);
	ROW("| rows (u64 key + u32 index) | %zu (%.2f GB; keys %.2f GB) |\n", n, n * 12 / 1e9,
		key_gb);
	ROW("| GPU budget / chunk | %zu MB / %zu rows, %zu chunks%s |\n", o.budget >> 20,
		o.chunk_rows, nchunks, o.ramp && nchunks > 3 &&
		ch.rows[0] < o.chunk_rows ? " (first and last two: 1/4, 1/2 of it)" : "");
	ROW("| CPU threads | %d |\n", nthreads);
	if (!o.cpu_only)
		ROW("| pinned PCIe H2D / D2H / both at once (1 GB, median) | %.1f / %.1f / %.1f GB/s |\n",
			r.bw.h2d_gbs, r.bw.d2h_gbs, r.bw.bidir_gbs);
	ROW("| chunked phase (encode + sort, keys out) | %.1f ms = %.1f GB/s of keys |\n",
		chunked, thr);
	if (!o.cpu_only)
		ROW("| chunked phase / one-way H2D bound | %.0f%% (target >= 60%%) |\n",
			100.0 * thr / r.bw.h2d_gbs);
	ROW("| encode (memcpy into pinned keybufs, %d threads) | %.1f ms |\n", o.enc_threads,
		median(r.t.encode));
	if (!o.cpu_only)
		ROW("| per chunk sums: upload / sort / download (events) | %.1f / %.1f / %.1f ms |\n",
			r.t.sum_up, r.t.sum_sort, r.t.sum_down);
	ROW("| merge (%zu runs, %d threads, loser tree, --merge %s) | %.1f ms |\n", nchunks,
		nthreads, merge_names[o.variant], merge);
	ROW("| whole chunked sort | %.1f ms |\n", whole);
	if (!o.no_cpu_sort)
	{
		ROW("| CPU sort (MSD %d bits + CPU engine, %d threads) | %.1f ms |\n", o.cpu_bits,
			nthreads, r.cpu_ms);
		ROW("| CPU sort / whole chunked sort | %.2fx (target >= 3x) |\n", r.cpu_ms / whole);
	}
	ROW("| outputs checked | %s |\n", r.ok ? "sorted, permutations, equal" : "MISMATCH");
	ROW("%s", r.mtable);
	ROW("\nmedian of %d reps; commit %s; `cuda/build/bench_chunked --pairs %zu --budget-mb %zu%s%s`\n",
		o.reps, o.commit, n, o.budget >> 20, o.cpu_only ? " --cpu-only" : "",
		o.merge_all ? " --merge-all" : "");
#undef ROW
	printf("%s", table);
	if (o.out)
	{
		FILE	   *f = fopen(o.out, "w");

		if (f == NULL || fputs(table + 1, f) < 0 || fclose(f) != 0)
		{
			fprintf(stderr, "could not write %s\n", o.out);
			return false;
		}
	}
	return true;
}

int
main(int argc, char **argv)
{
	Options		o;
	Data		d;
	Chunks		ch;
	Results		r;
	int			ndev = 0;

	if (!parse_options(argc, argv, &o))
		return 2;
	if (!o.cpu_only && (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0))
	{
		(void) cudaGetLastError();
		printf("no CUDA device: running the CPU parts only (--cpu-only)\n");
		o.cpu_only = true;
	}

	if (o.chunk_rows == 0)
		o.chunk_rows = fit_chunk_rows(o.n, o.budget);
	plan_chunks(o.n, o.chunk_rows, o.ramp, ch.rows, ch.off);
	ch.count = ch.rows.size();
	printf("rows %zu (%.2f GB of u64 key + u32 index), budget %zu MB, chunk %zu rows "
		   "(%zu MB of device buffers per slot), %zu chunks, %d threads%s\n",
		   o.n, o.n * 12 / 1e9, o.budget >> 20, o.chunk_rows, slot_bytes(o.chunk_rows) >> 20,
		   ch.count, nthreads, o.cpu_only ? ", CPU only" : "");
	fflush(stdout);

	/* source data, engine and pinned buffers */
	double		t0 = now_ms();

	if (!make_data(o, &d))
	{
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	if (!open_chunks(o, &ch))
		return 1;
	printf("device: %s; data and %zu pinned buffers ready in %.0f ms\n", ch.info.name,
		   2 * ch.count, now_ms() - t0);
	fflush(stdout);

	r.bw = {0, 0, 0};
	if (!o.cpu_only)
		r.bw = pinned_bandwidth(o, ch);

	/* the chunked GPU sort, R times */
	std::vector<Run> runs(ch.count);

	r.t.sum_up = r.t.sum_sort = r.t.sum_down = 0;
	for (int rep = 0; rep < o.reps; rep++)
		chunked_rep(rep, o, d, ch, runs, &r.t);
	r.ok = check_sorted(o.cpu_only ? "chunked CPU-engine sort + merge" :
						"chunked GPU sort + merge", d.src, o.n, d.gkeys, d.gidx);

	r.mtable[0] = 0;
	if (o.merge_all)
		r.ok &= merge_all_table(o, d, runs, r.mtable, sizeof(r.mtable));

	r.cpu_ms = 0;
	if (!o.no_cpu_sort)
	{
		double		cpu_scatter_ms = 0;

		r.ok &= cpu_sort_phase(o, d, &r.cpu_ms, &cpu_scatter_ms);
	}

	if (!report(o, ch, r))
		return 1;

	close_chunks(&ch);
	free(d.src);
	free(d.gkeys);
	free(d.gidx);
	return r.ok ? 0 : 1;
}
