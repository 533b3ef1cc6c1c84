/*-------------------------------------------------------------------------
 *
 * sort_parallel.c
 *	  Parallel load of a GpuSort: PostgreSQL's parallel workers read the
 *	  input, copy its rows and encode their keys into shared memory, and
 *	  the sorting process takes them from there.
 *
 * The planner gives a GpuSort whose input is a plain Seq Scan (parallel
 * safe, not under a Gather) a small custom node, "GpuSortLoad", between
 * the two, and makes the scan parallel aware (planner.c).  At run time the
 * GpuSort asks that node for its rows (gs_load_into):
 *
 *	 - the node sets up a parallel context over itself with
 *	   ExecInitParallelPlan, as Gather does, and launches the workers;
 *	 - each worker runs the node's plan: the partial scan hands it rows,
 *	   which it copies as MinimalTuples into blocks of a DSA area that the
 *	   leader created for this worker in this load, with each row's
 *	   normalized key beside it.  Nothing goes through a tuple queue;
 *	 - the leader runs its share of the partial scan through the sort
 *	   state's ordinary put (into its own arena), then waits for the
 *	   workers and hands their rows to the sort state in bulk
 *	   (gs_sort_bulk_room, on threads): the tuples stay where the workers
 *	   wrote them, only the keys are copied into the engine's key buffer
 *	   (which the workers cannot write: it belongs to the engine, pinned
 *	   memory of the GPU engine or of the GPU service).
 *
 * The DSA area outlives the parallel context (which is gone at the end of
 * the executor run, before the rows may have all been read); it is freed
 * when the next load starts, when the node ends, or, on error, with the
 * resource owner.  Workers that cannot be had, or a run outside parallel
 * mode (a cursor, a portal fetched in pieces), leave the leader to load
 * alone, serially, exactly as a GpuSort without this node does.
 *
 * That holds the whole input in shared memory until the sort ends, so it
 * is only for an input estimated to fit work_mem and the room /dev/shm
 * has (load_budget.c, which also makes that room the load's budget).  An
 * estimate far too low still works: a worker past the budget stops taking
 * pages and leaves the rest to the other participants, and the sort state
 * spills its batches by work_mem as the leader takes the workers' rows.
 *
 * An input larger than work_mem, or than /dev/shm has room for, is sorted
 * in runs by every participant instead.  Each
 * worker puts its rows into a sort state of its own (private memory, its
 * work_mem, the engine as for any sort), which writes every full
 * batch as a sorted run -- the format of every run (gpusort_spill.h) --
 * into the leader's temporary file.  The leader creates that
 * file before the workers start and shares its name and its two counters
 * (bytes placed, bytes held: temp_file_limit) in the DSM, so that every
 * process places its runs atomically (spill.c, gs_temp_share).  The
 * leader's own share goes through its sort state, cut to the same share.
 * At the end each worker hands the places of its runs over through the
 * DSA area, and the leader adds them to its own and merges them all, as
 * any sort larger than work_mem.  The file remains the leader's: created,
 * removed (with the sort, on error, at exit) and reported by it alone.
 *
 * This file holds the node, its shared state and the workers' side, and
 * decides how each load goes; the leader's side (its share, the workers'
 * blocks and runs handed to the sort, EXPLAIN) is load_finish.c, and the
 * room in /dev/shm, load_budget.c.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "commands/explain.h"
#include "executor/execParallel.h"
#include "executor/executor.h"
#include "jit/jit.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "storage/dsm_impl.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/dsa.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"

#include "gpusort_blocks.h"
#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"
#include "load_int.h"
#include "sortstate_int.h"

/* a worker writing rows into its blocks */
typedef struct GsLoadWriter
{
	GsBlockWriter bw;			/* its blocks, their chain at slot->first */
	GsLoaderSlot *slot;
	size_t		next_size;
	size_t		limit;			/* the area's size limit (see
								 * gs_load_new_block); 0: none set */
	GsLoadShared *shared;
	bool		over;			/* the load's budget is spent */
	char	   *entry;			/* entry of the row being added */
	uint64		nrows;			/* rows added */
	uint64		nlossy;
	uint32		max_tuple_len;
} GsLoadWriter;

static Node *gs_load_create_state(CustomScan *cscan);
static void gs_load_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *gs_load_exec(CustomScanState *node);
static void gs_load_end(CustomScanState *node);
static void gs_load_rescan(CustomScanState *node);
static Size gs_load_estimate_dsm(CustomScanState *node, ParallelContext *pcxt);
static void gs_load_init_dsm(CustomScanState *node, ParallelContext *pcxt,
							 void *coordinate);
static void gs_load_reinit_dsm(CustomScanState *node, ParallelContext *pcxt,
							   void *coordinate);
static void gs_load_init_worker(CustomScanState *node, shm_toc *toc,
								void *coordinate);
static void gs_load_shutdown(CustomScanState *node);

CustomScanMethods gs_load_scan_methods = {
	"GpuSortLoad",
	gs_load_create_state
};

static CustomExecMethods gs_load_exec_methods = {
	.CustomName = "GpuSortLoad",
	.BeginCustomScan = gs_load_begin,
	.ExecCustomScan = gs_load_exec,
	.EndCustomScan = gs_load_end,
	.ReScanCustomScan = gs_load_rescan,
	.EstimateDSMCustomScan = gs_load_estimate_dsm,
	.InitializeDSMCustomScan = gs_load_init_dsm,
	.ReInitializeDSMCustomScan = gs_load_reinit_dsm,
	.InitializeWorkerCustomScan = gs_load_init_worker,
	.ShutdownCustomScan = gs_load_shutdown,
	.ExplainCustomScan = gs_load_explain,
};

/* ---------------------------------------------------------------------
 * Plan
 * ---------------------------------------------------------------------
 */

/*
 * The GpuSortLoad node put between a GpuSort and its child scan, which the
 * caller makes parallel aware.  sortinfo is the GpuSort's custom_private
 * (key columns, operators, collations, nulls first).  Its target list is
 * the identity over a scan tuple that is the child's output, so that
 * EXPLAIN resolves the GpuSort's keys through it to the scan's columns.
 */
CustomScan *
gs_load_make_plan(Plan *child, List *sortinfo, int nworkers, int flags,
				  int plan_node_id)
{
	CustomScan *cscan = makeNode(CustomScan);
	List	   *tlist = NIL;
	List	   *scan_tlist = NIL;
	ListCell   *lc;

	foreach(lc, child->targetlist)
	{
		TargetEntry *ctle = lfirst_node(TargetEntry, lc);
		Oid			type = exprType((Node *) ctle->expr);
		int32		typmod = exprTypmod((Node *) ctle->expr);
		Oid			coll = exprCollation((Node *) ctle->expr);

		scan_tlist = lappend(scan_tlist,
							 makeTargetEntry((Expr *) makeVar(OUTER_VAR, ctle->resno,
															  type, typmod, coll, 0),
											 ctle->resno, ctle->resname,
											 ctle->resjunk));
		tlist = lappend(tlist,
						makeTargetEntry((Expr *) makeVar(INDEX_VAR, ctle->resno,
														 type, typmod, coll, 0),
										ctle->resno, ctle->resname,
										ctle->resjunk));
	}

	cscan->scan.plan.startup_cost = child->startup_cost;
	cscan->scan.plan.total_cost = child->total_cost;
	cscan->scan.plan.plan_rows = child->plan_rows;
	cscan->scan.plan.plan_width = child->plan_width;
	cscan->scan.plan.parallel_aware = true;
	cscan->scan.plan.parallel_safe = true;
	cscan->scan.plan.async_capable = false;
	cscan->scan.plan.plan_node_id = plan_node_id;
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = NIL;
	cscan->scan.plan.lefttree = child;
	cscan->scan.plan.righttree = NULL;
	cscan->scan.plan.extParam = bms_copy(child->extParam);
	cscan->scan.plan.allParam = bms_copy(child->allParam);
	cscan->scan.scanrelid = 0;
	cscan->flags = 0;
	cscan->custom_plans = NIL;
	cscan->custom_exprs = NIL;
	cscan->custom_private = lappend(list_copy(sortinfo),
									list_make2_int(nworkers, flags));
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_relids = NULL;
	cscan->methods = &gs_load_scan_methods;
	return cscan;
}

/* ---------------------------------------------------------------------
 * Executor methods
 * ---------------------------------------------------------------------
 */

static Node *
gs_load_create_state(CustomScan *cscan)
{
	GsLoadState *ls = palloc0(sizeof(GsLoadState));
	List	   *opts = list_nth(cscan->custom_private, 4);

	NodeSetTag(ls, T_CustomScanState);
	ls->css.methods = &gs_load_exec_methods;
	gs_sort_def_read(cscan->custom_private, &ls->def);
	ls->nworkers = linitial_int(opts);
	ls->shards = (lsecond_int(opts) & GS_LOAD_SHARDS) != 0;
	return (Node *) ls;
}

static void
gs_load_begin(CustomScanState *node, EState *estate, int eflags)
{
	GsLoadState *ls = (GsLoadState *) node;

	outerPlanState(node) = ExecInitNode(outerPlan(node->ss.ps.plan), estate,
										eflags);
	ls->workers = palloc0(Max(ls->nworkers, 1) * sizeof(GsLoaderReport));
}

/*
 * Loads whose areas are attached: an abort then has their segments' pages
 * freed on a thread (shm_reap.c), which it starts once PostgreSQL has
 * detached them.
 */
static int	live_loads = 0;
static GsReap *abort_reap = NULL;
static bool reap_callbacks_registered = false;

static void
gs_load_abort_begin(void)
{
	if (live_loads > 0 && abort_reap == NULL)
	{
		/* threads copying rows would map pages again as they are dropped */
		gs_sort_stop_copies();
		abort_reap = gs_reap_begin();
		gs_reap_zap(abort_reap);
	}
}

static void
gs_load_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT)
		gs_load_abort_begin();
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT ||
		event == XACT_EVENT_PREPARE)
		live_loads = 0;
}

static void
gs_load_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	/* the load may belong to an outer level: its count stays */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		gs_load_abort_begin();
}

/* resource owners release DSM segments before locks: they are gone now */
static void
gs_load_release_callback(ResourceReleasePhase phase, bool isCommit,
						 bool isTopLevel, void *arg)
{
	if (phase == RESOURCE_RELEASE_AFTER_LOCKS && abort_reap != NULL)
	{
		gs_reap_end(abort_reap);
		abort_reap = NULL;
	}
}

/* the load is about to have areas */
static void
gs_load_track(void)
{
	if (!reap_callbacks_registered)
	{
		RegisterXactCallback(gs_load_xact_callback, NULL);
		RegisterSubXactCallback(gs_load_subxact_callback, NULL);
		RegisterResourceReleaseCallback(gs_load_release_callback, NULL);
		reap_callbacks_registered = true;
	}
	live_loads++;
}

/* the rows of the last load are no longer wanted */
static void
gs_load_release(GsLoadState *ls)
{
	GsReap	   *reap = NULL;
	int			i;

	/* no thread may still be copying rows out of them */
	if (ls->area || ls->nareas > 0)
	{
		gs_sort_stop_copies();
		/* the last to detach frees the pages: let a thread do it */
		reap = gs_reap_begin();
		gs_reap_zap(reap);
		if (live_loads > 0)
			live_loads--;
	}
	if (ls->area)
	{
		dsa_detach(ls->area);
		ls->area = NULL;
	}
	for (i = 0; i < ls->nareas; i++)
		dsa_detach(ls->areas[i]);
	ls->nareas = 0;
	if (ls->mapped)
	{
		pfree(ls->mapped);
		ls->mapped = NULL;
	}
	gs_load_budget_release(&ls->claim);
	gs_reap_end(reap);
}

static void
gs_load_shutdown(CustomScanState *node)
{
	GsLoadState *ls = (GsLoadState *) node;

	/* the workers are gone; the rows, in their own area, stay */
	if (ls->pei)
	{
		ExecParallelFinish(ls->pei);
		ExecParallelCleanup(ls->pei);
		ls->pei = NULL;
	}
}

static void
gs_load_end(CustomScanState *node)
{
	GsLoadState *ls = (GsLoadState *) node;

	gs_load_shutdown(node);
	gs_load_release(ls);
	ExecEndNode(outerPlanState(node));
}

static void
gs_load_rescan(CustomScanState *node)
{
	GsLoadState *ls = (GsLoadState *) node;
	PlanState  *child = outerPlanState(node);

	/*
	 * A scan set up in a parallel DSM that is gone must not be touched: the
	 * next load sets it up again in a new one (gs_load_into).
	 */
	if (ls->scan_shared && ls->pei == NULL)
		return;
	if (child->chgParam == NULL)
		ExecReScan(child);
}

static Size
gs_load_estimate_dsm(CustomScanState *node, ParallelContext *pcxt)
{
	return add_size(offsetof(GsLoadShared, slots),
					mul_size(Max(pcxt->nworkers, 1), sizeof(GsLoaderSlotPadded)));
}

static void
gs_load_reinit_dsm(CustomScanState *node, ParallelContext *pcxt,
				   void *coordinate)
{
	GsLoadState *ls = (GsLoadState *) node;
	GsLoadShared *sh = (GsLoadShared *) coordinate;
	int			i;

	sh->area = dsa_get_handle(ls->area);
	sh->key_bytes = ls->key_bytes;
	sh->nslots = pcxt->nworkers;
	for (i = 0; i < sh->nslots; i++)
	{
		memset(&sh->slots[i], 0, sizeof(GsLoaderSlotPadded));
		sh->slots[i].slot.area = i < ls->nareas ?
			dsa_get_handle(ls->areas[i]) : sh->area;
		sh->slots[i].slot.first = InvalidDsaPointer;
		sh->slots[i].slot.runs = InvalidDsaPointer;
	}
	sh->runs = ls->runs;
	sh->budget = ls->runs ? 0 : ls->claim.budget;
	pg_atomic_init_u64(&sh->used, 0);
	if (ls->runs)
	{
		/*
		 * Every participant sorts its batches in work_mem of its own, as a
		 * worker's Sort below a Gather Merge does: PostgreSQL lets each
		 * process of a parallel query use what a session may (see
		 * max_parallel_workers_per_gather in its documentation).  Batches
		 * of a tiny share of work_mem would only make runs to merge again.
		 * gpusort.cpu_threads is shared out (at least two threads each, so
		 * that a loader's writes go on while it reads); fewer launched use
		 * less.
		 */
		int			nparts = pcxt->nworkers +
			(parallel_leader_participation ? 1 : 0);

		sh->worker_threads = Min(gpusort_cpu_threads,
								 Max(2, gpusort_cpu_threads / Max(nparts, 1)));
		sh->worker_rows = ls->css.ss.ps.plan->plan_rows / Max(nparts, 1);
		sh->nparts = Max(nparts, 1);
		gs_temp_share(gs_sort_file(ls->sort), &sh->file);
	}
	ls->shared = sh;
}

static void
gs_load_init_dsm(CustomScanState *node, ParallelContext *pcxt,
				 void *coordinate)
{
	gs_load_reinit_dsm(node, pcxt, coordinate);
}

static void
gs_load_init_worker(CustomScanState *node, shm_toc *toc, void *coordinate)
{
	((GsLoadState *) node)->shared = (GsLoadShared *) coordinate;
}

/* a new block for a row of len bytes (MAXALIGNed) */
static void
gs_load_new_block(GsLoadWriter *w, size_t len)
{
	GsBlockWriter *bw = &w->bw;
	size_t		size = Max(w->next_size, GS_BLOCK_HDR + len + bw->esz);
	dsa_pointer dp;
	GsRowBlock *b;
	GsRowBlock *filled = bw->cur;

	/*
	 * An area makes each new segment about as large as all its segments
	 * before (by 440 MB a worker, 128 MB and more), and PostgreSQL
	 * zero-fills a new segment (posix_fallocate) with signals blocked: a
	 * worker canceled meanwhile went on for up to 100 ms before it noticed.
	 * The area's size limit, raised by one block whenever a block does not
	 * fit, keeps every new segment about as large as the block it is made
	 * for; past 16 blocks' worth it grows by a 16th of what the worker has
	 * loaded, so that an area's 1024 segments still hold TBs.  (A failure
	 * with the limit raised is the area's own: out of segments.)
	 */
	dp = gs_blocks_alloc(bw, size);
	if (!DsaPointerIsValid(dp) && w->limit > 0)
	{
		w->limit += Max(size, w->slot->bytes / LOAD_SEGMENT_GROWTH) +
			LOAD_SEGMENT_SLACK;
		dsa_set_size_limit(bw->area, w->limit);
		dp = gs_blocks_alloc(bw, size);
	}
	if (!DsaPointerIsValid(dp))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of shared memory for a parallel sort load"),
				 errdetail("A block of %zu bytes could not be allocated.", size),
				 errhint("Free space in /dev/shm, or turn gpusort.parallel_load off.")));
	/* at the chain's end: the leader follows it meanwhile */
	b = gs_blocks_link(bw, dp);
	w->slot->bytes += size;
	if (w->shared->budget > 0 &&
		pg_atomic_fetch_add_u64(&w->shared->used, size) + size > w->shared->budget)
		w->over = true;
	gs_blocks_fill(bw, b);
	if (w->next_size < LOAD_MAX_BLOCK)
		w->next_size *= 2;

	/*
	 * The block's pages are faulted in (and zeroed by the kernel) by a
	 * thread while the worker fills it, as the backend's own arena blocks
	 * are (sort_load.c).  A worker is done with the block it filled: its
	 * exit is then quick.
	 */
	gs_blocks_populate(bw, CurrentMemoryContext, b,
					   IsParallelWorker() ? filled : NULL);
}

/* room for a tuple of len bytes and its entry (gs_form_row's allocator) */
static char *
gs_load_alloc(void *arg, Size len)
{
	GsLoadWriter *w = (GsLoadWriter *) arg;

	len = MAXALIGN(len);
	if (!gs_blocks_fits(&w->bw, len))
		gs_load_new_block(w, len);
	return gs_blocks_take(&w->bw, len, &w->entry);
}

/*
 * The row just formed at tup (in the entry gs_load_alloc gave) gets its
 * key and counts: made from its bytes where the keys may be (derive) and
 * it came without a slot (derivable: see gs_load_worker) or the
 * derivation takes it, else from its slot ts.
 */
static pg_attribute_always_inline void
gs_load_take(GsLoadWriter *w, GsKeyPlan *kp, bool derive,
			 TupleTableSlot *ts, MinimalTuple tup, AttrNumber maxattno)
{
	const char *body = (const char *) tup + MINIMAL_TUPLE_DATA_OFFSET;
	bool		lossy;

	if (derive && (ts == NULL || gs_key_derivable(kp, body)))
		lossy = gs_key_derive(kp, body, w->entry);
	else
	{
		slot_getsomeattrs(ts, maxattno);
		lossy = gs_encode_key(kp, ts->tts_values, ts->tts_isnull, w->entry);
	}
	if (lossy)
		w->nlossy++;
	w->max_tuple_len = Max(w->max_tuple_len, tup->t_len);
	gs_blocks_entry_done(&w->bw, w->entry, (char *) tup, lossy);
	w->nrows++;
}

/* a worker's share of the load: every row its partial scan gives */
static void
gs_load_worker(GsLoadState *ls)
{
	GsLoadShared *sh = ls->shared;
	GsLoaderSlot *slot;
	PlanState  *child = outerPlanState(ls);
	TupleDesc	desc = ExecGetResultType(child);
	GsKeyPlan  *kp;
	GsLoadWriter *w;
	GsHeapReader *hr;
	GsRowLayout layout;
	instr_time	t0;
	bool		derive;
	bool		pages;
	GsPageRows	pr;

	Assert(ParallelWorkerNumber >= 0 && ParallelWorkerNumber < sh->nslots);
	gs_row_layout_init(&layout, desc);
	INSTR_TIME_SET_CURRENT(t0);
	slot = &sh->slots[ParallelWorkerNumber].slot;
	kp = gs_keyplan_create(ls->def.nkeys, ls->def.attnums, ls->def.sortops,
						   ls->def.collations, ls->def.nulls_first, desc,
						   gpusort_max_key_bytes);
	if (kp == NULL || gs_keyplan_key_bytes(kp) != sh->key_bytes)
		elog(ERROR, "gpusort: a parallel loader's key layout differs from the leader's");

	w = palloc0(sizeof(GsLoadWriter));
	gs_blocks_init(&w->bw, dsa_attach(slot->area), &slot->first,
				   sh->key_bytes);
	if (slot->area != sh->area)
	{
		/* an area of its own: its segments are kept small */
		w->limit = LOAD_SEGMENT_SLACK + DSA_INITIAL_SEGMENT_BYTES;
		dsa_set_size_limit(w->bw.area, w->limit);
	}
	w->slot = slot;
	w->shared = sh;
	w->next_size = LOAD_FIRST_BLOCK;
	hr = gs_heapread_begin(child);

	/*
	 * A key of fixed-width columns is made from the copied row's bytes,
	 * and the rows of a plain table (or of a projection of its columns at
	 * known offsets) are copied from their pages a page at a time, as the
	 * sort state's own load does (gs_sort_put_page); so is a key of one
	 * text column in C order, for the rows whose value allows it.
	 */
	derive = gs_keyplan_derives_fast(kp);
	pages = gs_keyplan_derives_cheaply(kp) &&
		gs_heapread_page_rows(hr, &pr) &&
		gs_page_rows_fit(&pr, &layout, desc->natts);
	for (;;)
	{
		if (pages)
		{
			Page		page;
			const OffsetNumber *offs;
			int			n = gs_heapread_next_page(hr, &page, &offs);
			int			i;

			if (n == 0)
				break;
			for (i = 0; i < n; i++)
			{
				MinimalTuple tup = gs_page_row(&pr, &layout, page, offs[i],
											   gs_load_alloc, w);
				TupleTableSlot *ts = NULL;

				if (unlikely(tup == NULL))
				{
					ts = gs_heapread_page_slot(hr, offs[i]);
					tup = gs_form_row(ts, desc->natts, &layout,
									  gs_load_alloc, w);
				}
				else if (!derive &&
						 !gs_key_derivable(kp, (const char *) tup +
										   MINIMAL_TUPLE_DATA_OFFSET))
					ts = gs_heapread_page_slot(hr, offs[i]);
				gs_load_take(w, kp, true, ts, tup, ls->def.maxattno);
			}
		}
		else
		{
			TupleTableSlot *ts = gs_input_next(hr, child);

			if (TupIsNull(ts))
				break;
			if (!derive)
				slot_getsomeattrs(ts, ls->def.maxattno);
			gs_load_take(w, kp, derive, ts,
						 gs_form_row(ts, desc->natts, &layout,
									 gs_load_alloc, w),
						 ls->def.maxattno);
		}

		/*
		 * Past the budget (the estimate was low): the rows this worker has
		 * been handed still come, the rest go to the other participants.
		 * A scan that can't stop early is read to its end.
		 */
		if (unlikely(w->over) && !slot->stopped)
		{
			slot->stopped = gs_heapread_stop(hr);
			w->over = false;
		}
	}

	if (hr)
		gs_heapread_end(hr);
	gs_blocks_wait(&w->bw);
	slot->nrows = w->nrows;
	slot->nlossy = w->nlossy;
	slot->max_tuple_len = w->max_tuple_len;
	slot->load_ms = gs_elapsed_ms(t0);
	pg_write_barrier();
	slot->done = true;
	/* the area's segments stay pinned until the leader lets them go */
	dsa_detach(w->bw.area);

	/* the node's row count, as its instrumentation shows it */
	if (ls->css.ss.ps.instrument)
		ls->css.ss.ps.instrument->tuplecount += w->nrows;
}

/*
 * A worker's share of a load that writes runs: its rows go into a sort
 * state of its own (private memory, work_mem of its own), which sorts
 * each batch with the engine and writes it as a run into the leader's
 * temporary file; the runs' places go to the leader through the area.
 */
static void
gs_load_worker_runs(GsLoadState *ls)
{
	GsLoadShared *sh = ls->shared;
	GsLoaderSlot *slot;
	PlanState  *child = outerPlanState(ls);
	TupleDesc	desc = ExecGetResultType(child);
	int			saved_threads = gpusort_cpu_threads;
	instr_time	t0;

	Assert(ParallelWorkerNumber >= 0 && ParallelWorkerNumber < sh->nslots);
	INSTR_TIME_SET_CURRENT(t0);
	slot = &sh->slots[ParallelWorkerNumber].slot;

	/* the process ends with the query: no one else sees this setting */
	gpusort_cpu_threads = sh->worker_threads;
	PG_TRY();
	{
		GsSortState *sort;
		GsHeapReader *hr;
		const GsRun *runs;
		uint64		nrows = 0;
		int			nruns;
		int			written;
		bool		any_lossy;
		uint32		max_tuple_len;

		sort = gs_sort_begin(desc, &ls->def, work_mem, false,
							 sh->worker_rows);
		if (gs_sort_key_bytes(sort) != sh->key_bytes)
			elog(ERROR, "gpusort: a parallel loader's key layout differs from the leader's");
		gs_sort_attach_file(sort, &sh->file);
		hr = gs_heapread_begin(child);
		if (gs_sort_takes_pages(sort, hr))
		{
			/* the rows straight from the pages (see gs_sort_put_page) */
			int			n;

			while ((n = gs_sort_put_page(sort, hr)) > 0)
				nrows += n;
		}
		else
		{
			for (;;)
			{
				TupleTableSlot *ts = gs_input_next(hr, child);

				if (TupIsNull(ts))
					break;
				gs_sort_put(sort, ts);
				nrows++;
			}
		}
		if (hr)
			gs_heapread_end(hr);
		written = gs_sort_runs_written(sort);
		runs = gs_sort_finish_runs(sort, sh->nparts, &nruns,
								   &any_lossy, &max_tuple_len);
		if (nruns > 0)
		{
			dsa_area   *area = dsa_attach(sh->area);
			dsa_pointer dp = dsa_allocate(area, nruns * sizeof(GsRun));

			memcpy(dsa_get_address(area, dp), runs, nruns * sizeof(GsRun));
			slot->runs = dp;
			/* the area's segments stay pinned until the leader lets them go */
			dsa_detach(area);
		}
		slot->nruns = nruns;
		slot->written = written;
		slot->nrows = nrows;
		slot->nlossy = any_lossy ? 1 : 0;
		slot->max_tuple_len = max_tuple_len;
		gs_sort_end(sort);
		slot->load_ms = gs_elapsed_ms(t0);
		pg_write_barrier();
		slot->done = true;

		if (ls->css.ss.ps.instrument)
			ls->css.ss.ps.instrument->tuplecount += nrows;
	}
	PG_FINALLY();
	{
		gpusort_cpu_threads = saved_threads;
	}
	PG_END_TRY();
}

static TupleTableSlot *
gs_load_exec(CustomScanState *node)
{
	GsLoadState *ls = (GsLoadState *) node;

	if (IsParallelWorker())
	{
		/* a worker's whole job; nothing goes back through the queue */
		if (ls->shared && ls->shared->runs)
			gs_load_worker_runs(ls);
		else if (ls->shared)
			gs_load_worker(ls);
		return NULL;
	}
	/* not driven by gs_load_into: pass rows through */
	return ExecProcNode(outerPlanState(node));
}

/* ---------------------------------------------------------------------
 * The leader
 * ---------------------------------------------------------------------
 */

bool
gs_load_is(PlanState *ps)
{
	return ps != NULL && IsA(ps, CustomScanState) &&
		((CustomScanState *) ps)->methods == &gs_load_exec_methods;
}

/*
 * The JIT flags for the workers' part of the plan: PostgreSQL's rule (the
 * jit_*_above_cost settings) applied to the cost of what the workers run,
 * the load's scan, instead of the whole statement's, and never more than
 * the statement has.  The statement's cost includes the sort as
 * PostgreSQL's planner costed it, so any large sort passed jit_above_cost
 * and every worker compiled its scan's expressions before it read a row:
 * on the 2-core machine, 0.4 s of a 1.7 s window query over 3M rows, while
 * the leader loaded most of the input alone.
 */
static int
gs_load_jit_flags(Plan *plan, int stmt_flags)
{
	Cost		cost = plan->total_cost;
	int			flags = PGJIT_NONE;

	if (!jit_enabled || jit_above_cost < 0 || cost <= jit_above_cost)
		return PGJIT_NONE;
	flags |= PGJIT_PERFORM;
	if (jit_optimize_above_cost >= 0 && cost > jit_optimize_above_cost)
		flags |= PGJIT_OPT3;
	if (jit_inline_above_cost >= 0 && cost > jit_inline_above_cost)
		flags |= PGJIT_INLINE;
	if (jit_expressions)
		flags |= PGJIT_EXPR;
	if (jit_tuple_deforming)
		flags |= PGJIT_DEFORM;
	return flags & stmt_flags;
}

/*
 * How the load goes: NULL if in parallel, ls->runs saying whether the
 * loaders write sorted runs (ls->runs_reason why) or keep the input in
 * shared memory (with its claim on /dev/shm); else why the leader loads
 * alone.
 */
static const char *
gs_load_choose(GsLoadState *ls, EState *estate)
{
	ls->runs_reason[0] = '\0';
	if (!gpusort_parallel_load)
		return "gpusort.parallel_load is off";
	if (ls->nworkers <= 0)
		return "no workers planned";
	if (!estate->es_use_parallel_mode)
		return "not in parallel mode";
	if (ls->shards && IsTransactionBlock())
	{
		/*
		 * The leader's remote transactions may hold this transaction's
		 * writes and snapshot; a worker's connection would see neither.
		 */
		return "inside a transaction block";
	}

	/*
	 * An input larger than work_mem, or than /dev/shm has room for: each
	 * participant sorts its rows in batches of work_mem and writes them
	 * as runs, which the leader merges.
	 */
	if (ls->est_bytes > (double) work_mem * 1024)
	{
		snprintf(ls->runs_reason, sizeof(ls->runs_reason),
				 "input larger than work_mem");
		ls->runs = true;
	}
	else if (!gs_load_budget_claim(&ls->claim, ls->est_bytes, ls->nworkers,
								   LOAD_MAX_BLOCK + LOAD_SEGMENT_SLACK,
								   ls->runs_reason, sizeof(ls->runs_reason)))
		ls->runs = true;
	return NULL;
}

/*
 * Load the input of the GpuSort into sort, through the GpuSortLoad node ps:
 * in parallel where workers can be had, else by the leader alone.  The
 * rows of the previous load (if any) must not be in use any more.
 */
void
gs_load_into(PlanState *ps, GsSortState *sort)
{
	GsLoadState *ls = (GsLoadState *) ps;
	EState	   *estate = ps->state;
	Plan	   *plan = ps->plan;
	const char *reason = NULL;
	instr_time	t0;
	double		rows = 0;
	int			i;

	gs_load_release(ls);
	ls->loaded = true;
	ls->launched = 0;
	ls->collect_ms = 0;
	ls->shared_bytes = 0;
	ls->runs = false;
	ls->sort = sort;
	memset(ls->workers, 0, Max(ls->nworkers, 1) * sizeof(GsLoaderReport));
	memset(&ls->leader, 0, sizeof(ls->leader));
	ls->est_bytes = plan->plan_rows *
		(MAXALIGN(plan->plan_width + MINIMAL_TUPLE_DATA_OFFSET + 8) +
		 gs_sort_key_bytes(sort) + sizeof(MinimalTuple));

	reason = gs_load_choose(ls, estate);

	if (reason == NULL || ls->scan_shared)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(estate->es_query_cxt);

		gs_load_track();
		ls->area = dsa_create(LWTRANCHE_PARALLEL_QUERY_DSA);
		if (reason == NULL && !ls->runs)
		{
			/*
			 * Each worker makes its blocks in an area of its own.  With one
			 * area for all, a worker that needed a new segment held the
			 * area's lock while the segment's memory was allocated and
			 * zeroed (posix_fallocate), and the others waited on that lock
			 * (LWLock ParallelQueryDSA in pg_stat_activity, seven of eight
			 * workers at a time on the H200).
			 */
			if (ls->areas == NULL)
				ls->areas = palloc0(Max(ls->nworkers, 1) * sizeof(dsa_area *));
			for (i = 0; i < ls->nworkers; i++)
			{
				ls->areas[i] = dsa_create(LWTRANCHE_PARALLEL_QUERY_DSA);
				ls->nareas = i + 1;
			}
		}
		ls->key_bytes = gs_sort_key_bytes(sort);
		if (ls->pei == NULL)
		{
			/* the workers' plan is serialized with these flags */
			int			stmt_jit = estate->es_jit_flags;

			estate->es_jit_flags = gs_load_jit_flags(ps->plan, stmt_jit);
			ls->pei = ExecInitParallelPlan(ps, estate, NULL,
										   Max(ls->nworkers, 1), -1);
			estate->es_jit_flags = stmt_jit;
		}
		else
			ExecParallelReinitialize(ps, ls->pei, NULL);
		MemoryContextSwitchTo(oldcxt);
		ls->scan_shared = true;
		if (reason == NULL)
		{
			LaunchParallelWorkers(ls->pei->pcxt);
			ls->launched = ls->pei->pcxt->nworkers_launched;
			if (ls->launched == 0)
			{
				reason = "no free worker";
				gs_load_budget_release(&ls->claim);
			}
			else
				gs_sort_bulk_threads(sort, ls->launched + 1);
			if (ls->launched > 0 && ls->nareas > 0)
			{
				int			j;

				if (ls->mapped == NULL)
					ls->mapped = MemoryContextAlloc(estate->es_query_cxt,
													Max(ls->nworkers, 1) * sizeof(dsa_pointer));
				for (j = 0; j < Max(ls->nworkers, 1); j++)
					ls->mapped[j] = InvalidDsaPointer;
			}
		}
	}
	ls->serial_reason = reason;

	/*
	 * The leader's share, through the sort state's own put; none when it
	 * is to leave the scan to the workers (parallel_leader_participation).
	 */
	if (ps->instrument)
		InstrStartNode(ps->instrument);
	INSTR_TIME_SET_CURRENT(t0);
	if (ls->launched == 0 || parallel_leader_participation)
		rows = gs_load_leader_read(ls, sort);
	ls->leader.rows = rows;
	ls->leader.ms = gs_elapsed_ms(t0);
	if (ps->instrument)
		InstrStopNode(ps->instrument, rows);

	if (ls->pei && ls->runs)
		gs_load_finish_runs(ls, sort, t0);
	else if (ls->pei)
		gs_load_finish_memory(ls, sort);
}

