/*-------------------------------------------------------------------------
 *
 * sort_util.c
 *	  Primitives that every phase of the sort state shares: its memory
 *	  accounting (gs_mem_used, gs_note_mem), huge pages for fresh memory,
 *	  PostgreSQL's order of two rows (gs_cmp_tuples, gs_cmp_rows) and the
 *	  layout of rows of fixed-width attributes (gs_row_layout_init).
 *
 * A bottom-layer file of the sort state: sortstate.c and the phase files
 * (sort_load.c, sort_chunks.c, sort_runs.c, sort_merge.c, sort_emit.c) call
 * it; it calls PostgreSQL only.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/mman.h>

#include "access/htup_details.h"
#include "miscadmin.h"
#include "utils/sortsupport.h"

#include "sortstate_int.h"

/*
 * Ask for transparent huge pages on a large fresh allocation: a sort touches
 * all of its memory once, and with 4 kB pages the page faults alone cost as
 * much as copying the rows.  Only the 2 MB-aligned interior can be advised.
 */
void
gs_advise_huge(void *p, size_t len)
{
#ifdef MADV_HUGEPAGE
	uintptr_t	start = TYPEALIGN(HUGE_PAGE_BYTES, (uintptr_t) p);
	uintptr_t	end = TYPEALIGN_DOWN(HUGE_PAGE_BYTES, (uintptr_t) p + len);

	if (end > start)
		(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
#endif
}

void
gs_note_mem(GsSortState *s, int64 extra)
{
	int64		m = gs_mem_used(s) + extra + (s->writing ? s->spare_bytes : 0);

	if (m > s->mem_peak)
		s->mem_peak = m;
}

/* PostgreSQL's order of two rows, over every sort column (or the variant's) */
int
gs_cmp_tuples(GsSortState *s, MinimalTuple ta, MinimalTuple tb)
{
	HeapTupleData ha;
	HeapTupleData hb;
	int			i;

	if (s->row_cmp != NULL)
		return s->row_cmp(s->row_cmp_arg, (char *) ta + GS_ROW_DATA_OFF,
						  (char *) tb + GS_ROW_DATA_OFF);

	ha.t_len = ta->t_len + MINIMAL_TUPLE_OFFSET;
	ha.t_data = (HeapTupleHeader) ((char *) ta - MINIMAL_TUPLE_OFFSET);
	hb.t_len = tb->t_len + MINIMAL_TUPLE_OFFSET;
	hb.t_data = (HeapTupleHeader) ((char *) tb - MINIMAL_TUPLE_OFFSET);

	for (i = 0; i < s->def.nkeys; i++)
	{
		SortSupport ssup = &s->ssup[i];
		bool		na;
		bool		nb;
		Datum		da = heap_getattr(&ha, ssup->ssup_attno, s->tupdesc, &na);
		Datum		db = heap_getattr(&hb, ssup->ssup_attno, s->tupdesc, &nb);
		int			c = ApplySortComparator(da, na, db, nb, ssup);

		if (c != 0)
			return c;
	}
	return 0;
}

/*
 * qsort_arg comparator over batch row indexes.  A long run of equal keys
 * under a slow collation can take a while, so it checks for interrupts now
 * and then (leaving qsort_arg by longjmp is safe: it holds no resources).
 */
int
gs_cmp_rows(const void *a, const void *b, void *arg)
{
	GsSortState *s = (GsSortState *) arg;

	if (++s->ncompares % COMPARE_INTERRUPT_INTERVAL == 0)
		CHECK_FOR_INTERRUPTS();

	return gs_cmp_tuples(s, s->tuples[*(const uint32 *) a],
						 s->tuples[*(const uint32 *) b]);
}

/*
 * The layout of desc's rows for gs_form_row: the offsets heap_fill_tuple
 * gives fixed-width attributes in a tuple without NULLs, or natts 0 where
 * an attribute is of variable width (or there are too many).  Where only
 * the last one is a varlena, tail_natts and the place its room starts.
 */
void
gs_row_layout_init(GsRowLayout *l, TupleDesc desc)
{
	Size		hoff = MAXALIGN(SizeofMinimalTupleHeader);
	Size		off = 0;
	int			i;

	memset(l, 0, sizeof(*l));
	if (desc->natts > GS_LAYOUT_MAX_ATTS)
		return;
	l->hoff = (uint8) (hoff + MINIMAL_TUPLE_OFFSET);
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attlen == -1 && i == desc->natts - 1 &&
			hoff + off <= PG_UINT16_MAX)
		{
			l->tail_natts = desc->natts;
			l->tail_start = (uint16) (hoff + off);
			l->tail_align = att->attalign;
			l->tail_packable = att->attstorage != TYPSTORAGE_PLAIN;
			return;
		}
		if (att->attlen <= 0)
			return;
		off = att_align_nominal(off, att->attalign);
		l->off[i] = (uint16) (hoff + off);
		l->attlen[i] = att->attbyval ? att->attlen : -att->attlen;
		off += att->attlen;
	}
	if (hoff + off > PG_UINT16_MAX)
		return;
	l->len = (uint32) (hoff + off);
	l->natts = desc->natts;
}
