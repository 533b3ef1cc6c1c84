/*-------------------------------------------------------------------------
 *
 * index_cluster_scan.c
 *	  CLUSTER's heap scan: the whole heap for a serial copy, or one
 *	  participant's share of a parallel one (index_parallel.c runs it in
 *	  the workers, index_cluster.c in the leader).
 *
 * Each tuple's fate is decided as the heap AM's copy decides it
 * (HeapTupleSatisfiesVacuum against OldestXmin, under the buffer's share
 * lock), with the same counters and warnings; each kept tuple is handed
 * to the caller with the TID it is sorted by (its HOT chain's root's when
 * the copy replaces an index scan) and its values of the index's columns.
 * index_cluster.c's header says why.
 *
 * It calls only PostgreSQL; the callers give it where the rows go.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/index.h"
#include "commands/progress.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "index_int.h"

/* a parallel participant adds to the shared progress count this often */
#define GS_CLUSTER_PROGRESS_EVERY	1024

/* why a parallel participant stops early (the reason is another's) */
static const char gs_cluster_other_gave_up[] = "another participant gave up";

void
gs_cluster_shared_init(GsClusterShared *sh)
{
	pg_atomic_init_u64(&sh->scanned, 0);
	pg_atomic_init_u32(&sh->gave_up, 0);
	SpinLockInit(&sh->mutex);
	memset(&sh->counts, 0, sizeof(sh->counts));
	sh->why[0] = '\0';
}

/* this participant's part of a parallel scan is over: into sh */
static void
gs_cluster_scan_done(GsClusterShared *sh, const GsClusterCounts *counts,
					 uint64 unreported, const char *why)
{
	pg_atomic_fetch_add_u64(&sh->scanned, unreported);
	SpinLockAcquire(&sh->mutex);
	sh->counts.num_tuples += counts->num_tuples;
	sh->counts.tups_vacuumed += counts->tups_vacuumed;
	sh->counts.tups_recently_dead += counts->tups_recently_dead;
	if (why != NULL && sh->why[0] == '\0')
		strlcpy(sh->why, why, sizeof(sh->why));
	SpinLockRelease(&sh->mutex);
	if (why != NULL)
		pg_atomic_write_u32(&sh->gave_up, 1);
}

/* the blocks scanned so far, for pg_stat_progress_cluster */
static void
gs_cluster_progress_blocks(HeapScanDesc hscan, ParallelTableScanDesc pscan)
{
	int64		done;

	if (pscan == NULL)
		/* counted from where the scan started */
		done = (hscan->rs_cblock + hscan->rs_nblocks -
				hscan->rs_startblock) % hscan->rs_nblocks + 1;
	else
		done = Min(pg_atomic_read_u64(&((ParallelBlockTableScanDesc) pscan)->phs_nallocated),
				   hscan->rs_nblocks);
	pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_BLKS_SCANNED, done);
}

/*
 * Is the tuple dead to the copy?  Decided (under the buffer's lock) and
 * counted as the heap AM's copy does.
 */
static bool
gs_cluster_tuple_dead(Relation OldHeap, HeapTuple tuple, Buffer buf,
					  TransactionId OldestXmin, GsClusterCounts *counts)
{
	bool		is_system_catalog = IsSystemRelation(OldHeap);

	switch (HeapTupleSatisfiesVacuum(tuple, OldestXmin, buf))
	{
		case HEAPTUPLE_DEAD:
			return true;
		case HEAPTUPLE_RECENTLY_DEAD:
			counts->tups_recently_dead += 1;
			return false;
		case HEAPTUPLE_LIVE:
			return false;
		case HEAPTUPLE_INSERT_IN_PROGRESS:

			/*
			 * Under our exclusive lock only our own transaction can have
			 * inserted it (catalogs release their locks early); copied as
			 * live either way.  (A parallel worker shares the leader's
			 * transaction.)
			 */
			if (!is_system_catalog &&
				!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data)))
				elog(WARNING, "concurrent insert in progress within table \"%s\"",
					 RelationGetRelationName(OldHeap));
			return false;
		case HEAPTUPLE_DELETE_IN_PROGRESS:
			/* likewise; copied as recently dead */
			if (!is_system_catalog &&
				!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetUpdateXid(tuple->t_data)))
				elog(WARNING, "concurrent delete in progress within table \"%s\"",
					 RelationGetRelationName(OldHeap));
			counts->tups_recently_dead += 1;
			return false;
		default:
			elog(ERROR, "unexpected HeapTupleSatisfiesVacuum result");
			return false;		/* keep compiler quiet */
	}
}

/*
 * The TID a kept tuple is sorted by when the copy replaces an index scan:
 * its HOT chain's root's (root_offsets: the page's, from
 * heap_get_root_tuples).  Returns NULL, or why the index scan's order
 * cannot be had.
 */
static const char *
gs_cluster_root_tid(HeapTuple tuple, const OffsetNumber *root_offsets,
					ItemPointer sort_tid)
{
	OffsetNumber off = ItemPointerGetOffsetNumber(&tuple->t_self);

	/* hint bits are set now: its successor is not dead either */
	if (HeapTupleIsHotUpdated(tuple))
		return "a HOT chain keeps more than one row version";
	if (HeapTupleIsHeapOnly(tuple))
	{
		if (root_offsets[off - 1] == InvalidOffsetNumber)
			return "a heap-only tuple is outside any HOT chain";
		ItemPointerSetOffsetNumber(sort_tid, root_offsets[off - 1]);
	}
	return NULL;
}

/* a kept tuple's row: its own TID, padded, then the tuple (in *row) */
static uint32
gs_cluster_row(HeapTuple tuple, char **row, uint32 *rowcap)
{
	uint32		len = GS_CLUSTER_TID_BYTES + tuple->t_len;

	if (len > *rowcap)
	{
		*rowcap = Max(len, 2 * *rowcap);
		if (*row != NULL)
			pfree(*row);
		*row = palloc(*rowcap);
	}
	memcpy(*row, &tuple->t_self, sizeof(ItemPointerData));
	memcpy(*row + GS_CLUSTER_TID_BYTES, tuple->t_data, tuple->t_len);
	return len;
}

/* the tuples kept so far, for pg_stat_progress_cluster */
static void
gs_cluster_progress_tuples(GsClusterShared *sh, const GsClusterCounts *counts,
						   uint64 *unreported, bool progress)
{
	/* counted once the row is in, as PostgreSQL counts after its put */
	if (sh == NULL)
	{
		if (progress)
			pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_TUPLES_SCANNED,
										 (int64) counts->num_tuples);
	}
	else if (++*unreported == GS_CLUSTER_PROGRESS_EVERY)
	{
		uint64		all;

		all = pg_atomic_add_fetch_u64(&sh->scanned, *unreported);
		*unreported = 0;
		if (progress)
			pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_TUPLES_SCANNED,
										 (int64) all);
	}
}

/*
 * The scan: gives each kept tuple to collect, counts as the heap AM does.
 * follow_index: PostgreSQL would follow the index, so the order must be
 * its (see index_cluster.c's header).  Returns NULL, or why the rows
 * cannot give the index scan's order (then nothing is written yet).
 */
const char *
gs_cluster_scan(Relation OldHeap, IndexInfo *indexInfo,
				GsClusterCollect collect, void *arg,
				ParallelTableScanDesc pscan, GsClusterShared *sh,
				bool follow_index, TransactionId OldestXmin,
				GsClusterCounts *counts, bool progress)
{
	EState	   *estate;
	ExprContext *econtext;
	TupleTableSlot *slot;
	TableScanDesc scan;
	HeapScanDesc hscan;
	BlockNumber prev_cblock = InvalidBlockNumber;
	BlockNumber root_block = InvalidBlockNumber;
	OffsetNumber root_offsets[MaxHeapTuplesPerPage];
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	char	   *row = NULL;
	uint32		rowcap = 0;
	uint64		unreported = 0;
	const char *why = NULL;

	/* index expressions are evaluated over the scan's slot */
	estate = CreateExecutorState();
	econtext = GetPerTupleExprContext(estate);
	slot = table_slot_create(OldHeap, NULL);
	econtext->ecxt_scantuple = slot;

	if (pscan != NULL)
		scan = table_beginscan_parallel(OldHeap, pscan);
	else
		scan = table_beginscan(OldHeap, SnapshotAny, 0, NULL);
	hscan = (HeapScanDesc) scan;
	if (progress)
		pgstat_progress_update_param(PROGRESS_CLUSTER_TOTAL_HEAP_BLKS,
									 hscan->rs_nblocks);

	for (;;)
	{
		HeapTuple	tuple;
		Buffer		buf;
		bool		isdead;
		ItemPointerData sort_tid;
		uint32		len;

		CHECK_FOR_INTERRUPTS();
		if (!table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			/* every block counts as scanned, even empty trailing ones */
			if (progress)
				pgstat_progress_update_param(PROGRESS_CLUSTER_HEAP_BLKS_SCANNED,
											 hscan->rs_nblocks);
			break;
		}
		if (prev_cblock != hscan->rs_cblock)
		{
			prev_cblock = hscan->rs_cblock;
			/* another participant gave up: so does this one */
			if (sh != NULL && pg_atomic_read_u32(&sh->gave_up) != 0)
			{
				why = gs_cluster_other_gave_up;
				break;
			}
			if (progress)
				gs_cluster_progress_blocks(hscan, pscan);
		}

		tuple = ExecFetchSlotHeapTuple(slot, false, NULL);
		buf = ((BufferHeapTupleTableSlot *) slot)->buffer;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		/* the page's HOT chains: where the index finds each tuple */
		if (follow_index &&
			root_block != ItemPointerGetBlockNumber(&tuple->t_self))
		{
			heap_get_root_tuples(BufferGetPage(buf), root_offsets);
			root_block = ItemPointerGetBlockNumber(&tuple->t_self);
		}
		isdead = gs_cluster_tuple_dead(OldHeap, tuple, buf, OldestXmin,
									   counts);

		/* the TID the row is sorted by: its chain's root's, or its own */
		sort_tid = tuple->t_self;
		if (!isdead && follow_index)
			why = gs_cluster_root_tid(tuple, root_offsets, &sort_tid);
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);
		if (why != NULL)
			break;				/* PostgreSQL copies the table instead */

		if (isdead)
		{
			counts->tups_vacuumed += 1;
			continue;
		}
		counts->num_tuples += 1;

		len = gs_cluster_row(tuple, &row, &rowcap);
		ResetExprContext(econtext);
		FormIndexDatum(indexInfo, slot, estate, values, isnull);
		collect(arg, &sort_tid, values, isnull, row, len);
		gs_cluster_progress_tuples(sh, counts, &unreported, progress);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	FreeExecutorState(estate);
	if (sh != NULL)
		gs_cluster_scan_done(sh, counts, unreported,
							 why == gs_cluster_other_gave_up ? NULL : why);
	return why;
}
