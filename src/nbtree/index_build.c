/*-------------------------------------------------------------------------
 *
 * index_build.c
 *	  The btree ambuild that gpusort puts in place of btbuild: the driver
 *	  of a build.
 *
 * The heap is scanned with table_index_build_scan, exactly as btbuild does
 * (same visibility rules, HOT chains, partial-index predicate, expression
 * evaluation), and its rows go to the sort core (index_sort.c), which
 * sorts them within maintenance_work_mem, in runs on disk beyond it.  When
 * index_build() planned parallel workers, they scan their share of the
 * heap too (index_parallel.c), and the leader's sort takes their rows.
 *
 * Whatever this file does not support is built by btbuild, unchanged.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/tableam.h"
#include "catalog/catalog.h"
#include "catalog/pg_am.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "optimizer/plancat.h"
#include "portability/instr_time.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sortsupport.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"
#include "gpusort_stats.h"
#include "index_int.h"

/* who built an index, and why not gpusort: LOG when asked, else DEBUG1 */
#define GS_IDX_REPORT_LEVEL		(gs_log_index_builds ? LOG : DEBUG1)

/* why index could not be built here, or NULL */
static const char *
gs_idx_unsupported(Relation heap, Relation index, IndexInfo *indexInfo)
{
	if (!gs_index_wanted())
		return "gpusort.enabled or gpusort.index_build is off";
	if (index->rd_rel->relam != BTREE_AM_OID)
		return "not a btree";
	if (IsCatalogRelation(heap) || IsSystemRelation(heap))
		return "system catalog";
	if (RelationGetNumberOfBlocks(index) != 0)
		return "index not empty";
	return NULL;
}

/* the progress view's count of the rows to write, once the scan ends */
static void
gs_idx_progress_scanned(double rows)
{
	const int	progress_index[] = {
		PROGRESS_CREATEIDX_TUPLES_TOTAL,
		PROGRESS_SCAN_BLOCKS_TOTAL,
		PROGRESS_SCAN_BLOCKS_DONE
	};
	const int64 progress_vals[] = {(int64) rows, 0, 0};

	pgstat_progress_update_multi_param(3, progress_index, progress_vals);
}

/*
 * Build the index.  Returns false, with nothing written, when it had to
 * give up (then btbuild builds it); *reltuples gets the heap tuple count.
 *
 * The rows go to the sort core (index_sort.c): the leader's own as the
 * scan gives them, within its share of maintenance_work_mem; parallel
 * workers' (index_parallel.c) as the runs they wrote into the leader's
 * file or the rows they kept in shared memory.  The sort then has all the
 * memory for its merge, and hands the rows in btree order to the page
 * writer.  Its DEBUG2 line says where the time went.
 */
static bool
gs_idx_build(Relation heap, Relation index, IndexInfo *indexInfo,
			 double *reltuples, double *indtuples, bool *external,
			 int *launched, const char **why)
{
	GsIdxBuild *b;
	GsIdxParallel *par = NULL;
	int			nworkers = 0;
	int			planned = 0;
	Size		mem = (Size) maintenance_work_mem * 1024;
	Size		share = mem;
	instr_time	t0;
	double		scan_ms;
	double		collect_ms = 0;
	double		launch_ms = 0;
	double		end_ms;
	double		leave_ms = 0;
	int			leader_runs;
	char	   *wreport = NULL;

	/*
	 * Not on the stack: the threads of its tasks read it, and an error
	 * unwinds the stack before the abort stops them
	 */
	b = palloc0(sizeof(GsIdxBuild));
	if (!gs_idx_init(b, heap, index, indexInfo))
	{
		*why = "leading key column cannot be encoded";
		pfree(b);
		return false;
	}

	/* scan */
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE,
								 PROGRESS_BTREE_PHASE_INDEXBUILD_TABLESCAN);
	INSTR_TIME_SET_CURRENT(t0);
	/* a concurrent build's MVCC snapshot is not passed on: scan alone */
	if (indexInfo->ii_ParallelWorkers > 0 && !indexInfo->ii_Concurrent)
	{
		/* memory is shared as in PostgreSQL's build: by participants */
		planned = gs_idx_plan_workers(heap, indexInfo->ii_ParallelWorkers);
		share = mem / (planned + (parallel_leader_participation ? 1 : 0));
	}
	gs_idx_sort_begin(b, share,
					  gs_idx_estimate_rows(b, indexInfo->ii_Predicate != NIL,
										   (double) share / mem));
	if (planned > 0)
		par = gs_idx_parallel_begin(b, indexInfo, planned, &share);
	if (par != NULL)
	{
		nworkers = gs_idx_parallel_nworkers(par);
		*reltuples = gs_idx_parallel_scan(par, b, indexInfo);
	}
	else
	{
		gs_sort_set_memory(b->sort, maintenance_work_mem);
		*reltuples = gs_idx_heap_scan(heap, index, indexInfo, true,
									  gs_idx_collect, b, NULL);
	}
	scan_ms = gs_idx_ms_since(t0);
	leader_runs = gs_sort_runs_spilled(b->sort);
	gs_idx_progress_scanned(b->indtuples);

	/* the merge takes all the memory, the workers' cores too */
	INSTR_TIME_SET_CURRENT(t0);
	gs_sort_set_memory(b->sort, maintenance_work_mem);
	if (par != NULL)
	{
		gs_sort_bulk_threads(b->sort, nworkers + 1);
		gs_idx_parallel_collect(par, b);
		collect_ms = gs_idx_ms_since(t0);
	}

	/* the workers, their scan over, log and write the pages */
	if (par != NULL)
	{
		INSTR_TIME_SET_CURRENT(t0);
		b->pipe = gs_btpipe_launch(index, nworkers, &b->writers);
		launch_ms = gs_idx_ms_since(t0);
	}

	INSTR_TIME_SET_CURRENT(t0);
	*external = gs_idx_sort_write(b);
	end_ms = gs_idx_ms_since(t0);
	if (par != NULL)
	{
		wreport = gs_idx_parallel_report(par);
		INSTR_TIME_SET_CURRENT(t0);
		gs_idx_parallel_end(par);
		leave_ms = gs_idx_ms_since(t0);
	}

	ereport(DEBUG2,
			(errmsg_internal("gpusort index \"%s\": %.0f rows, %d-byte keys%s; "
							 "scan %.1f ms with %d workers (the leader wrote %d runs)%s%s%s; "
							 "sort, merge and write %.1f ms; %s%s",
							 RelationGetRelationName(index), b->indtuples,
							 b->keybytes, b->exact ? "" : " (tie-breaks)",
							 scan_ms, nworkers, leader_runs,
							 wreport ? "; " : "", wreport ? wreport : "",
							 nworkers > 0 ? psprintf("; workers' rows collected in %.1f ms; %d workers launched to write pages in %.1f ms",
													 collect_ms, b->writers, launch_ms) : "",
							 end_ms, gs_idx_sort_summary(b),
							 nworkers > 0 ? psprintf("; parallel mode left in %.1f ms", leave_ms) : "")));

	*indtuples = b->indtuples;
	*launched = nworkers;
	pfree(b);
	return true;
}

IndexBuildResult *
gs_btbuild(Relation heap, Relation index, IndexInfo *indexInfo)
{
	const char *why;
	IndexBuildResult *result;
	MemoryContext cxt;
	MemoryContext oldcxt;
	double		reltuples = 0;
	double		indtuples = 0;
	bool		external = false;
	int			nworkers = 0;
	bool		done;

	why = gs_idx_unsupported(heap, index, indexInfo);
	if (why != NULL)
	{
		ereport(GS_IDX_REPORT_LEVEL,
				(errmsg_internal("index \"%s\" built by PostgreSQL: %s",
								 RelationGetRelationName(index), why)));
		if (gs_index_wanted())
			gs_stats_index_build(false);
		return btbuild(heap, index, indexInfo);
	}

	result = (IndexBuildResult *) palloc(sizeof(IndexBuildResult));

	cxt = AllocSetContextCreate(CurrentMemoryContext, "gpusort index build",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	done = gs_idx_build(heap, index, indexInfo, &reltuples, &indtuples,
						&external, &nworkers, &why);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);

	if (!done)
	{
		ereport(GS_IDX_REPORT_LEVEL,
				(errmsg_internal("index \"%s\" built by PostgreSQL: %s",
								 RelationGetRelationName(index), why)));
		pfree(result);
		if (gs_index_wanted())
			gs_stats_index_build(false);
		return btbuild(heap, index, indexInfo);
	}

	ereport(GS_IDX_REPORT_LEVEL,
			(errmsg_internal("index \"%s\" built by gpusort%s%s",
							 RelationGetRelationName(index),
							 external ? " (sorted in runs on disk)" : "",
							 nworkers > 0 ?
							 psprintf(" with %d parallel worker%s", nworkers,
									  nworkers == 1 ? "" : "s") : "")));
	gs_stats_index_build(true);
	result->heap_tuples = reltuples;
	result->index_tuples = indtuples;
	return result;
}
