/*-------------------------------------------------------------------------
 *
 * index_cluster.c
 *	  CLUSTER's sort of the table, through gpusort.
 *
 * CLUSTER ... USING idx copies the table in index order: copy_table_data()
 * asks plan_cluster_use_sort() whether to sort or to follow the index,
 * and then calls the table AM's relation_copy_for_cluster through the old
 * heap's relcache entry, which it holds open.  plan_cluster_use_sort()
 * plans a dummy relation for the heap, so get_relation_info_hook runs just
 * before (index.c); inside CLUSTER it points the open entry's rd_tableam at
 * a copy of the heap AM's routine whose relation_copy_for_cluster is
 * gs_cluster_copy below.  gs_cluster_copy puts the heap AM back first
 * thing.  If an invalidation rebuilds the entry in between, the patch is
 * gone and PostgreSQL copies the table.
 *
 * Which path: PostgreSQL's planner weighs its own sort against following
 * the index.  Following the index reads the heap in index order, one
 * random page read per tuple unless the heap is already nearly in that
 * order; gpusort reads it once, sequentially, and sorts at memory speed.
 * So gpusort sorts whenever PostgreSQL chose its sort, and also when it
 * chose the index scan, unless the statistics say the heap is already in
 * index order (|correlation| of the index's leading column at least
 * GS_CLUSTER_CORRELATED: the index scan then reads the heap sequentially
 * too and skips the sort), or the index is older than PostgreSQL 12's
 * btree version 4 (its equal keys are not in heap TID order, so its order
 * cannot be reproduced).  On the GPU machine, 50M random int8 keys: the
 * index scan copy took 97.6 s.  On the 2-core development machine (CPU
 * engine), 2M random keys: 4.2 s against gpusort's 1.5 s; see
 * GS_CLUSTER_CORRELATED for nearly ordered heaps.
 *
 * Replacing the index scan, the new heap must be the one it writes.  A
 * btree (version 4) returns equal keys in heap TID order, and the heap
 * tuples of a HOT chain at the TID of the chain's root, the place of the
 * chain's index entry.  So each kept tuple is sorted by the index key and
 * then by its root's TID (heap_get_root_tuples, per page).  That order is
 * the index scan's as long as each chain keeps at most one row version
 * (its live one): a chain keeping recently dead versions too (an old
 * snapshot was open) may be a "broken" chain whose versions have
 * different keys, which the index scan returns all at its one entry.  The
 * scan notices such chains (a kept tuple that was HOT-updated) and a
 * heap-only tuple without a root; then, before anything is written, the
 * rows are dropped and PostgreSQL copies the table by its index scan.
 *
 * The copy does what the heap AM's does, in the same order, so that the
 * new heap is the one PostgreSQL writes:
 *
 *	- one sequential scan with SnapshotAny; each tuple's fate is decided by
 *	  HeapTupleSatisfiesVacuum against OldestXmin, under the buffer's share
 *	  lock: live, recently dead and in-progress ones are kept, with the same
 *	  counters and warnings; dead ones are counted (PostgreSQL's sort path
 *	  hands them to rewrite_heap_dead_tuple, which can do nothing before
 *	  the first tuple is written, so the rewrite starts after the scan);
 *	- the kept tuples are sorted by the index's key, as an index build sorts
 *	  them: an index tuple is formed (FormIndexDatum: expressions too) with
 *	  the root's heap TID, and the build's sort (index_sort.c, on the sort
 *	  core: in memory or in runs on disk) orders them; the TID breaks
 *	  ties, so the order is the index's;
 *	  each row carries the tuple's own TID and the heap tuple itself after
 *	  its index tuple (in memory and in the runs);
 *	- the scan runs in parallel workers where PostgreSQL would plan them
 *	  for building the index (plan_create_index_workers): each participant
 *	  scans a share of the blocks as above and keeps its rows as a
 *	  parallel index build's participant does (index_parallel.c); the
 *	  counts are summed, and one that finds the index scan's order cannot
 *	  be had makes all stop;
 *	- in that order each heap tuple is reformed with dropped columns set
 *	  to NULL and given to rewrite_heap_tuple, which writes the new heap
 *	  and its WAL as for PostgreSQL's own copy; a tuple that reforming
 *	  would give back byte for byte (gs_cluster_tuple_as_formed) is
 *	  copied instead;
 *	- pg_stat_progress_cluster goes through the phases of PostgreSQL's sort
 *	  path with the same counts (seq scan, sort, write), also where
 *	  PostgreSQL would have followed the index.
 *
 * What can differ from PostgreSQL's index scan copy: the "removable" count
 * (CLUSTER VERBOSE) is the sequential scan's, every dead tuple in the
 * heap, as PostgreSQL's sort path counts; the index scan counts only the
 * dead tuples its index entries still reach; and a recently dead tuple
 * whose successor is already dead (possible only when transactions commit
 * out of xid order) is written, as PostgreSQL's sort path writes it, where
 * its index scan may drop it.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/rewriteheap.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_statistic.h"
#include "commands/progress.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "optimizer/plancat.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include <math.h>

#include "gpusort_exec.h"
#include "gpusort_spill.h"
#include "gpusort_stats.h"
#include "index_int.h"

/*
 * PostgreSQL's index scan copy is kept where the heap is this close to the
 * index's order already (|correlation| of the leading column, from
 * ANALYZE): it then reads the heap sequentially and needs no sort.
 * Measured (2M rows, CPU engine, 2 cores, whole CLUSTER): heap in key order
 * (1.0) index scan 0.84-0.95 s, gpusort 1.04-1.08 s; each row at most 5% of
 * the table away from its place (0.9988) 1.49 s against 1.37 s; 30% away
 * (0.961) 2.15 s against 1.37 s; random order 4.2 s against 1.5 s.  Only a
 * heap in order all but exactly keeps the index scan.
 */
#define GS_CLUSTER_CORRELATED	0.999

/* who sorted a table, and why not gpusort: LOG when asked, else DEBUG1 */
#define GS_CLUSTER_REPORT_LEVEL	(gs_log_index_builds ? LOG : DEBUG1)

/*
 * A WAL-logged new heap is synced at the end; the kernel is asked to start
 * writing it back every this many bytes of tuples written
 */
#define GS_CLUSTER_WRITEBACK_BYTES	(512 * 1024)

/* the heap AM's routine, and our copy of it */
static const TableAmRoutine *gs_heap_am = NULL;
static TableAmRoutine gs_cluster_am;

/* the write phase: heap tuples in order, reformed, rewritten */
typedef struct GsClusterWrite
{
	Relation	old_heap;
	Relation	new_heap;
	RewriteState rwstate;
	Datum	   *values;
	bool	   *isnull;
	MemoryContext tupcxt;		/* per-tuple memory */
	MemoryContext cxt;			/* the write's memory */
	bool		anydropped;		/* the new heap has dropped columns */
	char	   *copy;			/* a tuple copied as is (MAXALIGN'd) */
	uint32		copycap;
	double		written;
	double		copied;			/* of them, copied as is */
	bool		use_wal;		/* the new heap is WAL-logged (and synced) */
	BlockNumber nflushing;		/* its blocks whose writeback has started */
	Size		unflushed;		/* bytes of tuples written since then */
} GsClusterWrite;

static void gs_cluster_copy(Relation OldHeap, Relation NewHeap,
							Relation OldIndex, bool use_sort,
							TransactionId OldestXmin,
							TransactionId *xid_cutoff,
							MultiXactId *multi_cutoff,
							double *num_tuples, double *tups_vacuumed,
							double *tups_recently_dead);

/*
 * Let gs_cluster_copy copy rel when CLUSTER does next (called while rel is
 * open for it).
 */
void
gs_cluster_patch(Relation rel)
{
	if (rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		rel->rd_tableam != GetHeapamTableAmRoutine())
		return;
	if (gs_heap_am == NULL)
	{
		gs_heap_am = GetHeapamTableAmRoutine();
		gs_cluster_am = *gs_heap_am;
		gs_cluster_am.relation_copy_for_cluster = gs_cluster_copy;
	}
	rel->rd_tableam = &gs_cluster_am;
}

/*
 * Would heap_form_tuple(heap_deform_tuple(td)) give td's bytes back, for
 * this descriptor without dropped columns?  It does when td was formed by
 * it for the same columns, which is every tuple but those of rows written
 * before a column was added (fewer attributes) or before a column's storage
 * was changed from PLAIN (a 4-byte varlena header reform would shorten).
 * One walk over the attributes, as heap_deform_tuple finds them, checks
 * the header, the flags and the length reform would give.
 */
static bool
gs_cluster_tuple_as_formed(TupleDesc desc, HeapTupleHeader td, uint32 len)
{
	int			natts = desc->natts;
	bool		hasnull = (td->t_infomask & HEAP_HASNULL) != 0;
	bits8	   *bp = td->t_bits;
	char	   *tp = (char *) td + td->t_hoff;
	uint16		flags = 0;
	uint32		off = 0;
	Size		hoff;
	int			i;

	if (HeapTupleHeaderGetNatts(td) != natts)
		return false;
	for (i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (hasnull && att_isnull(i, bp))
		{
			flags |= HEAP_HASNULL;
			continue;
		}
		if (att->attlen == -1)
		{
			char	   *val;

			off = att_align_pointer(off, att->attalign, -1, tp + off);
			val = tp + off;
			flags |= HEAP_HASVARWIDTH;
			if (VARATT_IS_EXTERNAL(val))
				flags |= HEAP_HASEXTERNAL;
			else if (VARATT_IS_4B_U(val) &&
					 att->attstorage != TYPSTORAGE_PLAIN &&
					 VARATT_CAN_MAKE_SHORT(val))
				return false;
		}
		else if (att->attlen == -2)
		{
			flags |= HEAP_HASVARWIDTH;
			off = att_align_nominal(off, att->attalign);
		}
		else
			off = att_align_nominal(off, att->attalign);
		off = att_addlength_pointer(off, att->attlen, tp + off);
	}
	hoff = SizeofHeapTupleHeader;
	if (flags & HEAP_HASNULL)
		hoff += BITMAPLEN(natts);
	hoff = MAXALIGN(hoff);
	return td->t_hoff == hoff &&
		(td->t_infomask & (HEAP_HASNULL | HEAP_HASVARWIDTH |
						   HEAP_HASEXTERNAL | HEAP_HASOID_OLD)) == flags &&
		hoff + off == len;
}

/* the next tuple in index order: write it to the new heap */
static void
gs_cluster_sink(void *arg, IndexTuple itup)
{
	GsClusterWrite *cw = (GsClusterWrite *) arg;
	TupleDesc	newdesc = RelationGetDescr(cw->new_heap);
	MemoryContext oldcxt;
	HeapTupleData tuple;
	HeapTupleData copy;
	HeapTuple	reformed;
	char	   *payload;
	uint32		len;
	int			i;

	CHECK_FOR_INTERRUPTS();
	if (cw->written == 0)
		pgstat_progress_update_param(PROGRESS_CLUSTER_PHASE,
									 PROGRESS_CLUSTER_PHASE_WRITE_NEW_HEAP);

	/* the tuple's TID and the tuple the row carries (aligned) */
	payload = gs_idx_payload(itup, &len);
	memcpy(&tuple.t_self, payload, sizeof(ItemPointerData));
	tuple.t_data = (HeapTupleHeader) (payload + GS_CLUSTER_TID_BYTES);
	tuple.t_len = len - GS_CLUSTER_TID_BYTES;
	tuple.t_tableOid = RelationGetRelid(cw->old_heap);

	/*
	 * The new heap has the old one's columns; dropped ones become NULL.
	 * PostgreSQL reforms every tuple; where that gives the same bytes, a
	 * copy does (rewrite_heap_tuple changes the new tuple's header, and
	 * reads the old one's after).
	 */
	if (!cw->anydropped &&
		gs_cluster_tuple_as_formed(newdesc, tuple.t_data, tuple.t_len))
	{
		if (tuple.t_len > cw->copycap)
		{
			if (cw->copy != NULL)
				pfree(cw->copy);
			cw->copycap = Max(tuple.t_len, 2 * cw->copycap);
			cw->copy = MemoryContextAlloc(cw->cxt, cw->copycap);
		}
		memcpy(cw->copy, tuple.t_data, tuple.t_len);
		copy.t_len = tuple.t_len;
		ItemPointerSetInvalid(&copy.t_self);
		copy.t_tableOid = InvalidOid;
		copy.t_data = (HeapTupleHeader) cw->copy;
		rewrite_heap_tuple(cw->rwstate, &tuple, &copy);
		cw->copied += 1;
	}
	else
	{
		oldcxt = MemoryContextSwitchTo(cw->tupcxt);
		heap_deform_tuple(&tuple, RelationGetDescr(cw->old_heap), cw->values,
						  cw->isnull);
		for (i = 0; i < newdesc->natts; i++)
			if (TupleDescAttr(newdesc, i)->attisdropped)
				cw->isnull[i] = true;
		reformed = heap_form_tuple(newdesc, cw->values, cw->isnull);
		rewrite_heap_tuple(cw->rwstate, &tuple, reformed);
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(cw->tupcxt);
	}

	cw->written += 1;
	cw->unflushed += tuple.t_len;
	if (cw->use_wal && cw->unflushed >= GS_CLUSTER_WRITEBACK_BYTES)
	{
		SMgrRelation smgr = RelationGetSmgr(cw->new_heap);
		BlockNumber nblocks = smgrnblocks(smgr, MAIN_FORKNUM);

		/*
		 * the new heap is synced at the end: let the kernel start writing
		 * back what rewriteheap has written since, as the build does for
		 * its index's pages
		 */
		if (nblocks > cw->nflushing)
		{
			smgrwriteback(smgr, MAIN_FORKNUM, cw->nflushing,
						  nblocks - cw->nflushing);
			cw->nflushing = nblocks;
		}
		cw->unflushed = 0;
	}
	pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_TUPLES_WRITTEN,
								 (int64) cw->written);
}

/* why gpusort does not sort this CLUSTER, or NULL */
static const char *
gs_cluster_unsupported(Relation OldHeap, Relation OldIndex)
{
	if (OldIndex == NULL)
		return "no index to sort by";
	if (!gs_index_wanted())
		return "gpusort.enabled or gpusort.index_build is off";
	if (OldIndex->rd_rel->relam != BTREE_AM_OID)
		return "not a btree";
	if (IsSystemRelation(OldHeap))
		return "system catalog";
	return NULL;
}

/*
 * The correlation ANALYZE found between the heap's order and the index's
 * leading column (a table column, or the index's own expression column).
 */
static bool
gs_cluster_correlation(Relation OldHeap, Relation OldIndex, float4 *corr)
{
	AttrNumber	attnum = OldIndex->rd_index->indkey.values[0];
	Oid			relid = RelationGetRelid(OldHeap);
	HeapTuple	stats;
	AttStatsSlot sslot;
	bool		found = false;

	if (attnum == 0)
	{
		/* an expression: ANALYZE keeps its statistics under the index */
		relid = RelationGetRelid(OldIndex);
		attnum = 1;
	}
	stats = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(relid),
							Int16GetDatum(attnum), BoolGetDatum(false));
	if (!HeapTupleIsValid(stats))
		return false;
	if (get_attstatsslot(&sslot, stats, STATISTIC_KIND_CORRELATION,
						 InvalidOid, ATTSTATSSLOT_NUMBERS))
	{
		if (sslot.nnumbers == 1)
		{
			*corr = sslot.numbers[0];
			found = true;
		}
		free_attstatsslot(&sslot);
	}
	ReleaseSysCache(stats);
	return found;
}

/*
 * PostgreSQL chose to follow the index: why that stays its choice, or NULL
 * when gpusort's sort is faster and writes the same heap (see the header).
 */
static const char *
gs_cluster_keep_index_scan(Relation OldHeap, Relation OldIndex)
{
	bool		heapkeyspace;
	bool		allequalimage;
	float4		corr;

	_bt_metaversion(OldIndex, &heapkeyspace, &allequalimage);
	if (!heapkeyspace)
		return "PostgreSQL chose an index scan and the index predates btree version 4 (equal keys not in heap order)";
	if (gs_cluster_correlation(OldHeap, OldIndex, &corr) &&
		fabs(corr) >= GS_CLUSTER_CORRELATED)
		return psprintf("PostgreSQL chose an index scan and the heap is in index order already (correlation %.4f)",
						corr);
	return NULL;
}

/* the leader's rows go into its own build */
static void
gs_cluster_collect(void *arg, ItemPointer sort_tid, Datum *values,
				   bool *isnull, const void *row, uint32 len)
{
	gs_idx_sort_put((GsIdxBuild *) arg, sort_tid, values, isnull, true,
					row, len);
}

/*
 * The scan, serial or with parallel workers, into b (set up here); then
 * the rows are all in b, in memory or as runs.  Returns NULL, or why not
 * (nothing kept then).
 */
static const char *
gs_cluster_collect_rows(Relation OldHeap, Relation OldIndex,
						IndexInfo *indexInfo, GsIdxBuild *b, bool follow_index,
						TransactionId OldestXmin, GsClusterCounts *counts,
						int *nworkers, char **wreport)
{
	GsIdxParallel *par = NULL;
	Size		mem = (Size) maintenance_work_mem * 1024;
	Size		share = mem;
	const char *why;
	int			planned;

	{
		const int	index[] = {
			PROGRESS_CLUSTER_PHASE,
			PROGRESS_CLUSTER_INDEX_RELID
		};
		int64		vals[2];

		vals[0] = PROGRESS_CLUSTER_PHASE_SEQ_SCAN_HEAP;
		vals[1] = InvalidOid;
		pgstat_progress_update_multi_param(2, index, vals);
	}

	/*
	 * Workers as PostgreSQL would plan them for building this index (its
	 * max_parallel_maintenance_workers, the table's size or parallel_workers,
	 * the index expressions' parallel safety, 32MB of memory each), with
	 * gpusort's smaller share of memory a participant needs.
	 */
	planned = gs_idx_plan_workers(OldHeap,
								  plan_create_index_workers(RelationGetRelid(OldHeap),
															RelationGetRelid(OldIndex)));
	if (planned > 0)
		share = mem / (planned + (parallel_leader_participation ? 1 : 0));
	gs_idx_sort_begin(b, share,
					  gs_idx_estimate_rows(b, false, (double) share / mem));
	if (planned > 0)
		par = gs_idx_parallel_begin_cluster(b, indexInfo, planned, &share,
											follow_index, OldestXmin);
	if (par == NULL)
		gs_sort_set_memory(b->sort, maintenance_work_mem);

	memset(counts, 0, sizeof(*counts));
	if (par != NULL)
		why = gs_idx_parallel_scan_cluster(par, b, indexInfo,
										   gs_cluster_collect, b, counts);
	else
		why = gs_cluster_scan(OldHeap, indexInfo, gs_cluster_collect, b,
							  NULL, NULL, follow_index, OldestXmin, counts,
							  true);

	*nworkers = 0;
	*wreport = NULL;
	if (par != NULL)
	{
		*nworkers = gs_idx_parallel_nworkers(par);
		if (why == NULL)
		{
			pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_TUPLES_SCANNED,
										 (int64) counts->num_tuples);
			/* the merge takes all the memory, the workers' cores too */
			gs_sort_set_memory(b->sort, maintenance_work_mem);
			gs_sort_bulk_threads(b->sort, *nworkers + 1);
			/* the workers' runs, and the rows they kept in memory */
			gs_idx_parallel_collect(par, b);
			*wreport = gs_idx_parallel_report(par);
			/* rows the workers left stay in shared memory until the end */
			b->parallel = par;
			gs_idx_parallel_leave(par);
		}
		else
			gs_idx_parallel_end(par);
	}
	return why;
}

/* the write phase's state, in cxt: the new heap's rewrite begins */
static void
gs_cluster_write_begin(GsClusterWrite *cw, Relation OldHeap,
					   Relation NewHeap, MemoryContext cxt,
					   TransactionId OldestXmin, TransactionId xid_cutoff,
					   MultiXactId multi_cutoff)
{
	TupleDesc	desc = RelationGetDescr(NewHeap);
	int			i;

	memset(cw, 0, sizeof(*cw));
	cw->old_heap = OldHeap;
	cw->new_heap = NewHeap;
	cw->use_wal = RelationNeedsWAL(NewHeap);
	cw->values = (Datum *) palloc(desc->natts * sizeof(Datum));
	cw->isnull = (bool *) palloc(desc->natts * sizeof(bool));
	cw->cxt = cxt;
	cw->tupcxt = AllocSetContextCreate(cxt, "gpusort cluster tuple",
									   ALLOCSET_DEFAULT_SIZES);
	for (i = 0; i < desc->natts; i++)
		if (TupleDescAttr(desc, i)->attisdropped)
			cw->anydropped = true;
	cw->rwstate = begin_heap_rewrite(OldHeap, NewHeap, OldestXmin,
									 xid_cutoff, multi_cutoff);
}

/* the heap AM's relation_copy_for_cluster, sorting through gpusort */
static void
gs_cluster_copy(Relation OldHeap, Relation NewHeap, Relation OldIndex,
				bool use_sort, TransactionId OldestXmin,
				TransactionId *xid_cutoff, MultiXactId *multi_cutoff,
				double *num_tuples, double *tups_vacuumed,
				double *tups_recently_dead)
{
	const char *why;
	MemoryContext cxt;
	MemoryContext oldcxt;
	IndexInfo  *indexInfo;
	GsIdxBuild *b;
	GsClusterWrite cw;
	GsClusterCounts counts;
	instr_time	t0;
	double		scan_ms = 0;
	double		end_ms;
	int			nworkers = 0;
	char	   *wreport = NULL;
	bool		external = false;

	/* the entry is the heap AM's again, whatever happens next */
	OldHeap->rd_tableam = gs_heap_am;

	why = gs_cluster_unsupported(OldHeap, OldIndex);
	if (why == NULL && !use_sort)
		why = gs_cluster_keep_index_scan(OldHeap, OldIndex);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "gpusort cluster",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	indexInfo = NULL;
	/* not on the stack, which an error unwinds before its threads stop */
	b = palloc0(sizeof(GsIdxBuild));
	if (why == NULL)
	{
		indexInfo = BuildIndexInfo(OldIndex);
		if (!gs_idx_init(b, OldHeap, OldIndex, indexInfo))
			why = "leading key column cannot be encoded";
	}
	if (why == NULL)
	{
		/* no unique check: the index's own rebuild makes it */
		b->isunique = false;
		b->payload = true;

		INSTR_TIME_SET_CURRENT(t0);
		why = gs_cluster_collect_rows(OldHeap, OldIndex, indexInfo, b,
									  !use_sort, OldestXmin, &counts,
									  &nworkers, &wreport);
		scan_ms = gs_idx_ms_since(t0);
		if (why != NULL)
		{
			/* nothing written: drop the rows, let PostgreSQL start over */
			const int	index[] = {
				PROGRESS_CLUSTER_HEAP_TUPLES_SCANNED,
				PROGRESS_CLUSTER_TOTAL_HEAP_BLKS,
				PROGRESS_CLUSTER_HEAP_BLKS_SCANNED
			};
			const int64 zeros[] = {0, 0, 0};

			/* (the sort's temporary file goes with it) */
			gs_sort_end(b->sort);
			b->sort = NULL;
			/* its index scan sets none of the block counts */
			pgstat_progress_update_multi_param(3, index, zeros);
		}
	}
	if (why != NULL)
	{
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(cxt);
		ereport(GS_CLUSTER_REPORT_LEVEL,
				(errmsg_internal("table \"%s\" sorted by PostgreSQL: %s",
								 RelationGetRelationName(OldHeap), why)));
		if (gs_index_wanted())
			gs_stats_cluster(false);
		gs_heap_am->relation_copy_for_cluster(OldHeap, NewHeap, OldIndex,
											  use_sort, OldestXmin,
											  xid_cutoff, multi_cutoff,
											  num_tuples, tups_vacuumed,
											  tups_recently_dead);
		return;
	}
	*num_tuples = counts.num_tuples;
	*tups_vacuumed = counts.tups_vacuumed;
	*tups_recently_dead = counts.tups_recently_dead;

	gs_cluster_write_begin(&cw, OldHeap, NewHeap, cxt, OldestXmin,
						   *xid_cutoff, *multi_cutoff);
	b->sink = gs_cluster_sink;
	b->sink_arg = &cw;

	/* sort, then write in order (the sink sets the write phase) */
	pgstat_progress_update_param(PROGRESS_CLUSTER_PHASE,
								 PROGRESS_CLUSTER_PHASE_SORT_TUPLES);
	INSTR_TIME_SET_CURRENT(t0);
	external = gs_idx_sort_write(b);
	if (cw.written == 0)
		pgstat_progress_update_param(PROGRESS_CLUSTER_PHASE,
									 PROGRESS_CLUSTER_PHASE_WRITE_NEW_HEAP);
	end_heap_rewrite(cw.rwstate);
	end_ms = gs_idx_ms_since(t0);
	if (b->parallel != NULL)
		gs_idx_parallel_end(b->parallel);

	ereport(DEBUG2,
			(errmsg_internal("gpusort cluster \"%s\": %.0f rows, %d-byte keys%s; "
							 "scan %.1f ms with %d workers%s%s; "
							 "sort, merge and write %.1f ms; %s",
							 RelationGetRelationName(OldHeap), b->indtuples,
							 b->keybytes, b->exact ? "" : " (tie-breaks)",
							 scan_ms, nworkers,
							 wreport ? "; " : "", wreport ? wreport : "",
							 end_ms, gs_idx_sort_summary(b))));
	ereport(DEBUG1,
			(errmsg_internal("gpusort cluster \"%s\": %.0f tuples copied as they were, %.0f reformed",
							 RelationGetRelationName(OldHeap),
							 cw.copied, cw.written - cw.copied)));

	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);

	gs_stats_cluster(true);
	ereport(GS_CLUSTER_REPORT_LEVEL,
			(errmsg_internal("table \"%s\" sorted by gpusort%s%s%s",
							 RelationGetRelationName(OldHeap),
							 use_sort ? "" : " instead of PostgreSQL's index scan",
							 external ? " (sorted in runs on disk)" : "",
							 nworkers > 0 ?
							 psprintf(" with %d parallel worker%s", nworkers,
									  nworkers == 1 ? "" : "s") : "")));
}
