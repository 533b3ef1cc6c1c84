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
 * Files: this one (options, chunks, the engine pipeline, the report),
 * chunked_merge.cu (the merge and its variants), chunked_cpu.cu (the CPU
 * sort and the checks), bench_chunked.h (what they share).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "gpusort_engine.h"
#include "hrs.h"
#include "test/splitmix.cuh"
#include "bench_chunked.h"

int			nthreads;

double
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

void
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
