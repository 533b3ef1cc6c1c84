/*-------------------------------------------------------------------------
 *
 * chunked_merge.cu
 *	  The chunked benchmark's parallel CPU k-way merge of the sorted chunks
 *	  (bench_chunked.cu sorts them): the output cut at exact ranks, a loser
 *	  tree per slice or tile, and the variants that --merge picks.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <vector>

#include "bench_chunked.h"

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

const char *const merge_names[MV_COUNT] = {
	"pair", "pair-pf", "one-pf", "tiles", "tiles-nt", "cascade", "tiles64", "tiles64-nt"
};

size_t		tile_rows = 256 * 1024;

int
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
void
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
