/*-------------------------------------------------------------------------
 *
 * sort_emit.c
 *	  The sort state's output: row pointers gathered into sorted order
 *	  (on threads for large sorts), and rows returned forward or backward,
 *	  with mark / restore and rewind.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>

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
 * Parallel gather: sorted[i] = tuples[perm[i]] for a slice of i.  The
 * threads touch nothing but these arrays (no PostgreSQL call, no palloc),
 * block every signal, and are joined before the caller goes on.
 */
typedef struct GsGatherSlice
{
	MinimalTuple *sorted;
	MinimalTuple *tuples;
	const uint32 *perm;
	size_t		from;
	size_t		to;
	pthread_t	thread;
	bool		started;
} GsGatherSlice;

static void
gs_gather_range(MinimalTuple *sorted, MinimalTuple *tuples,
				const uint32 *perm, size_t from, size_t to)
{
	size_t		i;

	for (i = from; i < to; i++)
	{
		/*
		 * The loads are independent, so their cache misses overlap;
		 * emitting through the permutation would take one dependent miss
		 * per row.
		 */
		if (i + GATHER_PREFETCH < to)
			__builtin_prefetch(&tuples[perm[i + GATHER_PREFETCH]]);
		sorted[i] = tuples[perm[i]];
	}
}

static void *
gs_gather_thread(void *arg)
{
	GsGatherSlice *g = (GsGatherSlice *) arg;

	gs_gather_range(g->sorted, g->tuples, g->perm, g->from, g->to);
	return NULL;
}

static void
gs_gather(MinimalTuple *sorted, MinimalTuple *tuples, const uint32 *perm,
		  size_t n)
{
	int			nthreads = Min(gpusort_cpu_threads, 64);
	GsGatherSlice slices[64];
	sigset_t	all;
	sigset_t	old;
	int			t;

	if (n < PAR_GATHER_MIN_ROWS || nthreads <= 1)
	{
		gs_gather_range(sorted, tuples, perm, 0, n);
		return;
	}

	/* the threads take no signal: the backend's handlers stay its own */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (t = 0; t < nthreads; t++)
	{
		GsGatherSlice *g = &slices[t];

		g->sorted = sorted;
		g->tuples = tuples;
		g->perm = perm;
		g->from = n * t / nthreads;
		g->to = n * (t + 1) / nthreads;
		/* slice 0 is the backend's own; a thread that won't start, too */
		g->started = t > 0 &&
			pthread_create(&g->thread, NULL, gs_gather_thread, g) == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	for (t = 0; t < nthreads; t++)
	{
		if (!slices[t].started)
			gs_gather_thread(&slices[t]);
	}
	for (t = 0; t < nthreads; t++)
	{
		if (slices[t].started)
			pthread_join(slices[t].thread, NULL);
	}
}

/*
 * Rows that parallel workers loaded lie in shared memory on small pages,
 * in the order the workers met them: returning them in sorted order costs
 * a TLB miss and a cache miss per row, more than the rest of the row's way
 * out.  Large sorts of such rows copy them once, in sorted order, into
 * private memory on huge pages, on threads (each an even share of the
 * output, its loads independent so their misses overlap); rows then go out
 * from consecutive addresses.  The threads are as many as the processes
 * that loaded the rows, or gpusort.cpu_threads if more: the workers' cores
 * are free again by then.  The copy is not counted against work_mem,
 * as the shared rows are not.
 *
 * A thread's share goes into a buffer sized from the average row; when it
 * runs out, the thread stops there, the backend adds a buffer and the
 * thread goes on.
 */
typedef struct GsCopySlice
{
	size_t		next;			/* next output row to copy */
	size_t		to;
	char	   *buf;
	size_t		cap;
	size_t		used;
} GsCopySlice;

typedef struct GsSortedCopy
{
	MinimalTuple *sorted;
	MinimalTuple *tuples;
	const uint32 *order;
	GsCopySlice *slices;
} GsSortedCopy;

static void
gs_copy_sorted_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsSortedCopy *c = (GsSortedCopy *) arg;
	GsCopySlice *sl = &c->slices[part];
	size_t		i;

	for (i = sl->next; i < sl->to; i++)
	{
		MinimalTuple t;
		size_t		len;

		if ((i & 4095) == 0 && *stop)
			break;
		if (i + GATHER_PREFETCH < sl->to)
			__builtin_prefetch(&c->tuples[c->order[i + GATHER_PREFETCH]]);
		if (i + PREFETCH_DISTANCE < sl->to)
			__builtin_prefetch(c->tuples[c->order[i + PREFETCH_DISTANCE]]);
		t = c->tuples[c->order[i]];
		len = MAXALIGN(t->t_len);
		if (sl->used + len > sl->cap)
			break;
		memcpy(sl->buf + sl->used, t, t->t_len);
		c->sorted[i] = (MinimalTuple) (sl->buf + sl->used);
		sl->used += len;
	}
	sl->next = i;
}

/* a buffer for rows [next, to) of slice sl, of avg bytes each on average */
static void
gs_copy_slice_buffer(GsSortState *s, GsCopySlice *sl, double avg)
{
	size_t		rows = sl->to - sl->next;
	size_t		cap = (size_t) (rows * avg * 1.0625) + 64 * 1024;

	cap = Max(cap, MAXALIGN(s->max_tuple_len));
	sl->buf = MemoryContextAllocHuge(s->cxt, cap);
	s->copy_bytes += cap;
	gs_advise_huge(sl->buf, cap);
	sl->cap = cap;
	sl->used = 0;
}

static void
gs_copy_sorted(GsSortState *s, const uint32 *order, size_t n)
{
	int			nslices = Min(Max(gpusort_cpu_threads, s->bulk_threads), 64);
	GsCopySlice *slices;
	GsSortedCopy c;
	double		avg = 0;
	size_t		probe = Min(n, (size_t) 4096);
	size_t		i;
	int			t;
	instr_time	t0;

	INSTR_TIME_SET_CURRENT(t0);
	/* the average row, from rows spread over the input */
	for (i = 0; i < probe; i++)
		avg += MAXALIGN(s->tuples[(n / probe) * i]->t_len);
	avg /= Max(probe, 1);

	slices = palloc(nslices * sizeof(GsCopySlice));
	for (t = 0; t < nslices; t++)
	{
		slices[t].next = n * t / nslices;
		slices[t].to = n * (t + 1) / nslices;
		gs_copy_slice_buffer(s, &slices[t], avg);
	}
	c.sorted = s->sorted;
	c.tuples = s->tuples;
	c.order = order;
	c.slices = slices;
	for (;;)
	{
		bool		left = false;

		while (!gs_parallel(gs_copy_sorted_part, &c, nslices))
			;
		for (t = 0; t < nslices; t++)
		{
			if (slices[t].next < slices[t].to)
			{
				/* out of room: the rest of the share gets a new buffer */
				left = true;
				gs_copy_slice_buffer(s, &slices[t], avg);
			}
		}
		if (!left)
			break;
	}
	pfree(slices);
	s->copy_ms += gs_elapsed_ms(t0);
}

/* all rows are in and fit in memory: merge chunks into sorted[] */
void
gs_merge_chunks_to_array(GsSortState *s)
{
	size_t		n = s->nrows;
	size_t		i = 0;
	uint32	   *order = NULL;	/* batch rows in sorted order */
	uint32	   *rows = NULL;

	if (s->nchunks == 1)
		order = s->chunks[0].perm;
	else if (s->nchunks > 1)
	{
		instr_time	t0;

		/*
		 * Merge the chunks' keys and row numbers, which are read in order,
		 * into an array of row numbers (on threads when the keys alone
		 * decide the order); the tuple pointers are gathered afterwards, as
		 * for one chunk.  Touching each tuple pointer during the merge
		 * itself would cost a cache miss a row that nothing overlaps.
		 */
		rows = MemoryContextAllocHuge(s->cxt, Max(n, 1) * sizeof(uint32));
		gs_note_mem(s, (int64) n * sizeof(uint32));

		INSTR_TIME_SET_CURRENT(t0);
		gs_merge_chunk_rows(s, rows, NULL);
		s->merge_ms += gs_elapsed_ms(t0);
		order = rows;
	}

	/* the keys are done with, and so are the chunks' orders when merged */
	gs_keybuf_free(s->keys_engine, s->keys);
	s->keys = NULL;
	if (rows)
	{
		for (i = 0; i < (size_t) s->nchunks; i++)
			pfree(s->chunks[i].perm);
		s->nchunks = 0;
	}

	/* gather the row pointers into sorted order once */
	s->sorted = MemoryContextAllocHuge(s->cxt, Max(n, 1) * sizeof(MinimalTuple));
	gs_advise_huge(s->sorted, n * sizeof(MinimalTuple));
	gs_note_mem(s, (int64) n * sizeof(MinimalTuple));
	s->nsorted = n;
	if (order && s->bulk_rows && n >= PAR_GATHER_MIN_ROWS &&
		Max(gpusort_cpu_threads, s->bulk_threads) > 1)
		gs_copy_sorted(s, order, n);
	else if (order)
		gs_gather(s->sorted, s->tuples, order, n);

	/* permutations and the arrival-order array are done with */
	if (rows)
		pfree(rows);
	for (i = 0; i < (size_t) s->nchunks; i++)
		pfree(s->chunks[i].perm);
	s->nchunks = 0;
	pfree(s->tuples);
	s->tuples = NULL;
}

static inline void
gs_store(GsSortState *s, size_t pos, TupleTableSlot *slot)
{
	ExecStoreMinimalTuple(s->sorted[pos], slot, false);
}

bool
gs_sort_get(GsSortState *s, bool forward, TupleTableSlot *slot)
{
	switch (s->status)
	{
		case GS_SORTED:
			break;
		case GS_STORED:
			return tuplestore_gettupleslot(s->store, forward, false, slot);
		case GS_MERGING:
			{
				GsSource   *src;

				if (!forward)
					elog(ERROR, "gpusort: backward scan without random access");
				src = gs_merge_next(s, s->merge);
				if (src == NULL)
				{
					/* the final merge's time, as rows were taken */
					if (!s->merge_timed)
					{
						s->merge_ms += gs_elapsed_ms(s->stream_start);
						gs_merge_waits(s, s->merge);
						s->merge_timed = true;
					}
					ExecClearTuple(slot);
					return false;
				}
				ExecStoreMinimalTuple(src->tup, slot, false);
				return true;
			}
		default:
			elog(ERROR, "gpusort: rows requested before the sort");
	}

	if (forward)
	{
		if (s->current < s->nsorted)
		{
			size_t		ahead = s->current + PREFETCH_DISTANCE;

			if (ahead < s->nsorted)
				__builtin_prefetch(s->sorted[ahead]);
			gs_store(s, s->current++, slot);
			return true;
		}
		s->eof_reached = true;
		ExecClearTuple(slot);
		return false;
	}

	/* backward: the row before the one last returned, as tuplesort does */
	if (s->current == 0)
	{
		ExecClearTuple(slot);
		return false;
	}
	if (s->eof_reached)
		s->eof_reached = false;
	else
	{
		s->current--;
		if (s->current == 0)
		{
			ExecClearTuple(slot);
			return false;
		}
	}
	gs_store(s, s->current - 1, slot);
	return true;
}

void
gs_sort_markpos(GsSortState *s)
{
	if (s->status == GS_STORED)
		tuplestore_copy_read_pointer(s->store, 0, 1);
	else if (s->status == GS_SORTED)
	{
		s->markpos = s->current;
		s->markeof = s->eof_reached;
	}
	else
		elog(ERROR, "gpusort: mark without random access");
}

void
gs_sort_restorepos(GsSortState *s)
{
	if (s->status == GS_STORED)
		tuplestore_copy_read_pointer(s->store, 1, 0);
	else if (s->status == GS_SORTED)
	{
		s->current = s->markpos;
		s->eof_reached = s->markeof;
	}
	else
		elog(ERROR, "gpusort: restore without random access");
}

bool
gs_sort_can_rewind(GsSortState *s)
{
	return s->status == GS_SORTED || s->status == GS_STORED;
}

void
gs_sort_rewind(GsSortState *s)
{
	Assert(gs_sort_can_rewind(s));
	if (s->status == GS_STORED)
		tuplestore_rescan(s->store);
	else
	{
		s->current = 0;
		s->eof_reached = false;
		s->markpos = 0;
		s->markeof = false;
	}
}
