/*-------------------------------------------------------------------------
 *
 * index_collect.c
 *	  Taking a btree build's rows as the heap scan gives them: each index
 *	  tuple into the arena of index_rows.c, its normalized key into the key
 *	  buffer; and, when maintenance_work_mem is full, the rows so far out
 *	  as a sorted run (index_spill.c).
 *
 * The scan callbacks of the leader (index_build.c, index_cluster.c) and of
 * parallel workers (index_parallel.c) land here.  It calls down only:
 * index_rows.c, index_spill.c and the key encoder.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/itup.h"
#include "utils/memutils.h"

#include "gpusort_keys.h"
#include "index_int.h"

/*
 * Copy a formed index tuple into the arena: tuples live until the end of
 * the build, packed, without a chunk header each.
 */
static IndexTuple
gs_idx_store(GsIdxBuild *b, IndexTuple src)
{
	Size		size = MAXALIGN(gs_idx_row_size(b, src));
	IndexTuple	dst;

	if (size > b->arena_left)
		gs_idx_arena_next(b, size);
	dst = (IndexTuple) b->arena;
	memcpy(dst, src, gs_idx_row_size(b, src));
	b->arena += size;
	b->arena_left -= size;
	return dst;
}

/*
 * The normalized key of one row into key (keybytes): the encoded key
 * columns, then the heap TID.  Returns true when the encoding was lossy.
 */
bool
gs_idx_encode(GsIdxBuild *b, Datum *values, bool *isnull, ItemPointer tid,
			  uint64 *key)
{
	bool		lossy;

	/* whole words: straight into the key */
	if (b->colbytes == b->colwords * 8)
	{
		lossy = gs_encode_key(b->kp, values, isnull, key);
		key[b->colwords] = gs_idx_tid_word(tid);
		return lossy;
	}
	lossy = gs_encode_key(b->kp, values, isnull, b->colbuf);
	if (b->colbytes == 4)
	{
		uint32		w;

		memcpy(&w, b->colbuf, sizeof(w));
		key[0] = (uint64) w << 32;
	}
	else
		memcpy(key, b->colbuf, b->colbytes);
	key[b->colwords] = gs_idx_tid_word(tid);
	return lossy;
}

/*
 * Room for one more row.  When one sort or maintenance_work_mem cannot
 * take more, the rows so far become a sorted run on disk (when b may
 * spill; else overflow is set and false returned).  (An index tuple is
 * smaller than a page, so with a page left in the arena no block is
 * allocated.)
 */
static inline bool
gs_idx_room(GsIdxBuild *b)
{
	if (b->overflow)
		return false;
	if ((b->n >= b->cap && !gs_idx_grow(b)) ||
		(b->arena_left < BLCKSZ &&
		 b->mem_arena + b->arena_block + b->cap * GS_IDX_ROW_BYTES(b) >
		 b->mem_limit))
	{
		if (b->may_spill)
		{
			/* with no row in memory, take the block anyway: progress */
			if (b->n > 0)
				gs_idx_spill_run(b);
			return true;
		}
		b->overflow = true;
		return false;
	}
	return true;
}

/* table_index_build_scan callback: one index tuple */
void
gs_idx_collect(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state)
{
	GsIdxBuild *b = (GsIdxBuild *) state;
	IndexTuple	itup;
	bool		lossy;

	b->indtuples += 1;
	if (!gs_idx_room(b))
		return;

	if (b->fixed)
	{
		bool		hasnull;
		Size		size = gs_idx_fixed_size(b, values, isnull, &hasnull);

		if (size > b->arena_left)
			gs_idx_arena_next(b, size);
		itup = (IndexTuple) b->arena;
		gs_idx_form_fixed(b, values, isnull, hasnull, size, itup);
		b->arena += size;
		b->arena_left -= size;
	}
	else
	{
		itup = gs_idx_store(b, index_form_tuple_context(b->itupdesc, values,
														isnull, b->scratch));
		if (++b->scratch_used >= GS_IDX_SCRATCH_TUPLES)
		{
			MemoryContextReset(b->scratch);
			b->scratch_used = 0;
		}
	}
	itup->t_tid = *tid;
	b->rec_bytes += MAXALIGN(IndexTupleSize(itup));
	if (unlikely(MAXALIGN(IndexTupleSize(itup)) != b->rec_tlen))
	{
		if (b->n == 0)
			b->rec_tlen = MAXALIGN(IndexTupleSize(itup));
		else
			b->rec_varlen = true;
	}

	lossy = gs_idx_encode(b, values, isnull, tid,
						  (uint64 *) (b->keys + b->n * b->keybytes));
	b->tuples[b->n] = itup;
	b->flags[b->n] = (tupleIsAlive ? GS_ROW_ALIVE : 0) |
		(lossy ? GS_ROW_LOSSY : 0);
	b->anylossy |= lossy;
	b->n++;
}

/*
 * Add a row with a payload (b->payload): its index tuple formed from
 * values, then the payload, in the arena.
 */
void
gs_idx_collect_payload(GsIdxBuild *b, ItemPointer tid, Datum *values,
					   bool *isnull, const void *payload, uint32 len)
{
	IndexTuple	itup;
	Size		isize;
	Size		size;
	bool		lossy;

	Assert(b->payload);
	b->indtuples += 1;
	if (!gs_idx_room(b))
		return;

	itup = index_form_tuple_context(b->itupdesc, values, isnull, b->scratch);
	itup->t_tid = *tid;
	isize = MAXALIGN(IndexTupleSize(itup));
	size = MAXALIGN(isize + 8 + len);
	if (size > b->arena_left)
		gs_idx_arena_next(b, size);
	memcpy(b->arena, itup, IndexTupleSize(itup));
	memcpy(b->arena + isize, &len, sizeof(len));
	memcpy(b->arena + isize + 8, payload, len);
	b->tuples[b->n] = (IndexTuple) b->arena;
	b->rec_varlen = true;
	b->rec_bytes += size;
	b->arena += size;
	b->arena_left -= size;
	if (++b->scratch_used >= GS_IDX_SCRATCH_TUPLES)
	{
		MemoryContextReset(b->scratch);
		b->scratch_used = 0;
	}

	lossy = gs_idx_encode(b, values, isnull, tid,
						  (uint64 *) (b->keys + b->n * b->keybytes));
	b->flags[b->n] = GS_ROW_ALIVE | (lossy ? GS_ROW_LOSSY : 0);
	b->anylossy |= lossy;
	b->n++;
}
