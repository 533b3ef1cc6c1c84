/*-------------------------------------------------------------------------
 *
 * index_sort.c
 *	  A btree build's rows sorted by the sort core (sortstate.c), as a
 *	  variant of its rows: every build of CREATE INDEX and REINDEX, and
 *	  CLUSTER's table sort, serial or with parallel workers.
 *
 * Each row is the index tuple (and, for CLUSTER, the heap tuple after it
 * as the row's payload, see gs_idx_payload), in the envelope the core
 * gives a variant's rows, with its flags (GS_ROW_ALIVE) in the envelope's
 * flags byte.  Its key is the one index_rows.c makes: the encoded key
 * columns, then the heap TID.  The core orders rows by the column part;
 * where that is not exact (the plan does not cover every column, or the
 * row's encoding was lossy) the index's comparators decide, then the TID
 * (gs_idx_row_cmp); where it is, the TID word decides, so the rows come
 * out in btree order.  Memory, engine, runs on disk and their merges are
 * the core's, within maintenance_work_mem, as for an ORDER BY within
 * work_mem.
 *
 * The rows come out to the page writer (index_write.c) or to CLUSTER's
 * sink, with the unique check over them on the way.
 *
 * It calls down only: the sort core, index_rows.c's comparators and the
 * page writer.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "index_int.h"

/* how far ahead the write prefetches rows */
#define GS_IDX_PREFETCH			8

/* btree order of two rows: key columns, then heap TID */
static int
gs_idx_row_cmp(void *arg, const char *a, const char *b)
{
	GsIdxBuild *bld = (GsIdxBuild *) arg;
	IndexTuple	t1 = (IndexTuple) a;
	IndexTuple	t2 = (IndexTuple) b;
	int			c;

	c = gs_idx_cmp_cols(bld, t1, t2);
	if (c != 0)
		return c;
	return ItemPointerCompare(&t1->t_tid, &t2->t_tid);
}

/*
 * The same on a merge's threads, for a key of one text column in C order
 * whose rows' keys are equal: the values' bytes decide (the TID word after
 * the column part then does, as in the key)
 */
static int
gs_idx_row_tie(void *arg, const char *a, size_t a_off, const char *b,
			   size_t b_off)
{
	return gs_key_tie_index(((GsIdxBuild *) arg)->kp, a, b);
}

/*
 * Sort b's rows in the core from now on, within mem bytes, expecting
 * est_rows of them.
 */
void
gs_idx_sort_begin(GsIdxBuild *b, Size mem, double est_rows)
{
	GsRowsDef	def;

	memset(&def, 0, sizeof(def));
	if (b->ssup == NULL)
		gs_idx_sortsupport(b);
	if (b->scratch == NULL)
		b->scratch = AllocSetContextCreate(CurrentMemoryContext,
										   "gpusort index tuple scratch",
										   ALLOCSET_DEFAULT_SIZES);
	def.key_bytes = b->keybytes;
	def.tie_bytes = b->colwords * 8;
	def.exact = b->exact;
	def.compare = gs_idx_row_cmp;
	/* a text key longer than its part of the key: merged on threads too */
	if (b->exact && b->nkeyatts == 1 && gs_keyplan_ties_by_bytes(b->kp))
		def.thread_compare = gs_idx_row_tie;
	def.arg = b;
	/* runs hold the index tuple and little else (index_rows.c) */
	def.key_derivable = gs_idx_key_derivable;
	def.key_derive = gs_idx_key_derive;
	def.keep = gs_idx_row_keep;
	/* the same without a call a row where the plan allows */
	def.key_always_derivable = gs_keyplan_derivable_natts(b->kp) > 0;
	if (!b->payload)
	{
		def.keep_len_off = offsetof(IndexTupleData, t_info);
		def.keep_len_mask = INDEX_SIZE_MASK;
	}
	b->sort = gs_sort_begin_rows(&def, (int) Min(mem / 1024, (Size) INT_MAX),
								 est_rows);
}

/*
 * One row into the core: the index tuple of values with TID tid (formed
 * in place when b->fixed), then len bytes of payload if b->payload.
 * Inline into the scan's callback (gs_idx_collect), which a serial build
 * calls for every row of the table.
 */
static pg_attribute_always_inline void
gs_idx_sort_put_inline(GsIdxBuild *b, ItemPointer tid, Datum *values,
					   bool *isnull, bool alive, const void *payload,
					   uint32 len)
{
	IndexTuple	itup;
	IndexTuple	formed = NULL;
	Size		isize;
	Size		size;
	bool		hasnull = false;
	GsRowRoom	room;
	char	   *row;
	int			runs = 0;

	if (b->fixed && !b->payload)
		isize = gs_idx_fixed_size(b, values, isnull, &hasnull);
	else if ((isize = gs_idx_var1_size(b, values, isnull)) == 0)
	{
		formed = index_form_tuple_context(b->itupdesc, values, isnull,
										  b->scratch);
		isize = IndexTupleSize(formed);
	}
	size = MAXALIGN(isize);
	if (b->payload)
		size += 8 + len;

	if (unlikely(gs_index_fault == GS_INDEX_FAULT_CANCEL_IN_RUN))
		runs = gs_sort_runs_spilled(b->sort);
	room = gs_sort_row_add(b->sort, size);
	row = room.row;
	itup = (IndexTuple) row;
	if (formed == NULL && b->fixed)
		gs_idx_form_fixed(b, values, isnull, hasnull, isize, itup);
	else if (formed == NULL)
		gs_idx_form_var1(b, values, isize, itup);
	else
	{
		memcpy(itup, formed, isize);
		memset(row + isize, 0, MAXALIGN(isize) - isize);
		if (++b->scratch_used >= GS_IDX_SCRATCH_TUPLES)
		{
			MemoryContextReset(b->scratch);
			b->scratch_used = 0;
		}
	}
	itup->t_tid = *tid;
	if (b->payload)
	{
		memcpy(row + MAXALIGN(isize), &len, sizeof(len));
		memcpy(row + MAXALIGN(isize) + 8, payload, len);
	}
	*gs_row_flags(row) = alive ? GS_ROW_ALIVE : 0;
	if (b->derive_key && formed == NULL && !hasnull ?
		gs_idx_key_derive(b, row, 0, room.key) :
		gs_idx_encode(b, values, isnull, tid, (uint64 *) room.key))
		gs_sort_row_lossy(b->sort);
	b->indtuples += 1;

	/* a run went to be written in the background: cancel meanwhile */
	if (unlikely(gs_index_fault == GS_INDEX_FAULT_CANCEL_IN_RUN) &&
		gs_sort_runs_spilled(b->sort) > runs)
		gs_index_fault_point(GS_INDEX_FAULT_CANCEL_IN_RUN);
}

void
gs_idx_sort_put(GsIdxBuild *b, ItemPointer tid, Datum *values,
				bool *isnull, bool alive, const void *payload, uint32 len)
{
	gs_idx_sort_put_inline(b, tid, values, isnull, alive, payload, len);
}

/* table_index_build_scan callback: one index tuple into b's sort */
void
gs_idx_collect(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state)
{
	gs_idx_sort_put_inline((GsIdxBuild *) state, tid, values, isnull,
						   tupleIsAlive, NULL, 0);
}

/*
 * Are the first n bytes of a's and b's data equal?  Word by word, inline:
 * it runs once a row as the rows go to the page writer, where a call to
 * memcmp cost half as much as the writer's own work on the row.
 */
static inline bool
gs_idx_data_equal(IndexTuple a, IndexTuple b, int n)
{
	const char *x = (const char *) a + MAXALIGN(sizeof(IndexTupleData));
	const char *y = (const char *) b + MAXALIGN(sizeof(IndexTupleData));
	int			i = 0;

	for (; i + 8 <= n; i += 8)
	{
		uint64		u;
		uint64		v;

		memcpy(&u, x + i, 8);
		memcpy(&v, y + i, 8);
		if (u != v)
			return false;
	}
	for (; i < n; i++)
		if (x[i] != y[i])
			return false;
	return true;
}

/*
 * Are the key columns of a and b equal, as the unique check asks?  For
 * fixed-width key columns (fixed: their bytes) of an index whose
 * opclasses make image equality the equality, equal bytes without NULLs
 * say so; else the comparators.
 */
static inline bool
gs_idx_same_key(GsIdxBuild *b, IndexTuple a, IndexTuple t, int fixed)
{
	if (fixed > 0 && !IndexTupleHasNulls(a) && !IndexTupleHasNulls(t))
		return gs_idx_data_equal(a, t, fixed);
	return gs_idx_cmp_cols(b, a, t) == 0;
}

/* what the write keeps of the rows before the current one */
typedef struct GsIdxPrev
{
	IndexTuple	last;			/* a copy of the row before, or NULL */
	IndexTuple	first_alive;	/* of its group's live rows, the first */
	bool		have_alive;
	int			fixed;			/* see gs_idx_same_key */
	bool		varlena;		/* see gs_idx_keys_differ */
} GsIdxPrev;

/*
 * Do the key columns of two rows without NULLs differ for certain?  Their
 * bytes tell where they are fixed-width (p->fixed); for an index of one
 * variable-width column (p->varlena: a text index), the values' images
 * do where both are inline and uncompressed, compared as datum_image_eq
 * compares them (lengths, then bytes).  Otherwise they may be equal.
 */
static inline bool
gs_idx_keys_differ(const GsIdxPrev *p, IndexTuple a, IndexTuple b)
{
	const char *x;
	const char *y;

	if (!p->varlena)
		return !gs_idx_data_equal(a, b, p->fixed);
	/* (no NULL bitmap, no alignment: the value starts the data) */
	x = (const char *) a + MAXALIGN(sizeof(IndexTupleData));
	y = (const char *) b + MAXALIGN(sizeof(IndexTupleData));
	if (VARATT_IS_EXTERNAL(x) || VARATT_IS_COMPRESSED(x) ||
		VARATT_IS_EXTERNAL(y) || VARATT_IS_COMPRESSED(y))
		return false;
	return VARSIZE_ANY_EXHDR(x) != VARSIZE_ANY_EXHDR(y) ||
		memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) != 0;
}

/*
 * The unique check, row by row in btree order: two live rows with equal
 * key columns (NULLs distinct unless NULLS NOT DISTINCT) are a violation,
 * reported with the first of them.
 */
static void
gs_idx_unique_step(GsIdxBuild *b, GsIdxPrev *p, IndexTuple itup, bool alive)
{
	if (p->last == NULL || !gs_idx_same_key(b, p->last, itup, p->fixed))
		p->have_alive = false;	/* a new group */
	if (!alive)
		return;
	if (!p->have_alive)
	{
		memcpy(p->first_alive, itup, IndexTupleSize(itup));
		p->have_alive = true;
	}
	else if (b->nulls_not_distinct || !gs_idx_key_has_null(b, p->first_alive))
		gs_idx_unique_violation(b, p->first_alive);
}

/*
 * The fixed-width bytes of the key columns when equal bytes say equal
 * keys (see gs_idx_same_key), else 0.
 */
static int
gs_idx_image_key_bytes(GsIdxBuild *b)
{
	int			fixed = gs_idx_fixed_key_bytes(b);

	if (fixed > 0 && !_bt_allequalimage(b->index, false))
		return 0;
	return fixed;
}

/*
 * One row in btree order to the page writer (or b's sink), with the
 * unique check; p->last is the row before it, valid.  stable: itup stays
 * where it lies until the writer is settled (gs_btw_settle), so it may
 * take the writer's short path as it is.
 */
static inline void
gs_idx_write_row(GsIdxBuild *b, GsBtWriter *w, GsIdxPrev *p,
				 bool dedup_hint, bool stable, IndexTuple itup, bool alive)
{
	if (b->isunique)
		gs_idx_unique_step(b, p, itup, alive);
	if (b->sink != NULL)
		b->sink(b->sink_arg, itup);
	else if (dedup_hint && p->last != NULL &&
			 !IndexTupleHasNulls(p->last) && !IndexTupleHasNulls(itup) &&
			 gs_idx_keys_differ(p, p->last, itup))
	{
		/* key columns that differ: no posting list can take it */
		if (stable)
			gs_btw_add_distinct(w, itup);
		else
			gs_btw_add(w, itup, false);
	}
	else
		gs_btw_add(w, itup, true);
}

/*
 * Where the sort's time went, from its report (the DEBUG2 lines of index
 * builds and CLUSTER): the engine, the runs written during the scan, the
 * merge passes and the final merge's threads.
 */
char *
gs_idx_sort_summary(GsIdxBuild *b)
{
	const GsSortReport *r = &b->rep;

	return psprintf("%d chunks sorted by %s in %.1f ms (transfers %.1f ms, "
					"the backend waited %.1f ms, tie-breaks %.1f ms); "
					"%d runs written in %.1f ms (%.1f ms waiting for "
					"writes in the background); %d merge passes, "
					"%d merge threads, %.1f ms merging%s",
					r->chunks, r->engine ? r->engine : "no engine",
					r->sort_ms, r->transfer_ms, r->wait_ms, r->tiebreak_ms,
					r->runs, r->spill_ms, r->spill_wait_ms,
					r->merge_passes, r->streams, r->merge_ms,
					b->sink != NULL ? "" :
					psprintf("; index pages written in %.1f ms (WAL and "
							 "storage), synced in %.1f ms; %llu pages, %s",
							 b->write_ms, b->sync_ms,
							 (unsigned long long) b->pages,
							 b->writers == 0 ? "logged and written by the leader" :
							 psprintf("%llu logged by %d workers, written in order by whichever was free",
									  (unsigned long long) b->pages_by_workers,
									  b->writers)));
}

/*
 * The scan is over: sort, then hand the rows in order to the page writer
 * (or b's sink), checking uniqueness on the way.  Rows come in blocks
 * where the sort can give them so (in memory, or its final merge's one
 * stream): they are used where they lie, and only what outlives a block
 * is copied.  Returns whether the rows went through runs on disk.
 */
bool
gs_idx_sort_write(GsIdxBuild *b)
{
	GsBtWriter *w = NULL;
	GsIdxPrev	p;
	char	   *last_buf = NULL;
	bool		external;
	bool		dedup_hint;
	double		count = 0;
	const char *const *rows;
	const char *row;
	size_t		n;
	size_t		off;

	if (b->sink == NULL)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE,
									 PROGRESS_BTREE_PHASE_PERFORMSORT_1);
	external = gs_sort_runs_spilled(b->sort) > 0;
	if (external)
		gs_index_fault_point(GS_INDEX_FAULT_CANCEL_IN_MERGE);
	gs_sort_perform(b->sort);

	/*
	 * Key columns whose bytes tell equal keys: the unique check compares
	 * them, and the page writer is told where they change (else it compares
	 * each tuple with its pending posting list's base, about 8% of a build).
	 */
	memset(&p, 0, sizeof(p));
	p.fixed = gs_idx_image_key_bytes(b);
	p.varlena = p.fixed == 0 && b->nkeyatts == 1 &&
		b->itupdesc->natts == 1 &&
		TupleDescAttr(b->itupdesc, 0)->attlen == -1 &&
		_bt_allequalimage(b->index, false);
	dedup_hint = (p.fixed > 0 || p.varlena) && b->sink == NULL &&
		!b->isunique && BTGetDeduplicateItems(b->index);
	if (b->isunique || dedup_hint)
	{
		last_buf = palloc(INDEX_SIZE_MASK + 1);
		p.first_alive = (IndexTuple) palloc(INDEX_SIZE_MASK + 1);
	}
	if (b->sink == NULL)
	{
		w = gs_btw_begin(b->heap, b->index, b->isunique);
		if (external)
			gs_btw_tuples_transient(w);
		if (b->pipe != NULL)
			gs_btw_set_pipe(w, b->pipe);
	}
	while ((rows = gs_sort_next_rows(b->sort, &n, &off)) != NULL)
	{
		size_t		i;

		for (i = 0; i < n; i++)
		{
			const char *data = rows[i] + off + GS_ROW_DATA_OFF;
			IndexTuple	itup = (IndexTuple) data;

			if (i + GS_IDX_PREFETCH < n)
				__builtin_prefetch(rows[i + GS_IDX_PREFETCH] + off);
			gs_idx_write_row(b, w, &p, dedup_hint, true, itup,
							 (*gs_row_flags(data) & GS_ROW_ALIVE) != 0);
			if (last_buf != NULL)
				p.last = itup;
		}
		count += n;
		/* the block goes back: what outlives it is copied */
		if (w != NULL)
			gs_btw_settle(w);
		if (p.last != NULL && (char *) p.last != last_buf)
		{
			memcpy(last_buf, p.last, IndexTupleSize(p.last));
			p.last = (IndexTuple) last_buf;
		}
		CHECK_FOR_INTERRUPTS();
	}
	while ((row = gs_sort_next_row(b->sort)) != NULL)
	{
		IndexTuple	itup = (IndexTuple) row;

		count++;
		gs_idx_write_row(b, w, &p, dedup_hint, !external, itup,
						 (*gs_row_flags(row) & GS_ROW_ALIVE) != 0);
		if (last_buf != NULL)
		{
			memcpy(last_buf, itup, IndexTupleSize(itup));
			p.last = (IndexTuple) last_buf;
		}
	}
	if (count != gs_sort_rows(b->sort))
		elog(ERROR, "gpusort: the index sort lost rows (%.0f of %.0f)",
			 count, gs_sort_rows(b->sort));
	if (w != NULL)
	{
		gs_btw_finish(w);
		b->write_ms = gs_btw_write_ms(w);
		b->sync_ms = gs_btw_sync_ms(w);
		gs_btw_pages(w, &b->pages, &b->pages_by_workers);
		b->pipe = NULL;			/* finished with the writer */
	}

	gs_sort_report(b->sort, &b->rep);
	gs_sort_end(b->sort);
	b->sort = NULL;
	return external;
}
