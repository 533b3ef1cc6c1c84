/*-------------------------------------------------------------------------
 *
 * sortstate.c
 *	  The sort state behind a GpuSort node: begin / put / perform / get /
 *	  mark / restore / rewind / end, shaped like PostgreSQL's tuplesort.
 *
 * Rows arrive one at a time.  Each is copied once into a block arena (no
 * palloc per row) and its normalized key is encoded once into a key buffer
 * that belongs to the engine (pinned host memory for the GPU engine).
 *
 * Rows in memory form a batch, cut into chunks of at most chunk_rows rows
 * (the GPU memory budget, gpusort.gpu_memory_limit).  A chunk is sorted by
 * the engine as soon as it is full, while the input goes on; rows whose
 * keys are equal are put in their final order with PostgreSQL's own
 * comparators when the key plan or a row's encoding was not exact.
 *
 * When the batch outgrows work_mem, its chunks are merged (a loser tree over
 * the normalized keys) into one sorted run on a logical tape -- PostgreSQL's
 * temporary files, counted against temp_file_limit and removed on error --
 * and the batch starts again.  At the end:
 *	 - no run was spilled: the chunks are merged in memory into an array of
 *	   row pointers in sorted order, and rows are emitted from it;
 *	 - otherwise the last batch is spilled too, runs are merged in passes of
 *	   at most merge_order runs until one merge can finish the sort, and that
 *	   final merge streams its rows to the caller -- or, when random access is
 *	   needed (backward scan, mark/restore, rewind), into a tuplestore that
 *	   is read instead.
 *
 * The code is split by phase: sort_load.c takes rows (the arena, key
 * encoding, chunks handed to the engine), sort_runs.c writes batches out as
 * runs, sort_merge.c holds every merge (the loser tree over chunks, runs or
 * streams, and the in-memory chunk merge on threads), and sort_emit.c puts
 * the result in order and returns it.  This file holds the life cycle:
 * begin, perform, report and end, and is their driver: it calls the phase
 * files and the primitives they share (sort_util.c), and none of them calls
 * it back.
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
#include "gpusort_stats.h"
#include "sortstate_int.h"

/*
 * A sort state in a context of its own, which is made current: the caller
 * sets the sort's definition (key_bytes and exact at least), then sizes
 * the state with gs_sort_size.
 */
static GsSortState *
gs_sort_create(int work_mem_kb, bool random_access)
{
	MemoryContext cxt;
	GsSortState *s;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "GpuSort",
								ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);

	s = palloc0(sizeof(GsSortState));
	s->cxt = cxt;
	s->tupcxt = AllocSetContextCreate(cxt, "GpuSort tuples",
									  ALLOCSET_DEFAULT_SIZES);
	s->mergecxt = AllocSetContextCreate(cxt, "GpuSort merge",
										ALLOCSET_DEFAULT_SIZES);
	s->status = GS_LOADING;
	s->work_mem_kb = work_mem_kb;
	s->mem_limit = (int64) work_mem_kb * 1024;
	s->batch_limit = s->mem_limit;
	s->random_access = random_access;
	return s;
}

/* the engine, the GPU budget and the arrays, from the estimate */
static void
gs_sort_size(GsSortState *s, double est_rows)
{
	MemoryContext cxt = s->cxt;

	if (s->tie_bytes == 0)
		s->tie_bytes = s->key_bytes;

	/* the engine that owns the key buffer; a chunk may still go elsewhere */
	s->keys_engine = gs_engine_choose(est_rows, NULL);

	/*
	 * The GPU memory budget, in rows of a chunk: the device holds keys and
	 * row indexes twice (input and output of a partitioning pass).
	 */
	{
		int64		budget = (int64) gpusort_gpu_memory_limit_kb * 1024;

		if (budget == 0 && s->keys_engine->is_gpu)
			budget = (int64) (s->keys_engine->info.free_mem / 2);
		if (budget > 0)
		{
			int64		rows = budget / (2 * (s->key_bytes + sizeof(uint32)));

			s->chunk_rows = (size_t) Max(rows, MIN_CHUNK_ROWS);
		}
	}

	/*
	 * Size the arrays from the estimate, within work_mem: a row costs its
	 * pointer and key here plus its tuple in the arena, so the arrays get
	 * at most half of work_mem up front.
	 */
	{
		double		per_row = sizeof(MinimalTuple) + s->key_bytes;
		double		fit = (double) s->mem_limit / 2 / per_row;
		double		want = Min(est_rows * 1.1 + 16, fit);

		want = Min(want, (double) GS_MAX_ROWS);
		s->cap = (size_t) Max(want, (double) MIN_BATCH_ROWS);
	}
	s->tuples = MemoryContextAllocHuge(cxt, s->cap * sizeof(MinimalTuple));
	gs_advise_huge(s->tuples, s->cap * sizeof(MinimalTuple));
	s->keys = gs_keybuf_alloc(s->keys_engine, s->cap * s->key_bytes, cxt);
	s->lossy = MemoryContextAllocHuge(cxt, (s->cap / 64 + 1) * sizeof(uint64));
	memset(s->lossy, 0, (s->cap / 64 + 1) * sizeof(uint64));
	s->next_blk_size = Min(ARENA_FIRST_BLOCK,
						   TYPEALIGN(1024, s->mem_limit / 8));

	/* merge order: as many runs as work_mem has read buffers for */
	s->merge_order = (int) Max(MERGE_MIN_ORDER,
							   Min(s->mem_limit / MERGE_MIN_BUFFER, 1024));
}

/*
 * The sort definition the planner keeps in a GpuSort's (and its loader's)
 * custom_private: the first four lists, of column numbers, sort operators,
 * collations and NULLS FIRST flags (planner.c).
 */
void
gs_sort_def_read(List *custom_private, GsSortDef *def)
{
	List	   *colidx = linitial(custom_private);
	List	   *sortops = lsecond(custom_private);
	List	   *colls = lthird(custom_private);
	List	   *nullsfirst = lfourth(custom_private);
	int			n = list_length(colidx);
	int			i;

	def->nkeys = n;
	def->attnums = palloc(n * sizeof(AttrNumber));
	def->sortops = palloc(n * sizeof(Oid));
	def->collations = palloc(n * sizeof(Oid));
	def->nulls_first = palloc(n * sizeof(bool));
	def->maxattno = 0;
	for (i = 0; i < n; i++)
	{
		def->attnums[i] = (AttrNumber) list_nth_int(colidx, i);
		def->sortops[i] = list_nth_oid(sortops, i);
		def->collations[i] = list_nth_oid(colls, i);
		def->nulls_first[i] = list_nth_int(nullsfirst, i) != 0;
		def->maxattno = Max(def->maxattno, def->attnums[i]);
	}
}

/*
 * The key plan's derivation of keys that runs leave out (keys_derive.c),
 * as the run format's callbacks (gpusort_spill.h)
 */
static bool
gs_derive_key_cb(void *arg, const char *body, size_t body_off, char *key)
{
	if (body_off == MINIMAL_TUPLE_DATA_OFFSET)
		return gs_key_derive((GsKeyPlan *) arg, body, key);
	/* a tuple without NULLs whose header the run left out: its data */
	return gs_key_derive_data((GsKeyPlan *) arg, body, key);
}

/* ties of lossy keys on a merge's threads (gs_keyplan_ties_by_bytes) */
static int
gs_key_tie_cb(void *arg, const char *a, size_t a_off, const char *b,
			  size_t b_off)
{
	return gs_key_tie((const GsKeyPlan *) arg, a, a_off, b, b_off);
}

static bool
gs_key_derivable_cb(void *arg, const char *body)
{
	return gs_key_derivable((const GsKeyPlan *) arg, body);
}

GsSortState *
gs_sort_begin(TupleDesc tupdesc, const GsSortDef *def, int work_mem_kb,
			  bool random_access, double est_rows)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	GsSortState *s;
	int			nkeys = def->nkeys;
	int			i;

	s = gs_sort_create(work_mem_kb, random_access);
	s->tupdesc = tupdesc;
	s->def.nkeys = nkeys;
	s->def.attnums = palloc(nkeys * sizeof(AttrNumber));
	s->def.sortops = palloc(nkeys * sizeof(Oid));
	s->def.collations = palloc(nkeys * sizeof(Oid));
	s->def.nulls_first = palloc(nkeys * sizeof(bool));
	memcpy(s->def.attnums, def->attnums, nkeys * sizeof(AttrNumber));
	memcpy(s->def.sortops, def->sortops, nkeys * sizeof(Oid));
	memcpy(s->def.collations, def->collations, nkeys * sizeof(Oid));
	memcpy(s->def.nulls_first, def->nulls_first, nkeys * sizeof(bool));
	s->def.maxattno = def->maxattno;

	s->kp = gs_keyplan_create(nkeys, def->attnums, def->sortops,
							  def->collations, def->nulls_first, tupdesc,
							  gpusort_max_key_bytes);
	if (s->kp == NULL)
		elog(ERROR, "gpusort: leading sort key is not encodable");
	s->key_bytes = gs_keyplan_key_bytes(s->kp);
	s->exact = gs_keyplan_exact(s->kp);
	s->load_derive = gs_keyplan_derives_fast(s->kp);
	gs_row_layout_init(&s->layout, tupdesc);
	/* runs leave out the keys they can derive again (keys_derive.c) */
	s->tape.tf.key_bytes = s->key_bytes;
	if (gs_keyplan_derives(s->kp))
	{
		s->tape.tf.derive = gs_derive_key_cb;
		s->tape.tf.derive_arg = s->kp;
		s->tape.omit = gs_key_derivable_cb;
		s->tape.arg = s->kp;
		s->tape.omit_natts = gs_keyplan_derivable_natts(s->kp);
		/* the header of a tuple without NULLs, left out with the key */
		s->tape.tf.std_natts = tupdesc->natts;
		s->tape.tf.std_hoff = TAPE_STD_HOFF;
		for (i = 0; i < tupdesc->natts; i++)
			if (TupleDescAttr(tupdesc, i)->attlen < 0)
				s->tape.tf.std_infomask = HEAP_HASVARWIDTH;
		gs_tape_std_init(&s->tape.tf);
	}
	/* one text column in C order: its ties need no comparator */
	if (nkeys == 1 && s->exact && gs_keyplan_ties_by_bytes(s->kp))
	{
		s->row_tie = gs_key_tie_cb;
		s->row_tie_arg = s->kp;
	}

	/* PostgreSQL's comparators, for runs of equal keys */
	s->ssup = palloc0(nkeys * sizeof(SortSupportData));
	for (i = 0; i < nkeys; i++)
	{
		SortSupport ssup = &s->ssup[i];

		ssup->ssup_cxt = s->cxt;
		ssup->ssup_collation = def->collations[i];
		ssup->ssup_nulls_first = def->nulls_first[i];
		ssup->ssup_attno = def->attnums[i];
		ssup->abbreviate = false;
		PrepareSortSupportFromOrderingOp(def->sortops[i], ssup);
	}
	gs_sort_size(s, est_rows);
	MemoryContextSwitchTo(oldcxt);
	return s;
}

/*
 * A sort of a variant's rows (see gpusort_exec.h) within mem_kb of memory:
 * forward only, read with gs_sort_next_row.
 */
GsSortState *
gs_sort_begin_rows(const GsRowsDef *def, int mem_kb, double est_rows)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	GsSortState *s;

	Assert(def->tie_bytes > 0 && def->tie_bytes <= def->key_bytes);
	Assert(def->tie_bytes % 8 == 0 || def->tie_bytes == def->key_bytes);
	s = gs_sort_create(mem_kb, false);
	s->key_bytes = def->key_bytes;
	s->tie_bytes = def->tie_bytes;
	s->exact = def->exact;
	s->row_cmp = def->compare;
	s->row_cmp_arg = def->arg;
	if (def->tie_bytes >= 8)
	{
		s->row_tie = def->thread_compare;
		s->row_tie_arg = def->arg;
	}
	s->tape.tf.key_bytes = s->key_bytes;
	s->tape.tf.rows = true;
	s->tape.tf.flags_off = GS_ROW_FLAGS_OFF;
	s->tape.tf.data_off = GS_ROW_DATA_OFF;
	s->tape.arg = def->arg;
	s->tape.keep = def->keep;
	if (def->key_derivable != NULL && def->key_derive != NULL)
	{
		s->tape.tf.derive = def->key_derive;
		s->tape.tf.derive_arg = def->arg;
		s->tape.omit = def->key_derivable;
		s->tape.omit_all = def->key_always_derivable;
	}
	s->tape.keep_len_off = def->keep_len_off;
	s->tape.keep_len_mask = def->keep_len_mask;
	gs_sort_size(s, est_rows);
	MemoryContextSwitchTo(oldcxt);
	return s;
}

/*
 * The sort may take mem_kb from now on: a parallel build's leader loads
 * its share within its part of the memory, then merges with all of it.
 */
void
gs_sort_set_memory(GsSortState *s, int mem_kb)
{
	s->work_mem_kb = mem_kb;
	s->mem_limit = (int64) mem_kb * 1024;
	/* writing runs in the background halves a batch (see gs_spill_batch) */
	s->batch_limit = s->overlap ? s->mem_limit / 2 : s->mem_limit;
	s->check_at = 0;
	s->merge_order = (int) Max(MERGE_MIN_ORDER,
							   Min(s->mem_limit / MERGE_MIN_BUFFER, 1024));
}

/* the rows put into the sort so far */
double
gs_sort_rows(GsSortState *s)
{
	return s->total_rows;
}

void
gs_sort_perform(GsSortState *s)
{
	instr_time	t0;
	bool		mapped;

	Assert(s->status == GS_LOADING);
	gs_prefault_wait(s);
	if (s->load_started)
		s->rep.load_ms = gs_elapsed_ms(s->load_start);

	if (s->nruns == 0)
	{
		/* everything is in memory */
		gs_close_chunk(s, s->nchunks > 0);
		gs_finish_chunks(s);
		gs_merge_chunks_to_array(s);
		s->status = GS_SORTED;
		s->current = 0;
		s->eof_reached = false;
		s->markpos = 0;
		s->markeof = false;
		INSTR_TIME_SET_CURRENT(s->stream_start);
		return;
	}

	/* spill the last batch too, and give the batches' memory back */
	gs_spill_batch(s);
	gs_spill_wait(s);
	gs_free_batch(s);
	if (s->overlap)
	{
		gs_swap_batches(s);
		gs_free_batch(s);
	}

	INSTR_TIME_SET_CURRENT(t0);

	/*
	 * The mapping lets the final merge take more runs than read buffers of
	 * the usual size allow; where those suffice, reads (pread) are faster:
	 * a mapped page costs a fault to read, and giving its space back takes
	 * it out of every thread's page tables (a serial 20M-row index build's
	 * merge of 34 runs took twice as long mapped).
	 */
	mapped = s->nruns > s->merge_order && gs_temp_map(s->file);
	gs_merge_passes_to(s, gs_final_merge_order(s, mapped), s->merge_order);
	s->merge = gs_merge_streams(s, mapped);
	if (s->merge == NULL)
	{
		/* merged here, through read buffers of merge_order's size */
		gs_merge_passes(s);
		s->merge = gs_merge_runs(s, s->runs, s->nruns);
	}
	s->merge_passes++;
	s->status = GS_MERGING;

	if (s->random_access)
	{
		/* materialise the final merge where it can be read any way */
		MemoryContext oldcxt = MemoryContextSwitchTo(s->cxt);
		GsSource   *src;
		size_t		i = 0;

		s->store = tuplestore_begin_heap(true, false, s->work_mem_kb);
		tuplestore_set_eflags(s->store, EXEC_FLAG_REWIND | EXEC_FLAG_BACKWARD);
		(void) tuplestore_alloc_read_pointer(s->store, EXEC_FLAG_REWIND |
											 EXEC_FLAG_BACKWARD);
		s->store_slot = MakeSingleTupleTableSlot(s->tupdesc, &TTSOpsMinimalTuple);
		while ((src = gs_merge_next(s, s->merge)) != NULL)
		{
			ExecStoreMinimalTuple(src->tup, s->store_slot, false);
			tuplestore_puttupleslot(s->store, s->store_slot);
			if ((++i % INTERRUPT_INTERVAL) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		ExecClearTuple(s->store_slot);
		MemoryContextSwitchTo(oldcxt);
		gs_merge_waits(s, s->merge);
		s->merge = NULL;
		s->cascade = NULL;
		MemoryContextReset(s->mergecxt);
		s->status = GS_STORED;
	}
	s->rep.merge_ms += gs_elapsed_ms(t0);
	INSTR_TIME_SET_CURRENT(s->stream_start);
}

void
gs_sort_report(GsSortState *s, GsSortReport *r)
{
	StringInfoData buf;

	*r = s->rep;
	r->sort_ms = Max(r->sort_ms, r->wait_ms);
	r->fallback = s->fallback;
	r->key_bytes = s->key_bytes;
	r->exact = s->exact && !s->any_lossy;
	r->rows = s->total_rows;
	r->chunks = s->total_chunks;
	r->runs = s->total_runs;
	r->merge_passes = s->merge_passes;
	r->mem_bytes = s->mem_peak;
	r->streams = s->nstreams;
	if (s->file)
		r->disk_kb = (gs_temp_peak(s->file) + 1023) / 1024;
	if (s->sort_engine)
	{
		r->engine = s->sort_engine->ops->name;
		r->device = s->sort_engine->info.name;
		/* "cpu (no GPU)": the server has none, rather than "cpu (CPU)" */
		if (!s->sort_engine->is_gpu && gs_gpu_absent())
			r->device = "no GPU";
	}
	initStringInfo(&buf);
	if (s->kp != NULL)
		gs_keyplan_describe(s->kp, &buf);
	r->keydesc = buf.data;
}

/* count the sort just performed in gpusort_stats (stats.c) */
void
gs_sort_count(GsSortState *s)
{
	gs_stats_sort(s->sort_engine != NULL && s->sort_engine->is_gpu,
				  s->total_rows, s->key_bytes, s->fallback);
}

void
gs_sort_end(GsSortState *s)
{
	if (s->store)
		tuplestore_end(s->store);
	if (s->store_slot)
		ExecDropSingleTupleTableSlot(s->store_slot);
	/*
	 * The key buffer, the merge's threads and the temporary file go with
	 * the context (see gs_keybuf_alloc and spill.c).
	 */
	MemoryContextDelete(s->cxt);
}
