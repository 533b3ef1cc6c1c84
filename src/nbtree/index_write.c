/*-------------------------------------------------------------------------
 *
 * index_write.c
 *	  Write a btree from index tuples that arrive in final order.
 *
 * The pages must be the ones PostgreSQL's own build writes, so that the
 * index cannot be told apart from a native one.  The layout rules are
 * therefore those of nbtree's bottom-up build (see nbtree's README and
 * nbtsort.c in PostgreSQL 15):
 *
 *	- one "open" page per level; leaf pages are closed when their free space
 *	  drops below the fillfactor target, internal pages at 70%, but every
 *	  page keeps at least two data items;
 *	- closing a page moves its last item to the next page of the level and
 *	  makes a high key of it (on the leaf level truncated against the item
 *	  before it with _bt_truncate), and adds a downlink for the closed page,
 *	  keyed by its low key, to the parent level (started on demand);
 *	- the first data item of an internal page is "minus infinity" (no key
 *	  attributes), as is the low key of the first page of each level;
 *	- at the end the open page of each level, bottom up, is the rightmost
 *	  one: it gets no high key, so its line pointers move back one slot;
 *	  the topmost one is the root;
 *	- block numbers are handed out in the order pages are started (block 0
 *	  is the metapage, written last); pages are written outside shared
 *	  buffers, WAL-logged as full-page images when the relation needs WAL,
 *	  checksummed, and synced at the end (their writeback started as they
 *	  go); in a parallel build the workers log and write them
 *	  (index_pipe.c);
 *	- with deduplication, runs of equal keys become posting list tuples of
 *	  at most a tenth of a page, built with nbtree's exported _bt_dedup_*
 *	  helpers.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/xloginsert.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/bufpage.h"
#include "storage/smgr.h"
#include "utils/rel.h"

#include "index_int.h"

/* how often the leaf load reports progress, in tuples */
#define GS_BTW_PROGRESS_EVERY	1024

/* the page being filled on one level of the tree */
typedef struct GsBtLevel
{
	Page		page;			/* page image being built */
	BlockNumber blkno;			/* where it will be written */
	IndexTuple	lowkey;			/* strict lower bound of the page (palloc'd) */
	OffsetNumber lastoff;		/* offset of the last item added */
	Size		lastextra;		/* posting list bytes of that item */
	uint32		level;			/* 0 = leaf */
	Size		target_free;	/* page is "full" below this free space */
	struct GsBtLevel *up;		/* parent level, NULL until needed */
} GsBtLevel;

struct GsBtWriter
{
	Relation	heap;
	Relation	index;
	BTScanInsert inskey;		/* for _bt_truncate */
	int			nkeyatts;
	bool		use_wal;
	BlockNumber next_blkno;		/* next block number to hand out */
	BlockNumber nwritten;		/* blocks that exist on disk */
	BlockNumber nflushing;		/* blocks whose writeback has started */
	Page		spare;			/* a written page's buffer, for reuse */
	GsBtLevel  *leaf;			/* NULL until the first tuple */

	/* deduplication */
	bool		dedup;
	BTDedupState dstate;
	IndexTuple	basecopy;		/* the pending base, when tuples are transient */
	IndexTuple	lone;			/* the pending tuple while no duplicate joined
								 * it (no posting list started yet) */

	/* workers that log and write the pages (index_pipe.c), or NULL */
	GsBtPipe   *pipe;
	uint64		pages;			/* pages written, here or through the pipe */
	uint64		pages_by_workers;	/* of those, logged by the workers */

	int64		ndone;			/* tuples added, for progress */
	instr_time	write_time;		/* in WAL and smgr calls */
	instr_time	sync_time;		/* in the final smgrimmedsync */
};

static void gs_btw_level_add(GsBtWriter *w, GsBtLevel *lv, IndexTuple itup,
							 Size truncextra);

/* a fresh, empty page for a level; slot P_HIKEY is reserved */
static Page
gs_btw_new_page(GsBtWriter *w, uint32 level)
{
	Page		page;
	BTPageOpaque op;

	if (w->spare)
	{
		page = w->spare;
		w->spare = NULL;
	}
	else
		page = (Page) palloc(BLCKSZ);

	_bt_pageinit(page, BLCKSZ);
	op = BTPageGetOpaque(page);
	op->btpo_prev = P_NONE;
	op->btpo_next = P_NONE;
	op->btpo_level = level;
	op->btpo_flags = (level == 0) ? BTP_LEAF : 0;
	op->btpo_cycleid = 0;

	/* the high key's line pointer is claimed now, filled on close */
	((PageHeader) page)->pd_lower += sizeof(ItemIdData);

	return page;
}

/* log and write one finished page at blkno, in this process */
static void
gs_btw_write_here(GsBtWriter *w, Page page, BlockNumber blkno)
{
	if (w->use_wal)
		log_newpage(GS_REL_PHYSICAL(w->index), MAIN_FORKNUM, blkno, page, true);
	PageSetChecksumInplace(page, blkno);
	gs_bt_store_page(RelationGetSmgr(w->index), w->use_wal, &w->nwritten,
					 &w->nflushing, (char *) page, blkno);
}

/*
 * Write one finished page at blkno, here or through the pipe (which
 * copies it); the buffer is kept for reuse.
 */
static void
gs_btw_write_page(GsBtWriter *w, Page page, BlockNumber blkno)
{
	instr_time	t0;
	instr_time	t1;

	INSTR_TIME_SET_CURRENT(t0);
	if (w->pipe != NULL)
		gs_btpipe_put(w->pipe, page, blkno);
	else
		gs_btw_write_here(w, page, blkno);
	w->pages++;
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_ACCUM_DIFF(w->write_time, t1, t0);

	if (w->spare == NULL)
		w->spare = page;
	else
		pfree(page);
}

static GsBtLevel *
gs_btw_level_start(GsBtWriter *w, uint32 level)
{
	GsBtLevel  *lv = (GsBtLevel *) palloc0(sizeof(GsBtLevel));

	lv->page = gs_btw_new_page(w, level);
	lv->blkno = w->next_blkno++;
	lv->lowkey = NULL;
	lv->lastoff = P_HIKEY;		/* the first item goes to P_FIRSTKEY */
	lv->lastextra = 0;
	lv->level = level;
	if (level == 0)
		lv->target_free = BTGetTargetPageFreeSpace(w->index);
	else
		lv->target_free = BLCKSZ * (100 - BTREE_NONLEAF_FILLFACTOR) / 100;
	lv->up = NULL;
	return lv;
}

/*
 * Put itup at offset off.  The first data item of an internal page keeps
 * only its downlink: its key is minus infinity.
 */
static void
gs_btw_put_item(Page page, IndexTuple itup, Size size, OffsetNumber off,
				bool minus_infinity)
{
	IndexTupleData bare;

	if (minus_infinity)
	{
		bare = *itup;
		bare.t_info = sizeof(IndexTupleData);
		BTreeTupleSetNAtts(&bare, 0, false);
		itup = &bare;
		size = sizeof(IndexTupleData);
	}

	if (PageAddItem(page, (Item) itup, size, off, false, false) ==
		InvalidOffsetNumber)
		elog(ERROR, "failed to add item to index page");
}

/*
 * Close the open page of lv: its last item moves to a new page, which
 * becomes the open page, and turns into the old page's high key.  The old
 * page gets a downlink in the parent level and is written.
 */
static void
gs_btw_level_close(GsBtWriter *w, GsBtLevel *lv)
{
	Page		opage = lv->page;
	BlockNumber oblkno = lv->blkno;
	OffsetNumber last = lv->lastoff;
	bool		leaf = (lv->level == 0);
	Page		npage;
	BlockNumber nblkno;
	ItemId		lastid;
	ItemId		hikeyid;
	IndexTuple	moved;
	IndexTuple	hikey;

	gs_index_fault_point(GS_INDEX_FAULT_CANCEL_IN_WRITE);

	Assert(last > P_FIRSTKEY);

	npage = gs_btw_new_page(w, lv->level);
	nblkno = w->next_blkno++;

	/* the last item starts the new page (minus infinity when internal) */
	lastid = PageGetItemId(opage, last);
	moved = (IndexTuple) PageGetItem(opage, lastid);
	gs_btw_put_item(npage, moved, ItemIdGetLength(lastid), P_FIRSTKEY, !leaf);

	/* ... and, in the old page, takes the high key slot */
	hikeyid = PageGetItemId(opage, P_HIKEY);
	*hikeyid = *lastid;
	ItemIdSetUnused(lastid);
	((PageHeader) opage)->pd_lower -= sizeof(ItemIdData);

	if (leaf)
	{
		IndexTuple	lastleft;
		IndexTuple	pivot;

		/* keep only the attributes that separate the two pages */
		lastleft = (IndexTuple) PageGetItem(opage,
											PageGetItemId(opage,
														  OffsetNumberPrev(last)));
		pivot = _bt_truncate(w->index, lastleft, moved, w->inskey);
		if (!PageIndexTupleOverwrite(opage, P_HIKEY, (Item) pivot,
									 IndexTupleSize(pivot)))
			elog(ERROR, "failed to add high key to index page");
		pfree(pivot);
	}
	hikey = (IndexTuple) PageGetItem(opage, PageGetItemId(opage, P_HIKEY));

	/* downlink to the old page, keyed by its low key */
	if (lv->up == NULL)
		lv->up = gs_btw_level_start(w, lv->level + 1);
	BTreeTupleSetDownLink(lv->lowkey, oblkno);
	gs_btw_level_add(w, lv->up, lv->lowkey, 0);
	pfree(lv->lowkey);

	/* the old page's high key is the new page's low key */
	lv->lowkey = CopyIndexTuple(hikey);

	BTPageGetOpaque(opage)->btpo_next = nblkno;
	BTPageGetOpaque(npage)->btpo_prev = oblkno;

	gs_btw_write_page(w, opage, oblkno);

	lv->page = npage;
	lv->blkno = nblkno;
	lv->lastoff = P_FIRSTKEY;
}

/*
 * Copy an item of size bytes (a multiple of 8): the small ones that most
 * indexes have word by word, as a memcpy of a size unknown to the compiler
 * costs more than the copy itself.
 */
static inline void
gs_btw_copy_item(char *dst, const char *src, Size size)
{
	switch (size)
	{
		case 32:
			memcpy(dst + 24, src + 24, 8);
			/* FALLTHROUGH */
		case 24:
			memcpy(dst + 16, src + 16, 8);
			/* FALLTHROUGH */
		case 16:
			memcpy(dst + 8, src + 8, 8);
			/* FALLTHROUGH */
		case 8:
			memcpy(dst, src, 8);
			break;
		default:
			memcpy(dst, src, size);
			break;
	}
}

/*
 * Append a leaf item of itemsz bytes (room checked by the caller) after the
 * page's last item: its maxaligned bytes go below pd_upper and a line
 * pointer is added, as PageAddItem would place them.
 */
static inline void
gs_btw_append(GsBtLevel *lv, IndexTuple itup, Size itemsz)
{
	PageHeader	phdr = (PageHeader) lv->page;
	LocationIndex upper = phdr->pd_upper - (LocationIndex) itemsz;
	OffsetNumber off = OffsetNumberNext(lv->lastoff);
	ItemIdData	lp;

	/* the line pointer array ends at off - 1: off is appended */
	Assert(PageGetMaxOffsetNumber(lv->page) == off - 1);
	gs_btw_copy_item((char *) lv->page + upper, (const char *) itup, itemsz);
	/* the line pointer is formed whole, then stored */
	lp.lp_off = upper;
	lp.lp_flags = LP_NORMAL;
	lp.lp_len = itemsz;
	*PageGetItemId(lv->page, off) = lp;
	phdr->pd_lower += sizeof(ItemIdData);
	phdr->pd_upper = upper;
	lv->lastoff = off;
}

/*
 * Add itup to level lv.  truncextra: bytes of itup that suffix truncation
 * would remove (its posting list), counted as free when deciding whether
 * the page is full.
 *
 * Leaf items, nearly all of a build's, are placed here directly, as
 * PageAddItem would place them at the end of the line pointer array (the
 * page's free space only shrinks, so no shuffling is ever needed): the
 * item's maxaligned bytes are copied below pd_upper and a line pointer
 * appended.  Interrupts are served when a page is closed, every few
 * hundred items at most.
 */
static void
gs_btw_level_add(GsBtWriter *w, GsBtLevel *lv, IndexTuple itup,
				 Size truncextra)
{
	bool		leaf = (lv->level == 0);
	Size		itemsz = MAXALIGN(IndexTupleSize(itup));
	Size		prevextra = lv->lastextra;
	PageHeader	phdr = (PageHeader) lv->page;
	int			space;
	Size		freespace;
	OffsetNumber off;

	lv->lastextra = truncextra;

	/* PageGetFreeSpace(), from the header */
	space = (int) phdr->pd_upper - (int) phdr->pd_lower;
	freespace = space < (int) sizeof(ItemIdData) ? 0 :
		(Size) (space - (int) sizeof(ItemIdData));

	/* too large for any page: nbtree's own error */
	if (unlikely(itemsz > GS_BT_MAX_ITEM_SIZE(lv->page)))
		_bt_check_third_page(w->index, w->heap, leaf, lv->page, itup);

	/*
	 * Close the page when the item does not fit (leaving room on a leaf
	 * for a heap TID the high key may need), or when the page has reached
	 * its fill target and already holds two items.
	 */
	if (freespace < itemsz + (leaf ? MAXALIGN(sizeof(ItemPointerData)) : 0) ||
		(freespace + prevextra < lv->target_free && lv->lastoff > P_FIRSTKEY))
	{
		CHECK_FOR_INTERRUPTS();
		gs_btw_level_close(w, lv);
		phdr = (PageHeader) lv->page;
	}

	/* first item of the level: its page's low key is minus infinity */
	if (unlikely(lv->lastoff == P_HIKEY))
	{
		Assert(lv->lowkey == NULL);
		lv->lowkey = (IndexTuple) palloc0(sizeof(IndexTupleData));
		lv->lowkey->t_info = sizeof(IndexTupleData);
		BTreeTupleSetNAtts(lv->lowkey, 0, false);
	}

	off = OffsetNumberNext(lv->lastoff);
	if (leaf)
	{
		if (unlikely((int) phdr->pd_upper - (int) itemsz <
					 (int) (phdr->pd_lower + sizeof(ItemIdData))))
			elog(ERROR, "failed to add item to index page");
		gs_btw_append(lv, itup, itemsz);
	}
	else
	{
		gs_btw_put_item(lv->page, itup, itemsz, off, off == P_FIRSTKEY);
		lv->lastoff = off;
	}
}

/* the pending posting list (or single tuple) goes to the leaf level */
static void
gs_btw_dedup_flush(GsBtWriter *w)
{
	BTDedupState d = w->dstate;

	Assert(d->nitems > 0);
	if (d->nitems == 1)
		gs_btw_level_add(w, w->leaf, d->base, 0);
	else
	{
		IndexTuple	posting;

		posting = _bt_form_posting(d->base, d->htids, d->nhtids);
		gs_btw_level_add(w, w->leaf, posting,
						 IndexTupleSize(posting) -
						 BTreeTupleGetPostingOffset(posting));
		pfree(posting);
	}
	d->nmaxitems = 0;
	d->nhtids = 0;
	d->nitems = 0;
	d->phystupsize = 0;
}

/*
 * itup becomes the pending tuple, alone so far; a transient one is copied.
 * A posting list is started only when a duplicate comes: most tuples of
 * most indexes have none, and go to the page as they are.
 */
static void
gs_btw_pend(GsBtWriter *w, IndexTuple itup)
{
	if (w->basecopy != NULL)
	{
		/* its padding too: the page gets the tuple's maxaligned bytes */
		gs_btw_copy_item((char *) w->basecopy, (const char *) itup,
						 MAXALIGN(IndexTupleSize(itup)));
		itup = w->basecopy;
	}
	w->lone = itup;
}

/* the pending tuple or posting list, if any, goes to the leaf level */
static void
gs_btw_pending_flush(GsBtWriter *w)
{
	if (w->lone != NULL)
	{
		gs_btw_level_add(w, w->leaf, w->lone, 0);
		w->lone = NULL;
	}
	else if (w->dstate->nitems > 0)
		gs_btw_dedup_flush(w);
}

void
gs_btw_tuples_transient(GsBtWriter *w)
{
	/* an index tuple's size fits in INDEX_SIZE_MASK */
	if (w->dedup && w->basecopy == NULL)
		w->basecopy = (IndexTuple) palloc(MAXALIGN(INDEX_SIZE_MASK + 1));
}

GsBtWriter *
gs_btw_begin(Relation heap, Relation index, bool isunique)
{
	GsBtWriter *w = (GsBtWriter *) palloc0(sizeof(GsBtWriter));

	w->heap = heap;
	w->index = index;
	w->nkeyatts = IndexRelationGetNumberOfKeyAttributes(index);
	w->inskey = _bt_mkscankey(index, NULL);
	/* without a metapage _bt_mkscankey cannot know; ask as btbuild does */
	w->inskey->allequalimage = _bt_allequalimage(index, true);
	w->use_wal = RelationNeedsWAL(index);
	w->next_blkno = BTREE_METAPAGE + 1;
	w->nwritten = 0;

	w->dedup = w->inskey->allequalimage && !isunique &&
		BTGetDeduplicateItems(index);
	if (w->dedup)
	{
		BTDedupState d = (BTDedupState) palloc0(sizeof(BTDedupStateData));

		d->deduplicate = true;
		/* a tenth of a page, less the item's line pointer */
		d->maxpostingsize = MAXALIGN_DOWN(BLCKSZ * 10 / 100) -
			sizeof(ItemIdData);
		d->htids = (ItemPointer) palloc(d->maxpostingsize);
		d->base = NULL;
		d->baseoff = InvalidOffsetNumber;
		w->dstate = d;
	}

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE,
								 PROGRESS_BTREE_PHASE_LEAF_LOAD);
	return w;
}

/*
 * The pending tuple of gs_btw_add_distinct lies where the caller's tuples
 * do, which need not outlive the call: copied now, when the caller said
 * its tuples are transient (gs_btw_tuples_transient).
 */
void
gs_btw_settle(GsBtWriter *w)
{
	if (w->lone != NULL && w->basecopy != NULL && w->lone != w->basecopy)
		gs_btw_pend(w, w->lone);
}

/*
 * A leaf item appended to the open leaf page when it plainly fits: not one
 * of the page's first two items, the last item no posting list, room for
 * it with a heap TID to spare and the page above its fill target (so that
 * gs_btw_level_add would neither close the page nor do anything else);
 * else gs_btw_level_add.
 */
static inline void
gs_btw_leaf_add(GsBtWriter *w, IndexTuple itup)
{
	GsBtLevel  *lv = w->leaf;
	PageHeader	phdr = (PageHeader) lv->page;
	Size		itemsz = MAXALIGN(IndexTupleSize(itup));
	int			freespace = (int) phdr->pd_upper - (int) phdr->pd_lower -
		(int) sizeof(ItemIdData);

	/* (small items only: no need of the too-large-item check) */
	if (likely(lv->lastoff > P_FIRSTKEY && lv->lastextra == 0 &&
			   itemsz <= 64 &&
			   freespace >= (int) (itemsz + MAXALIGN(sizeof(ItemPointerData))) &&
			   freespace >= (int) lv->target_free))
	{
		gs_btw_append(lv, itup, itemsz);
		return;
	}
	gs_btw_level_add(w, lv, itup, 0);
}

/*
 * Add the next tuple, whose key columns differ from the one before it (no
 * posting list can take it): gs_btw_add(w, itup, false) on its short path,
 * for the merges that know where keys change.  With deduplication the
 * tuple is kept pending, where it lies, and goes to the page when the next
 * one comes: when the caller's tuples are transient it must call
 * gs_btw_settle before the memory they lie in is reused.
 */
void
gs_btw_add_distinct(GsBtWriter *w, IndexTuple itup)
{
	if (unlikely(w->leaf == NULL || (w->dedup && w->dstate->nitems > 0)))
	{
		gs_btw_add(w, itup, false);
		return;
	}
	if (w->dedup)
	{
		if (w->lone != NULL)
			gs_btw_leaf_add(w, w->lone);
		w->lone = itup;
	}
	else
		gs_btw_leaf_add(w, itup);

	if (++w->ndone % GS_BTW_PROGRESS_EVERY == 0)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE,
									 w->ndone);
}

/*
 * Add the next tuple.  itup must stay valid until the next call and, if it
 * becomes the base of a posting list, until that list is written, unless
 * gs_btw_tuples_transient was called (then the writer keeps a copy).
 */
void
gs_btw_add(GsBtWriter *w, IndexTuple itup, bool maybe_dup)
{
	if (w->leaf == NULL)
		w->leaf = gs_btw_level_start(w, 0);
	/* a posting list may start from the pending tuple: it must stay */
	gs_btw_settle(w);

	if (!w->dedup)
		gs_btw_level_add(w, w->leaf, itup, 0);
	else
	{
		IndexTuple	base = w->lone;

		if (base == NULL && w->dstate->nitems > 0)
			base = w->dstate->base;
		if (base != NULL && maybe_dup &&
			_bt_keep_natts_fast(w->index, base, itup) > w->nkeyatts)
		{
			/* equal to the pending base: its TIDs join the posting list */
			if (w->lone != NULL)
			{
				_bt_dedup_start_pending(w->dstate, w->lone, InvalidOffsetNumber);
				w->lone = NULL;
			}
			if (!_bt_dedup_save_htid(w->dstate, itup))
			{
				/* the list is full: it goes, itup starts the next */
				gs_btw_dedup_flush(w);
				gs_btw_pend(w, itup);
			}
		}
		else
		{
			gs_btw_pending_flush(w);
			gs_btw_pend(w, itup);
		}
	}

	if (++w->ndone % GS_BTW_PROGRESS_EVERY == 0)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE,
									 w->ndone);
}

/* time spent writing pages (WAL and smgr), in ms */
double
gs_btw_write_ms(GsBtWriter *w)
{
	return INSTR_TIME_GET_MILLISEC(w->write_time);
}

void
gs_btw_set_pipe(GsBtWriter *w, GsBtPipe *pipe)
{
	w->pipe = pipe;
}

void
gs_btw_pages(GsBtWriter *w, uint64 *pages, uint64 *by_workers)
{
	*pages = w->pages;
	*by_workers = w->pages_by_workers;
}

/* time spent syncing the index's file at the end, in ms */
double
gs_btw_sync_ms(GsBtWriter *w)
{
	return INSTR_TIME_GET_MILLISEC(w->sync_time);
}

void
gs_btw_finish(GsBtWriter *w)
{
	GsBtLevel  *lv;
	BlockNumber root = P_NONE;
	uint32		rootlevel = 0;
	Page		meta;

	if (w->dedup)
		gs_btw_pending_flush(w);

	/* every level's open page is its rightmost; the top one is the root */
	for (lv = w->leaf; lv != NULL; lv = lv->up)
	{
		BTPageOpaque op = BTPageGetOpaque(lv->page);
		OffsetNumber off;
		OffsetNumber maxoff;
		ItemId		prev;

		if (lv->up == NULL)
		{
			op->btpo_flags |= BTP_ROOT;
			root = lv->blkno;
			rootlevel = lv->level;
		}
		else
		{
			BTreeTupleSetDownLink(lv->lowkey, lv->blkno);
			gs_btw_level_add(w, lv->up, lv->lowkey, 0);
		}
		if (lv->lowkey)
			pfree(lv->lowkey);
		lv->lowkey = NULL;

		/* no high key on a rightmost page: drop the reserved slot */
		maxoff = PageGetMaxOffsetNumber(lv->page);
		prev = PageGetItemId(lv->page, P_HIKEY);
		for (off = P_FIRSTKEY; off <= maxoff; off = OffsetNumberNext(off))
		{
			ItemId		cur = PageGetItemId(lv->page, off);

			*prev = *cur;
			prev = cur;
		}
		((PageHeader) lv->page)->pd_lower -= sizeof(ItemIdData);

		gs_btw_write_page(w, lv->page, lv->blkno);
		lv->page = NULL;
	}

	meta = (Page) palloc(BLCKSZ);
	_bt_initmetapage(meta, root, rootlevel, w->inskey->allequalimage);
	gs_btw_write_page(w, meta, BTREE_METAPAGE);
	if (w->pipe != NULL)
	{
		instr_time	t0;
		instr_time	t1;

		INSTR_TIME_SET_CURRENT(t0);
		w->pages_by_workers = gs_btpipe_finish(w->pipe);
		w->pipe = NULL;
		INSTR_TIME_SET_CURRENT(t1);
		INSTR_TIME_ACCUM_DIFF(w->write_time, t1, t0);
	}

	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, w->ndone);

	/*
	 * The pages bypassed shared buffers, so a checkpoint that starts after
	 * their WAL records cannot have flushed them: sync before commit.
	 */
	if (w->use_wal)
	{
		instr_time	t0;
		instr_time	t1;

		INSTR_TIME_SET_CURRENT(t0);
		smgrimmedsync(RelationGetSmgr(w->index), MAIN_FORKNUM);
		INSTR_TIME_SET_CURRENT(t1);
		INSTR_TIME_ACCUM_DIFF(w->sync_time, t1, t0);
	}
}
