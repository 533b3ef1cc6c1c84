/*-------------------------------------------------------------------------
 *
 * load_finish.c
 *	  The leader's side of a parallel load (see sort_parallel.c): its own
 *	  share of the rows, the workers' blocks mapped as they are made, the
 *	  workers' runs or rows handed to the sort state at the end, and what
 *	  EXPLAIN shows of the load.
 *
 * Called by sort_parallel.c, never calling back into it.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "commands/explain.h"
#include "executor/execParallel.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "utils/dsa.h"
#include "utils/wait_event.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"
#include "load_int.h"
#include "sortstate_int.h"

/*
 * The leader maps the blocks the workers have made since it last looked
 * (in-memory loads).  The last process to detach from a segment frees its
 * pages, and the leader is the last; only segments it maps can be handed
 * to a thread for that (shm_reap.c), so a cancel during the load would
 * otherwise free the workers' segments in the leader, before the error
 * comes back.
 */
void
gs_load_map_blocks(GsLoadState *ls)
{
	uint64		newbytes = 0;
	int			i;

	for (i = 0; i < ls->launched && i < ls->nareas; i++)
	{
		GsLoaderSlot *slot = &ls->shared->slots[i].slot;
		dsa_pointer dp = ls->mapped[i];
		volatile GsRowBlock *b;

		if (!DsaPointerIsValid(dp))
		{
			dp = ((volatile GsLoaderSlot *) slot)->first;
			if (!DsaPointerIsValid(dp))
				continue;
			pg_read_barrier();
			b = (volatile GsRowBlock *) dsa_get_address(ls->areas[i], dp);
			newbytes += b->size;
		}
		for (;;)
		{
			dsa_pointer next;

			pg_read_barrier();
			b = (volatile GsRowBlock *) dsa_get_address(ls->areas[i], dp);
			next = b->next;
			if (!DsaPointerIsValid(next))
				break;
			dp = next;

			/*
			 * The worker wrote the new block's header before the link to it
			 * (pg_write_barrier in gs_blocks_link): read it after the
			 * link, as the first block's is read after slot->first.
			 */
			pg_read_barrier();
			b = (volatile GsRowBlock *) dsa_get_address(ls->areas[i], dp);
			newbytes += b->size;
		}
		ls->mapped[i] = dp;
	}
	gs_load_budget_used(&ls->claim, newbytes);
}

/*
 * The leader, done with its share of an in-memory load, waits for the
 * workers' shares, mapping their new blocks meanwhile (ExecParallelFinish
 * would wait without).  A worker's error ends the wait as the leader's
 * own (CHECK_FOR_INTERRUPTS handles the workers' messages); a worker gone
 * without setting done, too, and ExecParallelFinish then tells why.
 */
static void
gs_load_await_workers(GsLoadState *ls)
{
	ParallelContext *pcxt = ls->pei->pcxt;

	for (;;)
	{
		bool		all_done = true;
		bool		any_alive = false;
		int			i;

		gs_load_map_blocks(ls);
		pg_read_barrier();
		for (i = 0; i < ls->launched; i++)
		{
			pid_t		pid;

			if (((volatile GsLoaderSlot *) &ls->shared->slots[i].slot)->done)
				continue;
			all_done = false;
			if (pcxt->worker[i].bgwhandle != NULL &&
				GetBackgroundWorkerPid(pcxt->worker[i].bgwhandle, &pid) != BGWH_STOPPED)
				any_alive = true;
		}
		if (all_done || !any_alive)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 MAP_BLOCKS_WAIT_MS, WAIT_EVENT_PARALLEL_FINISH);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	gs_load_map_blocks(ls);
}

/*
 * Handing participants' rows over, in as many passes as the sort's batches
 * take them (a sort larger than its memory writes a run between two).  In
 * a pass every stretch of a block goes to a known place in the sort's
 * arrays, so threads (which call nothing of PostgreSQL's) fill the tuple
 * pointers and copy the keys into the engine's key buffer, an even share
 * of the rows each.  The rows stay where the participants wrote them.
 */
typedef struct GsCopyPiece
{
	char	   *blk;
	size_t		first;			/* first row of the block taken */
	size_t		nrows;
	size_t		dest;			/* its place in the pass */
} GsCopyPiece;

typedef struct GsCopyJob
{
	GsCopyPiece *pieces;
	int			npieces;
	size_t		nrows;			/* in the pass */
	MinimalTuple *tuples;
	char	   *keys;
	int			key_bytes;
	bool		touch;			/* map the blocks' pages first */
} GsCopyJob;

/* rows a thread copies at least */
#define COPY_PART_MIN_ROWS	((size_t) 65536)

/* the step of the threads touching the blocks' pages */
#define COPY_TOUCH_STEP		((size_t) 4096)

static void
gs_copy_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsCopyJob  *j = (GsCopyJob *) arg;
	size_t		kb = j->key_bytes;
	size_t		esz = gs_block_entry_size(kb);
	size_t		from = j->nrows * part / nparts;
	size_t		to = j->nrows * (part + 1) / nparts;
	int			p;

	/*
	 * Map the blocks' pages into this process now, on the threads: each
	 * first touch of a page of shared memory the leader has not used yet
	 * is a page fault (15% of an index build's leader in a profile), else
	 * taken one by one where the rows are read in sorted order.
	 */
	for (p = part; j->touch && p < j->npieces && !*stop; p += nparts)
	{
		const volatile char *blk = j->pieces[p].blk;
		size_t		size = ((GsRowBlock *) j->pieces[p].blk)->size;
		size_t		off;

		for (off = 0; off < size; off += COPY_TOUCH_STEP)
			(void) blk[off];
	}

	for (p = 0; p < j->npieces && !*stop; p++)
	{
		GsCopyPiece *pc = &j->pieces[p];
		char	   *end = pc->blk + ((GsRowBlock *) pc->blk)->size;
		size_t		lo = Max(from, pc->dest);
		size_t		hi = Min(to, pc->dest + pc->nrows);
		size_t		d;

		for (d = lo; d < hi; d++)
		{
			size_t		r = pc->first + (d - pc->dest);
			const char *ent = end - (r + 1) * esz;
			uint32		word;

			memcpy(&word, ent + kb, sizeof(uint32));
			j->tuples[d] = (MinimalTuple) (pc->blk + (word & ~GS_BLOCK_LOSSY_BIT));
			memcpy(j->keys + d * kb, ent, kb);
		}
	}
}

/* the lossy marks of a pass's rows (long strings, ICU text: a few) */
static void
gs_copy_lossy(GsSortState *sort, const GsCopyJob *j)
{
	size_t		esz = gs_block_entry_size(j->key_bytes);
	int			p;

	for (p = 0; p < j->npieces; p++)
	{
		const GsCopyPiece *pc = &j->pieces[p];
		char	   *end = pc->blk + ((GsRowBlock *) pc->blk)->size;
		size_t		r;

		for (r = 0; r < pc->nrows; r++)
		{
			uint32		word;

			memcpy(&word, end - (pc->first + r + 1) * esz + j->key_bytes,
				   sizeof(uint32));
			if (word & GS_BLOCK_LOSSY_BIT)
				gs_sort_bulk_lossy(sort, pc->dest + r);
		}
		CHECK_FOR_INTERRUPTS();
	}
}

void
gs_block_list_init(GsBlockList *l)
{
	l->cap = 16;
	l->n = 0;
	l->rows = 0;
	l->blocks = palloc(l->cap * sizeof(char *));
}

/*
 * A participant's chain of blocks (from first, in area) appended to l:
 * they must hold the nrows rows it said it loaded; who names it in the
 * error if not.
 */
void
gs_block_list_add(GsBlockList *l, dsa_area *area, dsa_pointer first,
				  uint64 nrows, const char *who)
{
	dsa_pointer dp = first;
	uint64		seen = 0;

	while (DsaPointerIsValid(dp) && seen < nrows)
	{
		GsRowBlock *b = (GsRowBlock *) dsa_get_address(area, dp);

		if (l->n == l->cap)
		{
			l->cap *= 2;
			l->blocks = repalloc(l->blocks, l->cap * sizeof(char *));
		}
		l->blocks[l->n++] = (char *) b;
		seen += b->nrows;
		dp = b->next;
	}
	if (seen != nrows)
		elog(ERROR, "gpusort: %s's rows went missing (%llu of %llu)", who,
			 (unsigned long long) seen, (unsigned long long) nrows);
	l->rows += seen;
}

/*
 * The rows of blocks[] (GsRowBlock, total rows in all, in this order) into
 * sort, whose keys are key_bytes wide, as if put one by one: with the
 * cores of participants processes (whose work is over) copying, and, with
 * touch, the blocks' pages mapped on those threads first.
 */
void
gs_sort_take_blocks(GsSortState *sort, char *const *blocks, int nblocks,
					size_t total, int key_bytes, bool any_lossy,
					uint32 max_tuple_len, int participants, bool touch)
{
	GsCopyJob	job;
	size_t		left;
	int			bi = 0;
	size_t		r0 = 0;
	int			i;

	for (i = 0; i < nblocks; i++)
		gs_sort_shared_span(sort, blocks[i], ((GsRowBlock *) blocks[i])->size);
	job.pieces = palloc((nblocks + 1) * sizeof(GsCopyPiece));
	job.key_bytes = key_bytes;
	job.touch = touch;
	for (left = total; left > 0;)
	{
		size_t		k = gs_sort_bulk_room(sort, left, &job.tuples, &job.keys);
		size_t		dest = 0;

		if (k == 0)
		{
			/* the batch is full: it becomes a run, as with gs_sort_put */
			gs_sort_bulk_spill(sort);
			continue;
		}
		job.npieces = 0;
		job.nrows = k;
		while (dest < k)
		{
			GsRowBlock *blk = (GsRowBlock *) blocks[bi];
			size_t		take = Min(blk->nrows - r0, k - dest);
			GsCopyPiece *pc = &job.pieces[job.npieces++];

			pc->blk = blocks[bi];
			pc->first = r0;
			pc->nrows = take;
			pc->dest = dest;
			dest += take;
			r0 += take;
			if (r0 == blk->nrows)
			{
				bi++;
				r0 = 0;
			}
		}

		while (!gs_parallel(gs_copy_part, &job,
							(int) Min((size_t) Max(gpusort_cpu_threads,
												   participants),
									  k / COPY_PART_MIN_ROWS + 1)))
			;
		job.touch = false;
		if (any_lossy)
			gs_copy_lossy(sort, &job);
		gs_sort_bulk_done(sort, k, max_tuple_len);
		left -= k;
	}
	pfree(job.pieces);
}

/* the workers' rows into the sort */
static void
gs_load_collect(GsLoadState *ls, GsSortState *sort)
{
	GsBlockList l;
	uint32		maxlen = 0;
	bool		any_lossy = false;
	int			i;

	/* every block of every worker, in order */
	gs_block_list_init(&l);
	for (i = 0; i < ls->launched; i++)
	{
		GsLoaderSlot *slot = &ls->shared->slots[i].slot;

		ls->workers[i].rows = (double) slot->nrows;
		ls->workers[i].ms = slot->load_ms;
		maxlen = Max(maxlen, slot->max_tuple_len);
		any_lossy |= slot->nlossy > 0;
		gs_block_list_add(&l, i < ls->nareas ? ls->areas[i] : ls->area,
						  slot->first, slot->nrows, "a parallel loader");
	}
	gs_sort_take_blocks(sort, l.blocks, l.n, l.rows, ls->key_bytes,
						any_lossy, maxlen, ls->launched + 1, false);
	pfree(l.blocks);
}

/*
 * The leader's share of the load, through the sort state's own put: the
 * rows the scan hands it, that is all of them when it loads alone.
 */
double
gs_load_leader_read(GsLoadState *ls, GsSortState *sort)
{
	PlanState  *child = outerPlanState(ls);
	EState	   *estate = ls->css.ss.ps.state;
	GsHeapReader *hr;
	double		rows = 0;
	bool		pages;
	uint64		map_at = MAP_BLOCKS_ROWS;

	/* the query's DSA area, for nodes that share state through it */
	estate->es_query_dsa = ls->pei ? ls->pei->area : NULL;
	hr = gs_heapread_begin(child);
	estate->es_query_dsa = NULL;
	pages = gs_sort_takes_pages(sort, hr);
	for (;;)
	{
		TupleTableSlot *slot;

		estate->es_query_dsa = ls->pei ? ls->pei->area : NULL;
		if (pages)
		{
			/* the rows straight from the pages (see gs_sort_put_page) */
			int			n = gs_sort_put_page(sort, hr);

			estate->es_query_dsa = NULL;
			if (n == 0)
				break;
			rows += n;
		}
		else
		{
			slot = gs_input_next(hr, child);
			estate->es_query_dsa = NULL;
			if (TupIsNull(slot))
				break;
			gs_sort_put(sort, slot);
			rows += 1;
		}
		if (ls->mapped && (uint64) rows >= map_at)
		{
			gs_load_map_blocks(ls);
			map_at = (uint64) rows + MAP_BLOCKS_ROWS;
		}
	}
	if (hr)
		gs_heapread_end(hr);
	return rows;
}

/*
 * Workers that stopped at the load's budget left the rest of the input to
 * the other participants; a leader that took no share reads it now.
 */
static void
gs_load_rest(GsLoadState *ls, GsSortState *sort)
{
	PlanState  *ps = &ls->css.ss.ps;
	double		rows;
	int			i;

	ls->stopped = 0;
	pg_read_barrier();
	for (i = 0; i < ls->launched; i++)
		if (ls->shared->slots[i].slot.stopped)
			ls->stopped++;
	if (ls->stopped == 0 || parallel_leader_participation)
		return;
	if (ps->instrument)
		InstrStartNode(ps->instrument);
	rows = gs_load_leader_read(ls, sort);
	ls->leader.rows += rows;
	if (ps->instrument)
		InstrStopNode(ps->instrument, rows);
}

/*
 * Which way the last load went and why, in one line: "serial (no free
 * worker)", "3 processes, in shared memory", "3 processes, sorted runs
 * (input larger than work_mem)".
 */
static const char *
gs_load_summary(GsLoadState *ls)
{
	StringInfoData s;
	int			procs;

	initStringInfo(&s);
	if (ls->serial_reason)
	{
		appendStringInfo(&s, "serial (%s)", ls->serial_reason);
		return s.data;
	}
	procs = ls->launched + (parallel_leader_participation ? 1 : 0);
	if (ls->runs)
		appendStringInfo(&s, "%d processes, sorted runs (%s)", procs,
						 ls->runs_reason);
	else
	{
		appendStringInfo(&s, "%d processes, in shared memory", procs);
		if (ls->stopped > 0)
			appendStringInfo(&s, " (%d stopped at the estimate's budget)",
							 ls->stopped);
	}
	return s.data;
}

void
gs_load_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	GsLoadState *ls = (GsLoadState *) node;
	int			i;

	ExplainPropertyInteger("Workers Planned", NULL, ls->nworkers, es);
	if (!es->analyze || !ls->loaded)
		return;
	ExplainPropertyInteger("Workers Launched", NULL, ls->launched, es);
	ExplainPropertyText("Load", gs_load_summary(ls), es);

	if (es->format == EXPLAIN_FORMAT_TEXT)
	{
		if (es->str->len > 0 && es->str->data[es->str->len - 1] != '\n')
			appendStringInfoChar(es->str, '\n');
		appendStringInfoSpaces(es->str, es->indent * 2);
		appendStringInfo(es->str, "Leader Load: rows=%.0f time=%.3f ms",
						 ls->leader.rows, ls->leader.ms);
		if (ls->runs)
			appendStringInfo(es->str, " runs=%d", ls->leader.runs);
		appendStringInfoChar(es->str, '\n');
		for (i = 0; i < ls->launched; i++)
		{
			appendStringInfoSpaces(es->str, es->indent * 2);
			appendStringInfo(es->str, "Worker %d Load: rows=%.0f time=%.3f ms",
							 i, ls->workers[i].rows, ls->workers[i].ms);
			if (ls->runs)
				appendStringInfo(es->str, " runs=%d", ls->workers[i].runs);
			appendStringInfoChar(es->str, '\n');
		}
		if (ls->launched > 0 && ls->runs)
		{
			appendStringInfoSpaces(es->str, es->indent * 2);
			appendStringInfo(es->str, "Work Mem per Participant: %dkB\n",
							 work_mem);
		}
		else if (ls->launched > 0)
		{
			appendStringInfoSpaces(es->str, es->indent * 2);
			appendStringInfo(es->str, "Collect Time: %.3f ms  Shared Memory: " UINT64_FORMAT "kB\n",
							 ls->collect_ms, (ls->shared_bytes + 1023) / 1024);
		}
		return;
	}

	ExplainPropertyFloat("Leader Rows", NULL, ls->leader.rows, 0, es);
	ExplainPropertyFloat("Leader Load Time", "ms", ls->leader.ms, 3, es);
	if (ls->runs)
		ExplainPropertyInteger("Leader Runs", NULL, ls->leader.runs, es);
	ExplainOpenGroup("Load Workers", "Load Workers", false, es);
	for (i = 0; i < ls->launched; i++)
	{
		ExplainOpenGroup("Load Worker", NULL, true, es);
		ExplainPropertyInteger("Worker Number", NULL, i, es);
		ExplainPropertyFloat("Rows", NULL, ls->workers[i].rows, 0, es);
		ExplainPropertyFloat("Load Time", "ms", ls->workers[i].ms, 3, es);
		if (ls->runs)
			ExplainPropertyInteger("Runs", NULL, ls->workers[i].runs, es);
		ExplainCloseGroup("Load Worker", NULL, true, es);
	}
	ExplainCloseGroup("Load Workers", "Load Workers", false, es);
	if (ls->runs)
	{
		ExplainPropertyInteger("Participant Work Mem", "kB",
							   work_mem, es);
		return;
	}
	ExplainPropertyFloat("Collect Time", "ms", ls->collect_ms, 3, es);
	ExplainPropertyInteger("Shared Memory", "kB",
						   (int64) ((ls->shared_bytes + 1023) / 1024), es);
}

/*
 * The end of a load in runs: the leader's own runs come down to a worker's
 * number too, while the workers do the same (when it has more: the final
 * merge takes them all at once then).  Then the workers' errors come up,
 * and their runs go over.  t0: when the leader's share began.
 */
void
gs_load_finish_runs(GsLoadState *ls, GsSortState *sort, instr_time t0)
{
	int			i;

	ls->leader.runs = gs_sort_runs_written(sort);
	if (ls->launched > 0 &&
		gs_sort_nruns(sort) > gs_sort_share_of_runs(sort, ls->shared->nparts))
	{
		int			n;
		bool		lossy;
		uint32		maxlen;

		(void) gs_sort_finish_runs(sort, ls->shared->nparts,
								   &n, &lossy, &maxlen);
	}
	ls->leader.ms = gs_elapsed_ms(t0);
	ExecParallelFinish(ls->pei);
	gs_temp_unshare(gs_sort_file(sort));
	INSTR_TIME_SET_CURRENT(t0);
	for (i = 0; i < ls->launched; i++)
	{
		GsLoaderSlot *slot = &ls->shared->slots[i].slot;

		if (!slot->done)
			elog(ERROR, "gpusort: a parallel loader ended without its rows");
		ls->workers[i].rows = (double) slot->nrows;
		ls->workers[i].ms = slot->load_ms;
		ls->workers[i].runs = slot->written;
		if (slot->nruns > 0)
			gs_sort_add_runs(sort,
							 dsa_get_address(ls->area, slot->runs),
							 slot->nruns, slot->written,
							 slot->nlossy > 0, slot->max_tuple_len);
	}
	ls->collect_ms = gs_elapsed_ms(t0);
}

/*
 * The end of an in-memory load: the workers' blocks mapped as they come,
 * the rest of the input read if workers stopped at the budget, then the
 * workers' errors come up, and their rows go over.
 */
void
gs_load_finish_memory(GsLoadState *ls, GsSortState *sort)
{
	instr_time	t0;
	int			i;

	/* map the workers' blocks as they come, until they are done */
	if (ls->mapped)
		gs_load_await_workers(ls);
	gs_load_rest(ls, sort);
	/* the workers' errors come up here; then their rows go over */
	ExecParallelFinish(ls->pei);
	if (ls->runs)
		gs_temp_unshare(gs_sort_file(sort));
	INSTR_TIME_SET_CURRENT(t0);
	for (i = 0; i < ls->launched; i++)
	{
		if (!ls->shared->slots[i].slot.done)
			elog(ERROR, "gpusort: a parallel loader ended without its rows");
		ls->shared_bytes += ls->shared->slots[i].slot.bytes;
	}
	gs_load_collect(ls, sort);
	ls->collect_ms = gs_elapsed_ms(t0);
}
