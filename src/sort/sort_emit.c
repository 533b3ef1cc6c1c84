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
#include <sys/mman.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "utils/memutils.h"
#include "utils/sortsupport.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"
#include "gpusort_stats.h"
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
 * private memory on huge pages, on threads whose loads are independent, so
 * their misses overlap; rows then go out from consecutive addresses.  The
 * threads are as many as the processes that loaded the rows, or
 * gpusort.cpu_threads if more: the workers' cores are free again by then.
 * The copy is not counted against work_mem, as the shared rows are not.
 *
 * The copy goes on while the rows go out.  The output is cut into blocks
 * of COPY_BLOCK_ROWS rows, dealt to the threads in turn (block b to thread
 * b % nthreads), so the threads advance side by side from the first row
 * and a thread's blocks sample the whole output.  Each thread counts the
 * blocks it has finished; the backend returns a row once its block is
 * counted, and waits (watching for interrupts) only when it has caught up.
 *
 * A thread's blocks go into one buffer sized from the average row; a row
 * that no longer fits is not copied, and sorted[] points at it in shared
 * memory, which lasts as long as the sort.
 *
 * The threads read the workers' shared memory, which an aborting
 * (sub)transaction unmaps when it releases its resources, before the
 * executor's memory goes.  So every copy under way is on a list, and a
 * transaction callback stops them all when any (sub)transaction aborts,
 * before that release; so does the load node before it lets its area go.
 * A copy stopped under a sort that goes on (an outer query's, when a
 * subtransaction fails) is finished by the backend: the rows of the
 * blocks not copied are returned from where they are.  The threads stop
 * with the sort's memory context too.
 */
#define COPY_BLOCK_ROWS		8192
#define COPY_PROBE_ROWS		65536

typedef struct GsCopySlice
{
	char	   *buf;
	size_t		cap;
	size_t		used;
	instr_time	end;			/* when the thread was done */
	pg_atomic_uint64 done;		/* blocks finished */
	char		pad[PG_CACHE_LINE_SIZE];
} GsCopySlice;

typedef struct GsSortedCopy
{
	dlist_node	node;			/* in live_copies, while linked */
	bool		linked;
	MemoryContextCallback cb;
	MinimalTuple *sorted;
	MinimalTuple *tuples;
	const uint32 *order;
	uint32	   *order_owned;	/* order, when the sort made it: freed after */
	size_t		n;
	size_t		nblocks;
	int			nslices;
	GsCopySlice *slices;
	GsTask	   *task;			/* NULL once stopped or finished */
	instr_time	start;

	/* the workers' blocks, given back once every row is copied */
	const GsSpan *spans;
	int			nspans;
	size_t		page_size;
	pg_atomic_uint32 parts_left;	/* copying */
	pg_atomic_uint32 overflow;	/* some row was left in shared memory */
	pg_atomic_uint64 released;	/* bytes given back */
	bool		hold_last;		/* gpusort.sort_fault: the last part waits
								 * for a stop before it ends */
} GsSortedCopy;

static dlist_head live_copies = DLIST_STATIC_INIT(live_copies);
static bool copy_callbacks_registered = false;

/*
 * Every row is copied: give the workers' blocks of rows back to the
 * system now, on this thread, rather than when the sort ends.  Freeing
 * gigabytes of shared memory took the backend 0.6-0.8 s at the end of a
 * 50M-row sort; here it goes on while the rows go out.  The pages are
 * punched out of the shared memory segments (MADV_REMOVE); the area's own
 * bookkeeping lies outside the blocks, and nothing reads the blocks again
 * (the area is only detached).  A failure just stops the early release.
 */
static void
gs_release_spans(GsSortedCopy *c, volatile bool *stop)
{
#ifdef MADV_REMOVE
	const size_t step = 64 * 1024 * 1024;
	int			i;

	for (i = 0; i < c->nspans; i++)
	{
		uintptr_t	p = TYPEALIGN(c->page_size, (uintptr_t) c->spans[i].addr);
		uintptr_t	end = TYPEALIGN_DOWN(c->page_size,
										 (uintptr_t) c->spans[i].addr +
										 c->spans[i].len);

		for (; p < end; p += step)
		{
			size_t		len = Min(step, end - p);

			if (*stop || madvise((void *) p, len, MADV_REMOVE) != 0)
				return;
			pg_atomic_fetch_add_u64(&c->released, len);
		}
	}
#endif
}

static void
gs_copy_sorted_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsSortedCopy *c = (GsSortedCopy *) arg;
	GsCopySlice *sl = &c->slices[part];
	bool		overflow = false;
	size_t		b;

	for (b = part; b < c->nblocks && !*stop; b += nparts)
	{
		size_t		from = b * COPY_BLOCK_ROWS;
		size_t		to = Min(c->n, from + COPY_BLOCK_ROWS);
		size_t		i;

		for (i = from; i < to; i++)
		{
			MinimalTuple t;
			size_t		len;

			if (i + GATHER_PREFETCH < to)
				__builtin_prefetch(&c->tuples[c->order[i + GATHER_PREFETCH]]);
			if (i + PREFETCH_DISTANCE < to)
				__builtin_prefetch(c->tuples[c->order[i + PREFETCH_DISTANCE]]);
			t = c->tuples[c->order[i]];
			len = MAXALIGN(t->t_len);
			if (sl->used + len > sl->cap)
			{
				/* out of room: this row stays where it is */
				c->sorted[i] = t;
				overflow = true;
				continue;
			}
			memcpy(sl->buf + sl->used, t, t->t_len);
			c->sorted[i] = (MinimalTuple) (sl->buf + sl->used);
			sl->used += len;
		}
		/* the rows and their pointers are visible before the count */
		pg_write_barrier();
		pg_atomic_write_u64(&sl->done, b / nparts + 1);
	}
	INSTR_TIME_SET_CURRENT(sl->end);

	/* the last part to finish gives the shared rows back, if all copied */
	if (overflow)
		pg_atomic_write_u32(&c->overflow, 1);
	if (pg_atomic_fetch_sub_u32(&c->parts_left, 1) == 1)
	{
		if (!*stop && pg_atomic_read_u32(&c->overflow) == 0)
			gs_release_spans(c, stop);
		/* a test's fault: still at work when the backend waits (10 s at most) */
		for (b = 0; c->hold_last && !*stop && b < 10000; b++)
			usleep(1000);
	}
}

static bool
gs_copy_block_done(GsSortedCopy *c, size_t b)
{
	return pg_atomic_read_u64(&c->slices[b % c->nslices].done) >
		b / c->nslices;
}

/* stop a copy's threads where they are (each between two blocks) */
static void
gs_copy_stop(GsSortedCopy *c)
{
	if (c->task)
	{
		gs_task_cancel(c->task);
		c->task = NULL;
	}
}

/* stop every copy under way: their shared rows are about to go */
void
gs_sort_stop_copies(void)
{
	dlist_iter	it;

	dlist_foreach(it, &live_copies)
		gs_copy_stop(dlist_container(GsSortedCopy, node, it.cur));
}

static void
gs_copy_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		gs_sort_stop_copies();
}

static void
gs_copy_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		gs_sort_stop_copies();
}

/* the sort's memory goes (its task, a child context, is joined already) */
static void
gs_copy_forget(void *arg)
{
	GsSortedCopy *c = (GsSortedCopy *) arg;

	if (c->linked)
		dlist_delete(&c->node);
}

static void
gs_copy_start(GsSortState *s, const uint32 *order, uint32 *order_owned,
			  size_t n)
{
	GsSortedCopy *c;
	int			nslices = Min(Max(gpusort_cpu_threads, s->bulk_threads), 64);
	double		avg = 0;
	size_t		probe = Min(n, (size_t) COPY_PROBE_ROWS);
	size_t		i;
	int			t;

	c = MemoryContextAllocZero(s->cxt, sizeof(GsSortedCopy));
	INSTR_TIME_SET_CURRENT(c->start);
	/* the average row, from rows spread over the input */
	for (i = 0; i < probe; i++)
		avg += MAXALIGN(s->tuples[(n / probe) * i]->t_len);
	avg /= Max(probe, 1);

	c->sorted = s->sorted;
	c->tuples = s->tuples;
	c->order = order;
	c->order_owned = order_owned;
	c->n = n;
	c->nblocks = (n + COPY_BLOCK_ROWS - 1) / COPY_BLOCK_ROWS;
	nslices = (int) Min((size_t) nslices, c->nblocks);
	c->nslices = nslices;
	c->slices = MemoryContextAllocZero(s->cxt, nslices * sizeof(GsCopySlice));
	for (t = 0; t < nslices; t++)
	{
		GsCopySlice *sl = &c->slices[t];
		size_t		blocks = (c->nblocks - t + nslices - 1) / nslices;
		size_t		cap = (size_t) (blocks * COPY_BLOCK_ROWS * avg * 1.0625) +
			64 * 1024;

		cap = Max(cap, MAXALIGN(s->max_tuple_len));
		sl->buf = MemoryContextAllocHuge(s->cxt, cap);
		gs_advise_huge(sl->buf, cap);
		sl->cap = cap;
		s->rep.copy_bytes += cap;
		pg_atomic_init_u64(&sl->done, 0);
	}
	if (!copy_callbacks_registered)
	{
		RegisterXactCallback(gs_copy_xact_callback, NULL);
		RegisterSubXactCallback(gs_copy_subxact_callback, NULL);
		copy_callbacks_registered = true;
	}
	dlist_push_tail(&live_copies, &c->node);
	c->linked = true;
	c->cb.func = gs_copy_forget;
	c->cb.arg = c;
	MemoryContextRegisterResetCallback(s->cxt, &c->cb);
	c->spans = s->shared_spans;
	c->nspans = s->nshared_spans;
	c->page_size = (size_t) sysconf(_SC_PAGESIZE);
	pg_atomic_init_u32(&c->parts_left, nslices);
	pg_atomic_init_u32(&c->overflow, 0);
	pg_atomic_init_u64(&c->released, 0);
	c->hold_last = gpusort_sort_fault == GS_SORT_FAULT_CANCEL_IN_COPY;
	s->copy = c;
	s->ready = 0;
	c->task = gs_task_start(s->cxt, gs_copy_sorted_part, c, nslices);
}

/* a block of rows that parallel workers left in shared memory */
void
gs_sort_shared_span(GsSortState *s, void *addr, size_t len)
{
	if (s->nshared_spans == s->shared_spans_cap)
	{
		s->shared_spans_cap = Max(64, s->shared_spans_cap * 2);
		s->shared_spans = s->shared_spans ?
			repalloc(s->shared_spans, s->shared_spans_cap * sizeof(GsSpan)) :
			MemoryContextAlloc(s->cxt, s->shared_spans_cap * sizeof(GsSpan));
	}
	s->shared_spans[s->nshared_spans].addr = addr;
	s->shared_spans[s->nshared_spans].len = len;
	s->nshared_spans++;
}

/*
 * The copy is over: its threads are joined and the arrays it read from go.
 */
static void
gs_copy_finish(GsSortState *s)
{
	GsSortedCopy *c = s->copy;
	instr_time	end = c->start;
	int			t;

	/*
	 * Every block is done: the threads are at their end, or the last is
	 * still giving the shared rows back.  The task is forgotten before the
	 * wait, which frees it and may throw (a cancel meanwhile): the abort's
	 * gs_sort_stop_copies must not find it again (it did: a double free),
	 * and a sort that goes on comes back here with nothing to wait for.
	 */
	if (c->task)
	{
		GsTask	   *t = c->task;

		c->task = NULL;
		if (c->hold_last)
		{
			QueryCancelPending = true;
			InterruptPending = true;
		}
		(void) gs_task_wait(t);
	}
	for (t = 0; t < c->nslices; t++)
	{
		if (INSTR_TIME_GET_DOUBLE(c->slices[t].end) > INSTR_TIME_GET_DOUBLE(end))
			end = c->slices[t].end;
	}
	INSTR_TIME_SUBTRACT(end, c->start);
	s->rep.copy_ms += INSTR_TIME_GET_MILLISEC(end);
	elog(DEBUG1, "gpusort: %zu rows copied into sorted order in %.1f ms; %lld kB of shared memory given back early",
		 c->n, INSTR_TIME_GET_MILLISEC(end),
		 (long long) (pg_atomic_read_u64(&c->released) / 1024));
	/* c itself stays, as the context's callback points at it */
	dlist_delete(&c->node);
	c->linked = false;
	if (c->order_owned)
		pfree(c->order_owned);
	pfree(c->tuples);
	pfree(c->slices);
	s->copy = NULL;
	s->ready = s->nsorted;
}

/*
 * Wait until row pos is copied (pos < nsorted), and move s->ready past
 * every block finished in a row from there.
 */
static pg_noinline void
gs_copy_wait(GsSortState *s, size_t pos)
{
	GsSortedCopy *c = s->copy;
	size_t		b = s->ready / COPY_BLOCK_ROWS;
	int			spins = 0;

	Assert(c != NULL && pos >= s->ready && pos < c->n);
	for (;;)
	{
		while (b < c->nblocks && gs_copy_block_done(c, b))
			b++;
		if (b * COPY_BLOCK_ROWS > pos || b == c->nblocks)
			break;
		if (c->task == NULL)
		{
			/* stopped: the blocks left are returned from where they lie */
			pg_read_barrier();
			for (; b < c->nblocks; b++)
			{
				if (!gs_copy_block_done(c, b))
					gs_gather_range(c->sorted, c->tuples, c->order,
									b * COPY_BLOCK_ROWS,
									Min(c->n, (b + 1) * COPY_BLOCK_ROWS));
			}
			break;
		}
		if (++spins < 1000)
			pg_spin_delay();
		else
		{
			CHECK_FOR_INTERRUPTS();
			pgstat_report_wait_start(gs_wait_event(GS_WAIT_THREADS));
			pg_usleep(20);
			pgstat_report_wait_end();
		}
	}
	pg_read_barrier();
	if (b == c->nblocks)
		gs_copy_finish(s);
	else
		s->ready = b * COPY_BLOCK_ROWS;
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
		s->rep.merge_ms += gs_elapsed_ms(t0);
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
	s->ready = n;
	if (order && s->bulk_rows && n >= PAR_GATHER_MIN_ROWS &&
		Max(gpusort_cpu_threads, s->bulk_threads) > 1)
	{
		uint32	   *owned = rows;

		/* the copy reads the order and the arrival-order array: it keeps them */
		if (owned == NULL)
		{
			Assert(s->nchunks == 1);
			owned = s->chunks[0].perm;
			s->nchunks = 0;
		}
		gs_copy_start(s, order, owned, n);
		s->tuples = NULL;
		return;
	}
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

/* how many records ahead the walk of a cascade's addresses prefetches */
#define STREAM_REF_AHEAD	16
/* ... and how many addresses ahead it asks for the block's lines */
#define STREAM_REF_LINES_AHEAD	64

/*
 * ExecStoreMinimalTuple(mt, slot, false), written out for the slot the
 * rows go to once a row: the node's own MinimalTuple slot, which never
 * owns what it holds.  The fields set are those tts_minimal_store_tuple
 * leaves after tts_minimal_clear (the same in PostgreSQL 15 to 18); the
 * two calls through the slot's callbacks cost 42 of the 124 instructions
 * returning a row took.  Any other slot goes through PostgreSQL's
 * function.
 */
static pg_attribute_always_inline void
gs_slot_store(MinimalTuple mt, TupleTableSlot *slot)
{
	MinimalTupleTableSlot *mslot = (MinimalTupleTableSlot *) slot;

	if (unlikely(!TTS_IS_MINIMALTUPLE(slot) || TTS_SHOULDFREE(slot)))
	{
		ExecStoreMinimalTuple(mt, slot, false);
		return;
	}
	Assert(mslot->tuple == &mslot->minhdr);
	slot->tts_flags &= ~TTS_FLAG_EMPTY;
	slot->tts_nvalid = 0;
	ItemPointerSetInvalid(&slot->tts_tid);
	mslot->off = 0;
	mslot->mintuple = mt;
	mslot->minhdr.t_len = mt->t_len + MINIMAL_TUPLE_OFFSET;
	mslot->minhdr.t_data = (HeapTupleHeader) ((char *) mt - MINIMAL_TUPLE_OFFSET);
}

static inline void
gs_store(GsSortState *s, size_t pos, TupleTableSlot *slot)
{
	gs_slot_store(s->sorted[pos], slot);
}

/*
 * The next row forward in the two common cases: a row in memory ready to
 * go, and a row of the final merge's single stream (a block of its
 * records' addresses being walked).  NULL when it is neither.
 */
static pg_attribute_always_inline MinimalTuple
gs_next_fast(GsSortState *s)
{
	if (s->status == GS_SORTED && likely(s->current < s->ready))
	{
		size_t		ahead = s->current + PREFETCH_DISTANCE;

		if (ahead < s->ready)
			__builtin_prefetch(s->sorted[ahead]);
		return s->sorted[s->current++];
	}
	if (s->status == GS_MERGING && likely(s->ref_pos < s->ref_n))
	{
		size_t		ahead = s->ref_pos + STREAM_REF_AHEAD;
		const char *rec;

		/*
		 * The records, and the block of their addresses, were written on
		 * other cores: ask early for both (an address past the block's end
		 * is harmless to a prefetch).
		 */
		__builtin_prefetch(&s->refs[ahead + STREAM_REF_LINES_AHEAD]);
		if (ahead < s->ref_n)
		{
			__builtin_prefetch(s->refs[ahead]);
			__builtin_prefetch(s->refs[ahead] + 64);
		}
		rec = s->refs[s->ref_pos++];
		s->merged_out++;
		return (MinimalTuple) (rec + s->stream_tupoff);
	}
	return NULL;
}

/*
 * The next row forward in every other case of a sort in memory or being
 * merged: the waits, the ends, the merges other than a single stream's.
 * NULL at the end.
 */
static pg_noinline MinimalTuple
gs_next_slow(GsSortState *s)
{
	if (s->status == GS_MERGING)
	{
		GsSource   *src;

		if (likely(s->cascade != NULL))
		{
			/* the next block of the records' addresses */
			s->refs = gs_stream_next_refs(s->cascade, &s->ref_n);
			s->ref_pos = 0;
			if (likely(s->refs != NULL))
			{
				const char *rec = s->refs[s->ref_pos++];

				s->merged_out++;
				return (MinimalTuple) (rec + s->stream_tupoff);
			}
			s->ref_n = 0;
			src = NULL;
		}
		else
			src = gs_merge_next(s, s->merge);
		if (src != NULL)
		{
			s->merged_out++;
			return src->tup;
		}
		/* every row the runs hold came out, or the answer would be short */
		if (s->merged_out != (uint64) s->total_rows)
			elog(ERROR, "gpusort: the final merge returned %llu of %.0f rows",
				 (unsigned long long) s->merged_out, s->total_rows);
		/* the final merge's time, as rows were taken */
		if (!s->merge_timed)
		{
			s->rep.emit_ms = gs_elapsed_ms(s->stream_start);
			s->rep.merge_ms += s->rep.emit_ms;
			gs_merge_waits(s, s->merge);
			gs_merge_log_threads(s);
			s->merge_timed = true;
		}
		return NULL;
	}
	if (s->status != GS_SORTED)
		elog(ERROR, "gpusort: rows requested before the sort");
	if (s->current < s->nsorted)
	{
		size_t		ahead = s->current + PREFETCH_DISTANCE;

		if (unlikely(s->current >= s->ready))
			gs_copy_wait(s, s->current);
		if (ahead < s->ready)
			__builtin_prefetch(s->sorted[ahead]);
		return s->sorted[s->current++];
	}
	if (!s->emit_timed)
	{
		s->rep.emit_ms = gs_elapsed_ms(s->stream_start);
		s->emit_timed = true;
	}
	s->eof_reached = true;
	return NULL;
}

/* every case of gs_sort_get but the two of gs_next_fast */
static pg_noinline TupleTableSlot *
gs_sort_get_slow(GsSortState *s, bool forward, TupleTableSlot *slot)
{
	MinimalTuple mt;

	if (s->status == GS_STORED)
		return tuplestore_gettupleslot(s->store, forward, false, slot) ?
			slot : NULL;
	if (forward)
	{
		mt = gs_next_slow(s);
		if (mt == NULL)
		{
			ExecClearTuple(slot);
			return NULL;
		}
		gs_slot_store(mt, slot);
		return slot;
	}
	if (s->status == GS_MERGING)
		elog(ERROR, "gpusort: backward scan without random access");
	if (s->status != GS_SORTED)
		elog(ERROR, "gpusort: rows requested before the sort");

	/* backward: the row before the one last returned, as tuplesort does */
	if (s->current == 0)
	{
		ExecClearTuple(slot);
		return NULL;
	}
	if (s->eof_reached)
		s->eof_reached = false;
	else
	{
		s->current--;
		if (s->current == 0)
		{
			ExecClearTuple(slot);
			return NULL;
		}
	}
	gs_store(s, s->current - 1, slot);
	return slot;
}

/*
 * The next row into slot, forward or backward: slot, or NULL at the end.  This
 * runs once a row (50M times in a 50M-row ORDER BY, where returning the
 * rows is half the time): the two common cases are taken here, without
 * the frame of the rest, which gs_sort_get_slow handles.
 */
TupleTableSlot *
gs_sort_get(GsSortState *s, bool forward, TupleTableSlot *slot)
{
	if (likely(forward))
	{
		MinimalTuple mt = gs_next_fast(s);

		if (likely(mt != NULL))
		{
			gs_slot_store(mt, slot);
			return slot;
		}
	}
	return gs_sort_get_slow(s, forward, slot);
}

/*
 * The next rows of a sort in memory or of its final merge's single stream,
 * as a block: *n pointers, each row's MinimalTuple at the pointer plus
 * *off.  The rows stay valid until the next call.  NULL when the rest must
 * be read row by row (gs_sort_next_row): a merge on the backend, or the end.
 */
const char *const *
gs_sort_next_rows(GsSortState *s, size_t *n, size_t *off)
{
	if (s->status == GS_SORTED)
	{
		const char *const *rows;

		if (s->current >= s->nsorted)
			return NULL;
		if (s->current >= s->ready)
			gs_copy_wait(s, s->current);
		rows = (const char *const *) &s->sorted[s->current];
		*n = s->ready - s->current;
		*off = 0;
		s->current = s->ready;
		return rows;
	}
	if (s->status == GS_MERGING && s->cascade != NULL)
	{
		const char *const *refs;

		if (s->ref_pos < s->ref_n)
		{
			refs = s->refs + s->ref_pos;
			*n = s->ref_n - s->ref_pos;
		}
		else
		{
			refs = gs_stream_next_refs(s->cascade, n);
			s->refs = refs;
			s->ref_n = refs ? *n : 0;
		}
		s->ref_pos = s->ref_n;
		if (refs == NULL)
			return NULL;
		s->merged_out += *n;
		*off = s->stream_tupoff;
		return refs;
	}
	return NULL;
}

/*
 * The next row of a variant's sort (gs_sort_begin_rows): its data, valid
 * until the next call; NULL at the end.
 */
const char *
gs_sort_next_row(GsSortState *s)
{
	MinimalTuple mt = gs_next_fast(s);

	if (unlikely(mt == NULL))
	{
		mt = gs_next_slow(s);
		if (mt == NULL)
			return NULL;
	}
	return (const char *) mt + GS_ROW_DATA_OFF;
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
