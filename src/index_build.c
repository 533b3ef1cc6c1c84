/*-------------------------------------------------------------------------
 *
 * index_build.c
 *	  The btree ambuild that gpusort puts in place of btbuild: the driver
 *	  of a build.
 *
 * The heap is scanned with table_index_build_scan, exactly as btbuild does
 * (same visibility rules, HOT chains, partial-index predicate, expression
 * evaluation), into the rows of index_rows.c.  When index_build() planned
 * parallel workers, they do the heap scan (index_parallel.c) and the
 * leader only gathers their rows.  The rows are kept within
 * maintenance_work_mem; when it is full they are sorted into a run on disk
 * and the build ends with a merge (index_spill.c, index_merge.c).
 *
 * Whatever this file does not support is built by btbuild, unchanged.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/resource.h>

#include "access/nbtree.h"
#include "access/tableam.h"
#include "catalog/catalog.h"
#include "catalog/pg_am.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "optimizer/plancat.h"
#include "portability/instr_time.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sortsupport.h"

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

/* this thread's CPU time (user and system) so far, in ms; 0 if unknown */
static double
gs_idx_thread_cpu_ms(void)
{
#ifdef RUSAGE_THREAD
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) == 0)
		return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
			(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
#endif
	return 0;
}

/*
 * Build the index.  Returns false, with nothing written, when it had to
 * give up (then btbuild builds it); *reltuples gets the heap tuple count.
 *
 * Its DEBUG2 line says where the time went: the scan (with the runs the
 * leader wrote meanwhile, and each worker's part), gathering the workers'
 * rows or runs, then either the sort and the writing of the pages, or the
 * merge passes and the final merge into the page writer.
 */
static bool
gs_idx_build(Relation heap, Relation index, IndexInfo *indexInfo,
			 double *reltuples, double *indtuples, bool *external,
			 const char **why)
{
	GsIdxBuild *b;
	GsIdxParallel *par = NULL;
	int			nworkers = 0;
	Size		share = (Size) maintenance_work_mem * 1024;
	instr_time	t0;
	double		scan_ms;
	double		collect_ms = 0;
	double		runs_ms;
	double		reduce_ms;
	double		end_ms;
	double		cpu0;
	double		end_cpu_ms;
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
		par = gs_idx_parallel_begin(b, indexInfo,
									indexInfo->ii_ParallelWorkers, &share);
	/*
	 * Runs written while the scan goes on are half as long: twice as many
	 * for the final merge.  Keys that need tie-breaks are merged by the
	 * backend itself, through the comparators, where twice the runs cost
	 * about what the overlap saves: those builds write their runs as
	 * before.
	 */
	b->overlap_ok = (par == NULL && b->exact);
	gs_idx_setup_share(b, indexInfo->ii_Predicate != NIL, share,
					   (double) share / ((Size) maintenance_work_mem * 1024));
	if (par != NULL)
	{
		nworkers = gs_idx_parallel_nworkers(par);
		b->merge_threads = nworkers + 1;
		*reltuples = gs_idx_parallel_scan(par, b, indexInfo);
	}
	else
		*reltuples = gs_idx_heap_scan(heap, index, indexInfo, true,
									  gs_idx_collect, b, NULL);
	gs_idx_prefault_wait(b);
	gs_idx_run_bg_finish(b);
	scan_ms = gs_idx_ms_since(t0);
	{
		const int	progress_index[] = {
			PROGRESS_CREATEIDX_TUPLES_TOTAL,
			PROGRESS_SCAN_BLOCKS_TOTAL,
			PROGRESS_SCAN_BLOCKS_DONE
		};
		const int64 progress_vals[] = {(int64) b->indtuples, 0, 0};

		pgstat_progress_update_multi_param(3, progress_index, progress_vals);
	}
	Assert(!b->overflow);
	reduce_ms = b->passes_ms;

	/* the workers' rows: into memory, or as runs */
	INSTR_TIME_SET_CURRENT(t0);
	if (par != NULL && !gs_idx_parallel_spilled(par, b))
		gs_idx_parallel_gather(par, b);
	else if (par != NULL)
	{
		if (b->n > 0)
			gs_idx_spill_run(b);
		gs_idx_parallel_runs(par, b);
	}
	collect_ms = gs_idx_ms_since(t0);
	runs_ms = b->runs_ms;

	INSTR_TIME_SET_CURRENT(t0);
	cpu0 = gs_idx_thread_cpu_ms();
	if (b->nruns > 0)
	{
		/* runs on disk: merge them into the index, with all the memory */
		b->mem_limit = (Size) maintenance_work_mem * 1024;
		b->npasses = 0;
		gs_idx_spill_build(b);
		*external = true;
	}
	else
		gs_idx_write_sorted(b);
	end_ms = gs_idx_ms_since(t0);
	end_cpu_ms = gs_idx_thread_cpu_ms() - cpu0;

	if (par != NULL)
	{
		wreport = gs_idx_parallel_report(par);
		gs_idx_parallel_end(par);
	}

	if (*external)
	{
		double		passes_ms = b->passes_ms - reduce_ms;
		double		late_runs_ms = b->runs_ms - runs_ms;

		ereport(DEBUG2,
				(errmsg_internal("gpusort index \"%s\": %.0f rows, %d-byte keys%s; "
								 "scan %.1f ms with %d workers; the leader wrote %d runs in %.1f ms (sort %.1f ms)%s%s%s%s; "
								 "%d runs merged: %d merge passes %.1f ms, final merge and write %.1f ms (%d merge threads; the leader waited %.1f ms for them%s%s; its CPU %.1f ms, page writes %.1f ms)",
								 RelationGetRelationName(index), b->indtuples,
								 b->keybytes, b->exact ? "" : " (tie-breaks)",
								 scan_ms, nworkers, b->nruns_written,
								 b->runs_ms, b->sort_ms,
								 reduce_ms > 0 ? psprintf(" and merged its own in %.1f ms", reduce_ms) : "",
								 wreport ? "; " : "", wreport ? wreport : "",
								 nworkers > 0 ? psprintf("; workers' runs collected in %.1f ms", collect_ms) : "",
								 b->nruns_merged, b->npasses, passes_ms,
								 end_ms - passes_ms - late_runs_ms,
								 b->nstreams, b->final_wait_ms,
								 b->final_report ? "; " : "",
								 b->final_report ? b->final_report : "",
								 end_cpu_ms, b->write_ms)));
	}
	else
		ereport(DEBUG2,
				(errmsg_internal("gpusort index \"%s\": %zu rows, %d-byte keys%s; "
								 "scan %.1f ms with %d workers%s%s%s; "
								 "sort %.1f ms (%s engine), gather and write %.1f ms",
								 RelationGetRelationName(index), b->n, b->keybytes,
								 b->exact ? "" : " (tie-breaks)",
								 scan_ms, nworkers,
								 wreport ? "; " : "", wreport ? wreport : "",
								 nworkers > 0 ? psprintf("; workers' rows gathered in %.1f ms", collect_ms) : "",
								 b->sort_ms, b->eng->ops->name,
								 end_ms - b->sort_ms)));

	*indtuples = b->indtuples;
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
						&external, &why);
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
			(errmsg_internal("index \"%s\" built by gpusort%s",
							 RelationGetRelationName(index),
							 external ? " (sorted in runs on disk)" : "")));
	gs_stats_index_build(true);
	result->heap_tuples = reltuples;
	result->index_tuples = indtuples;
	return result;
}
