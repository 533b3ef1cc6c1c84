/*-------------------------------------------------------------------------
 *
 * gpusort_blocks.h
 *	  Rows written into blocks of a DSA area by a parallel participant
 *	  (load_blocks.c), for the leader to take with gs_sort_take_blocks.
 *
 * The writer of a parallel ORDER BY's load workers (sort_parallel.c) and
 * of a parallel index build's or CLUSTER's workers (index_parallel.c).
 * It makes blocks, links them into the participant's chain, has a thread
 * populate them, and places each row in the block being filled (the
 * GsRowBlock format of gpusort_exec.h); the caller decides when a block
 * is made, how large, and what happens when none may be (its memory, its
 * errors).
 *
 * A row, once gs_blocks_fits has said yes (else the caller makes room):
 *
 *	 tup = gs_blocks_take(bw, len, &entry);	 -- the tuple's len bytes
 *	 (write the tuple at tup and the key at entry)
 *	 gs_blocks_entry_done(bw, entry, tup, lossy);
 *
 * These run once a row: they are inline.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_BLOCKS_H
#define GPUSORT_BLOCKS_H

#include "utils/dsa.h"

#include "gpusort_exec.h"
#include "gpusort_spill.h"

typedef struct GsBlockWriter
{
	GsRowBlock *cur;			/* block being filled, NULL before the first */
	Size		tup_end;		/* next free byte for a tuple */
	Size		ent_start;		/* lowest entry */
	Size		esz;			/* entry size */
	int			key_bytes;
	dsa_area   *area;
	dsa_pointer *head;			/* where the chain starts */
	GsTask	   *populate;		/* the thread populating a block */
} GsBlockWriter;

extern void gs_blocks_init(GsBlockWriter *bw, dsa_area *area,
						   dsa_pointer *head, int key_bytes);
extern dsa_pointer gs_blocks_alloc(GsBlockWriter *bw, Size size);
extern GsRowBlock *gs_blocks_link(GsBlockWriter *bw, dsa_pointer dp);
extern void gs_blocks_fill(GsBlockWriter *bw, GsRowBlock *blk);
extern void gs_blocks_populate(GsBlockWriter *bw, MemoryContext cxt,
							   GsRowBlock *blk, GsRowBlock *drop);
extern void gs_blocks_wait(GsBlockWriter *bw);

/* the block after the one being filled (the chain's first if none) */
static inline dsa_pointer
gs_blocks_next(const GsBlockWriter *bw)
{
	return bw->cur ? bw->cur->next : *bw->head;
}

/* whether the block being filled has room for a tuple of len bytes */
static inline bool
gs_blocks_fits(const GsBlockWriter *bw, Size len)
{
	return bw->cur != NULL && bw->tup_end + len + bw->esz <= bw->ent_start;
}

/* where the next tuple goes in the block being filled */
static inline char *
gs_blocks_free(const GsBlockWriter *bw)
{
	return (char *) bw->cur + bw->tup_end;
}

/*
 * A row's room, where gs_blocks_fits said there is: len bytes for its
 * tuple, returned, and its entry below the block's other entries, *entry.
 */
static inline char *
gs_blocks_take(GsBlockWriter *bw, Size len, char **entry)
{
	char	   *tup = (char *) bw->cur + bw->tup_end;

	bw->tup_end += len;
	bw->ent_start -= bw->esz;
	*entry = (char *) bw->cur + bw->ent_start;
	return tup;
}

/*
 * The row's key is in its entry: the word after it (the tuple's offset
 * and whether the key is lossy), and the row counted in its block.
 */
static inline void
gs_blocks_entry_done(GsBlockWriter *bw, char *entry, const char *tup,
					 bool lossy)
{
	uint32		word = (uint32) (tup - (char *) bw->cur);

	if (lossy)
		word |= GS_BLOCK_LOSSY_BIT;
	memcpy(entry + bw->key_bytes, &word, sizeof(uint32));
	bw->cur->nrows++;
}

#endif							/* GPUSORT_BLOCKS_H */
