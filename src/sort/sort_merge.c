/*-------------------------------------------------------------------------
 *
 * sort_merge.c
 *	  Every merge of the sort state: a loser tree over sources (sorted
 *	  chunks in memory, runs on disk, or streams of runs merged by threads),
 *	  ordered by normalized key and, between equal keys that need it,
 *	  PostgreSQL's comparators; the in-memory chunk merge on threads; and
 *	  the passes over runs until one merge can finish the sort.
 *
 * Below the life cycle (sortstate.c), the writing of runs (sort_runs.c)
 * and the emission (sort_emit.c), which call it; it calls the run writer
 * (sort_writer.c), the loser tree (loser_tree.c), the streams
 * (spill_stream.c), the shared primitives (sort_util.c) and spill.c.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/sortsupport.h"
#include "utils/tuplestore.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"
#include "sortstate_int.h"

/*
 * Merging the chunks of an in-memory sort on threads, when the keys alone
 * decide the order.  The key space is cut at splitter keys taken from
 * samples of every chunk; a binary search finds where each splitter falls
 * in each chunk (the chunks' keys are sorted in place), so every range of
 * keys knows its rows in every chunk and its place in the output, and the
 * ranges are merged independently.  Keys equal to a splitter all go to the
 * range that starts there, in every chunk.  The threads read the keys and
 * the chunks' orders and write disjoint stretches of rows[].
 */
typedef struct GsParMerge
{
	const char *keys;
	int			key_bytes;
	int			nchunks;
	const GsChunk *chunks;
	int			nranges;
	size_t	   *bounds;			/* [nranges + 1][nchunks]: start of each
								 * range in each chunk */
	uint32	   *rows;			/* out: batch rows in sorted order */
	uint32	   *keyidx;			/* out, if wanted: where their keys are */
} GsParMerge;

/* one range's merge: the chunks' stretches of it, in a loser tree */
typedef struct GsRangeMerge
{
	const GsParMerge *pm;
	size_t		pos[GS_PAR_MERGE_MAX_CHUNKS];
	size_t		end[GS_PAR_MERGE_MAX_CHUNKS];
	int			tree[GS_PAR_MERGE_MAX_CHUNKS];
} GsRangeMerge;

static inline void
gs_source_eof(GsSource *src)
{
	src->eof = true;
	src->k0 = PG_UINT64_MAX;
}

/* read up to len more bytes of a source's run into dst; how many were read */
static size_t
gs_source_read(GsSortState *s, GsSource *src, char *dst, size_t len)
{
	size_t		n = (size_t) Min((int64) len, src->fend - src->fpos);
	int			err;

	if (n == 0)
		return 0;
	err = gs_temp_pread(s->file, dst, n, src->fpos);
	if (err)
		gs_temp_error(s->file, err, false);
	src->fpos += n;
	return n;
}

/*
 * Make the read-ahead hold at least need (<= rbuf_size) bytes; false if the
 * run ends before.  Reading a run through a buffer of its own lets the
 * merge prefetch each run's next row.  What was read before the buffer's
 * bytes is not needed again: its disk space is given back.
 */
static bool
gs_source_fill(GsSortState *s, GsSource *src, size_t need)
{
	size_t		have = src->rlen - src->rpos;

	if (likely(have >= need))
		return true;
	if (have > 0)
		memmove(src->rbuf, src->rbuf + src->rpos, have);
	src->rpos = 0;
	src->rlen = have;
	src->rlen += gs_source_read(s, src, src->rbuf + have,
								src->rbuf_size - have);
	src->given_back = gs_temp_discard(s->file, src->given_back,
									  src->fpos - src->rlen, false);
	return src->rlen >= need;
}

/* read a source's next len bytes into dst (the row's bytes after its head) */
static void
gs_source_read_body(GsSortState *s, GsSource *src, char *dst, size_t len)
{
	if (len <= src->rbuf_size)
	{
		if (!gs_source_fill(s, src, len))
			elog(ERROR, "gpusort: unexpected end of a sorted run");
		memcpy(dst, src->rbuf + src->rpos, len);
		src->rpos += len;
	}
	else
	{
		/* larger than the read-ahead: what it holds, then the rest */
		size_t		have = src->rlen - src->rpos;

		memcpy(dst, src->rbuf + src->rpos, have);
		src->rpos = src->rlen = 0;
		if (gs_source_read(s, src, dst + have, len - have) != len - have)
			elog(ERROR, "gpusort: unexpected end of a sorted run");
		src->given_back = gs_temp_discard(s->file, src->given_back,
										  src->fpos, false);
	}
}

static void
gs_source_read_run(GsSortState *s, GsSource *src)
{
	const GsTapeFormat *tf = &s->tape.tf;
	uint32		word;
	GsTapeRec	rec;

	if (src->left == 0)
	{
		/* the run is read: all of its space can go */
		src->given_back = gs_temp_discard(s->file, src->given_back,
										  src->fend, true);
		gs_source_eof(src);
		return;
	}
	src->left--;

	/*
	 * keybuf holds the row's word and key (see gpusort_spill.h): the key as
	 * read, or derived from the row below if the run left it out
	 */
	if (!gs_source_fill(s, src, TAPE_ROW_HDR))
		elog(ERROR, "gpusort: unexpected end of a sorted run");
	memcpy(&word, src->rbuf + src->rpos, sizeof(uint32));
	gs_tape_decode(tf, word, &rec);
	if (!gs_source_fill(s, src, rec.head))
		elog(ERROR, "gpusort: unexpected end of a sorted run");
	memcpy(src->keybuf, src->rbuf + src->rpos, rec.head);
	src->rpos += rec.head;
	if (rec.t_len > src->tupbuf_size)
	{
		size_t		sz = Max(rec.t_len, src->tupbuf_size * 2);

		src->tupbuf = MemoryContextAllocHuge(s->mergecxt, sz);
		src->tupbuf_size = sz;
	}
	gs_source_read_body(s, src, src->tupbuf + rec.body_off, rec.body_len);
	gs_tape_restore(tf, word, &rec, src->tupbuf);

	/*
	 * This source's next row is read when it next wins, after rows of other
	 * runs: with many runs, too many streams for the hardware prefetcher.
	 */
	__builtin_prefetch(src->rbuf + src->rpos);
	__builtin_prefetch(src->rbuf + src->rpos + 64);

	src->key = src->keybuf + TAPE_ROW_HDR;
	src->lossy = (word & TAPE_LOSSY_BIT) != 0;
	if (word & TAPE_NOKEY_BIT)
	{
		bool		lossy;

		if (tf->derive == NULL)
			elog(ERROR, "gpusort: a sorted run left out a key it cannot derive");
		lossy = tf->derive(tf->derive_arg, src->tupbuf + rec.body_off,
						   rec.body_off, src->keybuf + TAPE_ROW_HDR);
		if (!gs_tape_lossy_in_word(tf, word))
			src->lossy = lossy;
	}
	src->k0 = gs_key_word0(src->key, s->key_bytes);
	src->tup = (MinimalTuple) src->tupbuf;
}

/* move a source to its next row */
static void
gs_source_next(GsSortState *s, GsSource *src)
{
	if (src->run)
	{
		gs_source_read_run(s, src);
		return;
	}
	if (src->stream)
	{
		const char *rec = gs_stream_next(src->stream);

		if (rec == NULL)
		{
			gs_source_eof(src);
			return;
		}
		src->key = rec + STREAM_KEY_OFFSET;
		src->k0 = gs_key_word0(src->key, s->key_bytes);
		/* (a stream's rows: any may be, where the sort's may) */
		src->lossy = s->any_lossy;
		src->tup = (MinimalTuple) (rec + gs_stream_tuple_offset(s->key_bytes));
		return;
	}
	if (src->pos >= src->chunk->nrows)
	{
		gs_source_eof(src);
		return;
	}
	{
		const uint32 *perm = src->chunk->perm;
		size_t		n = src->chunk->nrows;
		uint32		row = perm[src->pos];

		if (src->want_tup)
		{
			gs_prefetch_row(s, perm, src->pos, n);
			src->tup = s->tuples[row];
		}
		src->key = s->keys + (src->chunk->base + src->pos) * s->key_bytes;
		src->k0 = gs_key_word0(src->key, s->key_bytes);
		src->lossy = s->any_lossy && gs_row_lossy(s, row);
		src->row = row;
		src->pos++;
	}
}

/* does source a's row come before source b's? */
static inline bool
gs_source_before(GsSortState *s, GsMerge *m, int a, int b)
{
	GsSource   *sa = &m->src[a];
	GsSource   *sb = &m->src[b];
	int			c;

	/* most comparisons end at the first word (an eof source's is the max) */
	if (likely(sa->k0 != sb->k0))
		return sa->k0 < sb->k0;
	if (sa->eof)
		return false;
	if (sb->eof)
		return true;
	c = gs_key_cmp_words(sa->key, sb->key, 8, s->tie_bytes);
	if (c == 0 && (!s->exact || sa->lossy || sb->lossy))
		c = gs_cmp_tuples(s, sa->tup ? sa->tup : s->tuples[sa->row],
						  sb->tup ? sb->tup : s->tuples[sb->row]);
	else if (c == 0)
		c = gs_key_cmp_words(sa->key, sb->key, s->tie_bytes, s->key_bytes);
	if (c == 0)
		c = (a > b) - (a < b);	/* any fixed order between equals */
	return c < 0;
}

static bool
gs_source_before_cb(void *arg, int a, int b)
{
	GsMerge    *m = (GsMerge *) arg;

	return gs_source_before(m->s, m, a, b);
}

static GsMerge *
gs_merge_start(GsSortState *s, int nsrc)
{
	GsMerge    *m = MemoryContextAllocZero(s->mergecxt, sizeof(GsMerge));

	m->s = s;
	m->nsrc = nsrc;
	m->src = MemoryContextAllocZero(s->mergecxt, nsrc * sizeof(GsSource));
	m->tree = MemoryContextAllocZero(s->mergecxt, Max(nsrc, 1) * sizeof(int));
	m->tree_k0 = MemoryContextAllocZero(s->mergecxt,
										Max(nsrc, 1) * sizeof(uint64));
	m->pending = -1;
	return m;
}

/* after the sources got their first rows */
static void
gs_merge_ready(GsSortState *s, GsMerge *m)
{
	int			i;

	m->tree[0] = gs_loser_tree_build(m->tree, m->nsrc, gs_source_before_cb, m);
	for (i = 1; i < m->nsrc; i++)
		m->tree_k0[i] = m->src[m->tree[i]].k0;
}

/* the winner moved on: replay its path to the root */
static void
gs_merge_replay(GsSortState *s, GsMerge *m)
{
	int			w = m->tree[0];

	gs_source_next(s, &m->src[w]);
	(void) gs_loser_tree_replay(m->tree, m->tree_k0, m->nsrc, w,
								m->src[w].k0, gs_source_before_cb, m);
}

/* the next row of a merge, or NULL at the end; valid until the next call */
GsSource *
gs_merge_next(GsSortState *s, GsMerge *m)
{
	GsSource   *w;

	if (m->single)
	{
		/* one source, not read ahead (gs_merge_streams' cascade) */
		gs_source_next(s, &m->src[0]);
		return m->src[0].eof ? NULL : &m->src[0];
	}
	if (m->pending >= 0)
	{
		gs_merge_replay(s, m);
		m->pending = -1;
	}
	w = &m->src[m->tree[0]];
	if (w->eof)
		return NULL;
	m->pending = m->tree[0];
	return w;
}

static void
gs_source_open_run(GsSortState *s, GsSource *src, GsRun *run, size_t bufsize)
{
	src->run = run;
	src->left = run->nrows;
	src->keybuf = MemoryContextAlloc(s->mergecxt, TAPE_ROW_HDR + s->key_bytes);
	src->tupbuf_size = 1024;
	src->tupbuf = MemoryContextAlloc(s->mergecxt, src->tupbuf_size);
	src->rbuf_size = Max(bufsize, BLCKSZ);
	src->rbuf = MemoryContextAlloc(s->mergecxt, src->rbuf_size);
	src->rpos = src->rlen = 0;
	src->fpos = run->offset;
	src->fend = run->offset + run->bytes;
	src->given_back = run->offset;
	gs_source_read_run(s, src);
}

/* a merge over runs[0 .. n-1] */
GsMerge *
gs_merge_runs(GsSortState *s, GsRun *runs, int n)
{
	GsMerge    *m = gs_merge_start(s, n);
	size_t		bufsize;
	int			i;

	bufsize = (size_t) (s->mem_limit / Max(n, 1));
	bufsize = Max(bufsize, MERGE_MIN_BUFFER);
	bufsize = Min(bufsize, MERGE_MAX_BUFFER);
	bufsize = TYPEALIGN_DOWN(BLCKSZ, bufsize);
	for (i = 0; i < n; i++)
		gs_source_open_run(s, &m->src[i], &runs[i], bufsize);
	gs_merge_ready(s, m);
	return m;
}

static int
gs_key_qsort_cmp(const void *a, const void *b, void *arg)
{
	return gs_key_cmp(*(const char *const *) a, *(const char *const *) b,
					  *(int *) arg);
}

/* the first row of chunk c whose key is not below key */
static size_t
gs_chunk_lower_bound(const GsParMerge *pm, int c, const char *key)
{
	const GsChunk *ch = &pm->chunks[c];
	const char *base = pm->keys + ch->base * pm->key_bytes;
	size_t		lo = 0;
	size_t		hi = ch->nrows;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (gs_key_cmp(base + mid * pm->key_bytes, key, pm->key_bytes) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static inline bool
gs_range_before(const GsRangeMerge *rm, int a, int b)
{
	const GsParMerge *pm = rm->pm;
	int			kb = pm->key_bytes;
	int			cmp;

	if (rm->pos[a] >= rm->end[a])
		return false;
	if (rm->pos[b] >= rm->end[b])
		return true;
	cmp = gs_key_cmp(pm->keys + (pm->chunks[a].base + rm->pos[a]) * kb,
					 pm->keys + (pm->chunks[b].base + rm->pos[b]) * kb, kb);
	return cmp < 0 || (cmp == 0 && a < b);
}

static bool
gs_range_before_cb(void *arg, int a, int b)
{
	return gs_range_before((const GsRangeMerge *) arg, a, b);
}

static void
gs_par_merge_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsParMerge *pm = (GsParMerge *) arg;
	int			k = pm->nchunks;
	GsRangeMerge rm;
	int			r;

	rm.pm = pm;
	for (r = part; r < pm->nranges; r += nparts)
	{
		const size_t *b0 = pm->bounds + (size_t) r * k;
		size_t		out = 0;
		size_t		left = 0;
		int			c;

		/* the range's place in the output: the rows of all earlier ranges */
		for (c = 0; c < k; c++)
		{
			out += b0[c];
			rm.pos[c] = b0[c];
			rm.end[c] = b0[k + c];
			left += rm.end[c] - rm.pos[c];
		}
		rm.tree[0] = gs_loser_tree_build(rm.tree, k, gs_range_before_cb, &rm);
		while (left-- > 0)
		{
			int			w = rm.tree[0];
			int			node;

			if (pm->keyidx)
				pm->keyidx[out] = (uint32) (pm->chunks[w].base + rm.pos[w]);
			pm->rows[out++] = pm->chunks[w].perm[rm.pos[w]++];
			for (node = (w + k) / 2; node >= 1; node /= 2)
			{
				int			l = rm.tree[node];

				if (gs_range_before(&rm, l, w))
				{
					rm.tree[node] = w;
					w = l;
				}
			}
			rm.tree[0] = w;
			if ((left % INTERRUPT_INTERVAL) == 0 && *stop)
				return;
		}
	}
}

/*
 * Merge the chunks into rows[] (and, when keyidx is not NULL, where each
 * row's key is into keyidx[]) on threads; false when it can't be done so
 * (keys that need PostgreSQL's comparators, one thread, few rows, many
 * chunks) and the caller merges on the backend.
 */
static bool
gs_par_merge_chunks(GsSortState *s, uint32 *rows, uint32 *keyidx, size_t n)
{
	int			k = s->nchunks;
	/* a parallel load's processes are done: their cores may merge */
	int			nthreads = Min(Max(gpusort_cpu_threads, s->bulk_threads),
							   GS_CPU_THREADS_MAX);
	int			nranges = nthreads * PAR_MERGE_RANGES_PER_THREAD;
	int			kb = s->key_bytes;
	GsParMerge	pm;
	const char **samples;
	int			nsamples = 0;
	int			c;
	int			r;

	if (!s->exact || s->any_lossy || nthreads <= 1 ||
		n < PAR_MERGE_MIN_ROWS || k > GS_PAR_MERGE_MAX_CHUNKS)
		return false;

	pm.keys = s->keys;
	pm.key_bytes = kb;
	pm.nchunks = k;
	pm.chunks = s->chunks;
	pm.nranges = nranges;
	pm.rows = rows;
	pm.keyidx = keyidx;
	pm.bounds = palloc((size_t) (nranges + 1) * k * sizeof(size_t));

	/* splitters: every k-th of the sorted samples, nranges - 1 in all */
	samples = palloc((size_t) k * nranges * sizeof(char *));
	for (c = 0; c < k; c++)
	{
		const GsChunk *ch = &s->chunks[c];

		for (r = 1; r < nranges; r++)
			samples[nsamples++] = s->keys +
				(ch->base + ch->nrows * r / nranges) * kb;
	}
	qsort_arg(samples, nsamples, sizeof(char *), gs_key_qsort_cmp, &kb);
	for (c = 0; c < k; c++)
	{
		pm.bounds[c] = 0;
		pm.bounds[(size_t) nranges * k + c] = s->chunks[c].nrows;
	}
	for (r = 1; r < nranges; r++)
	{
		const char *split = samples[(size_t) r * nsamples / nranges];

		for (c = 0; c < k; c++)
		{
			size_t		at = gs_chunk_lower_bound(&pm, c, split);

			/* splitters ascend, but equal ones must not step back */
			pm.bounds[(size_t) r * k + c] =
				Max(at, pm.bounds[(size_t) (r - 1) * k + c]);
		}
	}
	pfree(samples);

	/*
	 * bounds[r][c] is where range r starts in chunk c; the output offset of
	 * range r is the sum over the chunks, which gs_par_merge_part works out
	 * from the same numbers.
	 */
	while (!gs_parallel(gs_par_merge_part, &pm, nthreads))
		;
	pfree(pm.bounds);
	return true;
}

/*
 * Merge the batch's sorted chunks into rows[], the batch rows in sorted
 * order, and (when keyidx is not NULL) keyidx[], where their keys are in
 * the key buffer: on threads where gs_par_merge_chunks can, else here.
 */
void
gs_merge_chunk_rows(GsSortState *s, uint32 *rows, uint32 *keyidx)
{
	GsMerge    *m;
	GsSource   *src;
	size_t		i = 0;
	int			c;

	if (gs_par_merge_chunks(s, rows, keyidx, s->nrows))
		return;
	m = gs_merge_start(s, s->nchunks);
	for (c = 0; c < s->nchunks; c++)
	{
		m->src[c].chunk = &s->chunks[c];
		gs_source_next(s, &m->src[c]);
	}
	gs_merge_ready(s, m);
	while ((src = gs_merge_next(s, m)) != NULL)
	{
		rows[i] = src->row;
		if (keyidx)
			keyidx[i] = (uint32) ((src->key - s->keys) / s->key_bytes);
		if ((++i % INTERRUPT_INTERVAL) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	Assert(i == s->nrows);
	MemoryContextReset(s->mergecxt);
}

/*
 * May the threads order rows of equal keys (lossy ones)?  With the
 * variant's tie function, when every run left out every key: a row's key
 * is kept only where it can't be derived from the row's bytes, and then
 * neither can its order (GsRowsDef).
 */
static bool
gs_merge_ties_on_threads(GsSortState *s)
{
	int			i;

	if (s->row_tie == NULL)
		return false;
	for (i = 0; i < s->nruns; i++)
	{
		if (s->runs[i].nkeyed > 0)
			return false;
	}
	return true;
}

/*
 * Whether the final merge of nruns runs can go on threads (see the top of
 * the file): not for keys that need PostgreSQL's comparators for ties, a
 * single thread allowed, or rows too large for a stream's blocks.
 */
static bool
gs_merge_can_stream(GsSortState *s, int nruns)
{
	int			nstreams = Min(gpusort_cpu_threads, nruns);

	if (!s->exact || nstreams < 2 ||
		(s->any_lossy && !gs_merge_ties_on_threads(s)))
		return false;
	/* the streams and the cascade that merges them share the memory */
	return 2 * (gs_stream_tuple_offset(s->key_bytes) +
				MAXALIGN(s->max_tuple_len)) <=
		gs_stream_block_size(s->mem_limit, nstreams + 1);
}

/*
 * How many runs the final merge may take at once: with the file mapped
 * and the merge on threads, as many as half of work_mem has read buffers
 * of STREAM_READ_MIN for (or of a row, if longer); else merge_order.
 */
int
gs_final_merge_order(GsSortState *s, bool mapped)
{
	int64		row = TAPE_ROW_HDR + s->key_bytes + s->max_tuple_len;
	int64		n;

	if (!mapped || !gs_merge_can_stream(s, s->merge_order + 1))
		return s->merge_order;
	n = s->mem_limit / 2 / Max(STREAM_READ_MIN, row);
	return (int) Max(s->merge_order, Min(n, MERGE_MAX_WIDE_ORDER));
}

/*
 * The final merge on threads, or NULL where it can't be
 * (gs_merge_can_stream).  mapped: the file is mapped (gs_temp_map), and the
 * runs' read buffers may be small.
 */
GsMerge *
gs_merge_streams(GsSortState *s, bool mapped)
{
	int			nstreams = Min(gpusort_cpu_threads, s->nruns);
	size_t		block;
	size_t		readsize;
	GsStream  **streams;
	GsStream   *cascade;
	GsMerge    *m;
	int			t;

	if (!gs_merge_can_stream(s, s->nruns))
		return NULL;
	block = gs_stream_block_size(s->mem_limit, nstreams + 1);
	/* lossy keys: the variant's tie function orders them on the threads */
	s->tape.tf.tie = s->any_lossy ? s->row_tie : NULL;
	s->tape.tf.tie_arg = s->row_tie_arg;
	s->tape.tf.tie_bytes = s->tie_bytes;
	readsize = (size_t) (s->mem_limit / 2 / s->nruns);
	readsize = Max(readsize, mapped ? STREAM_READ_MIN : MERGE_MIN_BUFFER);
	readsize = Min(readsize, MERGE_MAX_BUFFER);
	readsize = Max(readsize, TAPE_ROW_HDR + s->key_bytes + s->max_tuple_len);

	streams = MemoryContextAlloc(s->mergecxt, nstreams * sizeof(GsStream *));
	for (t = 0; t < nstreams; t++)
	{
		int			first = s->nruns * t / nstreams;
		int			last = s->nruns * (t + 1) / nstreams;

		streams[t] = gs_stream_start(s->mergecxt, s->file, &s->tape.tf,
									 &s->runs[first], last - first, block,
									 readsize);
		if (streams[t] == NULL)
		{
			/* no thread to be had: stop those started, merge here */
			MemoryContextReset(s->mergecxt);
			return NULL;
		}
	}
	s->nstreams = nstreams;

	/*
	 * One more thread merges the streams (see spill_stream.c's cascades),
	 * by reference: its blocks hold the addresses of the rows in the
	 * streams' blocks, which the backend walks.  Without that thread, the
	 * backend merges the streams.
	 */
	cascade = gs_stream_cascade(s->mergecxt, streams, nstreams, block);
	if (cascade != NULL)
	{
		/* no tree: gs_merge_next takes the cascade's records as they come */
		m = gs_merge_start(s, 1);
		m->src[0].stream = cascade;
		m->single = true;
		s->cascade = cascade;
		s->refs = NULL;
		s->ref_n = s->ref_pos = 0;
		s->stream_tupoff = gs_stream_tuple_offset(s->key_bytes);
		return m;
	}
	m = gs_merge_start(s, nstreams);
	for (t = 0; t < nstreams; t++)
	{
		m->src[t].stream = streams[t];
		gs_source_next(s, &m->src[t]);
	}
	gs_merge_ready(s, m);
	return m;
}

/* add up how long the backend waited for a merge's threads */
void
gs_merge_waits(GsSortState *s, GsMerge *m)
{
	int			i;

	for (i = 0; i < m->nsrc; i++)
	{
		if (m->src[i].stream)
			s->rep.merge_wait_ms += gs_stream_wait_ms(m->src[i].stream);
	}
}

/*
 * The final merge's threads are done: where their time went, at DEBUG1
 * (reading, giving space back, waiting for the reader, and the cascade's
 * waiting for its inputs), to tell which of them held the backend up.
 */
void
gs_merge_log_threads(GsSortState *s)
{
	StringInfoData buf;

	if (s->cascade == NULL || !message_level_is_interesting(DEBUG1))
		return;
	initStringInfo(&buf);
	gs_stream_report(s->cascade, &buf);
	elog(DEBUG1, "gpusort final merge of %d runs on %d streams: the backend waited %.1f ms; %s",
		 s->nruns, s->nstreams, s->rep.merge_wait_ms, buf.data);
	pfree(buf.data);
}

static int
gs_run_cmp_bytes(const void *a, const void *b)
{
	int64		x = ((const GsRun *) a)->bytes;
	int64		y = ((const GsRun *) b)->bytes;

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * Merge runs in passes until one merge can produce the result.  A pass
 * merges only as many runs as it takes to leave merge_order of them, the
 * smallest first (the runs' order does not matter to a merge): one run
 * more than a merge takes costs rewriting two runs, not all of them.
 * Parallel loads make many runs (every participant writes its own), so
 * a few over the order is the common case there.
 */
void
gs_merge_passes(GsSortState *s)
{
	gs_merge_passes_to(s, s->merge_order, s->merge_order);
}

/*
 * The same down to target runs, merging at most width at once (a parallel
 * load's participant leaves fewer runs than its memory could merge).
 */
void
gs_merge_passes_to(GsSortState *s, int target, int width)
{
	Assert(target >= 1 && width >= 2);
	while (s->nruns > target)
	{
		int			n = Min(width, s->nruns - target + 1);
		int			i;
		GsRun	   *group;
		GsWriter	w;
		GsMerge    *m;
		GsSource   *src;

		/* the n smallest runs leave the list, their merge joins it */
		qsort(s->runs, s->nruns, sizeof(GsRun), gs_run_cmp_bytes);
		group = MemoryContextAlloc(s->cxt, n * sizeof(GsRun));
		memcpy(group, s->runs, n * sizeof(GsRun));
		memmove(s->runs, s->runs + n, (s->nruns - n) * sizeof(GsRun));
		s->nruns -= n;

		m = gs_merge_runs(s, group, n);
		w.run = gs_new_run(s);
		w.reserved = 0;
		for (i = 0; i < n; i++)
			w.reserved += group[i].bytes;
		w.run->offset = gs_temp_place(s->file, w.reserved);
		w.size = SPILL_WRITE_BUFFER;
		w.buf = MemoryContextAlloc(s->mergecxt, w.size);
		w.used = 0;
		while ((src = gs_merge_next(s, m)) != NULL)
			gs_writer_put(s, &w, src->key, src->lossy, src->tup);
		gs_writer_emit(s, &w, w.buf, w.used);
		Assert(w.run->bytes == w.reserved);
		MemoryContextReset(s->mergecxt);
		pfree(group);
		s->merge_passes++;
	}
}
