/*-------------------------------------------------------------------------
 *
 * sortstate.c
 *	  The sort state behind a GpuSort node: begin / put / perform / get /
 *	  mark / restore / rewind / end, shaped like PostgreSQL's tuplesort.
 *
 * Rows arrive one at a time.  Each is copied once into a block arena (no
 * palloc per row) and its normalized key is encoded once into a key buffer
 * that belongs to the engine (pinned host memory for the GPU engine).  At
 * perform time the engine sorts the (key, row index) pairs; rows whose keys
 * are equal are then put in their final order with PostgreSQL's own
 * comparators when the key plan or a row's encoding was not exact.  Rows
 * are emitted through the permutation, prefetching ahead.
 *
 * Everything stays within work_mem.  When the input outgrows it, every row
 * taken so far and all later ones are handed to PostgreSQL's tuplesort,
 * which sorts externally; EXPLAIN ANALYZE says so.
 *
 * The sorted result is kept until the state ends, so backward scans,
 * mark/restore and rescans without new parameters cost nothing extra.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/sortsupport.h"
#include "utils/tuplesort.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"

/*
 * Arena blocks start small (sorts of a few rows stay cheap) and double up
 * to a size where malloc overhead is negligible; tuples larger than a
 * quarter of the biggest block get a chunk of their own.
 */
#define ARENA_FIRST_BLOCK	(32 * 1024)
#define ARENA_MAX_BLOCK		(8 * 1024 * 1024)
#define ARENA_BIG_TUPLE		(ARENA_MAX_BLOCK / 4)

/* initial row capacity when the planner's estimate is useless */
#define MIN_ROW_CAPACITY	1024

/* rows emitted ahead of the current one whose memory is prefetched */
#define PREFETCH_DISTANCE	8

/* rows ahead whose pointer is prefetched while gathering sorted order */
#define GATHER_PREFETCH		16

/* how often long loops of ours check for interrupts (rows) */
#define INTERRUPT_INTERVAL	65536

typedef enum GsStatus
{
	GS_LOADING,					/* taking rows into the arena */
	GS_SORTED,					/* in-memory result ready */
	GS_TS_LOADING,				/* handed over: taking rows into tuplesort */
	GS_TS_SORTED				/* handed over: tuplesort result ready */
} GsStatus;

struct GsSortState
{
	MemoryContext cxt;			/* owns everything below */
	MemoryContext tupcxt;		/* arena blocks */
	GsStatus	status;

	/* sort definition */
	TupleDesc	tupdesc;
	int			nkeys;
	AttrNumber *attnums;
	Oid		   *sortops;
	Oid		   *collations;
	bool	   *nulls_first;
	int			maxattno;
	int			work_mem_kb;
	bool		random_access;

	/* keys */
	GsKeyPlan  *kp;
	int			key_bytes;
	bool		exact;			/* static part: every column fully encoded */
	bool		any_lossy;		/* some row's encoding lost information */
	uint64	   *lossy;			/* bit per row: its encoding was lossy */
	SortSupport ssup;			/* PostgreSQL's comparators, for ties */

	/* engine */
	GsEngine   *keys_engine;	/* owner of the key buffer */
	GsEngine   *sort_engine;	/* the one that sorted */
	char	   *fallback;

	/* rows */
	size_t		nrows;
	size_t		cap;			/* rows the arrays below have room for */
	MinimalTuple *tuples;		/* in arrival order */
	char	   *keys;			/* cap * key_bytes, engine-owned */
	uint32	   *perm;
	MinimalTuple *sorted;		/* in sorted order, once sorted */

	/* arena */
	char	   *blk_free;		/* next free byte in the current block */
	size_t		blk_left;
	size_t		next_blk_size;
	int64		arena_bytes;	/* bytes taken from tupcxt */
	int64		mem_limit;		/* work_mem in bytes */
	int64		mem_peak;

	/* reading */
	size_t		current;		/* as in tuplesort: next row to return */
	bool		eof_reached;
	size_t		markpos;
	bool		markeof;

	/* handed over to tuplesort */
	Tuplesortstate *ts;
	TupleTableSlot *ts_slot;

	/* report */
	double		load_ms;
	double		sort_ms;
	double		transfer_ms;
	double		tiebreak_ms;
	double		tiebreak_rows;
	instr_time	load_start;
	bool		load_started;
};

static int64
gs_mem_used(GsSortState *s)
{
	return s->arena_bytes +
		(int64) s->cap * (sizeof(MinimalTuple) + s->key_bytes) +
		(int64) (s->cap / 64 + 1) * sizeof(uint64);
}

static void
gs_note_mem(GsSortState *s, int64 extra)
{
	int64		m = gs_mem_used(s) + extra;

	if (m > s->mem_peak)
		s->mem_peak = m;
}

GsSortState *
gs_sort_begin(TupleDesc tupdesc, int nkeys, const AttrNumber *attnums,
			  const Oid *sortops, const Oid *collations,
			  const bool *nulls_first, int work_mem_kb, bool random_access,
			  double est_rows)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	GsSortState *s;
	int			i;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "GpuSort",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);

	s = palloc0(sizeof(GsSortState));
	s->cxt = cxt;
	s->tupcxt = AllocSetContextCreate(cxt, "GpuSort tuples",
									  ALLOCSET_DEFAULT_SIZES);
	s->status = GS_LOADING;
	s->tupdesc = tupdesc;
	s->nkeys = nkeys;
	s->attnums = palloc(nkeys * sizeof(AttrNumber));
	s->sortops = palloc(nkeys * sizeof(Oid));
	s->collations = palloc(nkeys * sizeof(Oid));
	s->nulls_first = palloc(nkeys * sizeof(bool));
	memcpy(s->attnums, attnums, nkeys * sizeof(AttrNumber));
	memcpy(s->sortops, sortops, nkeys * sizeof(Oid));
	memcpy(s->collations, collations, nkeys * sizeof(Oid));
	memcpy(s->nulls_first, nulls_first, nkeys * sizeof(bool));
	s->maxattno = 0;
	for (i = 0; i < nkeys; i++)
		s->maxattno = Max(s->maxattno, attnums[i]);
	s->work_mem_kb = work_mem_kb;
	s->mem_limit = (int64) work_mem_kb * 1024;
	s->random_access = random_access;

	s->kp = gs_keyplan_create(nkeys, attnums, sortops, collations,
							  nulls_first, tupdesc, gpusort_max_key_bytes);
	if (s->kp == NULL)
		elog(ERROR, "gpusort: leading sort key is not encodable");
	s->key_bytes = gs_keyplan_key_bytes(s->kp);
	s->exact = gs_keyplan_exact(s->kp);

	/* PostgreSQL's comparators, for runs of equal keys */
	s->ssup = palloc0(nkeys * sizeof(SortSupportData));
	for (i = 0; i < nkeys; i++)
	{
		SortSupport ssup = &s->ssup[i];

		ssup->ssup_cxt = cxt;
		ssup->ssup_collation = collations[i];
		ssup->ssup_nulls_first = nulls_first[i];
		ssup->ssup_attno = attnums[i];
		ssup->abbreviate = false;
		PrepareSortSupportFromOrderingOp(sortops[i], ssup);
	}

	/* the engine that owns the key buffer; the sort may still go elsewhere */
	s->keys_engine = gs_engine_choose(est_rows, NULL);

	/* size the arrays from the estimate, within work_mem */
	{
		double		per_row = sizeof(MinimalTuple) + s->key_bytes + 32.0;
		double		fit = (double) s->mem_limit / per_row;
		double		want = Min(est_rows * 1.1 + 16, fit);

		want = Min(want, (double) GS_MAX_ROWS);
		s->cap = (size_t) Max(want, (double) MIN_ROW_CAPACITY);
	}
	s->tuples = MemoryContextAllocHuge(cxt, s->cap * sizeof(MinimalTuple));
	s->keys = gs_keybuf_alloc(s->keys_engine, s->cap * s->key_bytes, cxt);
	s->lossy = MemoryContextAllocHuge(cxt, (s->cap / 64 + 1) * sizeof(uint64));
	memset(s->lossy, 0, (s->cap / 64 + 1) * sizeof(uint64));
	s->next_blk_size = ARENA_FIRST_BLOCK;

	MemoryContextSwitchTo(oldcxt);
	return s;
}

/*
 * Hand every row taken so far to PostgreSQL's tuplesort and release the
 * arena; later rows go straight to tuplesort.
 */
static void
gs_hand_over(GsSortState *s, const char *why)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(s->cxt);
	size_t		i;

	s->ts = tuplesort_begin_heap(s->tupdesc, s->nkeys, s->attnums,
								 s->sortops, s->collations, s->nulls_first,
								 s->work_mem_kb, NULL,
								 s->random_access ? TUPLESORT_RANDOMACCESS :
								 TUPLESORT_NONE);
	s->ts_slot = MakeSingleTupleTableSlot(s->tupdesc, &TTSOpsMinimalTuple);
	for (i = 0; i < s->nrows; i++)
	{
		if ((i % INTERRUPT_INTERVAL) == 0)
			CHECK_FOR_INTERRUPTS();
		ExecStoreMinimalTuple(s->tuples[i], s->ts_slot, false);
		tuplesort_puttupleslot(s->ts, s->ts_slot);
	}
	ExecClearTuple(s->ts_slot);

	gs_keybuf_free(s->keys_engine, s->keys);
	s->keys = NULL;
	pfree(s->tuples);
	s->tuples = NULL;
	pfree(s->lossy);
	s->lossy = NULL;
	MemoryContextReset(s->tupcxt);
	s->arena_bytes = 0;
	s->blk_left = 0;
	s->cap = 0;
	s->fallback = pstrdup(why);
	s->status = GS_TS_LOADING;
	MemoryContextSwitchTo(oldcxt);
}

/* make room for one more row; false if that would break work_mem */
static bool
gs_grow(GsSortState *s)
{
	size_t		newcap;
	size_t		oldwords = s->cap / 64 + 1;
	size_t		newwords;

	if (s->cap >= GS_MAX_ROWS)
		return false;
	newcap = s->cap * 2;
	if (newcap > GS_MAX_ROWS)
		newcap = GS_MAX_ROWS;
	if (s->arena_bytes + (int64) newcap * (sizeof(MinimalTuple) + s->key_bytes) >
		s->mem_limit)
	{
		/* not doubling: grow by what work_mem still allows, if useful */
		int64		room = s->mem_limit - gs_mem_used(s);
		size_t		more = room > 0 ?
			(size_t) (room / (sizeof(MinimalTuple) + s->key_bytes + 1)) : 0;

		if (more < s->cap / 8 + 16)
			return false;
		newcap = s->cap + more;
	}

	s->tuples = repalloc_huge(s->tuples, newcap * sizeof(MinimalTuple));
	s->keys = gs_keybuf_grow(s->keys_engine, s->keys,
							 s->nrows * s->key_bytes,
							 newcap * s->key_bytes);
	newwords = newcap / 64 + 1;
	s->lossy = repalloc_huge(s->lossy, newwords * sizeof(uint64));
	memset(s->lossy + oldwords, 0, (newwords - oldwords) * sizeof(uint64));
	s->cap = newcap;
	gs_note_mem(s, 0);
	return true;
}

static char *
gs_arena_alloc(GsSortState *s, Size len)
{
	char	   *p;

	len = MAXALIGN(len);
	if (len > ARENA_BIG_TUPLE)
	{
		s->arena_bytes += len;
		return MemoryContextAllocHuge(s->tupcxt, len);
	}
	if (len > s->blk_left)
	{
		size_t		blk = s->next_blk_size;

		s->blk_free = MemoryContextAlloc(s->tupcxt, blk);
		s->blk_left = blk;
		s->arena_bytes += blk;
		if (s->next_blk_size < ARENA_MAX_BLOCK)
			s->next_blk_size *= 2;
		gs_note_mem(s, 0);
	}
	p = s->blk_free;
	s->blk_free += len;
	s->blk_left -= len;
	return p;
}

/* copy the slot's row into the arena as a MinimalTuple */
static MinimalTuple
gs_copy_row(GsSortState *s, TupleTableSlot *slot)
{
	MinimalTuple mt;

	if (TTS_IS_MINIMALTUPLE(slot) || TTS_IS_HEAPTUPLE(slot) ||
		TTS_IS_BUFFERTUPLE(slot))
	{
		bool		should_free;

		if (TTS_IS_MINIMALTUPLE(slot))
		{
			MinimalTuple src = ExecFetchSlotMinimalTuple(slot, &should_free);

			mt = (MinimalTuple) gs_arena_alloc(s, src->t_len);
			memcpy(mt, src, src->t_len);
			if (should_free)
				pfree(src);
			return mt;
		}
		else
		{
			HeapTuple	ht = ExecFetchSlotHeapTuple(slot, false, &should_free);

			/*
			 * A stored heap tuple can have fewer attributes than the
			 * descriptor (columns added later with a default); form those
			 * from the deformed values below instead.
			 */
			if (HeapTupleHeaderGetNatts(ht->t_data) >= s->tupdesc->natts)
			{
				Size		len = ht->t_len - MINIMAL_TUPLE_OFFSET;

				mt = (MinimalTuple) gs_arena_alloc(s, len);
				memcpy(mt, (char *) ht->t_data + MINIMAL_TUPLE_OFFSET, len);
				mt->t_len = len;
				if (should_free)
					heap_freetuple(ht);
				return mt;
			}
			if (should_free)
				heap_freetuple(ht);
		}
	}

	/* virtual slot (or short heap tuple): form from the values */
	{
		TupleDesc	desc = slot->tts_tupleDescriptor;
		int			natts = desc->natts;
		bool		hasnull = false;
		Size		hoff;
		Size		data_len;
		int			i;

		slot_getallattrs(slot);
		for (i = 0; i < natts; i++)
		{
			if (slot->tts_isnull[i])
			{
				hasnull = true;
				break;
			}
		}
		hoff = SizeofMinimalTupleHeader;
		if (hasnull)
			hoff += BITMAPLEN(natts);
		hoff = MAXALIGN(hoff);
		data_len = heap_compute_data_size(desc, slot->tts_values,
										  slot->tts_isnull);
		mt = (MinimalTuple) gs_arena_alloc(s, hoff + data_len);
		memset(mt, 0, hoff + data_len);
		mt->t_len = hoff + data_len;
		HeapTupleHeaderSetNatts(mt, natts);
		mt->t_hoff = hoff + MINIMAL_TUPLE_OFFSET;
		heap_fill_tuple(desc, slot->tts_values, slot->tts_isnull,
						(char *) mt + hoff, data_len, &mt->t_infomask,
						hasnull ? mt->t_bits : NULL);
		return mt;
	}
}

void
gs_sort_put(GsSortState *s, TupleTableSlot *slot)
{
	size_t		n;

	if (!s->load_started)
	{
		INSTR_TIME_SET_CURRENT(s->load_start);
		s->load_started = true;
	}

	if (s->status == GS_TS_LOADING)
	{
		tuplesort_puttupleslot(s->ts, slot);
		return;
	}
	Assert(s->status == GS_LOADING);

	n = s->nrows;
	if (n == s->cap && !gs_grow(s))
	{
		gs_hand_over(s, n >= GS_MAX_ROWS ?
					 "more rows than one sort takes" :
					 "input exceeded work_mem");
		tuplesort_puttupleslot(s->ts, slot);
		return;
	}

	slot_getsomeattrs(slot, s->maxattno);
	if (gs_encode_key(s->kp, slot->tts_values, slot->tts_isnull,
					  s->keys + n * s->key_bytes))
	{
		s->lossy[n / 64] |= UINT64CONST(1) << (n % 64);
		s->any_lossy = true;
	}
	s->tuples[n] = gs_copy_row(s, slot);
	s->nrows = n + 1;

	if (gs_mem_used(s) > s->mem_limit)
	{
		gs_note_mem(s, 0);
		gs_hand_over(s, "input exceeded work_mem");
	}
}

/* qsort_arg comparator over row indexes: PostgreSQL's own order */
static int
gs_cmp_rows(const void *a, const void *b, void *arg)
{
	GsSortState *s = (GsSortState *) arg;
	MinimalTuple ta = s->tuples[*(const uint32 *) a];
	MinimalTuple tb = s->tuples[*(const uint32 *) b];
	HeapTupleData ha;
	HeapTupleData hb;
	int			i;

	ha.t_len = ta->t_len + MINIMAL_TUPLE_OFFSET;
	ha.t_data = (HeapTupleHeader) ((char *) ta - MINIMAL_TUPLE_OFFSET);
	hb.t_len = tb->t_len + MINIMAL_TUPLE_OFFSET;
	hb.t_data = (HeapTupleHeader) ((char *) tb - MINIMAL_TUPLE_OFFSET);

	for (i = 0; i < s->nkeys; i++)
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

static inline bool
gs_row_lossy(GsSortState *s, uint32 row)
{
	return (s->lossy[row / 64] >> (row % 64)) & 1;
}

/*
 * Put runs of equal keys in PostgreSQL's order.  keys[] holds the sorted
 * keys (the engine returned them), so a run is a stretch of equal
 * neighbours.  A run needs the comparators only when the key plan is not
 * exact or one of its rows was encoded lossily.
 */
static void
gs_tiebreak(GsSortState *s)
{
	size_t		n = s->nrows;
	size_t		kb = s->key_bytes;
	size_t		i = 0;
	size_t		checked = 0;

	while (i < n)
	{
		size_t		j = i + 1;
		const char *ki = s->keys + i * kb;

		while (j < n && memcmp(ki, s->keys + j * kb, kb) == 0)
			j++;
		if (j - i > 1)
		{
			bool		need = !s->exact;
			size_t		k;

			for (k = i; !need && k < j; k++)
				need = gs_row_lossy(s, s->perm[k]);
			if (need)
			{
				qsort_arg(s->perm + i, j - i, sizeof(uint32), gs_cmp_rows, s);
				s->tiebreak_rows += j - i;
			}
		}
		checked += j - i;
		if (checked >= INTERRUPT_INTERVAL)
		{
			CHECK_FOR_INTERRUPTS();
			checked = 0;
		}
		i = j;
	}
}

void
gs_sort_perform(GsSortState *s)
{
	instr_time	t0;
	instr_time	t1;

	INSTR_TIME_SET_CURRENT(t0);
	if (s->load_started)
	{
		instr_time	d = t0;

		INSTR_TIME_SUBTRACT(d, s->load_start);
		s->load_ms = INSTR_TIME_GET_MILLISEC(d);
	}

	if (s->status == GS_TS_LOADING)
	{
		tuplesort_performsort(s->ts);
		INSTR_TIME_SET_CURRENT(t1);
		INSTR_TIME_SUBTRACT(t1, t0);
		s->sort_ms = INSTR_TIME_GET_MILLISEC(t1);
		s->status = GS_TS_SORTED;
		return;
	}
	Assert(s->status == GS_LOADING);

	s->perm = MemoryContextAllocHuge(s->cxt,
									 Max(s->nrows, 1) * sizeof(uint32));
	gs_note_mem(s, (int64) s->nrows * sizeof(uint32));

	if (s->nrows > 1)
	{
		bool		need_ties = !s->exact || s->any_lossy;
		const char *why = NULL;
		GsEngine   *e = gs_engine_choose((double) s->nrows, &why);
		gs_sort_stats st;

		if (why)
			s->fallback = pstrdup(why);
		s->sort_engine = gs_engine_sort(e, s->keys, s->nrows, s->key_bytes,
										s->perm,
										need_ties ? GS_SORT_KEYS_OUT : 0,
										&st, &s->fallback);
		s->transfer_ms = st.upload_ms + st.download_ms;
		INSTR_TIME_SET_CURRENT(t1);
		INSTR_TIME_SUBTRACT(t1, t0);
		s->sort_ms = INSTR_TIME_GET_MILLISEC(t1);

		if (need_ties)
		{
			INSTR_TIME_SET_CURRENT(t0);
			gs_tiebreak(s);
			INSTR_TIME_SET_CURRENT(t1);
			INSTR_TIME_SUBTRACT(t1, t0);
			s->tiebreak_ms = INSTR_TIME_GET_MILLISEC(t1);
		}
	}
	else
	{
		s->perm[0] = 0;
		s->sort_engine = s->keys_engine;
	}

	/*
	 * Gather the row pointers into sorted order once.  The loads of this
	 * loop are independent, so the cache misses overlap; emitting rows
	 * through perm instead would take one dependent miss per row.  Keys,
	 * permutation and the arrival-order array are not needed any more.
	 */
	s->sorted = MemoryContextAllocHuge(s->cxt,
									   Max(s->nrows, 1) * sizeof(MinimalTuple));
	gs_note_mem(s, (int64) s->nrows * (sizeof(uint32) + sizeof(MinimalTuple)));
	{
		size_t		i;
		size_t		n = s->nrows;

		for (i = 0; i < n; i++)
		{
			if (i + GATHER_PREFETCH < n)
				__builtin_prefetch(&s->tuples[s->perm[i + GATHER_PREFETCH]]);
			s->sorted[i] = s->tuples[s->perm[i]];
		}
	}
	pfree(s->perm);
	s->perm = NULL;
	pfree(s->tuples);
	s->tuples = NULL;
	gs_keybuf_free(s->keys_engine, s->keys);
	s->keys = NULL;

	s->status = GS_SORTED;
	s->current = 0;
	s->eof_reached = false;
	s->markpos = 0;
	s->markeof = false;
}

static inline void
gs_store(GsSortState *s, size_t pos, TupleTableSlot *slot)
{
	ExecStoreMinimalTuple(s->sorted[pos], slot, false);
}

bool
gs_sort_get(GsSortState *s, bool forward, TupleTableSlot *slot)
{
	if (s->status == GS_TS_SORTED)
		return tuplesort_gettupleslot(s->ts, forward, false, slot, NULL);

	Assert(s->status == GS_SORTED);
	if (forward)
	{
		if (s->current < s->nrows)
		{
			size_t		ahead = s->current + PREFETCH_DISTANCE;

			if (ahead < s->nrows)
				__builtin_prefetch(s->sorted[ahead]);
			gs_store(s, s->current++, slot);
			return true;
		}
		s->eof_reached = true;
		ExecClearTuple(slot);
		return false;
	}

	/* backward: the row before the one last returned, as tuplesort does */
	if (s->current == 0)
	{
		ExecClearTuple(slot);
		return false;
	}
	if (s->eof_reached)
		s->eof_reached = false;
	else
	{
		s->current--;
		if (s->current == 0)
		{
			ExecClearTuple(slot);
			return false;
		}
	}
	gs_store(s, s->current - 1, slot);
	return true;
}

void
gs_sort_markpos(GsSortState *s)
{
	if (s->status == GS_TS_SORTED)
		tuplesort_markpos(s->ts);
	else
	{
		s->markpos = s->current;
		s->markeof = s->eof_reached;
	}
}

void
gs_sort_restorepos(GsSortState *s)
{
	if (s->status == GS_TS_SORTED)
		tuplesort_restorepos(s->ts);
	else
	{
		s->current = s->markpos;
		s->eof_reached = s->markeof;
	}
}

bool
gs_sort_can_rewind(GsSortState *s)
{
	if (s->status == GS_SORTED)
		return true;
	return s->status == GS_TS_SORTED && s->random_access;
}

void
gs_sort_rewind(GsSortState *s)
{
	Assert(gs_sort_can_rewind(s));
	if (s->status == GS_TS_SORTED)
		tuplesort_rescan(s->ts);
	else
	{
		s->current = 0;
		s->eof_reached = false;
		s->markpos = 0;
		s->markeof = false;
	}
}

void
gs_sort_report(GsSortState *s, GsSortReport *r)
{
	memset(r, 0, sizeof(*r));
	r->fallback = s->fallback;
	r->key_bytes = s->key_bytes;
	r->load_ms = s->load_ms;
	r->sort_ms = s->sort_ms;
	r->transfer_ms = s->transfer_ms;
	r->tiebreak_ms = s->tiebreak_ms;
	r->tiebreak_rows = s->tiebreak_rows;
	r->exact = s->exact && !s->any_lossy;

	{
		StringInfoData buf;

		initStringInfo(&buf);
		gs_keyplan_describe(s->kp, &buf);
		r->keydesc = buf.data;
	}

	if (s->status == GS_TS_SORTED || s->status == GS_TS_LOADING)
	{
		r->handed_over = true;
		r->engine = "tuplesort";
		if (s->status == GS_TS_SORTED)
		{
			TuplesortInstrumentation stats;

			tuplesort_get_stats(s->ts, &stats);
			r->ts_method = tuplesort_method_name(stats.sortMethod);
			r->ts_space_type = tuplesort_space_type_name(stats.spaceType);
			r->ts_space_kb = stats.spaceUsed;
		}
		r->mem_bytes = s->mem_peak;
		return;
	}

	r->rows = (double) s->nrows;
	r->mem_bytes = s->mem_peak;
	if (s->sort_engine)
	{
		r->engine = s->sort_engine->ops->name;
		r->device = s->sort_engine->info.name;
	}
}

void
gs_sort_end(GsSortState *s)
{
	if (s->ts)
		tuplesort_end(s->ts);
	if (s->ts_slot)
		ExecDropSingleTupleTableSlot(s->ts_slot);
	/* the key buffer goes with the context (see gs_keybuf_alloc) */
	MemoryContextDelete(s->cxt);
}
