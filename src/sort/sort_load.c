/*-------------------------------------------------------------------------
 *
 * sort_load.c
 *	  The sort state's input: rows copied into the block arena, their keys
 *	  encoded into the engine's key buffer, and full chunks handed to the
 *	  engine (sort_chunks.c).
 *
 * A driver of the load: it calls the chunks (sort_chunks.c), the writing
 * of a full batch (sort_runs.c), the shared primitives (sort_util.c), the
 * engine and the key encoder, never sortstate.c.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/mman.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/sortsupport.h"
#include "utils/tuplestore.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"
#include "sortstate_int.h"

/* make room for one more row; false if that would break work_mem */
static bool
gs_grow(GsSortState *s)
{
	size_t		newcap;
	size_t		oldwords = s->cap / 64 + 1;
	size_t		newwords;

	/* the arrays move: nothing may be populating them */
	gs_prefault_wait(s);
	if (s->cap >= GS_MAX_ROWS)
		return false;
	newcap = Min(s->cap * 2, GS_MAX_ROWS);
	if (s->arena_bytes + s->chunk_bytes +
		(int64) newcap * (sizeof(MinimalTuple) + s->key_bytes) > s->batch_limit)
	{
		/* not doubling: grow by what work_mem still allows, if useful */
		int64		room = s->batch_limit - gs_mem_used(s);
		size_t		more = room > 0 ?
			(size_t) (room / (sizeof(MinimalTuple) + s->key_bytes + 1)) : 0;

		if (more < s->cap / 8 + 16)
			return false;
		newcap = Min(s->cap + more, GS_MAX_ROWS);
	}

	s->tuples = repalloc_huge(s->tuples, newcap * sizeof(MinimalTuple));
	s->keys = gs_keybuf_grow(s->keys_engine, s->keys,
							 s->nrows * s->key_bytes,
							 newcap * s->key_bytes);
	newwords = newcap / 64 + 1;
	s->lossy = repalloc_huge(s->lossy, newwords * sizeof(uint64));
	memset(s->lossy + oldwords, 0, (newwords - oldwords) * sizeof(uint64));
	s->cap = newcap;
	s->check_at = 0;
	gs_note_mem(s, 0);
	return true;
}

/*
 * Fresh memory costs a page fault and the kernel's zeroing of the page on
 * first touch: about 40% of a serial load in a profile.  A new arena
 * block, and the stretch of the tuple and key arrays that its rows should
 * fill, are populated by a thread meanwhile (MADV_POPULATE_WRITE faults
 * pages in without writing to them, so racing the backend's writes is
 * harmless), and the backend mostly finds its pages ready.  Kernels older
 * than 5.14 refuse the advice and the thread gives up.
 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PREFAULT_STEP		((size_t) 2 * 1024 * 1024)

/*
 * A parallel worker that loaded 440 MB of rows into shared memory has the
 * page table entries of all of it when it exits; removing them made its
 * exit, which a canceled leader waits for, take 100-200 ms.  The thread
 * drops those of a block the worker has filled (pf->drop) before it
 * populates the next.  On a shared mapping MADV_DONTNEED leaves the pages
 * and their contents in the segment: a later touch maps them again.  The
 * range is widened to whole pages, which stay inside the same mapping.
 */
static void
gs_drop_range(GsPrefault *pf, uintptr_t pagesz)
{
	uintptr_t	start = (uintptr_t) pf->drop & ~(pagesz - 1);
	uintptr_t	end = ((uintptr_t) pf->drop + pf->drop_len + pagesz - 1) &
		~(pagesz - 1);

	if (pf->drop_len > 0)
		(void) madvise((void *) start, end - start, MADV_DONTNEED);
}

static void
gs_prefault_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsPrefault *pf = (GsPrefault *) arg;
	uintptr_t	pagesz = (uintptr_t) sysconf(_SC_PAGESIZE);
	int			r;

	gs_drop_range(pf, pagesz);

	for (r = 0; r < GS_PREFAULT_RANGES; r++)
	{
		/*
		 * madvise takes page-aligned starts only (else EINVAL): from the
		 * page the range starts in; the bytes before it stay as they are
		 */
		uintptr_t	start = (uintptr_t) pf->start[r] & ~(pagesz - 1);
		size_t		len = pf->len[r] > 0 ?
			pf->len[r] + ((uintptr_t) pf->start[r] - start) : 0;
		size_t		off;

		for (off = 0; off < len && !*stop; off += PREFAULT_STEP)
		{
			if (madvise((char *) start + off, Min(PREFAULT_STEP, len - off),
						MADV_POPULATE_WRITE) != 0)
				return;
		}
	}
}

/*
 * Populate pf's ranges on a thread, in the background; *task (NULL or an
 * earlier one, waited for first) gets the new task, owned by cxt.  The
 * thread works on a copy of pf: a caller's pf may lie on a stack that an
 * error unwinds, and a thread that read the frames written there since
 * took them for a range to drop (MADV_DONTNEED) and zeroed the stack.
 */
void
gs_populate_start(MemoryContext cxt, GsTask **task, const GsPrefault *pf)
{
	gs_populate_wait(task);
	*task = gs_task_start_copy(cxt, gs_prefault_part, pf, sizeof(GsPrefault),
							   1);
}

/* wait for the populating thread, if any (it is quick) */
void
gs_populate_wait(GsTask **task)
{
	if (*task)
	{
		GsTask	   *t = *task;

		*task = NULL;
		(void) gs_task_wait(t);
	}
}

void
gs_prefault_wait(GsSortState *s)
{
	gs_populate_wait(&s->prefault_task);
}

/* populate the new arena block b and the array slots its rows will take */
static void
gs_prefault_block(GsSortState *s, char *blk, size_t size)
{
	GsPrefault *pf = &s->prefault;
	size_t		per_row;
	size_t		from = s->nrows;
	size_t		to;

	gs_populate_wait(&s->prefault_task);
	memset(pf, 0, sizeof(GsPrefault));
	pf->start[0] = blk;
	pf->len[0] = size;
	per_row = s->nrows > 0 ? Max(s->arena_bytes / s->nrows, 16) : 64;
	to = Min(s->cap, from + size / per_row + size / per_row / 4);
	if (to > from)
	{
		pf->start[1] = (char *) (s->tuples + from);
		pf->len[1] = (to - from) * sizeof(MinimalTuple);
		pf->start[2] = s->keys + from * s->key_bytes;
		pf->len[2] = (to - from) * s->key_bytes;
	}
	gs_populate_start(s->cxt, &s->prefault_task, pf);
}

/* gs_arena_alloc's rare cases (len MAXALIGNed): a big row, a new block */
static pg_noinline char *
gs_arena_alloc_slow(GsSortState *s, Size len)
{
	char	   *p;

	/* the batch's memory grows: the next row checks it (gs_load_check) */
	s->check_at = 0;

	if (len > ARENA_BIG_TUPLE)
	{
		s->arena_bytes += len;
		return MemoryContextAllocHuge(s->tupcxt, len);
	}
	if (len > s->blk_left)
	{
		GsBlock    *b = NULL;

		/* a block an earlier batch used, if one is big enough */
		while (s->blk_next < s->nblocks)
		{
			b = &s->blocks[s->blk_next++];
			if (b->size >= len)
				break;
			b = NULL;
		}
		if (b == NULL)
		{
			size_t		blk = Max(s->next_blk_size, len);

			if (s->nblocks == s->blocks_cap)
			{
				s->blocks_cap = Max(16, s->blocks_cap * 2);
				s->blocks = s->blocks ?
					repalloc(s->blocks, s->blocks_cap * sizeof(GsBlock)) :
					MemoryContextAlloc(s->cxt, s->blocks_cap * sizeof(GsBlock));
			}
			b = &s->blocks[s->nblocks++];
			/*
			 * Huge pages need 2 MB alignment: blocks that large get it (the
			 * slack is never touched).  Rows taken in sorted order are
			 * scattered over the blocks, and on 4 kB pages nearly every one
			 * missed the TLB: writing runs took three times as long.
			 */
			if (blk >= HUGE_PAGE_BYTES)
			{
				b->raw = MemoryContextAllocHuge(s->cxt, blk + HUGE_PAGE_BYTES);
				b->ptr = (char *) TYPEALIGN(HUGE_PAGE_BYTES, b->raw);
			}
			else
				b->ptr = b->raw = MemoryContextAlloc(s->cxt, blk);
			b->size = blk;
			gs_advise_huge(b->ptr, blk);
			if (blk >= PREFAULT_STEP)
				gs_prefault_block(s, b->ptr, blk);
			s->blk_next = s->nblocks;
			/*
			 * Double, up to the largest block, and to a sixteenth of the
			 * batch's memory: the block that crosses the limit is taken
			 * whole, so that bounds how far a batch overshoots work_mem.
			 */
			if (s->next_blk_size < ARENA_MAX_BLOCK &&
				(int64) s->next_blk_size * 2 <= Max(s->batch_limit / 16,
													ARENA_FIRST_BLOCK))
				s->next_blk_size *= 2;
		}
		s->blk_free = b->ptr;
		s->blk_left = b->size;
		s->arena_bytes += b->size;
		gs_note_mem(s, 0);
	}
	p = s->blk_free;
	s->blk_free += len;
	s->blk_left -= len;
	return p;
}

/* len bytes of the arena: inline for the common case, room in the block */
static inline char *
gs_arena_alloc(GsSortState *s, Size len)
{
	char	   *p;

	len = MAXALIGN(len);
	if (unlikely(len > s->blk_left || len > ARENA_BIG_TUPLE))
		return gs_arena_alloc_slow(s, len);
	p = s->blk_free;
	s->blk_free += len;
	s->blk_left -= len;
	return p;
}

static char *
gs_arena_alloc_cb(void *arg, Size len)
{
	return gs_arena_alloc((GsSortState *) arg, len);
}

/* copy the slot's row into the arena as a MinimalTuple */
static MinimalTuple
gs_copy_row(GsSortState *s, TupleTableSlot *slot)
{
	return gs_form_row(slot, s->tupdesc->natts, &s->layout,
					   gs_arena_alloc_cb, s);
}

/*
 * What a row's put tests only now and then: the load's start, the open
 * chunk full (closed, to be sorted), the batch over its memory (written
 * out as a run), the arrays full (grown, or the batch written out).  Then
 * check_at becomes the first row count at which one of those can come
 * true, and the puts until then test that one word.  The batch's memory
 * changes only where check_at is set to 0 (a new arena block, a chunk
 * closed, the arrays grown, swapped or reset), so the count is exact.
 */
static pg_noinline void
gs_load_check(GsSortState *s)
{
	size_t		at;

	if (!s->load_started)
	{
		INSTR_TIME_SET_CURRENT(s->load_start);
		s->load_started = true;
	}
	if (s->chunk_rows > 0 && s->nrows - s->chunk_start >= s->chunk_rows)
		gs_close_chunk(s, true);
	if (gs_mem_used(s) > s->batch_limit && s->nrows >= MIN_BATCH_ROWS)
		gs_spill_batch(s);
	if (s->nrows == s->cap)
	{
		/* the engine must be done with the key buffer before it moves */
		gs_finish_chunks(s);
		if (!gs_grow(s))
			gs_spill_batch(s);
	}

	at = s->cap;
	if (s->chunk_rows > 0)
		at = Min(at, s->chunk_start + s->chunk_rows);
	if (gs_mem_used(s) > s->batch_limit)
		at = Min(at, Max(s->nrows + 1, MIN_BATCH_ROWS));
	Assert(at > s->nrows);
	s->check_at = at;
}

/*
 * The key of row n, just copied to mt, made from its bytes (load_derive):
 * as a run's reader derives it (keys_derive.c), rather than from the row
 * deformed.  For an int8 key that was 180 instructions a row, this is
 * about 20.  A row the derivation can't take (a NULL, fewer attributes)
 * is deformed from its slot.  derivable: the caller knows
 * gs_key_derivable's answer to be yes (and passes no slot).
 */
static pg_attribute_always_inline void
gs_derive_row_key(GsSortState *s, size_t n, MinimalTuple mt,
				  TupleTableSlot *slot, bool derivable)
{
	const char *body = (const char *) mt + MINIMAL_TUPLE_DATA_OFFSET;
	char	   *key = s->keys + n * s->key_bytes;
	bool		lossy;

	Assert(!derivable || gs_key_derivable(s->kp, body));
	if (derivable || likely(gs_key_derivable(s->kp, body)))
		lossy = gs_key_derive(s->kp, body, key);
	else
	{
		slot_getsomeattrs(slot, s->def.maxattno);
		lossy = gs_encode_key(s->kp, slot->tts_values, slot->tts_isnull,
							  key);
	}
	if (lossy)
	{
		s->lossy[n / 64] |= UINT64CONST(1) << (n % 64);
		s->any_lossy = true;
	}
}

/*
 * Row n, at mt with its key made, counts in the batch; derived: the key
 * was derived from the row's bytes
 */
static pg_attribute_always_inline void
gs_row_taken(GsSortState *s, size_t n, MinimalTuple mt, bool derived)
{
	s->tuples[n] = mt;
	s->max_tuple_len = Max(s->max_tuple_len, mt->t_len);
	gs_batch_note(s, mt, false, derived);
	s->nrows = n + 1;
	s->total_rows += 1;
}

void
gs_sort_put(GsSortState *s, TupleTableSlot *slot)
{
	size_t		n;
	MinimalTuple mt;

	Assert(s->status == GS_LOADING);
	if (unlikely(s->nrows >= s->check_at))
		gs_load_check(s);
	n = s->nrows;
	Assert(n < s->cap);
	if (s->load_derive)
	{
		mt = gs_copy_row(s, slot);
		gs_derive_row_key(s, n, mt, slot, false);
	}
	else
	{
		slot_getsomeattrs(slot, s->def.maxattno);
		if (gs_encode_key(s->kp, slot->tts_values, slot->tts_isnull,
						  s->keys + n * s->key_bytes))
		{
			s->lossy[n / 64] |= UINT64CONST(1) << (n % 64);
			s->any_lossy = true;
		}
		mt = gs_copy_row(s, slot);
	}
	gs_row_taken(s, n, mt, false);
}

/*
 * May the rows of r go in a page at a time (gs_sort_put_page)?  Those of
 * a reader that copies them from their pages (gs_heapread_page_rows),
 * where the keys are made from the copied rows (gs_keyplan_derives_cheaply)
 * and a projection's values have this sort's layout.
 */
bool
gs_sort_takes_pages(GsSortState *s, GsHeapReader *r)
{
	if (!gs_keyplan_derives_cheaply(s->kp) ||
		!gs_heapread_page_rows(r, &s->page_rows))
		return false;
	/* a text key: derivable unless its value is compressed or external */
	s->page_check = !s->load_derive;
	return gs_page_rows_fit(&s->page_rows, &s->layout, s->tupdesc->natts);
}

/*
 * The rows of r's next page (gs_sort_takes_pages) into the sort, copied
 * from the page without a slot: their number, 0 at the end.  A slot's
 * store and fetch of a heap tuple were 75 instructions a row, a
 * projection into the node's slot and the row formed from there 150, the
 * calls of a row at a time 60.
 */
int
gs_sort_put_page(GsSortState *s, GsHeapReader *r)
{
	Page		page;
	const OffsetNumber *offs;
	int			n = gs_heapread_next_page(r, &page, &offs);
	int			i;

	Assert(s->status == GS_LOADING);
	for (i = 0; i < n; i++)
	{
		size_t		row;
		MinimalTuple mt;

		if (unlikely(s->nrows >= s->check_at))
			gs_load_check(s);
		row = s->nrows;
		Assert(row < s->cap);
		mt = gs_page_row(&s->page_rows, &s->layout, page, offs[i],
						 gs_arena_alloc_cb, s);
		if (unlikely(mt == NULL))
		{
			/* NULLs in a projection, or a tuple without later columns */
			gs_sort_put(s, gs_heapread_page_slot(r, offs[i]));
			continue;
		}
		/* (fixed-width keys: derivable, the row has every attribute) */
		if (likely(!s->page_check) ||
			gs_key_derivable(s->kp,
							 (const char *) mt + MINIMAL_TUPLE_DATA_OFFSET))
		{
			gs_derive_row_key(s, row, mt, NULL, true);
			gs_row_taken(s, row, mt, true);
		}
		else
		{
			gs_derive_row_key(s, row, mt, gs_heapread_page_slot(r, offs[i]),
							  false);
			gs_row_taken(s, row, mt, false);
		}
	}
	return n;
}

/*
 * Room for a variant's row (gs_sort_row_add): room for its len bytes and
 * its key (GsRowRoom), which the caller fills in before its next call, as gs_sort_put
 * takes a slot's row.  The row counts from now on; a lossy key is marked
 * with gs_sort_row_lossy.  Its run's bytes depend on what the caller
 * writes, so a row is noted for its run (gs_batch_note) at the next call,
 * or when its batch is written (gs_spill_batch).
 *
 * A serial index build calls this for every row of the table: the common
 * case, room in the arrays and in the current arena block and no check
 * due, is kept to a few instructions.
 */
GsRowRoom
gs_sort_row_add(GsSortState *s, Size len)
{
	GsRowRoom	room;
	MinimalTuple mt;
	Size		need = GS_ROW_DATA_OFF + len;
	size_t		n;

	Assert(s->status == GS_LOADING && s->row_cmp != NULL);
	/* a run's record holds the length in a few bits (gpusort_spill.h) */
	if (unlikely(len > TAPE_ROW_MAX_LEN))
		elog(ERROR, "gpusort: a row of %zu bytes is too large for a sort",
			 len);
	/* the row before, filled in now */
	if (s->batch_noted < s->nrows)
		gs_batch_note(s, s->tuples[s->nrows - 1], true, false);
	if (unlikely(s->nrows >= s->check_at))
		gs_load_check(s);
	n = s->nrows;
	Assert(n < s->cap);
	mt = (MinimalTuple) gs_arena_alloc(s, need);
	memset(mt, 0, GS_ROW_DATA_OFF);
	mt->t_len = need;
	s->tuples[n] = mt;
	s->max_tuple_len = Max(s->max_tuple_len, (uint32) need);
	s->nrows = n + 1;
	s->total_rows += 1;
	room.row = (char *) mt + GS_ROW_DATA_OFF;
	room.key = s->keys + n * s->key_bytes;
	return room;
}

/* the key of the row gs_sort_row_add gave last is lossy */
void
gs_sort_row_lossy(GsSortState *s)
{
	size_t		n = s->nrows - 1;

	s->lossy[n / 64] |= UINT64CONST(1) << (n % 64);
	s->any_lossy = true;
}

/* the width of the sort's keys, which parallel loaders must match */
int
gs_sort_key_bytes(GsSortState *s)
{
	return s->key_bytes;
}

/*
 * Rows put in bulk (sort_parallel.c hands over the rows of its workers so,
 * filling the arrays on threads).  gs_sort_bulk_room makes room for up to n
 * more rows in the batch and returns how many it made (at least one unless
 * the batch is full) and where their tuple pointers and keys go; a full
 * batch is written out as a run with gs_sort_bulk_spill, as gs_sort_put
 * would.  Once the caller has filled them (and marked the lossy ones with
 * gs_sort_bulk_lossy, i counting from the first row given),
 * gs_sort_bulk_done takes them in, closing chunks as gs_sort_put would.
 * The tuples stay where they are, in memory that outlives the sort state,
 * and are not counted against work_mem.
 */
size_t
gs_sort_bulk_room(GsSortState *s, size_t n, MinimalTuple **tuples,
				  char **keys)
{
	size_t		want = Min(s->nrows + n, GS_MAX_ROWS);

	Assert(s->status == GS_LOADING);
	s->bulk_rows = true;
	if (!s->load_started)
	{
		INSTR_TIME_SET_CURRENT(s->load_start);
		s->load_started = true;
	}
	if (want > s->cap)
	{
		/* grow once, to what the rows need or the batch's memory allows */
		int64		room = s->batch_limit - s->arena_bytes - s->chunk_bytes;
		size_t		fit = room > 0 ?
			(size_t) (room / (sizeof(MinimalTuple) + s->key_bytes + 1)) : 0;
		size_t		newcap = Min(want, Max(fit, s->cap));

		if (newcap > s->cap)
		{
			size_t		oldwords = s->cap / 64 + 1;
			size_t		newwords = newcap / 64 + 1;

			/* the engine must be done with the key buffer before it moves */
			gs_finish_chunks(s);
			s->tuples = repalloc_huge(s->tuples, newcap * sizeof(MinimalTuple));
			s->keys = gs_keybuf_grow(s->keys_engine, s->keys,
									 s->nrows * s->key_bytes,
									 newcap * s->key_bytes);
			s->lossy = repalloc_huge(s->lossy, newwords * sizeof(uint64));
			memset(s->lossy + oldwords, 0,
				   (newwords - oldwords) * sizeof(uint64));
			s->cap = newcap;
			gs_note_mem(s, 0);
		}
	}
	s->check_at = 0;
	*tuples = s->tuples + s->nrows;
	*keys = s->keys + s->nrows * s->key_bytes;
	return Min(n, s->cap - s->nrows);
}

void
gs_sort_bulk_spill(GsSortState *s)
{
	gs_finish_chunks(s);
	gs_spill_batch(s);
}

void
gs_sort_bulk_lossy(GsSortState *s, size_t i)
{
	size_t		row = s->nrows + i;

	Assert(row < s->cap);
	s->lossy[row / 64] |= UINT64CONST(1) << (row % 64);
	s->any_lossy = true;
}

void
gs_sort_bulk_done(GsSortState *s, size_t n, uint32 max_tuple_len)
{
	size_t		end = s->nrows + n;

	Assert(end <= s->cap);
	s->max_tuple_len = Max(s->max_tuple_len, max_tuple_len);
	s->total_rows += n;
	if (s->chunk_rows > 0)
	{
		while (end - s->chunk_start >= s->chunk_rows)
		{
			s->nrows = s->chunk_start + s->chunk_rows;
			gs_close_chunk(s, true);
		}
	}
	s->nrows = end;
	s->check_at = 0;
}

/*
 * The load ran in nthreads processes (the leader and its parallel
 * workers): those cores were granted to this query, and the passes over
 * the rows after the load (the merge of chunks, the copy into sorted
 * order) may use as many threads, when that is more than
 * gpusort.cpu_threads.
 */
void
gs_sort_bulk_threads(GsSortState *s, int nthreads)
{
	s->bulk_threads = Max(s->bulk_threads, nthreads);
}
