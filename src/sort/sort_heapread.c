/*-------------------------------------------------------------------------
 *
 * sort_heapread.c
 *	  The rows of a sort's plain table scan, read page by page with the next
 *	  page's memory fetched ahead, instead of one at a time through the Seq
 *	  Scan node.
 *
 * A profile of a parallel loader (a worker that reads, copies and encodes
 * rows) showed its largest costs in first touches of memory: each tuple's
 * header as the slot deformed it, each page's header as the scan looked
 * for something to prune.  One cache miss after another, since each waits
 * for the row before it.  Here a process pins the page after the one it
 * returns rows from and asks the CPU for all of that page's cache lines;
 * they arrive while the current page's rows are copied.  The same idea
 * serves the heap scan of index builds (index_scan.c).
 *
 * The reader returns what the node would return, row for row:
 *	- the pages are those of the node's own scan: the blocks its parallel
 *	  block allocator hands this process (so the node's other
 *	  participants and this reader share the table out as usual), or,
 *	  serially, the blocks the scan counted at its start, from the block
 *	  it starts at;
 *	- each page gets what PostgreSQL's page-at-a-time scan gives it: the
 *	  chance to be pruned, then, under its share lock, the visibility of
 *	  every normal line pointer under the scan's snapshot (all visible on
 *	  an all-visible page, else HeapTupleSatisfiesVisibility), with the
 *	  serializable conflict check; the tuples are then read with only the
 *	  pin held, which keeps pruning from moving them;
 *	- the rows are counted for the table's statistics and for the node's
 *	  instrumentation.
 * A synchronized scan does not report where it is while the reader reads;
 * that only helps other scans start near it.
 *
 * It is taken only where the node does nothing to its rows but pick some
 * of their columns: no qual, a projection (if any) of the table's columns
 * alone, a heap table, an MVCC snapshot, no EvalPlanQual recheck.  Such a
 * projection is done here, into the node's own result slot, as
 * ExecProject would fill it (the values point into the pinned page).  Any
 * other input goes through the node.
 *
 * A partitioned table's Append (parallel or not) of such scans is read the
 * same way, one partition after another: the Append's own choice of the
 * next subplan (choose_next_subplan: in a Parallel Append, the one its
 * shared state hands this process) picks the partition, whose scan is then
 * read as above, or through its node if it does anything to its rows.
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
#include "access/tupmacs.h"
#include "catalog/pg_am_d.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"

struct GsHeapReader
{
	PlanState  *node;
	/* an Append's reader: its current subplan, read by sub if not NULL */
	AppendState *append;
	PlanState  *subnode;
	GsHeapReader *sub;

	Relation	rel;
	Snapshot	snapshot;
	HeapScanDesc scan;
	ParallelBlockTableScanDesc pbscan;	/* NULL: a serial scan */
	BufferAccessStrategy strategy;
	BlockNumber nblocks;		/* serial: the blocks to read */
	BlockNumber startblock;
	BlockNumber taken;			/* serial: blocks taken so far */
	BlockNumber next;			/* the page after the current one */
	Buffer		nextbuf;		/* pinned, its memory on its way */
	Buffer		buf;			/* the page whose rows are returned */
	BlockNumber blkno;
	Page		page;
	int			ntup;			/* visible tuples of buf */
	int			pos;			/* the next of them to return */
	bool		done;
	bool		stopping;		/* take no new block or subplan */
	double		rows;
	TupleTableSlot *slot;
	/* a projection of columns: the node's result slot and what goes there */
	TupleTableSlot *pslot;
	AttrNumber *proj;			/* attribute numbers, pslot's natts of them */
	AttrNumber	proj_max;		/* the largest */
	/*
	 * proj_known: where each picked column lies in a tuple without NULLs,
	 * known once for the attributes before the first varlena (walk_from),
	 * found per tuple from there (gs_hr_walk); proj_var: the last picked
	 * one (proj_max) is a varlena
	 */
	bool		proj_known;
	bool		proj_var;
	int			walk_from;		/* -1: every offset known once */
	int32	   *att_off;		/* each attribute's, up to proj_max */
	int32	   *proj_off;		/* each picked one's (a varlena's room,
								 * before alignment) */
	Form_pg_attribute *proj_att;
	HeapTupleData tuple;
	OffsetNumber offs[MaxHeapTuplesPerPage];
};

/* the next block of this process's share, or InvalidBlockNumber */
static BlockNumber
gs_hr_take(GsHeapReader *r)
{
	if (r->pbscan != NULL)
	{
		/*
		 * Stopping: the rest of the chunk this process was handed is its
		 * own to read (no one else gets those blocks), nothing more.
		 */
		if (r->stopping &&
			r->scan->rs_parallelworkerdata->phsw_chunk_remaining == 0)
			return InvalidBlockNumber;
		return table_block_parallelscan_nextpage(r->rel,
												 r->scan->rs_parallelworkerdata,
												 r->pbscan);
	}
	if (r->taken >= r->nblocks)
		return InvalidBlockNumber;
	return (r->startblock + r->taken++) % r->nblocks;
}

/*
 * The visible tuples of the page in r->buf, as heapgetpage finds them
 * (PostgreSQL 15; heap_prepare_pagescan later).
 */
static void
gs_hr_collect(GsHeapReader *r)
{
	Buffer		buf = r->buf;
	Page		page = BufferGetPage(buf);
	OffsetNumber maxoff;
	OffsetNumber off;
	bool		allvis;
	bool		check_serializable;
	int			n = 0;

	heap_page_prune_opt(r->rel, buf);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
#if PG_VERSION_NUM < 170000
	TestForOldSnapshot(r->snapshot, r->rel, page);
#endif
	maxoff = PageGetMaxOffsetNumber(page);
	allvis = PageIsAllVisible(page) && !r->snapshot->takenDuringRecovery;

	/*
	 * Whether the tuples' serializable conflicts need checking, asked once
	 * a page (as PostgreSQL 17's heap_prepare_pagescan does): outside
	 * SERIALIZABLE transactions, the check of every tuple was two calls
	 * that returned at once, 30 instructions a row.
	 */
	check_serializable = CheckForSerializableConflictOutNeeded(r->rel,
															   r->snapshot);
	for (off = FirstOffsetNumber; off <= maxoff; off = OffsetNumberNext(off))
	{
		ItemId		lp = PageGetItemId(page, off);
		HeapTupleData tup;
		bool		valid;

		if (!ItemIdIsNormal(lp))
			continue;
		tup.t_tableOid = RelationGetRelid(r->rel);
		tup.t_data = (HeapTupleHeader) PageGetItem(page, lp);
		tup.t_len = ItemIdGetLength(lp);
		ItemPointerSet(&tup.t_self, r->blkno, off);
		valid = allvis || HeapTupleSatisfiesVisibility(&tup, r->snapshot, buf);
		if (check_serializable)
			HeapCheckForSerializableConflictOut(valid, r->rel, &tup, buf,
												r->snapshot);
		if (valid)
			r->offs[n++] = off;
	}
	LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	r->page = page;
	r->ntup = n;
	r->pos = 0;
}

/*
 * n rows of the current page returned, counted a page at a time for the
 * table's statistics (as pgstat_count_heap_getnext counts each) and for
 * the node's instrumentation: a page's rows are all returned (what a
 * reader ended early did not return is taken back from the node's count,
 * gs_hr_finish).
 */
static inline void
gs_hr_count(GsHeapReader *r, int n)
{
	/* (the counter pgstat_count_heap_getnext adds one to, in every version) */
	pgstat_count_index_tuples(r->rel, n);
	r->rows += n;
}

/*
 * Move to the next page with a visible tuple; false at the end.  (Out of
 * line: the calls a row leave their registers alone.)
 */
static pg_noinline bool
gs_hr_next_page(GsHeapReader *r)
{
	for (;;)
	{
		if (BufferIsValid(r->buf))
		{
			ReleaseBuffer(r->buf);
			r->buf = InvalidBuffer;
		}
		if (r->next == InvalidBlockNumber)
			return false;
		CHECK_FOR_INTERRUPTS();

		r->buf = r->nextbuf;
		r->blkno = r->next;
		r->nextbuf = InvalidBuffer;
		r->next = gs_hr_take(r);
		if (r->next != InvalidBlockNumber)
		{
			r->nextbuf = ReadBufferExtended(r->rel, MAIN_FORKNUM, r->next,
											RBM_NORMAL, r->strategy);
			gs_prefetch_page((const char *) BufferGetPage(r->nextbuf));
		}
		gs_hr_collect(r);
		if (r->ntup > 0)
			return true;
	}
}

/*
 * The columns a scan's projection picks, if it does nothing else: every
 * output column a column of the table (no expression, no system column,
 * no whole-row reference).  NULL otherwise.
 */
static AttrNumber *
gs_hr_projection(PlanState *child, AttrNumber *max)
{
	List	   *tlist = child->plan->targetlist;
	Index		scanrelid = ((Scan *) child->plan)->scanrelid;
	AttrNumber *attnos;
	ListCell   *lc;
	int			i = 0;

	if (list_length(tlist) !=
		child->ps_ResultTupleSlot->tts_tupleDescriptor->natts)
		return NULL;
	attnos = palloc(Max(list_length(tlist), 1) * sizeof(AttrNumber));
	*max = 0;
	foreach(lc, tlist)
	{
		Var		   *var = (Var *) ((TargetEntry *) lfirst(lc))->expr;

		if (!IsA(var, Var) || var->varno != scanrelid ||
			var->varlevelsup != 0 || var->varattno <= 0)
		{
			pfree(attnos);
			return NULL;
		}
		attnos[i++] = var->varattno;
		*max = Max(*max, var->varattno);
	}
	return attnos;
}

/*
 * Where the picked columns lie in a tuple without NULLs that has every
 * attribute up to the last picked one: at offsets known once, as the
 * tuple descriptor's cached offsets would give them, for the attributes
 * before the first varlena (a dropped attribute keeps its width); from
 * there, found for each tuple by walking its values (gs_hr_walk), as
 * deforming it would.  A varlena's offset is where its room starts (its
 * value there aligned as att_align_pointer finds it).
 */
static void
gs_hr_projection_offsets(GsHeapReader *r)
{
	TupleDesc	desc = RelationGetDescr(r->rel);
	int			n = r->pslot->tts_tupleDescriptor->natts;
	int32		off = 0;
	int			a;

	r->att_off = palloc(r->proj_max * sizeof(int32));
	r->walk_from = -1;
	for (a = 0; a < r->proj_max; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		if (att->attlen != -1 && att->attlen <= 0)
			return;				/* (a cstring) */
		if (r->walk_from >= 0)
			continue;
		if (att->attlen == -1)
		{
			r->walk_from = a;
			r->att_off[a] = off;
			continue;
		}
		off = att_align_nominal(off, att->attalign);
		r->att_off[a] = off;
		off += att->attlen;
	}
	/* a varlena picked last starts where the fixed values end: no walk */
	if (r->walk_from == r->proj_max - 1)
		r->walk_from = -1;
	r->proj_var = TupleDescAttr(desc, r->proj_max - 1)->attlen == -1;
	r->proj_off = palloc(Max(n, 1) * sizeof(int32));
	r->proj_att = palloc(Max(n, 1) * sizeof(Form_pg_attribute));
	for (a = 0; a < n; a++)
	{
		r->proj_off[a] = r->att_off[r->proj[a] - 1];
		r->proj_att[a] = TupleDescAttr(desc, r->proj[a] - 1);
	}
	r->proj_known = true;
}

/*
 * The offsets of the picked columns in the tuple whose data is at data
 * (without NULLs, every attribute up to proj_max), where some lie after a
 * varlena: the attributes from the first varlena on, walked as
 * slot_deform_heap_tuple walks them.
 */
static void
gs_hr_walk(void *arg, const char *data)
{
	GsHeapReader *r = (GsHeapReader *) arg;
	TupleDesc	desc = RelationGetDescr(r->rel);
	int32		off = r->att_off[r->walk_from];
	int			n = r->pslot->tts_tupleDescriptor->natts;
	int			a;

	for (a = r->walk_from; a < r->proj_max; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		if (att->attlen == -1)
		{
			r->att_off[a] = off;
			off = att_align_pointer(off, att->attalign, -1, data + off);
			off = att_addlength_pointer(off, -1, data + off);
		}
		else
		{
			off = att_align_nominal(off, att->attalign);
			r->att_off[a] = off;
			off += att->attlen;
		}
	}
	for (a = 0; a < n; a++)
		r->proj_off[a] = r->att_off[r->proj[a] - 1];
}

/* a reader of one scan's rows (see gs_heapread_begin) */
static GsHeapReader *
gs_hr_begin_scan(PlanState *child)
{
	ScanState  *ss = (ScanState *) child;
	EState	   *estate = child->state;
	GsHeapReader *r;
	HeapScanDesc scan;
	Relation	rel;
	AttrNumber *proj = NULL;
	AttrNumber	proj_max = 0;

	if (!IsA(child, SeqScanState) ||
		child->qual != NULL || estate->es_epq_active != NULL)
		return NULL;
	if (child->ps_ProjInfo != NULL &&
		(proj = gs_hr_projection(child, &proj_max)) == NULL)
		return NULL;
	rel = ss->ss_currentRelation;
	if (rel == NULL || rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		!IsMVCCSnapshot(estate->es_snapshot))
		return NULL;

	/* the node's scan, begun as its first fetch would begin it */
	if (ss->ss_currentScanDesc == NULL)
		ss->ss_currentScanDesc = table_beginscan(rel, estate->es_snapshot,
												 0, NULL);
	scan = (HeapScanDesc) ss->ss_currentScanDesc;
	if ((scan->rs_base.rs_flags & SO_ALLOW_PAGEMODE) == 0 ||
		!IsMVCCSnapshot(scan->rs_base.rs_snapshot))
		return NULL;

	r = palloc0(sizeof(GsHeapReader));
	r->node = child;
	r->rel = rel;
	r->snapshot = scan->rs_base.rs_snapshot;
	r->scan = scan;
	r->pbscan = (ParallelBlockTableScanDesc) scan->rs_base.rs_parallel;
	r->strategy = scan->rs_strategy;
	r->buf = InvalidBuffer;
	r->nextbuf = InvalidBuffer;
	r->tuple.t_tableOid = RelationGetRelid(rel);
	r->slot = MakeSingleTupleTableSlot(RelationGetDescr(rel),
									   &TTSOpsHeapTuple);
	if (proj != NULL)
	{
		r->pslot = child->ps_ResultTupleSlot;
		r->proj = proj;
		r->proj_max = proj_max;
		gs_hr_projection_offsets(r);
	}
	if (r->pbscan != NULL)
		table_block_parallelscan_startblock_init(rel,
												 scan->rs_parallelworkerdata,
												 r->pbscan);
	else
	{
		r->nblocks = scan->rs_nblocks;
		r->startblock = r->nblocks > 0 ? scan->rs_startblock % r->nblocks : 0;
	}
	r->next = gs_hr_take(r);
	if (r->next != InvalidBlockNumber)
		r->nextbuf = ReadBufferExtended(rel, MAIN_FORKNUM, r->next,
										RBM_NORMAL, r->strategy);
	if (child->instrument)
		InstrStartNode(child->instrument);
	return r;
}

/*
 * An Append's reader, if child is an Append with a plain scan among its
 * subplans and no asynchronous ones.
 */
static GsHeapReader *
gs_hr_begin_append(PlanState *child)
{
	AppendState *as = (AppendState *) child;
	GsHeapReader *r;
	bool		any_scan = false;
	int			i;

	if (as->as_nasyncplans > 0 || child->qual != NULL ||
		child->ps_ProjInfo != NULL || child->state->es_epq_active != NULL)
		return NULL;
	for (i = 0; i < as->as_nplans; i++)
		if (IsA(as->appendplans[i], SeqScanState))
			any_scan = true;
	if (!any_scan)
		return NULL;

	r = palloc0(sizeof(GsHeapReader));
	r->node = child;
	r->append = as;
	if (child->instrument)
		InstrStartNode(child->instrument);
	return r;
}

/*
 * A reader of child's rows, or NULL if the child is not a scan the reader
 * may stand in for (the caller then runs the node).  The first page is
 * read by the first gs_heapread_next.
 */
GsHeapReader *
gs_heapread_begin(PlanState *child)
{
	if (child == NULL)
		return NULL;
	if (IsA(child, AppendState))
		return gs_hr_begin_append(child);
	return gs_hr_begin_scan(child);
}

/*
 * The next row of an Append's reader: ExecAppend's loop over its subplans,
 * each read by a scan reader where it can be.
 */
static TupleTableSlot *
gs_hr_append_next(GsHeapReader *r)
{
	AppendState *as = r->append;

	for (;;)
	{
		TupleTableSlot *slot;

		if (r->subnode == NULL)
		{
			if (r->done)
				return NULL;
			/* the first call finds the first subplan, as ExecAppend's does */
			as->as_begun = true;
			if (r->stopping || !as->choose_next_subplan(as))
			{
				r->done = true;
				if (r->node->instrument)
					InstrStopNode(r->node->instrument, r->rows);
				return NULL;
			}
			r->subnode = as->appendplans[as->as_whichplan];
			r->sub = gs_hr_begin_scan(r->subnode);
		}
		slot = r->sub ? gs_heapread_next(r->sub) : ExecProcNode(r->subnode);
		if (!TupIsNull(slot))
		{
			r->rows += 1;
			return slot;
		}
		if (r->sub)
			gs_heapread_end(r->sub);
		r->sub = NULL;
		r->subnode = NULL;
	}
}

/* the pins go and the node's instrumentation gets the rows */
static void
gs_hr_finish(GsHeapReader *r)
{
	if (r->done)
		return;
	r->done = true;
	r->rows -= r->ntup - r->pos;
	if (BufferIsValid(r->buf))
		ReleaseBuffer(r->buf);
	if (BufferIsValid(r->nextbuf))
		ReleaseBuffer(r->nextbuf);
	r->buf = r->nextbuf = InvalidBuffer;
	ExecClearTuple(r->slot);
	if (r->node->instrument)
		InstrStopNode(r->node->instrument, r->rows);
}

/*
 * The columns the node's projection picks of the tuple read last: taken at
 * their offsets from a tuple without NULLs where they are known
 * (proj_known), else from the tuple deformed in the reader's slot
 */
static TupleTableSlot *
gs_hr_project(GsHeapReader *r)
{
	HeapTupleHeader th = r->tuple.t_data;
	TupleTableSlot *in;
	TupleTableSlot *out = r->pslot;
	int			n = out->tts_tupleDescriptor->natts;
	int			i;

	if (r->proj_known && !(th->t_infomask & HEAP_HASNULL) &&
		HeapTupleHeaderGetNatts(th) >= r->proj_max)
	{
		const char *data = (const char *) th + th->t_hoff;

		if (r->walk_from >= 0)
			gs_hr_walk(r, data);
		ExecClearTuple(out);
		for (i = 0; i < n; i++)
		{
			Form_pg_attribute att = r->proj_att[i];
			int32		off = r->proj_off[i];

			if (att->attlen == -1)
				off = att_align_pointer(off, att->attalign, -1, data + off);
			out->tts_values[i] = fetchatt(att, data + off);
			out->tts_isnull[i] = false;
		}
		return ExecStoreVirtualTuple(out);
	}
	in = ExecStoreHeapTuple(&r->tuple, r->slot, false);
	slot_getsomeattrs(in, r->proj_max);
	ExecClearTuple(out);
	for (i = 0; i < n; i++)
	{
		out->tts_values[i] = in->tts_values[r->proj[i] - 1];
		out->tts_isnull[i] = in->tts_isnull[r->proj[i] - 1];
	}
	return ExecStoreVirtualTuple(out);
}

/*
 * The next row, in a slot of the reader's (valid until the next call: the
 * tuple lies in a pinned shared buffer), or NULL at the end.
 */
TupleTableSlot *
gs_heapread_next(GsHeapReader *r)
{
	if (r->append)
		return gs_hr_append_next(r);
	if (unlikely(r->pos >= r->ntup))
	{
		if (r->done || !gs_hr_next_page(r))
		{
			gs_hr_finish(r);
			return NULL;
		}
		gs_hr_count(r, r->ntup);
	}
	return gs_heapread_page_slot(r, r->offs[r->pos++]);
}

/*
 * Can r's rows be copied from their pages a page at a time
 * (gs_heapread_next_page), without a slot?  Those of a plain table's
 * reader (not an Append's), as whole tuples, and those of a projection
 * whose columns' places are known (proj_known), from their values' bytes.
 * If so, *pr says how (gs_page_row, sortstate_int.h).
 */
bool
gs_heapread_page_rows(GsHeapReader *r, GsPageRows *pr)
{
	if (r == NULL || r->append != NULL)
		return false;
	if (r->proj == NULL)
	{
		pr->fixed_off = NULL;
		pr->natts = RelationGetDescr(r->rel)->natts;
		pr->var_tail = false;
		pr->walk = NULL;
		return true;
	}
	if (!r->proj_known)
		return false;
	pr->fixed_off = r->proj_off;
	pr->natts = r->proj_max;
	pr->var_tail = r->proj_var;
	pr->walk = r->walk_from >= 0 ? gs_hr_walk : NULL;
	pr->walk_arg = r;
	return true;
}

/*
 * The visible tuples of the next page (of a plain scan's reader, see
 * gs_heapread_page_rows): their number, 0 at the end; *page (pinned until
 * the next call) and the numbers of their line pointers, *offs.  A
 * caller that takes rows a page at a time has no call a row here.
 */
int
gs_heapread_next_page(GsHeapReader *r, Page *page, const OffsetNumber **offs)
{
	int			n;

	Assert(r->append == NULL);
	if (r->pos >= r->ntup)
	{
		if (r->done || !gs_hr_next_page(r))
		{
			gs_hr_finish(r);
			return 0;
		}
		gs_hr_count(r, r->ntup);
	}
	n = r->ntup - r->pos;
	*page = r->page;
	*offs = r->offs + r->pos;
	r->pos = r->ntup;
	return n;
}

/*
 * The tuple at off of the page gs_heapread_next_page returned last, as
 * gs_heapread_next would return it (projected if the node projects):
 * for a row that can't be copied from its bytes.
 */
TupleTableSlot *
gs_heapread_page_slot(GsHeapReader *r, OffsetNumber off)
{
	ItemId		lp = PageGetItemId(r->page, off);

	r->tuple.t_data = (HeapTupleHeader) PageGetItem(r->page, lp);
	r->tuple.t_len = ItemIdGetLength(lp);
	ItemPointerSet(&r->tuple.t_self, r->blkno, off);
	if (r->proj != NULL)
		return gs_hr_project(r);
	return ExecStoreHeapTuple(&r->tuple, r->slot, false);
}

/*
 * Stop taking more of the input than what this process has been handed:
 * the rows of the blocks (and subplans) it holds still come, then the end.
 * Only a process of a parallel scan can stop early, as the other
 * participants then read the rest; false if r can't (the caller must read
 * on).  An Append's reader stops its current subplan's scan where it can,
 * else reads that subplan to its end, and then chooses no other.
 */
bool
gs_heapread_stop(GsHeapReader *r)
{
	if (r == NULL)
		return false;
	if (r->append)
	{
		if (r->append->as_pstate == NULL)
			return false;
		r->stopping = true;
		if (r->sub)
			(void) gs_heapread_stop(r->sub);
		return true;
	}
	if (r->pbscan == NULL)
		return false;
	r->stopping = true;
	return true;
}

void
gs_heapread_end(GsHeapReader *r)
{
	if (r->append)
	{
		if (r->sub)
			gs_heapread_end(r->sub);
		if (!r->done && r->node->instrument)
			InstrStopNode(r->node->instrument, r->rows);
		pfree(r);
		return;
	}
	gs_hr_finish(r);
	ExecDropSingleTupleTableSlot(r->slot);
	pfree(r);
}
