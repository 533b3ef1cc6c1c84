/*-------------------------------------------------------------------------
 *
 * sort_chunks.c
 *	  The sort state's chunks: a chunk of the batch handed to the engine
 *	  (gs_close_chunk, sorted in the background while the next rows
 *	  arrive), and chunks finished when the engine is done with them
 *	  (gs_finish_chunks), runs of equal keys put in PostgreSQL's order.
 *
 * A primitive of the sort state: the load (sort_load.c), the writing of
 * runs (sort_runs.c) and the life cycle (sortstate.c) call it; it calls
 * the engine (engine.c) and the shared primitives (sort_util.c) only.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "gpusort_int.h"
#include "sortstate_int.h"

/* qsort_arg over positions in a run of equal keys: the rows at them */
typedef struct GsTieRun
{
	GsSortState *s;
	const uint32 *perm;
} GsTieRun;

static int
gs_cmp_run_pos(const void *a, const void *b, void *arg)
{
	GsTieRun   *t = (GsTieRun *) arg;
	uint32		ra = t->perm[*(const uint32 *) a];
	uint32		rb = t->perm[*(const uint32 *) b];

	return gs_cmp_rows(&ra, &rb, t->s);
}

/*
 * Put the run perm[i .. j-1] of a sorted chunk, whose keys are equal in
 * their first tie_bytes, in order with the comparators.  Where keys have
 * bytes after those (see gs_sort_begin_rows), each row keeps its own: the
 * merges of runs compare them between rows whose first parts are exact.
 */
static void
gs_tiebreak_run(GsSortState *s, GsChunk *c, char *keys, size_t i, size_t j)
{
	size_t		kb = s->key_bytes;
	size_t		tb = s->tie_bytes;
	size_t		m = j - i;
	uint32	   *pos;
	uint32	   *rows;
	char	   *rest;
	GsTieRun	t;
	size_t		k;

	if (tb == kb)
	{
		qsort_arg(c->perm + i, m, sizeof(uint32), gs_cmp_rows, s);
		return;
	}
	pos = palloc(m * sizeof(uint32));
	rows = palloc(m * sizeof(uint32));
	rest = palloc(m * (kb - tb));
	for (k = 0; k < m; k++)
	{
		pos[k] = (uint32) k;
		rows[k] = c->perm[i + k];
		memcpy(rest + k * (kb - tb), keys + (i + k) * kb + tb, kb - tb);
	}
	t.s = s;
	t.perm = rows;
	qsort_arg(pos, m, sizeof(uint32), gs_cmp_run_pos, &t);
	for (k = 0; k < m; k++)
	{
		c->perm[i + k] = rows[pos[k]];
		memcpy(keys + (i + k) * kb + tb, rest + pos[k] * (kb - tb), kb - tb);
	}
	pfree(pos);
	pfree(rows);
	pfree(rest);
}

/*
 * Put runs of equal keys of a sorted chunk in PostgreSQL's order.  The
 * chunk's keys are sorted in place, so a run is a stretch of equal
 * neighbours.  A run needs the comparators only when the key plan is not
 * exact or one of its rows was encoded lossily.
 */
static void
gs_tiebreak(GsSortState *s, GsChunk *c)
{
	size_t		kb = s->key_bytes;
	size_t		tb = s->tie_bytes;
	char	   *keys = s->keys + c->base * kb;
	size_t		n = c->nrows;
	size_t		i = 0;
	size_t		checked = 0;

	while (i < n)
	{
		size_t		j = i + 1;
		const char *ki = keys + i * kb;

		while (j < n && memcmp(ki, keys + j * kb, tb) == 0)
			j++;
		if (j - i > 1)
		{
			bool		need = !s->exact;
			size_t		k;

			for (k = i; !need && k < j; k++)
				need = gs_row_lossy(s, c->perm[k]);
			if (need)
			{
				gs_tiebreak_run(s, c, keys, i, j);
				s->rep.tiebreak_rows += j - i;
			}
		}
		checked += j - i;
		if (checked >= INTERRUPT_INTERVAL)
		{
			CHECK_FOR_INTERRUPTS();
			checked = 0;
		}
		i = j;
	}
}

/*
 * The engine is done with chunk c: take its permutation and put runs of
 * equal keys in PostgreSQL's order.
 */
static void
gs_finish_chunk(GsSortState *s, GsChunk *c)
{
	GsSortJob  *job = &s->jobs[c->job];
	bool		need_ties = !s->exact || s->any_lossy;
	gs_sort_stats st;
	instr_time	t0;
	size_t		i;

	INSTR_TIME_SET_CURRENT(t0);
	s->sort_engine = gs_engine_wait(job, &st, &s->fallback);
	c->job = -1;
	s->rep.transfer_ms += st.upload_ms + st.download_ms;
	s->rep.sort_ms += st.upload_ms + st.sort_ms + st.download_ms;
	for (i = 0; i < c->nrows; i++)
		c->perm[i] += (uint32) c->base;
	s->rep.wait_ms += gs_elapsed_ms(t0);

	/* the keys are in sorted order only if the engine was asked for them */
	if (need_ties && c->keys_out)
	{
		INSTR_TIME_SET_CURRENT(t0);
		gs_tiebreak(s, c);
		s->rep.tiebreak_ms += gs_elapsed_ms(t0);
	}
}

/* wait for every chunk the engine is still sorting */
void
gs_finish_chunks(GsSortState *s)
{
	while (s->first_pending < s->nchunks)
	{
		GsChunk    *c = &s->chunks[s->first_pending];

		if (c->job >= 0)
			gs_finish_chunk(s, c);
		s->first_pending++;
	}
}

/*
 * Hand the open chunk (rows chunk_start .. nrows-1) to the engine.  The
 * engine sorts it in the background where it can, while rows for the next
 * chunk come in; at most GS_MAX_INFLIGHT chunks are being sorted at once.
 * With more than one chunk to merge later, or ties to break, the keys must
 * come back sorted.
 */
void
gs_close_chunk(GsSortState *s, bool keys_needed)
{
	GsChunk    *c;
	size_t		n = s->nrows - s->chunk_start;
	int			slot;

	if (n == 0)
		return;
	/* the oldest chunk in flight must be done before its slot is reused */
	if (s->nchunks - s->first_pending >= GS_MAX_INFLIGHT)
	{
		GsChunk    *old = &s->chunks[s->first_pending];

		if (old->job >= 0)
			gs_finish_chunk(s, old);
		s->first_pending++;
	}
	if (s->nchunks == s->chunks_cap)
	{
		s->chunks_cap = Max(8, s->chunks_cap * 2);
		s->chunks = s->chunks ?
			repalloc(s->chunks, s->chunks_cap * sizeof(GsChunk)) :
			MemoryContextAlloc(s->cxt, s->chunks_cap * sizeof(GsChunk));
	}
	slot = s->nchunks % GS_MAX_INFLIGHT;
	c = &s->chunks[s->nchunks++];
	c->base = s->chunk_start;
	c->nrows = n;
	c->job = -1;
	c->keys_out = false;
	c->perm = MemoryContextAllocHuge(s->cxt, n * sizeof(uint32));
	/*
	 * Fresh memory: faulting a large chunk's in 4 kB pages cost 0.3 s at
	 * 50M rows.  Small ones (a batch of a sort over work_mem) stay on
	 * small pages, where no huge page needs to be found for them.
	 */
	if (n >= PAR_GATHER_MIN_ROWS * 4)
		gs_advise_huge(c->perm, n * sizeof(uint32));
	s->chunk_bytes += n * sizeof(uint32);
	/* the CPU engine's scratch records while it sorts (see engine_cpu.c) */
	gs_note_mem(s, (int64) n * ENGINE_SCRATCH_PER_ROW);
	s->total_chunks++;

	if (n > 1)
	{
		bool		need_ties = !s->exact || s->any_lossy;
		const char *why = NULL;
		GsEngine   *e;
		instr_time	t0;

		/*
		 * Whether the GPU is worth it is a question about the whole sort:
		 * a chunk of a large one goes there however small it is.
		 */
		e = gs_engine_choose(Max((double) n, s->total_rows), &why);
		if (why && s->fallback == NULL)
			s->fallback = pstrdup(why);
		c->keys_out = need_ties || keys_needed;
		c->job = slot;
		INSTR_TIME_SET_CURRENT(t0);
		gs_engine_submit(&s->jobs[slot], e,
						 s->keys + c->base * s->key_bytes, n, s->key_bytes,
						 c->perm, c->keys_out ? GS_SORT_KEYS_OUT : 0);
		s->rep.wait_ms += gs_elapsed_ms(t0);
	}
	else
	{
		c->perm[0] = (uint32) c->base;
		if (s->sort_engine == NULL)
			s->sort_engine = s->keys_engine;
	}
	s->chunk_start = s->nrows;
	s->check_at = 0;
}
