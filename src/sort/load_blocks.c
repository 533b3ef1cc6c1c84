/*-------------------------------------------------------------------------
 *
 * load_blocks.c
 *	  The blocks a parallel participant writes its rows into: made in a
 *	  DSA area, linked into its chain, populated by a thread.
 *
 * Used by a parallel ORDER BY's load workers (sort_parallel.c) and by the
 * workers of a parallel index build or CLUSTER (index_parallel.c); the
 * per-row part is inline in gpusort_blocks.h.  What each keeps of its own:
 * the size of its blocks, when one may be made (a budget, a share of
 * memory) and what it does when none can be.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/atomics.h"
#include "utils/dsa.h"

#include "gpusort_blocks.h"

/* a writer of blocks in area, whose chain starts at *head (invalid now) */
void
gs_blocks_init(GsBlockWriter *bw, dsa_area *area, dsa_pointer *head,
			   int key_bytes)
{
	memset(bw, 0, sizeof(GsBlockWriter));
	bw->area = area;
	bw->head = head;
	bw->key_bytes = key_bytes;
	bw->esz = gs_block_entry_size(key_bytes);
}

/*
 * A block of size bytes in the writer's area, with no rows and not in the
 * chain; InvalidDsaPointer when the area has no room for it.
 */
dsa_pointer
gs_blocks_alloc(GsBlockWriter *bw, Size size)
{
	dsa_pointer dp;
	GsRowBlock *blk;

	dp = dsa_allocate_extended(bw->area, size,
							   DSA_ALLOC_HUGE | DSA_ALLOC_NO_OOM);
	if (!DsaPointerIsValid(dp))
		return InvalidDsaPointer;
	blk = (GsRowBlock *) dsa_get_address(bw->area, dp);
	blk->next = InvalidDsaPointer;
	blk->size = size;
	blk->nrows = 0;
	return dp;
}

/*
 * Link the block dp into the chain after the block being filled (first if
 * there is none yet), before the blocks that followed it.  The leader of
 * an ORDER BY's load follows a worker's chain while the worker writes
 * (gs_load_map_blocks, with a read barrier): the block's header is
 * written before the link to it.
 */
GsRowBlock *
gs_blocks_link(GsBlockWriter *bw, dsa_pointer dp)
{
	GsRowBlock *blk = (GsRowBlock *) dsa_get_address(bw->area, dp);
	dsa_pointer *link = bw->cur ? &bw->cur->next : bw->head;

	blk->next = *link;
	pg_write_barrier();
	*link = dp;
	return blk;
}

/* rows go into blk from now on (any it held before are forgotten) */
void
gs_blocks_fill(GsBlockWriter *bw, GsRowBlock *blk)
{
	bw->cur = blk;
	blk->nrows = 0;
	bw->tup_end = GS_BLOCK_HDR;
	bw->ent_start = blk->size;
}

/*
 * Have a thread fault in blk's pages (and the kernel zero them), after the
 * last one it was given: the first touch of each page of shared memory is
 * a page fault, and in a profile those were a third of a worker's scan.
 * drop, if not NULL, is a block the process is done with, whose page table
 * entries the thread drops first (see sort_load.c).  The task belongs to
 * cxt.
 */
void
gs_blocks_populate(GsBlockWriter *bw, MemoryContext cxt, GsRowBlock *blk,
				   GsRowBlock *drop)
{
	GsPrefault	pf;

	gs_populate_wait(&bw->populate);
	/* the thread works on a copy (gs_populate_start) */
	memset(&pf, 0, sizeof(GsPrefault));
	pf.start[0] = (char *) blk;
	pf.len[0] = blk->size;
	if (drop != NULL)
	{
		pf.drop = (char *) drop;
		pf.drop_len = drop->size;
	}
	gs_populate_start(cxt, &bw->populate, &pf);
}

/* wait for the populating thread, if any */
void
gs_blocks_wait(GsBlockWriter *bw)
{
	gs_populate_wait(&bw->populate);
}
