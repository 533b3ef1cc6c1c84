/*-------------------------------------------------------------------------
 *
 * index_rows.c
 *	  The rows of a btree build in memory: the primitives its drivers
 *	  (index_build.c, index_cluster.c, index_parallel.c, index_spill.c,
 *	  index_merge.c) call.
 *
 * Each index tuple is formed into an arena, and a normalized key is
 * written for it into an engine key buffer: the encoded key columns
 * (gpusort_keys.h) followed by one 64-bit word holding the heap TID, so
 * that the engine's order is btree order whenever the columns are encoded
 * exactly.  Runs of rows whose column part is equal and not exact are put
 * in order with the index's own comparators (sort support, as tuplesort
 * does), then TID.  Unique indexes are checked over the sorted rows (live
 * tuples only, as btbuild keeps recently dead ones out of the check), and
 * the tuples of a build that fits in memory go to the page writer
 * (index_write.c) from here.
 *
 * It calls down only: keys, engines, threads (spill.c) and the page
 * writer; never the drivers above it.
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

/* column part of the key: at most this many bytes, so the TID fits */
#define GS_IDX_MAX_COL_BYTES	24

/* first allocation, in rows, and how often long loops check interrupts */
#define GS_IDX_MIN_ROWS			1024
#define GS_IDX_CFI_EVERY		65536

/* index tuples are packed into blocks of this size (less when memory is short) */
#define GS_IDX_ARENA_BLOCK		((Size) 4 * 1024 * 1024)
#define GS_IDX_ARENA_MIN_BLOCK	((Size) 64 * 1024)
/* who built an index, and why not gpusort: LOG when asked, else DEBUG1 */

/* how far ahead the leaf load prefetches tuples */
#define GS_IDX_PREFETCH			8


/*
 * The key plan over the leading key columns the encoder accepts; NULL when
 * it accepts not even the first.
 */
static GsKeyPlan *
gs_idx_keyplan(GsIdxBuild *b, int *ncols_planned)
{
	Relation	index = b->index;
	AttrNumber	attnos[INDEX_MAX_KEYS];
	Oid			sortops[INDEX_MAX_KEYS];
	Oid			colls[INDEX_MAX_KEYS];
	bool		nulls_first[INDEX_MAX_KEYS];
	int			ncols = 0;
	int			maxbytes;
	int			i;

	for (i = 0; i < b->nkeyatts; i++)
	{
		int16		opt = index->rd_indoption[i];
		Oid			type = index->rd_opcintype[i];
		Oid			op;

		op = get_opfamily_member(index->rd_opfamily[i], type, type,
								 (opt & INDOPTION_DESC) ?
								 BTGreaterStrategyNumber :
								 BTLessStrategyNumber);
		if (!OidIsValid(op) ||
			!gs_column_encodable(TupleDescAttr(b->itupdesc, i)->atttypid,
								 op, index->rd_indcollation[i], NULL))
			break;
		attnos[i] = i + 1;
		sortops[i] = op;
		colls[i] = index->rd_indcollation[i];
		nulls_first[i] = (opt & INDOPTION_NULLS_FIRST) != 0;
		ncols++;
	}
	*ncols_planned = ncols;
	if (ncols == 0)
		return NULL;

	maxbytes = Min(gpusort_max_key_bytes, GS_IDX_MAX_COL_BYTES);
	return gs_keyplan_create(ncols, attnos, sortops, colls, nulls_first,
							 b->itupdesc, maxbytes);
}

/* the estimated size of one index tuple in memory (arena) */
static Size
gs_idx_tuple_width(GsIdxBuild *b)
{
	Size		width = sizeof(IndexTupleData);
	int			i;

	for (i = 0; i < b->itupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(b->itupdesc, i);

		if (att->attlen > 0)
			width = att_align_nominal(width, att->attalign) + att->attlen;
		else
			width += get_typavgwidth(att->atttypid, att->atttypmod);
	}
	return MAXALIGN(width) + (b->payload ? 8 + b->payload_width : 0);
}

/* are all key columns fixed-width, so that no key is ever encoded lossily? */
static bool
gs_idx_keys_fixed_width(GsIdxBuild *b)
{
	int			i;

	for (i = 0; i < b->nkeyatts; i++)
		if (TupleDescAttr(b->itupdesc, i)->attlen <= 0)
			return false;
	return true;
}

/*
 * Tuples formed in place when every column is fixed-width (no TOAST, no
 * varlena), and small enough that index_form_tuple could never refuse one
 * (a NULL bitmap adds at most a MAXALIGN'd word).
 */
static void
gs_idx_init_fixed(GsIdxBuild *b)
{
	Size		off = 0;
	int			i;

	b->fixed = false;
	for (i = 0; i < b->itupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(b->itupdesc, i);

		if (att->attlen <= 0)
			return;
		off = att_align_nominal(off, att->attalign);
		b->fixed_off[i] = (uint16) (IndexInfoFindDataOffset(0) + off);
		off += att->attlen;
	}
	b->fixed_size = MAXALIGN(IndexInfoFindDataOffset(0) + off);
	b->fixed = b->fixed_size + MAXIMUM_ALIGNOF <= INDEX_SIZE_MASK;
}

/*
 * Set up b for index: its key plan and key layout (the same in the leader
 * and in parallel workers).  False when the leading key column cannot be
 * encoded.
 */
bool
gs_idx_init(GsIdxBuild *b, Relation heap, Relation index,
			IndexInfo *indexInfo)
{
	int			ncols_planned;

	memset(b, 0, sizeof(GsIdxBuild));
	b->cxt = CurrentMemoryContext;
	b->heap = heap;
	b->index = index;
	b->itupdesc = RelationGetDescr(index);
	b->nkeyatts = IndexRelationGetNumberOfKeyAttributes(index);
	b->isunique = indexInfo->ii_Unique;
	b->nulls_not_distinct = indexInfo->ii_NullsNotDistinct;

	b->kp = gs_idx_keyplan(b, &ncols_planned);
	if (b->kp == NULL)
		return false;
	b->colbytes = gs_keyplan_key_bytes(b->kp);
	b->colwords = (b->colbytes + 7) / 8;
	b->keybytes = (b->colwords + 1) * 8;
	Assert(GS_KEY_BYTES_VALID(b->keybytes));
	b->arenacxt = CurrentMemoryContext;
	b->exact = ncols_planned == b->nkeyatts &&
		gs_keyplan_ncols_encoded(b->kp) == b->nkeyatts &&
		gs_keyplan_exact(b->kp);
	gs_idx_init_fixed(b);
	return true;
}

void
gs_idx_sortsupport(GsIdxBuild *b)
{
	int			i;

	b->ssup = (SortSupport) palloc0(b->nkeyatts * sizeof(SortSupportData));
	for (i = 0; i < b->nkeyatts; i++)
	{
		SortSupport s = &b->ssup[i];
		int16		opt = b->index->rd_indoption[i];

		s->ssup_cxt = CurrentMemoryContext;
		s->ssup_collation = b->index->rd_indcollation[i];
		s->ssup_nulls_first = (opt & INDOPTION_NULLS_FIRST) != 0;
		s->ssup_attno = i + 1;
		s->abbreviate = false;
		gs_PrepareSortSupportFromIndexRel(b->index,
										  (opt & INDOPTION_DESC) != 0, s);
	}
}

/* compare the key columns of two index tuples, as the btree orders them */
int
gs_idx_cmp_cols(GsIdxBuild *b, IndexTuple t1, IndexTuple t2)
{
	int			i;

	for (i = 0; i < b->nkeyatts; i++)
	{
		Datum		d1,
					d2;
		bool		n1,
					n2;
		int			c;

		d1 = index_getattr(t1, i + 1, b->itupdesc, &n1);
		d2 = index_getattr(t2, i + 1, b->itupdesc, &n2);
		c = ApplySortComparator(d1, n1, d2, n2, &b->ssup[i]);
		if (c != 0)
			return c;
	}
	return 0;
}

/* qsort_arg comparator over row numbers: key columns, then heap TID */
static int
gs_idx_cmp_rows(const void *a, const void *bb, void *arg)
{
	GsIdxBuild *b = (GsIdxBuild *) arg;
	IndexTuple	t1 = b->tuples[*(const uint32 *) a];
	IndexTuple	t2 = b->tuples[*(const uint32 *) bb];
	int			c;

	c = gs_idx_cmp_cols(b, t1, t2);
	if (c != 0)
		return c;
	return ItemPointerCompare(&t1->t_tid, &t2->t_tid);
}

/*
 * Fresh memory costs a page fault and the kernel's zeroing of each page on
 * first touch: in a profile of a build of 10M int8 keys, a quarter of the
 * scan.  Arena blocks and arrays get huge pages where the kernel gives
 * them, and a thread populates them ahead of the scan: the next arena
 * block, taken before it is needed, and the array slots of the rows the
 * next blocks should take (MADV_POPULATE_WRITE faults pages in without
 * changing them, so the backend may write there meanwhile; kernels before
 * 5.14 refuse it and the thread gives up).  What it populates lies ahead
 * of the backend's writes: a huge page the backend touches first, the
 * backend zeroes itself.
 */
static void
gs_idx_prefault(GsIdxBuild *b, char *blk)
{
	GsPrefault *pf = &b->prefault;
	Size		used = b->mem_arena - b->arena_left;
	Size		per_row;
	size_t		from = Max(b->prefault_rows, b->n);
	size_t		to;

	gs_populate_wait(&b->prefault_task);
	memset(pf, 0, sizeof(GsPrefault));
	if (blk != NULL)
	{
		pf->start[0] = blk;
		pf->len[0] = b->arena_block;
	}
	/* the smallest index tuple takes 16 bytes: at first, expect those */
	per_row = b->n > 0 ? Max(used / b->n, 16) : 16;
	to = Min(b->cap, b->n + 3 * (b->arena_block / per_row));
	if (to > from)
	{
		pf->start[1] = (char *) (b->tuples + from);
		pf->len[1] = (to - from) * sizeof(IndexTuple);
		pf->start[2] = (char *) (b->flags + from);
		pf->len[2] = to - from;
		/* a GPU engine's key buffer is pinned: resident already */
		if (!b->eng->is_gpu)
		{
			pf->start[3] = b->keys + from * b->keybytes;
			pf->len[3] = (to - from) * b->keybytes;
		}
		b->prefault_rows = to;
	}
	if (pf->len[0] > 0 || pf->len[1] > 0)
		gs_populate_start(b->cxt, &b->prefault_task, pf);
}

/* wait for the populating thread: before the arrays move or go */
void
gs_idx_prefault_wait(GsIdxBuild *b)
{
	gs_populate_wait(&b->prefault_task);
}

/* huge pages for the arrays, just allocated for b->cap rows */
static void
gs_idx_advise_arrays(GsIdxBuild *b)
{
	gs_advise_huge(b->tuples, b->cap * sizeof(IndexTuple));
	if (!b->eng->is_gpu)
		gs_advise_huge(b->keys, b->cap * b->keybytes);
}

/* a new arena block at the end of the list (huge pages advised) */
static char *
gs_idx_arena_alloc(GsIdxBuild *b)
{
	/* huge pages need 2 MB alignment: blocks that large get it */
	Size		slack = b->arena_block >= HUGE_PAGE_BYTES ? HUGE_PAGE_BYTES : 0;
	char	   *raw;
	char	   *blk;

	if (b->nblocks == b->blocks_cap)
	{
		b->blocks_cap = Max(16, b->blocks_cap * 2);
		if (b->blocks == NULL)
		{
			b->blocks = MemoryContextAlloc(b->cxt, b->blocks_cap * sizeof(char *));
			b->blocks_raw = MemoryContextAlloc(b->cxt, b->blocks_cap * sizeof(char *));
		}
		else
		{
			b->blocks = repalloc(b->blocks, b->blocks_cap * sizeof(char *));
			b->blocks_raw = repalloc(b->blocks_raw, b->blocks_cap * sizeof(char *));
		}
	}
	raw = (char *) MemoryContextAllocExtended(b->cxt, b->arena_block + slack,
											  MCXT_ALLOC_HUGE);
	blk = slack ? (char *) TYPEALIGN(HUGE_PAGE_BYTES, raw) : raw;
	b->blocks[b->nblocks] = blk;
	b->blocks_raw[b->nblocks] = raw;
	b->nblocks++;
	gs_advise_huge(blk, b->arena_block);
	return blk;
}

/*
 * Make the arena's free space a block with room for size bytes: a block
 * taken ahead or kept from an earlier run, else a new one (a tuple larger
 * than a block gets one of its own, freed after the run).  When no block
 * follows, the next one is allocated ahead and populated meanwhile, if the
 * memory allows taking it now.
 */
void
gs_idx_arena_next(GsIdxBuild *b, Size size)
{
	char	   *blk;
	char	   *ahead = NULL;

	if (size > b->arena_block)
	{
		b->arena = (char *) MemoryContextAllocExtended(b->arenacxt, size,
													   MCXT_ALLOC_HUGE);
		b->arena_left = size;
		b->mem_arena += size;
		return;
	}
	if (b->blk_next == b->nblocks)
		(void) gs_idx_arena_alloc(b);
	blk = b->blocks[b->blk_next++];
	b->arena = blk;
	b->arena_left = b->arena_block;
	b->mem_arena += b->arena_block;

	if (b->blk_next == b->nblocks &&
		b->mem_arena + b->arena_block + b->cap * GS_IDX_ROW_BYTES(b) <=
		b->mem_limit)
		ahead = gs_idx_arena_alloc(b);
	gs_idx_prefault(b, ahead);
}

/* free the arena's blocks (the build is past its scan and runs) */
void
gs_idx_arena_free(GsIdxBuild *b)
{
	int			i;

	gs_idx_prefault_wait(b);
	for (i = 0; i < b->nblocks; i++)
		pfree(b->blocks_raw[i]);
	b->nblocks = 0;
	b->blk_next = 0;
	MemoryContextReset(b->arenacxt);
	b->arena = NULL;
	b->arena_left = 0;
	b->mem_arena = 0;
}

/* false when growing would exceed maintenance_work_mem or one sort */
bool
gs_idx_grow(GsIdxBuild *b)
{
	size_t		newcap = b->cap * 2;
	/* blocks taken ahead or kept from an earlier run are memory held too */
	Size		held = b->mem_arena +
		(Size) (b->nblocks - b->blk_next) * b->arena_block;
	Size		room = b->mem_limit - Min(b->mem_limit, held);

	if (newcap > GS_MAX_ROWS)
		newcap = GS_MAX_ROWS;
	if (newcap * GS_IDX_ROW_BYTES(b) > room)
		newcap = room / GS_IDX_ROW_BYTES(b);
	if (newcap <= b->cap)
		return false;
	gs_idx_prefault_wait(b);
	b->keys = gs_keybuf_grow(b->eng, b->keys, b->cap * b->keybytes,
							 newcap * b->keybytes);
	b->tuples = (IndexTuple *) repalloc_huge(b->tuples,
											 newcap * sizeof(IndexTuple));
	b->flags = (uint8 *) repalloc_huge(b->flags, newcap);
	b->cap = newcap;
	gs_idx_advise_arrays(b);
	return true;
}

/*
 * Room in the arrays for nrows rows, whatever maintenance_work_mem says
 * (a parallel build's leader gathering its workers' rows, whose memory
 * their shares counted); false when one sort cannot take that many.
 */
bool
gs_idx_reserve(GsIdxBuild *b, size_t nrows)
{
	if (nrows > GS_MAX_ROWS)
		return false;
	if (nrows <= b->cap)
		return true;
	gs_idx_prefault_wait(b);
	b->keys = gs_keybuf_grow(b->eng, b->keys, b->cap * b->keybytes,
							 nrows * b->keybytes);
	b->tuples = (IndexTuple *) repalloc_huge(b->tuples,
											 nrows * sizeof(IndexTuple));
	b->flags = (uint8 *) repalloc_huge(b->flags, nrows);
	b->cap = nrows;
	gs_idx_advise_arrays(b);
	return true;
}

/* the error btbuild raises for two live tuples with equal keys */
void
gs_idx_unique_violation(GsIdxBuild *b, IndexTuple itup)
{
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	char	   *key_desc;

	index_deform_tuple(itup, b->itupdesc, values, isnull);
	key_desc = BuildIndexValueDescription(b->index, values, isnull);
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("could not create unique index \"%s\"",
					RelationGetRelationName(b->index)),
			 key_desc ? errdetail("Key %s is duplicated.", key_desc) :
			 errdetail("Duplicate keys exist."),
			 errtableconstraint(b->heap,
								RelationGetRelationName(b->index))));
}

/* any key column NULL? */
bool
gs_idx_key_has_null(GsIdxBuild *b, IndexTuple itup)
{
	int			i;

	if (!IndexTupleHasNulls(itup))
		return false;
	for (i = 0; i < b->nkeyatts; i++)
		if (att_isnull(i, (bits8 *) itup + sizeof(IndexTupleData)))
			return true;
	return false;
}

/*
 * Rows perm[s .. e-1] have equal column keys and are in final order.
 * Raise the unique violation if two live rows have equal key columns.
 */
static void
gs_idx_check_unique(GsIdxBuild *b, const uint32 *perm, size_t s, size_t e)
{
	size_t		g = s;

	while (g < e)
	{
		size_t		h = g + 1;
		int			alive = (b->flags[perm[g]] & GS_ROW_ALIVE) ? 1 : 0;
		IndexTuple	first_alive = alive ? b->tuples[perm[g]] : NULL;

		/* the group of rows equal to row g */
		while (h < e)
		{
			uint32		r0 = perm[h - 1];
			uint32		r1 = perm[h];
			bool		equal;

			if (b->exact &&
				!((b->flags[r0] | b->flags[r1]) & GS_ROW_LOSSY))
				equal = true;
			else
				equal = gs_idx_cmp_cols(b, b->tuples[r0], b->tuples[r1]) == 0;
			if (!equal)
				break;
			if (b->flags[r1] & GS_ROW_ALIVE)
			{
				if (first_alive == NULL)
					first_alive = b->tuples[r1];
				alive++;
			}
			h++;
		}

		if (alive >= 2 &&
			(b->nulls_not_distinct || !gs_idx_key_has_null(b, first_alive)))
			gs_idx_unique_violation(b, first_alive);
		g = h;
	}
}

/*
 * Sort the collected rows; returns perm, the rows in btree order.  Raises
 * the unique violation when there is one.  keys_out: keys[] must come back
 * in sorted order (else it does when b->keys_sorted says so).
 */
uint32 *
gs_idx_sort(GsIdxBuild *b, bool keys_out)
{
	uint32	   *perm;
	char	   *fallback = NULL;
	gs_sort_stats stats;
	size_t		s;
	bool		final;
	instr_time	t0;

	perm = (uint32 *) palloc_extended(Max(b->n, 1) * sizeof(uint32),
									  MCXT_ALLOC_HUGE);
	if (b->n == 0)
		return perm;
	INSTR_TIME_SET_CURRENT(t0);

	/*
	 * The engine's order is final when keys are exact and no check is due;
	 * otherwise the sorted keys come back, to find runs of equal keys.  The
	 * leaf load uses them too, to skip deduplication checks; a GPU engine
	 * is asked for them for that alone (a cheap copy back), the CPU engine
	 * not (writing them out costs it more than the checks).
	 */
	final = b->exact && !b->anylossy && !b->isunique;
	b->keys_sorted = !final || keys_out ||
		(b->eng->is_gpu && !b->isunique && BTGetDeduplicateItems(b->index) &&
		 _bt_allequalimage(b->index, false));
	b->eng = gs_engine_sort(b->eng, b->keys, b->n, b->keybytes, perm,
							b->keys_sorted ? GS_SORT_KEYS_OUT : 0,
							&stats, &fallback);
	if (fallback)
		ereport(DEBUG2,
				(errmsg_internal("gpusort index sort fell back to the CPU: %s",
								 fallback)));
	if (final)
	{
		b->sort_ms += gs_idx_ms_since(t0);
		return perm;
	}

	/*
	 * Runs of equal column keys: put them in order with the comparators
	 * where the keys are not exact, and check uniqueness.  Keys are now in
	 * sorted order, so the column part of key i belongs to row perm[i];
	 * reordering rows within a run keeps that true, but not of the heap TID
	 * word after it: that is written again from the rows' own TIDs, for
	 * the merges of runs break ties between runs with it (left as the
	 * engine sorted it, a row of one run could pass a row of another with
	 * equal columns and a lower TID: a posting list out of TID order).
	 */

	s = 0;
	while (s < b->n)
	{
		const uint64 *k0 = (const uint64 *) (b->keys + s * b->keybytes);
		size_t		e = s + 1;
		bool		lossy = (b->flags[perm[s]] & GS_ROW_LOSSY) != 0;

		while (e < b->n &&
			   memcmp(k0, b->keys + e * b->keybytes,
					  b->colwords * sizeof(uint64)) == 0)
		{
			lossy |= (b->flags[perm[e]] & GS_ROW_LOSSY) != 0;
			e++;
		}

		if (e - s > 1)
		{
			if (!b->exact || lossy)
			{
				size_t		i;

				qsort_arg(perm + s, e - s, sizeof(uint32), gs_idx_cmp_rows, b);
				for (i = s; i < e; i++)
				{
					uint64		w = gs_idx_tid_word(&b->tuples[perm[i]]->t_tid);

					memcpy(b->keys + i * b->keybytes + b->colwords * sizeof(uint64),
						   &w, sizeof(w));
				}
			}
			if (b->isunique)
				gs_idx_check_unique(b, perm, s, e);
		}

		if ((s / GS_IDX_CFI_EVERY) != (e / GS_IDX_CFI_EVERY))
			CHECK_FOR_INTERRUPTS();
		s = e;
	}
	b->sort_ms += gs_idx_ms_since(t0);
	return perm;
}

/*
 * Sort support, buffers and engine for a build set up by gs_idx_init, in
 * CurrentMemoryContext, sized from the planner's estimate of the heap's
 * rows.  partial: the rows may be few (a partial index).
 */
void
gs_idx_setup(GsIdxBuild *b, bool partial)
{
	gs_idx_setup_share(b, partial, (Size) maintenance_work_mem * 1024, 1.0);
}

/*
 * The same for one participant of a parallel build: mem bytes of memory,
 * and that fraction of the heap's rows to expect.
 */
void
gs_idx_setup_share(GsIdxBuild *b, bool partial, Size mem, double fraction)
{
	double		est;
	double		rowbytes;

	gs_idx_sortsupport(b);

	{
		BlockNumber pages;
		double		allvisfrac;

		estimate_rel_size(b->heap, NULL, &pages, &est, &allvisfrac);
		est *= fraction;
	}

	/*
	 * Rows are collected within maintenance_work_mem, as PostgreSQL's build
	 * does; when it is full, they go to disk as a sorted run and the build
	 * ends with a merge (index_spill.c).  Buffers are made for all rows
	 * when they should fit, else for one run of rows of the estimated
	 * width.
	 */
	b->mem_limit = mem;
	b->arena_block = Min(GS_IDX_ARENA_BLOCK,
						 Max(b->mem_limit / 16, GS_IDX_ARENA_MIN_BLOCK));
	b->may_spill = true;
	/* a partial index may take few of them: start small, grow as needed */
	if (partial)
		est /= 16;
	est = Max(est, GS_IDX_MIN_ROWS);
	rowbytes = GS_IDX_ROW_BYTES(b) + gs_idx_tuple_width(b);
	if (est * rowbytes <= (double) b->mem_limit)
	{
		b->cap = (size_t) Min(est * 1.05, (double) GS_MAX_ROWS);
		b->cap = Min(b->cap, b->mem_limit / GS_IDX_ROW_BYTES(b));
	}
	else
	{
		/*
		 * Runs ahead: the scan fills half the memory while one is written.
		 * A variable-width key may come out lossy, and then the backend
		 * merges the runs itself: such a build waits for its first run to
		 * show it has none.
		 */
		if (b->overlap_ok && gs_idx_keys_fixed_width(b))
		{
			b->overlap = true;
			b->mem_limit /= 2;
		}
		b->cap = (b->mem_limit - Min(b->mem_limit / 2, b->arena_block)) /
			rowbytes;
		b->cap = Min(Max(b->cap, GS_IDX_MIN_ROWS), GS_MAX_ROWS);
		est = (double) b->cap;
	}

	b->eng = gs_engine_choose(est, NULL);
	b->keys = gs_keybuf_alloc(b->eng, b->cap * b->keybytes,
							  CurrentMemoryContext);
	b->tuples = (IndexTuple *) palloc_extended(b->cap * sizeof(IndexTuple),
											   MCXT_ALLOC_HUGE);
	b->flags = (uint8 *) palloc_extended(b->cap, MCXT_ALLOC_HUGE);
	gs_idx_advise_arrays(b);
	b->scratch = AllocSetContextCreate(CurrentMemoryContext,
									   "gpusort index tuple scratch",
									   ALLOCSET_DEFAULT_SIZES);
	b->arenacxt = AllocSetContextCreate(CurrentMemoryContext,
										"gpusort index tuples",
										ALLOCSET_DEFAULT_SIZES);
}

/*
 * Gathering the sorted tuple pointers: threads (which call nothing of
 * PostgreSQL's) take a stretch of the permutation each, of at least
 * GS_IDX_GATHER_PART rows (a thread costs about what a serial gather of
 * 10k rows does).
 */
#define GS_IDX_GATHER_PART		((size_t) 16384)

typedef struct GsIdxGather
{
	IndexTuple *src;
	const uint32 *perm;
	IndexTuple *dst;
	size_t		n;
} GsIdxGather;

static void
gs_idx_gather_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsIdxGather *g = (GsIdxGather *) arg;
	size_t		from = g->n * part / nparts;
	size_t		to = g->n * (part + 1) / nparts;
	size_t		i;

	for (i = from; i < to; i++)
	{
		if ((i & 65535) == 0 && *stop)
			return;
		g->dst[i] = g->src[g->perm[i]];
	}
}

/*
 * May tuple b have the key columns of tuple a, the one before it?  Their
 * first keybytes data bytes are equal, or one has NULLs.  For key columns
 * that are all fixed-width, those bytes are the columns, and equal bytes
 * are what deduplication calls equal (it is done only on indexes whose
 * opclasses make image equality the equality).
 */
static inline bool
gs_idx_same_bytes(IndexTuple a, IndexTuple b, int keybytes)
{
	if (IndexTupleHasNulls(a) || IndexTupleHasNulls(b))
		return true;
	return memcmp((char *) a + MAXALIGN(sizeof(IndexTupleData)),
				  (char *) b + MAXALIGN(sizeof(IndexTupleData)),
				  keybytes) == 0;
}

/*
 * The data bytes the key columns of a tuple without NULLs take when they
 * are all fixed-width, else 0.
 */
static int
gs_idx_fixed_key_bytes(GsIdxBuild *b)
{
	int			off = 0;
	int			i;

	for (i = 0; i < b->nkeyatts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(b->itupdesc, i);

		if (att->attlen <= 0)
			return 0;
		off = att_align_nominal(off, att->attalign) + att->attlen;
	}
	return off;
}

/*
 * Sort the rows collected, all in memory, and write them as the index (or
 * hand them to b's sink when it has one).
 */
void
gs_idx_write_sorted(GsIdxBuild *b)
{
	GsBtWriter *w = NULL;
	uint32	   *perm;
	IndexTuple *sorted;
	int			fixed;
	GsEngine   *eng;
	size_t		i;

	gs_idx_prefault_wait(b);

	/* the engine for the actual row count, if the estimate chose another */
	eng = gs_engine_choose((double) b->n, NULL);
	if (eng != b->eng && b->n > 0)
	{
		char	   *keys = gs_keybuf_alloc(eng, b->n * b->keybytes,
										   CurrentMemoryContext);

		memcpy(keys, b->keys, b->n * b->keybytes);
		gs_keybuf_free(b->eng, b->keys);
		b->keys = keys;
		b->eng = eng;
	}

	/* sort */
	if (b->sink == NULL)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE,
									 PROGRESS_BTREE_PHASE_PERFORMSORT_1);
	perm = gs_idx_sort(b, false);

	/*
	 * Gather the tuple pointers in order first: a tight loop of independent
	 * random loads overlaps its cache misses, which the load loop, with
	 * much work per tuple, cannot.
	 */
	sorted = (IndexTuple *) palloc_extended(Max(b->n, 1) * sizeof(IndexTuple),
											MCXT_ALLOC_HUGE);
	{
		GsIdxGather g;
		int			nparts;

		g.src = b->tuples;
		g.perm = perm;
		g.dst = sorted;
		g.n = b->n;
		nparts = (int) Min((size_t) gpusort_cpu_threads,
						   b->n / GS_IDX_GATHER_PART + 1);
		while (!gs_parallel(gs_idx_gather_part, &g, nparts))
			;
	}

	/*
	 * Without sorted keys to tell where key columns change, the page
	 * writer would compare every tuple with its pending posting list's
	 * base through _bt_keep_natts_fast (about 8% of a build); for
	 * fixed-width key columns a comparison of their bytes with the
	 * previous tuple's, in cache, tells it where to look.
	 */
	fixed = 0;
	if (!b->keys_sorted && b->sink == NULL && !b->isunique &&
		BTGetDeduplicateItems(b->index) &&
		(fixed = gs_idx_fixed_key_bytes(b)) > 0 &&
		!_bt_allequalimage(b->index, false))
		fixed = 0;
	pfree(b->tuples);
	b->tuples = NULL;

	/* write */
	if (b->sink == NULL)
		w = gs_btw_begin(b->heap, b->index, b->isunique);
	for (i = 0; i < b->n; i++)
	{
		bool		maybe_dup;

		/* tuples are scattered over the arena: fetch ahead */
		if (i + GS_IDX_PREFETCH < b->n)
			__builtin_prefetch(sorted[i + GS_IDX_PREFETCH]);

		/*
		 * Column keys that differ mean key columns that differ (equal
		 * values encode equally), so no posting list can take the tuple.
		 */
		if (fixed > 0)
			maybe_dup = i == 0 ||
				gs_idx_same_bytes(sorted[i - 1], sorted[i], fixed);
		else
			maybe_dup = !b->keys_sorted || i == 0 ||
				memcmp(b->keys + (i - 1) * b->keybytes,
					   b->keys + i * b->keybytes,
					   b->colwords * sizeof(uint64)) == 0;
		if (b->sink != NULL)
			b->sink(b->sink_arg, sorted[i]);
		else if (maybe_dup)
			gs_btw_add(w, sorted[i], true);
		else
			gs_btw_add_distinct(w, sorted[i]);
	}
	if (w != NULL)
		gs_btw_finish(w);
}
