/*-------------------------------------------------------------------------
 *
 * index_scan.c
 *	  The heap scan of a btree build: the tuples table_index_build_scan
 *	  would hand to the build, read page by page with the next page's
 *	  memory fetched ahead.
 *
 * A profile of PostgreSQL's own scan (heapam_index_build_range_scan) shows
 * most of its time going to the first touch of each tuple: one cache miss
 * after another, as it walks a page's tuples in heap_get_root_tuples, then
 * again one tuple at a time through the visibility check, the slot and
 * FormIndexDatum.  Here a participant pins the page after the one it
 * works on and asks the CPU for all of that page's cache lines at once;
 * by the time it gets to them they are in the cache.
 *
 * A page is taken by this loop only when the answer is certainly the one
 * PostgreSQL's scan gives, that is, when every tuple on it is to be
 * indexed as live under its own TID:
 *	- no redirect line pointer and no heap-only tuple (no HOT chain, so
 *	  every tuple is its own root);
 *	- the page is all-visible, or HeapTupleSatisfiesVacuum (against the
 *	  same horizon PostgreSQL's scan takes) says LIVE of every tuple, or
 *	  INSERT_IN_PROGRESS of one that this transaction inserted, which
 *	  PostgreSQL also indexes as live and counts.
 * Any other page (recently dead tuples, HOT chains, concurrent inserts
 * and deletes, which may mean waiting for other transactions) goes to
 * PostgreSQL's own scan, limited to that page and the ones right after it
 * that need it as well.  Index builds the loop cannot serve at all go to
 * table_index_build_scan whole: expression and partial indexes, another
 * table access method, concurrent builds (which scan with an MVCC
 * snapshot) and bootstrap.
 *
 * The tuples are read with only the pin held, as PostgreSQL's scan reads
 * them: the table's ShareLock keeps out inserts, updates and deletes, and
 * the pin keeps pruning from moving them.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relscan.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/rel.h"

#include "index_int.h"

/*
 * Serial scans: once this many pages went to PostgreSQL's scan, and they
 * are more than a quarter of those seen, the rest of the table goes to it
 * in one call, as the loop gains little on such a table.
 */
#define GS_SCAN_GIVE_UP_PAGES	64

typedef struct GsHeapScan
{
	Relation	heap;
	Relation	index;
	IndexInfo  *indexInfo;
	TupleDesc	tupdesc;
	IndexBuildCallback callback;
	void	   *state;
	TransactionId oldest_xmin;
	BufferAccessStrategy strategy;
	int			natts;
	AttrNumber	attnums[INDEX_MAX_KEYS];

	/* pages for PostgreSQL's scan, not yet handed over: [fb_start, fb_end) */
	BlockNumber fb_start;
	BlockNumber fb_end;
	BlockNumber nfallback;		/* pages handed over */
	BlockNumber nown;			/* pages the loop indexed */

	double		reltuples;
	OffsetNumber offs[MaxHeapTuplesPerPage];
} GsHeapScan;

/* can the loop serve this build at all? */
static bool
gs_scan_usable(Relation heap, IndexInfo *indexInfo)
{
	int			i;

	if (IsBootstrapProcessingMode() ||
		indexInfo->ii_Concurrent ||
		heap->rd_rel->relam != HEAP_TABLE_AM_OID ||
		indexInfo->ii_Expressions != NIL ||
		indexInfo->ii_Predicate != NIL)
		return false;
	for (i = 0; i < indexInfo->ii_NumIndexAttrs; i++)
		if (indexInfo->ii_IndexAttrNumbers[i] <= 0)
			return false;
	return true;
}

/* PostgreSQL's scan of the pages put aside so far */
static void
gs_scan_fallback_flush(GsHeapScan *s)
{
	BlockNumber n = s->fb_end - s->fb_start;

	if (n == 0)
		return;
	s->reltuples += table_index_build_range_scan(s->heap, s->index,
												 s->indexInfo, false, false,
												 false, s->fb_start, n,
												 s->callback, s->state, NULL);
	s->nfallback += n;
	s->fb_start = s->fb_end = InvalidBlockNumber;
}

/* put blkno aside for PostgreSQL's scan, with its neighbours if any */
static void
gs_scan_fallback(GsHeapScan *s, BlockNumber blkno)
{
	if (s->fb_end != InvalidBlockNumber && blkno == s->fb_end)
	{
		s->fb_end++;
		return;
	}
	gs_scan_fallback_flush(s);
	s->fb_start = blkno;
	s->fb_end = blkno + 1;
}

/*
 * Index every tuple of the page in buf, or, when one of them needs
 * PostgreSQL's treatment, none of them: returns false then.  The buffer
 * stays pinned.
 */
static bool
gs_scan_page(GsHeapScan *s, Buffer buf, BlockNumber blkno)
{
	Page		page = BufferGetPage(buf);
	OffsetNumber maxoff;
	OffsetNumber off;
	bool		allvis;
	int			n = 0;
	int			i;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	HeapTupleData tup;

	tup.t_tableOid = RelationGetRelid(s->heap);

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	maxoff = PageGetMaxOffsetNumber(page);
	allvis = PageIsAllVisible(page);
	for (off = FirstOffsetNumber; off <= maxoff; off = OffsetNumberNext(off))
	{
		ItemId		lp = PageGetItemId(page, off);
		HeapTupleHeader htup;

		if (!ItemIdIsNormal(lp))
		{
			if (ItemIdIsRedirected(lp))
				break;
			continue;
		}
		htup = (HeapTupleHeader) PageGetItem(page, lp);
		if (HeapTupleHeaderIsHeapOnly(htup))
			break;
		if (!allvis)
		{
			HTSV_Result r;

			tup.t_data = htup;
			tup.t_len = ItemIdGetLength(lp);
			ItemPointerSet(&tup.t_self, blkno, off);
			r = HeapTupleSatisfiesVacuum(&tup, s->oldest_xmin, buf);
			if (r != HEAPTUPLE_LIVE &&
				!(r == HEAPTUPLE_INSERT_IN_PROGRESS &&
				  TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(htup))))
				break;
		}
		s->offs[n++] = off;
	}
	LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	if (off <= maxoff)
		return false;

	for (i = 0; i < n; i++)
	{
		ItemId		lp = PageGetItemId(page, s->offs[i]);
		int			a;

		tup.t_data = (HeapTupleHeader) PageGetItem(page, lp);
		tup.t_len = ItemIdGetLength(lp);
		ItemPointerSet(&tup.t_self, blkno, s->offs[i]);
		for (a = 0; a < s->natts; a++)
			values[a] = heap_getattr(&tup, s->attnums[a], s->tupdesc,
									 &isnull[a]);
		s->callback(s->index, &tup.t_self, values, isnull, true, s->state);
	}
	s->reltuples += n;
	return true;
}

/*
 * table_index_build_scan for a btree build: the same tuples with the same
 * values, TIDs and liveness, handed to callback.  pscan: the parallel scan
 * this participant takes part in, or NULL.  progress: report the blocks
 * done, as the leader's scan does.  Returns the live heap tuples seen.
 */
double
gs_idx_heap_scan(Relation heap, Relation index, IndexInfo *indexInfo,
				 bool progress, IndexBuildCallback callback, void *state,
				 ParallelTableScanDesc pscan)
{
	GsHeapScan	s;
	ParallelBlockTableScanDesc pbscan = (ParallelBlockTableScanDesc) pscan;
	ParallelBlockTableScanWorkerData pbwork;
	BlockNumber nblocks;
	BlockNumber blkno;
	BlockNumber next;
	BlockNumber seen = 0;
	Buffer		nextbuf = InvalidBuffer;
	int			i;

	if (!gs_scan_usable(heap, indexInfo))
	{
		TableScanDesc scan = NULL;

		if (pscan != NULL)
			scan = table_beginscan_parallel(heap, pscan);
		return table_index_build_scan(heap, index, indexInfo, true, progress,
									  callback, state, scan);
	}

	memset(&s, 0, offsetof(GsHeapScan, offs));
	s.heap = heap;
	s.index = index;
	s.indexInfo = indexInfo;
	s.tupdesc = RelationGetDescr(heap);
	s.callback = callback;
	s.state = state;
	s.natts = indexInfo->ii_NumIndexAttrs;
	for (i = 0; i < s.natts; i++)
		s.attnums[i] = indexInfo->ii_IndexAttrNumbers[i];
	s.fb_start = s.fb_end = InvalidBlockNumber;
	/* the horizon PostgreSQL's scan of a non-concurrent build takes */
	s.oldest_xmin = GetOldestNonRemovableTransactionId(heap);

	if (pbscan != NULL)
	{
		nblocks = pbscan->phs_nblocks;
		table_block_parallelscan_startblock_init(heap, &pbwork, pbscan);
		next = table_block_parallelscan_nextpage(heap, &pbwork, pbscan);
	}
	else
	{
		nblocks = RelationGetNumberOfBlocks(heap);
		next = nblocks > 0 ? 0 : InvalidBlockNumber;
	}
	/* a large table through a ring of buffers, as PostgreSQL's scan reads it */
	if (!RelationUsesLocalBuffers(heap) && nblocks > (BlockNumber) NBuffers / 4)
		s.strategy = GetAccessStrategy(BAS_BULKREAD);
	if (progress)
		pgstat_progress_update_param(PROGRESS_SCAN_BLOCKS_TOTAL, nblocks);

	if (next != InvalidBlockNumber)
		nextbuf = ReadBufferExtended(heap, MAIN_FORKNUM, next, RBM_NORMAL,
									 s.strategy);
	while (next != InvalidBlockNumber)
	{
		Buffer		buf = nextbuf;

		blkno = next;
		CHECK_FOR_INTERRUPTS();

		/* the next page is pinned and on its way while this one is read */
		if (pbscan != NULL)
			next = table_block_parallelscan_nextpage(heap, &pbwork, pbscan);
		else
			next = (blkno + 1 < nblocks) ? blkno + 1 : InvalidBlockNumber;
		nextbuf = InvalidBuffer;
		if (next != InvalidBlockNumber)
		{
			nextbuf = ReadBufferExtended(heap, MAIN_FORKNUM, next, RBM_NORMAL,
										 s.strategy);
			gs_prefetch_page((const char *) BufferGetPage(nextbuf));
		}

		if (gs_scan_page(&s, buf, blkno))
			s.nown++;
		else
			gs_scan_fallback(&s, blkno);
		ReleaseBuffer(buf);
		seen++;

		if (progress)
			pgstat_progress_update_param(PROGRESS_SCAN_BLOCKS_DONE,
										 pbscan != NULL ?
										 Min(nblocks, (BlockNumber)
											 pg_atomic_read_u64(&pbscan->phs_nallocated)) :
										 blkno + 1);

		/* a serial scan of a table the loop cannot serve: PostgreSQL's */
		if (pbscan == NULL && next != InvalidBlockNumber &&
			s.nfallback + (s.fb_end - s.fb_start) >= GS_SCAN_GIVE_UP_PAGES &&
			(s.nfallback + (s.fb_end - s.fb_start)) * 4 > seen)
		{
			ReleaseBuffer(nextbuf);
			nextbuf = InvalidBuffer;
			if (s.fb_end == next)
				s.fb_end = nblocks;
			else
			{
				gs_scan_fallback_flush(&s);
				s.fb_start = next;
				s.fb_end = nblocks;
			}
			break;
		}
	}
	gs_scan_fallback_flush(&s);

	if (progress)
		pgstat_progress_update_param(PROGRESS_SCAN_BLOCKS_DONE, nblocks);
	if (s.strategy != NULL)
		FreeAccessStrategy(s.strategy);

	ereport(DEBUG1,
			(errmsg_internal("gpusort index \"%s\": the scan read %u pages itself and left %u to PostgreSQL's scan",
							 RelationGetRelationName(index), s.nown,
							 s.nfallback)));
	return s.reltuples;
}
