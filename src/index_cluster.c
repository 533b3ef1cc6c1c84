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
 * thing, and leaves the copy to it unless the sort was chosen and gpusort
 * can encode the index's leading key.  If an invalidation rebuilds the
 * entry in between, the patch is gone and PostgreSQL copies the table.
 *
 * The copy does what the heap AM's does, in the same order, so that the
 * new heap is the one PostgreSQL writes:
 *
 *	- one sequential scan with SnapshotAny; each tuple's fate is decided by
 *	  HeapTupleSatisfiesVacuum against OldestXmin, under the buffer's share
 *	  lock: dead tuples go to the rewrite module right away (it must see
 *	  them for update chains), live, recently dead and in-progress ones are
 *	  kept, with the same counters and warnings;
 *	- the kept tuples are sorted by the index's key, as an index build sorts
 *	  them: an index tuple is formed (FormIndexDatum: expressions too) with
 *	  the heap TID, and the build's sort, runs on disk and merge
 *	  (index_build.c, index_spill.c) order them; the heap TID breaks ties,
 *	  so for a unique key the order is PostgreSQL's;
 *	  each row carries the heap tuple itself after its index tuple (in
 *	  memory and in the runs);
 *	- in that order each heap tuple is reformed with dropped columns set
 *	  to NULL and given to rewrite_heap_tuple, which writes the new heap
 *	  and its WAL as for PostgreSQL's own copy;
 *	- pg_stat_progress_cluster goes through the same phases with the same
 *	  counts (scan, sort, write).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/rewriteheap.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "commands/progress.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "optimizer/plancat.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "index_int.h"

/* who sorted a table, and why not gpusort: LOG when asked, else DEBUG1 */
#define GS_CLUSTER_REPORT_LEVEL	(gs_log_index_builds ? LOG : DEBUG1)

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
	double		written;
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

/* the next tuple in index order: write it to the new heap */
static void
gs_cluster_sink(void *arg, IndexTuple itup)
{
	GsClusterWrite *cw = (GsClusterWrite *) arg;
	TupleDesc	newdesc = RelationGetDescr(cw->new_heap);
	MemoryContext oldcxt;
	HeapTupleData tuple;
	HeapTuple	reformed;
	uint32		len;
	int			i;

	CHECK_FOR_INTERRUPTS();
	if (cw->written == 0)
		pgstat_progress_update_param(PROGRESS_CLUSTER_PHASE,
									 PROGRESS_CLUSTER_PHASE_WRITE_NEW_HEAP);

	/* the heap tuple the row carries (aligned: see gs_idx_payload) */
	tuple.t_data = (HeapTupleHeader) gs_idx_payload(itup, &len);
	tuple.t_len = len;
	tuple.t_self = itup->t_tid;
	tuple.t_tableOid = RelationGetRelid(cw->old_heap);

	/* the new heap has the old one's columns; dropped ones become NULL */
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

	cw->written += 1;
	pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_TUPLES_WRITTEN,
								 (int64) cw->written);
}

/* why gpusort does not sort this CLUSTER, or NULL */
static const char *
gs_cluster_unsupported(Relation OldHeap, Relation OldIndex, bool use_sort)
{
	if (OldIndex == NULL)
		return "no index to sort by";
	if (!use_sort)
		return "PostgreSQL chose an index scan";
	if (!gs_index_wanted())
		return "gpusort.enabled or gpusort.index_build is off";
	if (OldIndex->rd_rel->relam != BTREE_AM_OID)
		return "not a btree";
	if (IsSystemRelation(OldHeap))
		return "system catalog";
	return NULL;
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
	GsIdxBuild	b;
	GsClusterWrite cw;
	EState	   *estate;
	ExprContext *econtext;
	TupleTableSlot *slot;
	BufferHeapTupleTableSlot *hslot;
	TableScanDesc scan;
	HeapScanDesc hscan;
	BlockNumber prev_cblock = InvalidBlockNumber;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	bool		is_system_catalog = IsSystemRelation(OldHeap);

	/* the entry is the heap AM's again, whatever happens next */
	OldHeap->rd_tableam = gs_heap_am;

	why = gs_cluster_unsupported(OldHeap, OldIndex, use_sort);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "gpusort cluster",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	indexInfo = NULL;
	if (why == NULL)
	{
		indexInfo = BuildIndexInfo(OldIndex);
		if (!gs_idx_init(&b, OldHeap, OldIndex, indexInfo))
			why = "leading key column cannot be encoded";
	}
	if (why != NULL)
	{
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(cxt);
		ereport(GS_CLUSTER_REPORT_LEVEL,
				(errmsg_internal("table \"%s\" sorted by PostgreSQL: %s",
								 RelationGetRelationName(OldHeap), why)));
		gs_heap_am->relation_copy_for_cluster(OldHeap, NewHeap, OldIndex,
											  use_sort, OldestXmin,
											  xid_cutoff, multi_cutoff,
											  num_tuples, tups_vacuumed,
											  tups_recently_dead);
		return;
	}

	/* no unique check: the index's own rebuild makes it */
	b.isunique = false;
	b.payload = true;
	b.payload_width = MAXALIGN(SizeofHeapTupleHeader +
							   get_rel_data_width(OldHeap, NULL));
	gs_idx_setup(&b, false);

	memset(&cw, 0, sizeof(cw));
	cw.old_heap = OldHeap;
	cw.new_heap = NewHeap;
	cw.values = (Datum *) palloc(RelationGetDescr(NewHeap)->natts * sizeof(Datum));
	cw.isnull = (bool *) palloc(RelationGetDescr(NewHeap)->natts * sizeof(bool));
	cw.tupcxt = AllocSetContextCreate(cxt, "gpusort cluster tuple",
									  ALLOCSET_DEFAULT_SIZES);
	cw.rwstate = begin_heap_rewrite(OldHeap, NewHeap, OldestXmin,
									*xid_cutoff, *multi_cutoff);
	b.sink = gs_cluster_sink;
	b.sink_arg = &cw;

	/* index expressions are evaluated over the scan's slot */
	estate = CreateExecutorState();
	econtext = GetPerTupleExprContext(estate);
	slot = table_slot_create(OldHeap, NULL);
	hslot = (BufferHeapTupleTableSlot *) slot;
	econtext->ecxt_scantuple = slot;

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
	scan = table_beginscan(OldHeap, SnapshotAny, 0, NULL);
	hscan = (HeapScanDesc) scan;
	pgstat_progress_update_param(PROGRESS_CLUSTER_TOTAL_HEAP_BLKS,
								 hscan->rs_nblocks);

	for (;;)
	{
		HeapTuple	tuple;
		Buffer		buf;
		bool		isdead;

		CHECK_FOR_INTERRUPTS();
		if (!table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			/* every block counts as scanned, even empty trailing ones */
			pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_BLKS_SCANNED,
										 hscan->rs_nblocks);
			break;
		}
		/* blocks scanned so far, counted from where the scan started */
		if (prev_cblock != hscan->rs_cblock)
		{
			pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_BLKS_SCANNED,
										 (hscan->rs_cblock +
										  hscan->rs_nblocks -
										  hscan->rs_startblock) %
										 hscan->rs_nblocks + 1);
			prev_cblock = hscan->rs_cblock;
		}

		tuple = ExecFetchSlotHeapTuple(slot, false, NULL);
		buf = hslot->buffer;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		switch (HeapTupleSatisfiesVacuum(tuple, OldestXmin, buf))
		{
			case HEAPTUPLE_DEAD:
				isdead = true;
				break;
			case HEAPTUPLE_RECENTLY_DEAD:
				*tups_recently_dead += 1;
				isdead = false;
				break;
			case HEAPTUPLE_LIVE:
				isdead = false;
				break;
			case HEAPTUPLE_INSERT_IN_PROGRESS:

				/*
				 * Under our exclusive lock only our own transaction can
				 * have inserted it (catalogs release their locks early);
				 * copied as live either way.
				 */
				if (!is_system_catalog &&
					!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data)))
					elog(WARNING, "concurrent insert in progress within table \"%s\"",
						 RelationGetRelationName(OldHeap));
				isdead = false;
				break;
			case HEAPTUPLE_DELETE_IN_PROGRESS:
				/* likewise; copied as recently dead */
				if (!is_system_catalog &&
					!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetUpdateXid(tuple->t_data)))
					elog(WARNING, "concurrent delete in progress within table \"%s\"",
						 RelationGetRelationName(OldHeap));
				*tups_recently_dead += 1;
				isdead = false;
				break;
			default:
				elog(ERROR, "unexpected HeapTupleSatisfiesVacuum result");
				isdead = false; /* keep compiler quiet */
				break;
		}
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);

		if (isdead)
		{
			*tups_vacuumed += 1;
			/* the rewrite module follows update chains through dead ones */
			if (rewrite_heap_dead_tuple(cw.rwstate, tuple))
			{
				/* an earlier recently dead tuple turned out dead */
				*tups_vacuumed += 1;
				*tups_recently_dead -= 1;
			}
			continue;
		}

		*num_tuples += 1;
		ResetExprContext(econtext);
		FormIndexDatum(indexInfo, slot, estate, values, isnull);
		gs_idx_collect_payload(&b, &tuple->t_self, values, isnull,
							   tuple->t_data, tuple->t_len);
		pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_TUPLES_SCANNED,
									 (int64) *num_tuples);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	FreeExecutorState(estate);

	/* sort, then write in order (the sink sets the write phase) */
	pgstat_progress_update_param(PROGRESS_CLUSTER_PHASE,
								 PROGRESS_CLUSTER_PHASE_SORT_TUPLES);
	if (b.file != NULL)
		gs_idx_spill_build(&b);
	else
		gs_idx_write_sorted(&b);
	if (cw.written == 0)
		pgstat_progress_update_param(PROGRESS_CLUSTER_PHASE,
									 PROGRESS_CLUSTER_PHASE_WRITE_NEW_HEAP);
	end_heap_rewrite(cw.rwstate);

	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);

	ereport(GS_CLUSTER_REPORT_LEVEL,
			(errmsg_internal("table \"%s\" sorted by gpusort%s",
							 RelationGetRelationName(OldHeap),
							 b.nruns_written > 0 ?
							 " (sorted in runs on disk)" : "")));
}
