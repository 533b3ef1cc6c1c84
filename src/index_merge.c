/*-------------------------------------------------------------------------
 *
 * index_merge.c
 *	  The merges of a btree build larger than maintenance_work_mem: runs
 *	  (index_spill.c) merged in passes, then straight into the page writer.
 *
 * A merge reads each run through a buffer of its own, so memory bounds how
 * many runs one merge can take (its fan-in): while there are more, groups
 * of runs are merged into longer runs (a merge pass, reading and writing
 * the data once more).  The last merge hands each tuple to the page writer
 * as it comes out, so the index itself is written once.  The unique check
 * of the final merge sees every row in order, as the one over an in-memory
 * sort.  When the keys alone order the rows, the final merge runs on
 * threads (spill_stream.c's streams).
 *
 * Order in a merge: the column words of the keys, compared as the engine
 * compares them; when they are equal and the keys are not exact (or one of
 * them was encoded lossily), the index's comparators; then the heap TID,
 * the key's last word.  That is the order of the in-memory sort.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "utils/memutils.h"

#include "index_run.h"

/* reads one run; rec is its current record, NULL once it is exhausted */
typedef struct GsRunReader
{
	GsTempFile *file;			/* the run's file */
	char	   *buf;
	Size		size;
	Size		pos;			/* rec's offset in buf */
	Size		len;			/* bytes of buf that hold data */
	int64		cur;			/* file offset of the next read */
	int64		end;
	int64		given_back;		/* space discarded up to here */
	char	   *rec;
} GsRunReader;

typedef struct GsMerge
{
	GsIdxBuild *b;
	GsRunReader *in;
	int			n;
	int		   *tree;			/* tree[0] the winner, see gs_loser_tree_build */

	/*
	 * The first key word of each input's record (PG_UINT64_MAX once it is
	 * exhausted): most matches are decided here, without touching the
	 * records in their buffers.
	 */
	uint64	   *k0;
} GsMerge;

/* ---- reading runs ---- */

static void
gs_rr_fill(GsRunReader *rd)
{
	Size		keep = rd->len - rd->pos;
	Size		want;
	int			err;

	if (rd->pos > 0 && keep > 0)
		memmove(rd->buf, rd->buf + rd->pos, keep);
	rd->pos = 0;
	rd->len = keep;
	want = Min((int64) (rd->size - keep), rd->end - rd->cur);
	if (want > 0)
	{
		err = gs_temp_pread(rd->file, rd->buf + keep, want, rd->cur);
		if (err != 0)
			gs_temp_error(rd->file, err, false);
		rd->cur += want;
		rd->len += want;
		rd->given_back = gs_temp_discard(rd->file, rd->given_back, rd->cur,
										 rd->cur == rd->end);
	}
}

/* make rec the record at pos, or NULL at the end of the run */
static void
gs_rr_settle(GsIdxBuild *b, GsRunReader *rd)
{
	uint32		hdr;

	if (rd->len - rd->pos < GS_RUN_HDR)
		gs_rr_fill(rd);
	if (rd->len == rd->pos)
	{
		rd->rec = NULL;
		return;
	}
	memcpy(&hdr, rd->buf + rd->pos, sizeof(hdr));
	if (rd->len - rd->pos < gs_rec_len(b, hdr))
		gs_rr_fill(rd);
	if (rd->len - rd->pos < gs_rec_len(b, hdr))
		elog(ERROR, "truncated record in gpusort index run");
	rd->rec = rd->buf + rd->pos;
}

static void
gs_rr_open(GsIdxBuild *b, GsRunReader *rd, const GsIdxRun *run, char *buf,
		   Size size)
{
	rd->file = b->file;
	rd->buf = buf;
	rd->size = size;
	rd->pos = 0;
	rd->len = 0;
	rd->cur = run->offset;
	rd->end = run->offset + run->bytes;
	rd->given_back = run->offset;
	gs_rr_settle(b, rd);
}

static inline void
gs_rr_next(GsIdxBuild *b, GsRunReader *rd)
{
	uint32		hdr;

	memcpy(&hdr, rd->rec, sizeof(hdr));
	rd->pos += gs_rec_len(b, hdr);

	/* most records lie whole in the buffer, after the one just read */
	if (likely(rd->len - rd->pos >= GS_RUN_HDR))
	{
		memcpy(&hdr, rd->buf + rd->pos, sizeof(hdr));
		if (likely(rd->len - rd->pos >= gs_rec_len(b, hdr)))
		{
			rd->rec = rd->buf + rd->pos;
			return;
		}
	}
	gs_rr_settle(b, rd);
}

/* ---- merging ---- */

/* are the first n words of two keys equal? (a call to memcmp costs more) */
static inline bool
gs_words_equal(const uint64 *k1, const uint64 *k2, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (k1[i] != k2[i])
			return false;
	return true;
}

/* does record r1 come before record r2? */
static inline bool
gs_rec_before(GsIdxBuild *b, char *r1, char *r2)
{
	const uint64 *k1 = gs_rec_key(r1);
	const uint64 *k2 = gs_rec_key(r2);
	int			i;

	for (i = 0; i < b->colwords; i++)
		if (k1[i] != k2[i])
			return k1[i] < k2[i];
	if (!b->exact || ((gs_rec_flags(r1) | gs_rec_flags(r2)) & GS_ROW_LOSSY))
	{
		int			c = gs_idx_cmp_cols(b, gs_rec_tuple(b, r1),
										gs_rec_tuple(b, r2));

		if (c != 0)
			return c < 0;
	}
	/* the heap TID */
	return k1[b->colwords] < k2[b->colwords];
}

/* does input a's record come before input bb's? (exhausted ones last) */
static pg_attribute_always_inline bool
gs_merge_before(GsMerge *m, int a, int bb)
{
	if (likely(m->k0[a] != m->k0[bb]))
		return m->k0[a] < m->k0[bb];
	if (m->in[a].rec == NULL)
		return false;
	if (m->in[bb].rec == NULL)
		return true;
	return gs_rec_before(m->b, m->in[a].rec, m->in[bb].rec);
}

static bool
gs_merge_before_cb(void *arg, int a, int bb)
{
	return gs_merge_before((GsMerge *) arg, a, bb);
}

/* input i's first key word, after its reader moved */
static inline void
gs_merge_set_k0(GsMerge *m, int i)
{
	const char *rec = m->in[i].rec;

	m->k0[i] = rec ? gs_rec_key(rec)[0] : PG_UINT64_MAX;
}

/* open runs[0 .. n-1] for a merge, each with a buffer of bufsize */
static void
gs_merge_start(GsIdxBuild *b, GsMerge *m, const GsIdxRun *runs, int n,
			   Size bufsize)
{
	int			i;

	m->b = b;
	m->n = n;
	m->in = (GsRunReader *) palloc(n * sizeof(GsRunReader));
	m->tree = (int *) palloc0(2 * n * sizeof(int));
	m->k0 = (uint64 *) palloc(n * sizeof(uint64));
	for (i = 0; i < n; i++)
	{
		gs_rr_open(b, &m->in[i], &runs[i], palloc(bufsize), bufsize);
		gs_merge_set_k0(m, i);
	}
	m->tree[0] = gs_loser_tree_build(m->tree, n, gs_merge_before_cb, m);
	gs_index_fault_point(GS_INDEX_FAULT_CANCEL_IN_MERGE);
}

/* the winner's record, or NULL when every run is exhausted */
static inline char *
gs_merge_top(GsMerge *m)
{
	return m->in[m->tree[0]].rec;
}

/* the winner moved on: replay its path to the root */
static void
gs_merge_advance(GsMerge *m)
{
	int			w = m->tree[0];
	int			node;

	gs_rr_next(m->b, &m->in[w]);
	gs_merge_set_k0(m, w);
	for (node = (m->n + w) / 2; node >= 1; node /= 2)
	{
		int			l = m->tree[node];
		int			mask = -(int) gs_merge_before(m, l, w);
		int			loser = (w & mask) | (l & ~mask);

		/* as good as random: the winner is chosen without a branch */
		w ^= l ^ loser;
		m->tree[node] = loser;
	}
	m->tree[0] = w;
}

static void
gs_merge_end(GsMerge *m)
{
	int			i;

	for (i = 0; i < m->n; i++)
		pfree(m->in[i].buf);
	pfree(m->in);
	pfree(m->tree);
	pfree(m->k0);
}

/* merge runs[0 .. n-1] into one run at the end of the file */
static GsIdxRun
gs_merge_pass_group(GsIdxBuild *b, const GsIdxRun *runs, int n, Size bufsize)
{
	GsMerge		m;
	GsRunWriter rw;
	char	   *rec;
	uint64		count = 0;
	int64		total = 0;
	int			i;

	/* the output is the runs' records, byte for byte */
	for (i = 0; i < n; i++)
		total += runs[i].bytes;
	gs_merge_start(b, &m, runs, n, bufsize);
	gs_idx_rw_init(&rw, b, palloc(bufsize), bufsize, total);
	while ((rec = gs_merge_top(&m)) != NULL)
	{
		gs_idx_rw_put(b, &rw, gs_rec_key(rec), gs_rec_tuple(b, rec),
				  gs_rec_flags(rec));
		gs_merge_advance(&m);
		if (++count % GS_SPILL_CFI_EVERY == 0)
			CHECK_FOR_INTERRUPTS();
	}
	gs_idx_rw_finish(&rw);
	pfree(rw.buf);
	gs_merge_end(&m);
	return rw.run;
}

/*
 * The final merge hands rows, in order, to the page writer (or the sink),
 * with the unique check: two live rows with equal key columns (none of
 * them NULL, unless NULLS NOT DISTINCT) raise btbuild's error.
 */
typedef struct GsFinal
{
	GsIdxBuild *b;
	GsBtWriter *w;
	uint64	   *prevkey;
	IndexTuple	prev;
	IndexTuple	first_alive;
	uint8		prevflags;
	int			alive;
	bool		first;
	uint64		count;
} GsFinal;

static void
gs_final_begin(GsIdxBuild *b, GsFinal *f)
{
	memset(f, 0, sizeof(GsFinal));
	f->b = b;
	f->first = true;
	f->prevkey = (uint64 *) palloc(b->keybytes);
	if (b->isunique)
	{
		f->prev = (IndexTuple) palloc(MAXALIGN(INDEX_SIZE_MASK + 1));
		f->first_alive = (IndexTuple) palloc(MAXALIGN(INDEX_SIZE_MASK + 1));
	}
	if (b->sink == NULL)
	{
		f->w = gs_btw_begin(b->heap, b->index, b->isunique);
		gs_btw_tuples_transient(f->w);
	}
}

/* the next record of the merge; it need not outlive the call */
static inline void
gs_final_put(GsFinal *f, char *rec)
{
	GsIdxBuild *b = f->b;
	const uint64 *key = gs_rec_key(rec);
	IndexTuple	itup = gs_rec_tuple(b, rec);
	uint8		flags = gs_rec_flags(rec);
	bool		samecols;

	samecols = !f->first && gs_words_equal(f->prevkey, key, b->colwords);

	if (b->isunique)
	{
		bool		equal = samecols;

		if (equal && !(b->exact && !((f->prevflags | flags) & GS_ROW_LOSSY)))
			equal = gs_idx_cmp_cols(b, f->prev, itup) == 0;
		if (!equal)
			f->alive = 0;
		if (flags & GS_ROW_ALIVE)
		{
			if (f->alive == 0)
				memcpy(f->first_alive, itup, IndexTupleSize(itup));
			else if (b->nulls_not_distinct ||
					 !gs_idx_key_has_null(b, f->first_alive))
				gs_idx_unique_violation(b, f->first_alive);
			f->alive++;
		}
		memcpy(f->prev, itup, IndexTupleSize(itup));
		f->prevflags = flags;
	}

	/* column words that differ: key columns that differ */
	if (b->sink != NULL)
		b->sink(b->sink_arg, itup);
	else
		gs_btw_add(f->w, itup, samecols);
	memcpy(f->prevkey, key, b->colwords * sizeof(uint64));
	f->first = false;

	if (++f->count % GS_SPILL_CFI_EVERY == 0)
		CHECK_FOR_INTERRUPTS();
}

static void
gs_final_end(GsFinal *f)
{
	if (f->w != NULL)
	{
		gs_btw_finish(f->w);
		f->b->write_ms = gs_btw_write_ms(f->w);
	}
}

/* the final merge of runs[0 .. n-1], in the backend alone */
static void
gs_merge_final(GsIdxBuild *b, const GsIdxRun *runs, int n, Size bufsize)
{
	GsMerge		m;
	GsFinal		f;
	char	   *rec;

	gs_merge_start(b, &m, runs, n, bufsize);
	gs_final_begin(b, &f);
	while ((rec = gs_merge_top(&m)) != NULL)
	{
		gs_final_put(&f, rec);
		gs_merge_advance(&m);
	}
	gs_final_end(&f);
	gs_merge_end(&m);
}

/*
 * The final merge on threads, when the keys alone order the rows (exact
 * keys, no lossy row): each of a few streams (spill_stream.c) merges a
 * group of the runs on a thread of its own, reading the file and copying
 * rows into blocks; from three threads on a cascade merges the streams
 * into one, else the backend merges them.  The backend's share of a row is
 * then the page writer's work and at most a comparison or two, where a
 * merge of tens of runs costs it several times that.  Memory: half of it
 * reads the runs, half holds the blocks.
 */
static size_t
gs_idx_row_len(const char *row, int key_bytes)
{
	uint32		hdr;

	memcpy(&hdr, row, sizeof(hdr));
	return GS_RUN_HDR + key_bytes + MAXALIGN(hdr & GS_RUN_SIZE_MASK);
}

static const GsRowFormat gs_idx_row_format = {GS_RUN_HDR, gs_idx_row_len};

/* how far ahead of the merge a stream's block is fetched, in bytes */
#define GS_STREAM_PREFETCH		512

/* runs a stream merges at least */
#define GS_STREAM_MIN_RUNS		2

/*
 * One stream as the backend merges it: it walks the stream's blocks
 * itself, record by record, and keeps the current record's first key word
 * at hand, where most matches are decided.
 */
typedef struct GsStreamIn
{
	const char *rec;			/* current record, NULL once exhausted */
	const char *end;			/* end of the block it lies in */
	uint64		k0;				/* its first key word; max once exhausted */
} GsStreamIn;

typedef struct GsStreamMerge
{
	GsIdxBuild *b;
	GsStream  **st;
	GsStreamIn *in;
} GsStreamMerge;

/* move input i to its stream's next record */
static inline void
gs_stream_in_next(GsStreamMerge *sm, int i)
{
	GsStreamIn *in = &sm->in[i];
	const char *rec = in->rec;

	if (rec != NULL)
		rec += gs_idx_row_len(rec, sm->b->keybytes);
	if (unlikely(rec == NULL || rec >= in->end))
	{
		size_t		len;

		/* the block is done with: the stream takes it back */
		rec = gs_stream_next_block(sm->st[i], &len);
		in->end = rec + len;
	}
	in->rec = rec;
	in->k0 = rec ? gs_rec_key(rec)[0] : PG_UINT64_MAX;

	/* the block was written on another core: fetch ahead */
	if (rec != NULL)
		__builtin_prefetch(rec + GS_STREAM_PREFETCH);
}

/*
 * Does input a's record come before input bb's, their first key words
 * being equal?  (Keys are exact and complete, the heap TID last.)
 */
static pg_noinline bool
gs_stream_before_tie(GsStreamMerge *sm, int a, int bb)
{
	const uint64 *k1;
	const uint64 *k2;
	int			i;

	if (sm->in[a].rec == NULL)
		return false;
	if (sm->in[bb].rec == NULL)
		return true;
	k1 = gs_rec_key(sm->in[a].rec);
	k2 = gs_rec_key(sm->in[bb].rec);
	for (i = 1; i <= sm->b->colwords; i++)
		if (k1[i] != k2[i])
			return k1[i] < k2[i];
	return false;
}

static inline bool
gs_stream_before(GsStreamMerge *sm, int a, int bb)
{
	if (likely(sm->in[a].k0 != sm->in[bb].k0))
		return sm->in[a].k0 < sm->in[bb].k0;
	return gs_stream_before_tie(sm, a, bb);
}

static bool
gs_stream_before_cb(void *arg, int a, int bb)
{
	return gs_stream_before((GsStreamMerge *) arg, a, bb);
}

/*
 * The streams a final merge of n runs takes: groups of at least
 * GS_STREAM_MIN_RUNS runs where there are enough, else a run each, as long
 * as there are two.  A stream of one run still takes the reading of the
 * file and the parsing of its records off the backend.
 */
static int
gs_merge_nstreams(int n, int threads)
{
	int			ns = n / GS_STREAM_MIN_RUNS;

	if (ns < 2)
		ns = n;
	ns = Min(ns, threads);
	return Min(ns, 16);
}

/*
 * Start the streams of the final merge over the runs, in cxt: groups of
 * runs of nearly equal counts, each merged by a thread, and (from three
 * threads on) one more thread that merges those streams.  Returns how many
 * streams the backend reads (into sm), or 0 when threads could not be had.
 */
static int
gs_merge_open_streams(GsIdxBuild *b, GsStreamMerge *sm, MemoryContext cxt,
					  const GsIdxRun *runs, int n, Size mem)
{
	Size		read_size;
	size_t		block_size;
	int			ns;
	int			threads;
	bool		cascade;
	int			i;

	threads = Max(gpusort_cpu_threads, b->merge_threads);
	ns = gs_merge_nstreams(n, threads);
	if (ns < 2)
		return 0;

	/*
	 * From three threads on, one of them merges the streams and the
	 * backend reads its one stream: the merge is then off the backend
	 * entirely, which is left with the pages, the final phase's
	 * bottleneck.  A stream fewer is well worth that.
	 */
	cascade = threads >= 3;
	if (cascade)
		ns = Min(ns, threads - 1);

	read_size = Max(GS_RUN_BUFFER_MIN, mem / 2 / n);
	read_size = MAXALIGN_DOWN(Min(read_size, GS_RUN_BUFFER));
	block_size = gs_stream_block_size((int64) mem, ns + (cascade ? 1 : 0));

	sm->b = b;
	sm->st = (GsStream **) palloc0(ns * sizeof(GsStream *));
	sm->in = (GsStreamIn *) palloc0(ns * sizeof(GsStreamIn));
	for (i = 0; i < ns; i++)
	{
		int			from = (int) ((int64) n * i / ns);
		int			to = (int) ((int64) n * (i + 1) / ns);
		GsRun	   *group = (GsRun *) palloc(Max(to - from, 1) * sizeof(GsRun));
		int			r;

		for (r = from; r < to; r++)
		{
			group[r - from].offset = runs[r].offset;
			group[r - from].bytes = runs[r].bytes;
			group[r - from].nrows = runs[r].nrows;
		}
		sm->st[i] = gs_stream_start_rows(cxt, b->file, &gs_idx_row_format,
										 b->keybytes, group, to - from,
										 block_size, read_size);
		/* no thread: the backend merges alone */
		if (sm->st[i] == NULL)
			return 0;
	}
	b->nstreams = ns;
	if (cascade)
	{
		GsStream   *top = gs_stream_cascade(cxt, sm->st, ns, block_size,
										   false);

		/* without its thread, the backend merges the streams itself */
		if (top != NULL)
		{
			sm->st[0] = top;
			ns = 1;
			b->nstreams++;
		}
	}
	return ns;
}

/*
 * One stream (the cascade's) and no unique check: its blocks are walked in
 * place, and a tuple whose key columns differ from the one before it goes
 * to the page writer's short path.
 */
static void
gs_merge_walk_stream(GsIdxBuild *b, GsStreamMerge *sm, GsFinal *f)
{
	GsStreamIn *in = &sm->in[0];

	while (in->rec != NULL)
	{
		const char *rec;
		const uint64 *prev = f->first ? NULL : f->prevkey;

		for (rec = in->rec; rec < in->end;
			 rec += gs_idx_row_len(rec, b->keybytes))
		{
			const uint64 *key = gs_rec_key(rec);
			IndexTuple	itup = gs_rec_tuple(b, (char *) rec);

			__builtin_prefetch(rec + GS_STREAM_PREFETCH);
			if (likely(prev == NULL ||
					   !gs_words_equal(prev, key, b->colwords)))
				gs_btw_add_distinct(f->w, itup);
			else
				gs_btw_add(f->w, itup, true);
			prev = key;
			f->count++;
		}
		/* the block goes back to the stream: keep what outlives it */
		gs_btw_settle(f->w);
		if (prev != NULL && prev != f->prevkey)
		{
			memcpy(f->prevkey, prev, b->colwords * sizeof(uint64));
			f->first = false;
		}
		CHECK_FOR_INTERRUPTS();
		in->rec = NULL;
		gs_stream_in_next(sm, 0);
	}
}

/*
 * Merge the ns streams (each at its first record) on the backend, through
 * a loser tree, into f.
 */
static void
gs_merge_stream_tree(GsStreamMerge *sm, int ns, GsFinal *f)
{
	int		   *tree;

	tree = (int *) palloc0(2 * ns * sizeof(int));
	tree[0] = gs_loser_tree_build(tree, ns, gs_stream_before_cb, sm);
	for (;;)
	{
		int			w = tree[0];
		int			node;

		if (sm->in[w].rec == NULL)
			break;
		gs_final_put(f, (char *) sm->in[w].rec);
		gs_stream_in_next(sm, w);

		/*
		 * Replay the winner's path.  Which of two records comes first is
		 * as good as random: the winner is chosen without a branch.
		 */
		for (node = (ns + w) / 2; node >= 1; node /= 2)
		{
			int			l = tree[node];
			int			mask = -(int) gs_stream_before(sm, l, w);
			int			loser = (w & mask) | (l & ~mask);

			w ^= l ^ loser;
			tree[node] = loser;
		}
		tree[0] = w;
	}
}

/*
 * The final merge on threads, when the keys alone order the rows: false
 * when it cannot be had (then the backend merges the runs itself).
 */
static bool
gs_merge_final_streams(GsIdxBuild *b, const GsIdxRun *runs, int n, Size mem)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	GsStreamMerge sm;
	GsFinal		f;
	size_t		rows = 0;
	int			ns;
	int			i;

	/* the rows of every run known exact */
	if (!b->exact || b->runs_lossy || b->anylossy)
		return false;
	for (i = 0; i < n; i++)
		rows += runs[i].nrows;

	/* the streams' threads stop when this goes, on error too */
	cxt = AllocSetContextCreate(CurrentMemoryContext,
								"gpusort index merge streams",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	ns = gs_merge_open_streams(b, &sm, cxt, runs, n, mem);
	if (ns == 0)
	{
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(cxt);
		return false;
	}
	gs_index_fault_point(GS_INDEX_FAULT_CANCEL_IN_MERGE);
	for (i = 0; i < ns; i++)
		gs_stream_in_next(&sm, i);

	gs_final_begin(b, &f);
	if (ns == 1 && b->sink == NULL && !b->isunique)
		gs_merge_walk_stream(b, &sm, &f);
	else
		gs_merge_stream_tree(&sm, ns, &f);
	gs_final_end(&f);
	if (f.count != rows)
		elog(ERROR, "gpusort: the index merge lost rows");
	for (i = 0; i < ns; i++)
	{
		b->final_wait_ms += gs_stream_wait_ms(sm.st[i]);
		if (message_level_is_interesting(DEBUG2))
		{
			StringInfoData buf;

			initStringInfo(&buf);
			gs_stream_report(sm.st[i], &buf);
			b->final_report = MemoryContextStrdup(oldcxt, buf.data);
		}
	}
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);
	return true;
}

/*
 * The most runs the final merge takes without a merge pass before it, for
 * mem bytes.  A read buffer per run and one for the output; when the keys
 * alone order the rows the merge runs on threads (gs_merge_final_streams),
 * whose readers take half of the memory in buffers of 32 kB or more.
 */
int
gs_idx_final_fanin(GsIdxBuild *b, Size mem)
{
	int			fanin;

	if (b->exact)
		fanin = (int) Min(mem / 2 / GS_RUN_BUFFER_MIN,
						  (Size) GS_MERGE_MAX_FANIN) - 1;
	else
		fanin = (int) Min(mem / GS_RUN_BUFFER, (Size) GS_MERGE_MAX_FANIN) - 1;
	return Max(fanin, GS_MERGE_MIN_FANIN);
}

/*
 * A parallel participant's share of that: when the keys alone order the
 * rows, each of nparticipants may leave this many runs to the final merge,
 * which merges them on threads; otherwise one, as the final merge of
 * tie-broken keys is the backend's alone.
 */
int
gs_idx_reduce_budget(GsIdxBuild *b, int nparticipants)
{
	if (!b->exact)
		return 1;
	return Max(1, gs_idx_final_fanin(b, (Size) maintenance_work_mem * 1024) /
			   Max(nparticipants, 1));
}

/* one merge pass: groups of at most fanin runs, each into one run */
static void
gs_merge_pass(GsIdxBuild *b, int fanin, Size bufsize)
{
	int			ngroups = (b->nruns + fanin - 1) / fanin;
	GsIdxRun   *out = (GsIdxRun *) palloc(ngroups * sizeof(GsIdxRun));
	int			g;
	int			start = 0;

	for (g = 0; g < ngroups; g++)
	{
		/* groups of nearly equal sizes */
		int			end = (int) (((int64) b->nruns * (g + 1)) / ngroups);

		/* a run alone in its group stays as it is */
		if (end - start == 1)
			out[g] = b->runs[start];
		else
			out[g] = gs_merge_pass_group(b, b->runs + start, end - start,
										 bufsize);
		start = end;
	}
	pfree(b->runs);
	b->runs = out;
	b->nruns = ngroups;
	b->maxruns = ngroups;
	b->npasses++;
}

void
gs_idx_spill_reduce(GsIdxBuild *b, int maxruns)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(b->cxt);
	instr_time	t0;

	maxruns = Max(maxruns, 1);
	/* nothing to merge: no time to report (the DEBUG2 line leaves it out) */
	if (b->nruns <= maxruns)
	{
		MemoryContextSwitchTo(oldcxt);
		return;
	}
	INSTR_TIME_SET_CURRENT(t0);
	while (b->nruns > maxruns)
	{
		Size		bufsize;
		int			fanin;

		/* as many runs at once as buffers of 32 kB or more allow */
		bufsize = b->mem_limit / (b->nruns + 1);
		bufsize = MAXALIGN_DOWN(Min(Max(bufsize, GS_RUN_BUFFER_MIN),
									GS_RUN_BUFFER));
		fanin = (int) Min(b->mem_limit / bufsize, (Size) GS_MERGE_MAX_FANIN) - 1;
		fanin = Max(fanin, GS_MERGE_MIN_FANIN);
		/* no more merging than it takes to get down to maxruns */
		fanin = Min(fanin, Max(2, (b->nruns + maxruns - 1) / maxruns));
		gs_merge_pass(b, fanin, bufsize);
		CHECK_FOR_INTERRUPTS();
	}
	b->passes_ms += gs_idx_ms_since(t0);
	MemoryContextSwitchTo(oldcxt);
}

void
gs_idx_spill_build(GsIdxBuild *b)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(b->cxt);
	Size		mem = b->mem_limit;
	int			fanin;
	Size		bufsize;
	instr_time	t0;

	gs_idx_spill_finish(b);

	fanin = gs_idx_final_fanin(b, mem);
	bufsize = Max(GS_RUN_BUFFER_MIN, mem / (fanin + 1));
	bufsize = Min(bufsize, GS_RUN_BUFFER);
	bufsize = MAXALIGN_DOWN(bufsize);

	if (b->sink == NULL)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE,
									 PROGRESS_BTREE_PHASE_PERFORMSORT_1);

	/* merge passes: groups of runs into longer runs, until few are left */
	b->npasses = 0;
	INSTR_TIME_SET_CURRENT(t0);
	while (b->nruns > fanin)
		gs_merge_pass(b, fanin, bufsize);
	b->passes_ms += gs_idx_ms_since(t0);
	if (!gs_merge_final_streams(b, b->runs, b->nruns, mem))
		gs_merge_final(b, b->runs, b->nruns, bufsize);
	gs_temp_close(b->file);
	MemoryContextSwitchTo(oldcxt);
}
