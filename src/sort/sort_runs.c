/*-------------------------------------------------------------------------
 *
 * sort_runs.c
 *	  Writing the sort state's batches out as sorted runs when they outgrow
 *	  work_mem: on threads, in the background while the next batch loads,
 *	  and the batches' memory that the two take turns with.
 *
 * Below the load (sort_load.c) and the life cycle (sortstate.c), which
 * call it; it calls the chunks (sort_chunks.c), the in-memory chunk merge
 * and the merge's plan (sort_merge.c), the run writer (sort_writer.c), the
 * shared primitives (sort_util.c), the engine's key buffers and spill.c.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>

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

/*
 * Writing a run of a batch on several threads.  The rows' order is known
 * (rows[]), so each part takes a slice of it, formats its rows into a
 * buffer of its own and writes it at the slice's place in the file.  The
 * run's bytes were counted as the rows came (gs_batch_note), so the run
 * is placed before the write starts.  Where every row has one size, that
 * places each slice too; else each part adds up its slice's bytes and
 * waits for the parts before it to have done the same (a chain on the
 * parts' threads).  Most of the time goes to fetching rows scattered over
 * the arena, which is why it pays to spread.  The job refers to the
 * batch's memory only, not to the sort state's current batch, so it runs
 * in the background while the next batch is loaded.
 *
 * A batch whose keys need no tie-break is also sorted there (part 0 sorts,
 * on the CPU engine's thread instance, while the others wait): the load
 * goes on meanwhile instead of waiting for the sort.
 */
struct GsSpillJob
{
	GsTempFile *file;
	int			key_bytes;
	GsTapeOut	tape;			/* the records' format */
	MinimalTuple *tuples;		/* the batch's rows */
	const uint64 *lossy;		/* and their lossy bits */
	const uint32 *rows;			/* batch rows in sorted order */
	const char *keys;			/* key of rows[i] at keys + i * key_bytes, */
	const uint32 *keyidx;		/* else at keys + keyidx[i] * key_bytes */
	uint32	   *merged;			/* rows and keyidx to free, if allocated */
	size_t		n;
	int			nparts;
	size_t		bufsize;		/* of each part's write buffer */
	int			pass;			/* 1: add up bytes, 2: write */
	int64		base;			/* file offset of the run */
	int64		rec;			/* every record's bytes, or -1 (chain) */
	GsEngine   *sort_eng;		/* sorts the rows into rows[] first, or NULL */
	int			sort_state;		/* 0 to do, 1 done, -1 failed */
	char		sort_err[GS_ERRBUF_SIZE];
	double		sort_ms;
	pthread_mutex_t lock;		/* the chain's and the sort's */
	pthread_cond_t cv;
	bool		sized[GS_CPU_THREADS_MAX];	/* bytes[part] known */
	int64		bytes[GS_CPU_THREADS_MAX];
	char	   *bufs[GS_CPU_THREADS_MAX];
	int			err[GS_CPU_THREADS_MAX];
	size_t		keyed[GS_CPU_THREADS_MAX];	/* rows written with their key */
	int			run;			/* the run's index in the sort's runs */
};

/* the engine's cancel callback on a part: the task's stop */
static int
gs_spill_stop(void *arg)
{
	return *(volatile bool *) arg;
}

/*
 * The batch's rows in order, into rows[] (which keyidx[] is too): part 0
 * sorts them, the others wait.  The CPU engine reads the keys and leaves
 * them as they are, so a sort stopped half-way is simply made again.
 * false when stopped or failed.
 */
static bool
gs_spill_sorted(GsSpillJob *j, int part, volatile bool *stop)
{
	bool		ok;

	if (part == 0 && j->sort_state == 0)
	{
		gs_status	st;
		instr_time	t0;
		instr_time	t1;

		INSTR_TIME_SET_CURRENT(t0);
		st = j->sort_eng->ops->sort(j->sort_eng->eng, (void *) j->keys, j->n,
									j->key_bytes, (uint32 *) j->rows, 0,
									gs_spill_stop, (void *) stop, NULL,
									j->sort_err, sizeof(j->sort_err));
		INSTR_TIME_SET_CURRENT(t1);
		INSTR_TIME_SUBTRACT(t1, t0);
		pthread_mutex_lock(&j->lock);
		j->sort_ms = INSTR_TIME_GET_MILLISEC(t1);
		j->sort_state = st == GS_OK ? 1 : -1;
		pthread_cond_broadcast(&j->cv);
		pthread_mutex_unlock(&j->lock);
	}
	pthread_mutex_lock(&j->lock);
	while (j->sort_state == 0 && !*stop)
	{
		struct timespec ts;

		gs_deadline(&ts, WAIT_POLL_MS);
		(void) pthread_cond_timedwait(&j->cv, &j->lock, &ts);
	}
	ok = j->sort_state == 1;
	pthread_mutex_unlock(&j->lock);
	return ok;
}

/*
 * The rows' pointers and keys some way ahead of row i of rows[], then the
 * tuple of a nearer one, whose pointer came in by now (asking for the
 * tuple far ahead stalled on its pointer's load).  A macro: GCC drops the
 * calls of a function that only prefetches, as having no effect.
 */
#define SPILL_PREFETCH	16
#define gs_spill_prefetch(j, i, to) \
	do { \
		if ((i) + 2 * SPILL_PREFETCH < (to)) \
		{ \
			__builtin_prefetch(&(j)->tuples[(j)->rows[(i) + 2 * SPILL_PREFETCH]]); \
			if ((j)->keyidx) \
				__builtin_prefetch((j)->keys + (size_t) (j)->key_bytes * \
								   (j)->keyidx[(i) + 2 * SPILL_PREFETCH]); \
		} \
		if ((i) + SPILL_PREFETCH < (to)) \
			__builtin_prefetch((j)->tuples[(j)->rows[(i) + SPILL_PREFETCH]]); \
	} while (0)

/* the bytes of the rows of slice [from, to) of j; -1 when stopped */
static int64
gs_spill_slice_bytes(GsSpillJob *j, size_t from, size_t to,
					 volatile bool *stop)
{
	int64		sum = 0;
	size_t		i;

	for (i = from; i < to; i++)
	{
		MinimalTuple tup;

		gs_spill_prefetch(j, i, to);
		tup = j->tuples[j->rows[i]];
		sum += gs_row_disk_bytes(&j->tape, tup);
		if ((i % INTERRUPT_INTERVAL) == 0 && *stop)
			return -1;
	}
	return sum;
}

/*
 * Where part's slice of a run of rows of several sizes starts: its bytes
 * are added up (unless known) and published, then the parts before it are
 * waited for.  false when stopped.
 */
static bool
gs_spill_chain(GsSpillJob *j, int part, size_t from, size_t to,
			   volatile bool *stop, int64 *off)
{
	int			t;

	if (!j->sized[part])
	{
		int64		sum = gs_spill_slice_bytes(j, from, to, stop);

		if (sum < 0)
			return false;
		pthread_mutex_lock(&j->lock);
		j->bytes[part] = sum;
		j->sized[part] = true;
		pthread_cond_broadcast(&j->cv);
	}
	else
		pthread_mutex_lock(&j->lock);
	*off = j->base;
	for (t = 0; t < part; t++)
	{
		while (!j->sized[t] && !*stop)
		{
			struct timespec ts;

			gs_deadline(&ts, WAIT_POLL_MS);
			(void) pthread_cond_timedwait(&j->cv, &j->lock, &ts);
		}
		if (!j->sized[t])
			break;
		*off += j->bytes[t];
	}
	pthread_mutex_unlock(&j->lock);
	return t == part;
}

/*
 * Write rows [from, to) of j's batch for part at off: gs_spill_part's
 * loop, inlined once for each kind of rows (rows constant), so that the
 * record's word is worked out without testing the kind on every row
 */
static pg_attribute_always_inline void
gs_spill_rows(GsSpillJob *j, int part, size_t from, size_t to, int64 off,
			  volatile bool *stop, bool rows)
{
	size_t		kb = j->key_bytes;
	char	   *buf = j->bufs[part];
	size_t		used = 0;
	size_t		keyed = 0;
	size_t		i;

	for (i = from; i < to; i++)
	{
		uint32		row = j->rows[i];
		MinimalTuple tup = j->tuples[row];
		const char *key = j->keyidx ? j->keys + j->keyidx[i] * kb :
			j->keys + i * kb;
		const char *bytes;
		size_t		body;
		uint32		word;
		size_t		head;

		gs_spill_prefetch(j, i, to);
		word = gs_tape_word_of(&j->tape, tup, gs_lossy_bit(j->lossy, row),
							   &bytes, &body, rows, !rows && j->tape.omit_sure);
		head = gs_tape_head(&j->tape, word);
		if (used + head + body > j->bufsize)
		{
			if ((j->err[part] = gs_temp_pwrite(j->file, buf, used, off)) != 0)
				return;
			off += used;
			used = 0;
			if (*stop)
				return;
		}
		gs_tape_put_head(&j->tape, buf + used, word, key);
		keyed += (word & TAPE_NOKEY_BIT) == 0;
		if (head + body <= j->bufsize)
		{
			memcpy(buf + used + head, bytes, body);
			used += head + body;
		}
		else
		{
			/* larger than the buffer: its header, then the tuple in place */
			if ((j->err[part] = gs_temp_pwrite(j->file, buf, head, off)) != 0 ||
				(j->err[part] = gs_temp_pwrite(j->file, bytes, body,
												off + head)) != 0)
				return;
			off += head + body;
		}
	}
	/* (counted aside: the parts' counters share a cache line) */
	j->keyed[part] = keyed;
	j->err[part] = gs_temp_pwrite(j->file, buf, used, off);
}

static void
gs_spill_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsSpillJob *j = (GsSpillJob *) arg;
	size_t		from = j->n * part / nparts;
	size_t		to = j->n * (part + 1) / nparts;
	int64		off;

	if (j->pass == 1)
	{
		int64		sum = gs_spill_slice_bytes(j, from, to, stop);

		if (sum >= 0)
			j->bytes[part] = sum;
		return;
	}

	if (j->sort_eng != NULL && !gs_spill_sorted(j, part, stop))
		return;
	if (j->rec > 0)
		off = j->base + (int64) from * j->rec;
	else if (nparts == 1)
		off = j->base;
	else if (!gs_spill_chain(j, part, from, to, stop, &off))
		return;
	if (j->tape.tf.rows)
		gs_spill_rows(j, part, from, to, off, stop, true);
	else
		gs_spill_rows(j, part, from, to, off, stop, false);
}

/*
 * A job has finished: raise the first write failure any part met, or note
 * in its run how many rows kept their keys
 */
static void
gs_spill_done(GsSortState *s, GsSpillJob *j)
{
	int			p;

	for (p = 0; p < j->nparts; p++)
	{
		if (j->err[p])
			gs_temp_error(j->file, j->err[p], true);
	}
	if (j->sort_eng != NULL && j->sort_state != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("gpusort could not sort a run of %zu rows", j->n),
				 errdetail("%s", j->sort_err)));
	for (p = 0; p < j->nparts; p++)
		s->runs[j->run].nkeyed += j->keyed[p];
}

/*
 * Run the job, again from the start as often as an interrupt that did
 * not throw stops it (its parts may have stopped half-way; what they did
 * is done again the same way).
 */
static void
gs_spill_run(GsSpillJob *j)
{
	do
	{
		if (j->sort_state < 0)
			j->sort_state = 0;
	} while (!gs_parallel(gs_spill_part, j, j->nparts));
}

/*
 * A job writing the batch's rows in the order of rows[] as a new run: the
 * first pass is done, the run placed in the file (temp_file_limit checked)
 * and the second pass is left to the caller.
 */
static GsSpillJob *
gs_spill_prepare(GsSortState *s, const uint32 *rows, const char *keys,
				 const uint32 *keyidx, uint32 *merged, size_t n)
{
	GsSpillJob *j = MemoryContextAllocZero(s->cxt, sizeof(GsSpillJob));
	int64		total = 0;
	GsRun	   *run;
	int			p;

	j->file = s->file;
	j->key_bytes = s->key_bytes;
	j->tape = s->tape;
	/* every row's key derived from its bytes: no need to ask omit of each */
	j->tape.omit_sure = s->tape.omit != NULL && !s->tape.tf.rows &&
		n > 0 && s->batch_derived == n;
	j->tuples = s->tuples;
	j->lossy = s->lossy;
	j->rows = rows;
	j->keys = keys;
	j->keyidx = keyidx;
	j->merged = merged;
	j->n = n;
	j->nparts = (int) Min((size_t) gpusort_cpu_threads,
						  n / SPILL_PART_MIN_ROWS + 1);
	/* the buffers take at most a sixteenth of the batch's memory */
	j->bufsize = (size_t) (s->batch_limit / 16 / j->nparts);
	j->bufsize = Max(j->bufsize, SPILL_WRITE_BUFFER_MIN);
	j->bufsize = Min(j->bufsize, SPILL_WRITE_BUFFER);
	for (p = 0; p < j->nparts; p++)
		j->bufs[p] = MemoryContextAlloc(s->cxt, j->bufsize);
	gs_note_mem(s, (int64) j->nparts * j->bufsize);
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->cv, NULL);

	if (s->batch_noted == n)
	{
		/* counted as they came: the parts place their slices themselves */
		total = s->batch_disk;
		j->rec = s->batch_rec;
	}
	else
	{
		/* a pass stopped by an interrupt that did not throw starts over */
		j->pass = 1;
		while (!gs_parallel(gs_spill_part, j, j->nparts))
			;
		for (p = 0; p < j->nparts; p++)
		{
			total += j->bytes[p];
			j->sized[p] = true;
		}
		j->rec = -1;
	}
	run = gs_new_run(s);
	j->run = s->nruns - 1;
	j->base = gs_temp_extend(s->file, total);
	/* (other processes may write into a shared file meanwhile) */
	run->offset = j->base;
	run->bytes = total;
	run->nrows = n;
	j->pass = 2;
	return j;
}

static void
gs_spill_free(GsSpillJob *j)
{
	int			p;

	for (p = 0; p < j->nparts; p++)
		pfree(j->bufs[p]);
	pthread_cond_destroy(&j->cv);
	pthread_mutex_destroy(&j->lock);
	if (j->merged)
		pfree(j->merged);
	pfree(j);
}

/* free what the batch's rows use, keeping its arrays and blocks */
static void
gs_release_rows(GsSortState *s)
{
	int			i;

	for (i = 0; i < s->nchunks; i++)
		pfree(s->chunks[i].perm);
	s->nchunks = 0;
	memset(s->lossy, 0, (s->cap / 64 + 1) * sizeof(uint64));
	MemoryContextReset(s->tupcxt);
}

/* forget the in-memory batch, keeping its arrays for the next one */
static void
gs_reset_batch(GsSortState *s)
{
	gs_release_rows(s);
	s->first_pending = 0;
	s->chunk_bytes = 0;
	s->nrows = 0;
	s->chunk_start = 0;
	s->arena_bytes = 0;
	s->batch_disk = 0;
	s->batch_noted = 0;
	s->batch_derived = 0;
	s->blk_left = 0;
	s->blk_next = 0;
	s->check_at = 0;
}

/* free the batch's arrays and arena blocks, when no more rows will come */
void
gs_free_batch(GsSortState *s)
{
	int			i;

	if (s->tuples == NULL)
		return;					/* freed already (gs_sort_finish_runs) */
	pfree(s->tuples);
	s->tuples = NULL;
	gs_keybuf_free(s->keys_engine, s->keys);
	s->keys = NULL;
	s->cap = 0;
	s->check_at = 0;
	for (i = 0; i < s->nblocks; i++)
		pfree(s->blocks[i].raw);
	s->nblocks = 0;
}

#define GS_SWAP(type, a, b) \
	do { type swap_ = (a); (a) = (b); (b) = swap_; } while (0)

/* the batch being loaded and the spare one trade places */
void
gs_swap_batches(GsSortState *s)
{
	GsBatch    *o = &s->spare;

	GS_SWAP(MinimalTuple *, s->tuples, o->tuples);
	GS_SWAP(char *, s->keys, o->keys);
	GS_SWAP(uint64 *, s->lossy, o->lossy);
	GS_SWAP(size_t, s->cap, o->cap);
	GS_SWAP(GsChunk *, s->chunks, o->chunks);
	GS_SWAP(int, s->nchunks, o->nchunks);
	GS_SWAP(int, s->chunks_cap, o->chunks_cap);
	GS_SWAP(GsBlock *, s->blocks, o->blocks);
	GS_SWAP(int, s->nblocks, o->nblocks);
	GS_SWAP(int, s->blocks_cap, o->blocks_cap);
	GS_SWAP(MemoryContext, s->tupcxt, o->tupcxt);
	s->check_at = 0;
}

/* wait for the spare batch's write, then free its rows */
void
gs_spill_wait(GsSortState *s)
{
	GsSpillJob *j = s->writing;
	GsTask	   *t;
	instr_time	t0;
	bool		done;

	if (j == NULL)
		return;
	INSTR_TIME_SET_CURRENT(t0);
	/*
	 * The task is forgotten before the wait, which frees it and may throw
	 * (a cancel): a sort that goes on after that (an outer query's) finds
	 * no task here, and writes the batch again.
	 */
	t = s->write_task;
	s->write_task = NULL;
	done = t != NULL && gs_task_wait(t);
	s->rep.spill_wait_ms += gs_elapsed_ms(t0);
	if (!done)
		gs_spill_run(j);		/* stopped by an interrupt that did not throw */
	s->writing = NULL;
	/* sorted by the write task: the engine's work, not the backend's wait */
	s->rep.sort_ms += j->sort_ms;
	gs_spill_done(s, j);
	gs_spill_free(j);
	gs_swap_batches(s);
	gs_release_rows(s);
	gs_swap_batches(s);
}

/*
 * From the second batch on, writing overlaps loading: each batch gets half
 * of work_mem, and a second set of arrays and arena blocks.  The first
 * batch's are cut down to the new size (its arena blocks beyond it freed).
 * The arrays get room for as many rows as the first batch's rows, at their
 * size in the arena, say will fit (the first batch's arrays were sized up
 * front from the planner's estimate, and may be far too large).
 */
static void
gs_start_overlap(GsSortState *s, size_t rows, int64 arena)
{
	size_t		cap = Max(s->cap / 2, MIN_BATCH_ROWS);
	int64		kept = 0;
	int			i;
	int			n = 0;

	if (rows > 0)
	{
		double		per_row = (double) arena / rows +
			sizeof(MinimalTuple) + s->key_bytes;
		double		fit = (double) s->mem_limit / 2 / per_row * 1.05;

		cap = Min(cap, (size_t) fit + MIN_BATCH_ROWS);
	}

	s->overlap = true;
	s->batch_limit = s->mem_limit / 2;
	s->check_at = 0;
	/* new blocks small enough that the last one overshoots by little */
	s->next_blk_size = Min(s->next_blk_size,
						   Max(ARENA_FIRST_BLOCK,
							   TYPEALIGN(1024, s->batch_limit / 16)));

	/* the arrays to half their rows, the blocks to what still fits */
	s->tuples = repalloc_huge(s->tuples, cap * sizeof(MinimalTuple));
	s->keys = gs_keybuf_grow(s->keys_engine, s->keys, 0, cap * s->key_bytes);
	s->lossy = repalloc_huge(s->lossy, (cap / 64 + 1) * sizeof(uint64));
	memset(s->lossy, 0, (cap / 64 + 1) * sizeof(uint64));
	s->cap = cap;
	kept = (int64) cap * (sizeof(MinimalTuple) + s->key_bytes);
	for (i = 0; i < s->nblocks; i++)
	{
		if (kept + (int64) s->blocks[i].size <= s->batch_limit)
		{
			kept += s->blocks[i].size;
			s->blocks[n++] = s->blocks[i];
		}
		else
			pfree(s->blocks[i].raw);
	}
	s->nblocks = n;

	/* the spare batch: the same arrays, blocks as it goes */
	s->spare.cap = cap;
	s->spare.tuples = MemoryContextAllocHuge(s->cxt, cap * sizeof(MinimalTuple));
	s->spare.keys = gs_keybuf_alloc(s->keys_engine, cap * s->key_bytes, s->cxt);
	s->spare.lossy = MemoryContextAllocHuge(s->cxt, (cap / 64 + 1) * sizeof(uint64));
	memset(s->spare.lossy, 0, (cap / 64 + 1) * sizeof(uint64));
	s->spare.tupcxt = AllocSetContextCreate(s->cxt, "GpuSort tuples",
											ALLOCSET_DEFAULT_SIZES);
}

/*
 * Sort the batch's last chunk and write the batch out as a new run.  The
 * first spill writes while the backend waits; from then on (when threads
 * may be used) the write goes on in the background while the next batch
 * is loaded into the spare batch's memory, and is waited for at the next
 * spill or at the end of the input.
 */
void
gs_spill_batch(GsSortState *s)
{
	GsSpillJob *j;
	instr_time	t0;
	size_t		rows;
	int64		arena;
	bool		bg_sort;

	if (s->nrows == 0)
		return;
	/* a variant's last row is noted only now (see gs_sort_row_add) */
	if (s->row_cmp != NULL && s->batch_noted == s->nrows - 1)
		gs_batch_note(s, s->tuples[s->nrows - 1], true, false);

	/*
	 * A batch written in the background whose keys need no tie-break, and
	 * that was not cut into chunks, is sorted there too (see GsSpillJob),
	 * unless it goes to the GPU: that takes about a millisecond here, a
	 * thread of the CPU engine twenty for half of a 64MB work_mem, and
	 * only the backend may call the gpusort service.
	 */
	bg_sort = s->overlap && s->nchunks == 0 && s->exact && !s->any_lossy &&
		s->nrows > 1 && s->batch_noted == s->nrows &&
		!gs_engine_choose(Max((double) s->nrows, s->total_rows), NULL)->is_gpu;
	if (!bg_sort)
	{
		gs_close_chunk(s, true);
		gs_finish_chunks(s);
	}

	INSTR_TIME_SET_CURRENT(t0);
	if (s->file == NULL)
		s->file = gs_temp_create(s->cxt);
	rows = s->nrows;
	arena = s->arena_bytes;
	/* the spare batch must be written before it can be loaded again */
	gs_spill_wait(s);
	if (bg_sort)
	{
		/* rows[] and keyidx[] both: the keys stay where they are */
		size_t		n = s->nrows;
		uint32	   *perm = MemoryContextAllocHuge(s->cxt, n * sizeof(uint32));

		gs_note_mem(s, (int64) n * (sizeof(uint32) + ENGINE_SCRATCH_PER_ROW));
		j = gs_spill_prepare(s, perm, s->keys, perm, perm, n);
		j->sort_eng = gs_engine_cpu_thread();
		s->total_chunks++;
		if (s->sort_engine == NULL)
			s->sort_engine = j->sort_eng;
	}
	else if (s->nchunks == 1)
	{
		/* one chunk: its order and its keys, sorted in place */
		GsChunk    *c = &s->chunks[0];

		j = gs_spill_prepare(s, c->perm, s->keys + c->base * s->key_bytes,
							 NULL, NULL, c->nrows);
	}
	else
	{
		/*
		 * Merge the chunks into the rows' order and where their keys are,
		 * here on the backend (ties may need PostgreSQL's comparators),
		 * then write as for one chunk.
		 */
		size_t		n = s->nrows;
		uint32	   *merged = MemoryContextAllocHuge(s->cxt,
													2 * n * sizeof(uint32));
		uint32	   *rows = merged;
		uint32	   *keyidx = merged + n;

		gs_note_mem(s, (int64) n * 2 * sizeof(uint32));
		gs_merge_chunk_rows(s, rows, keyidx);
		j = gs_spill_prepare(s, rows, s->keys, keyidx, merged, n);
	}

	if (s->overlap)
	{
		s->spare_bytes = gs_mem_used(s);
		gs_swap_batches(s);
		s->writing = j;
		s->write_task = gs_task_start(s->cxt, gs_spill_part, j, j->nparts);
	}
	else
	{
		gs_spill_run(j);
		gs_spill_done(s, j);
		gs_spill_free(j);
	}
	s->total_runs++;
	gs_reset_batch(s);
	if (!s->overlap && gpusort_cpu_threads > 1)
		gs_start_overlap(s, rows, arena);
	s->rep.spill_ms += gs_elapsed_ms(t0);
}

/* ---------------------------------------------------------------------
 * Runs written by the participants of a parallel load (sort_parallel.c):
 * each participant's sort state writes its batches as runs into the
 * leader's temporary file, and the leader merges them all.
 * ---------------------------------------------------------------------
 */

/* the sort's temporary file, created now if it has none */
GsTempFile *
gs_sort_file(GsSortState *s)
{
	if (s->file == NULL)
		s->file = gs_temp_create(s->cxt);
	return s->file;
}

/* a worker's sort state writes its runs into the leader's shared file */
void
gs_sort_attach_file(GsSortState *s, GsTempShared *sh)
{
	Assert(s->file == NULL);
	s->file = gs_temp_attach(s->cxt, sh);
}

/*
 * A participant's input has ended (one of nparts): write what is in memory
 * as its last run and wait for every write; then, if it wrote more than its
 * share of the final merge's order (gs_sort_share_of_runs), merge the
 * smallest of them (in merges as wide as its memory allows) until that many
 * are left, so that the leader's final merge can take every participant's
 * runs at once.  Returns its runs, and whether any row's key was lossy and
 * the longest tuple, which the leader's merge needs.
 */
const GsRun *
gs_sort_finish_runs(GsSortState *s, int nparts, int *nruns,
					bool *any_lossy, uint32 *max_tuple_len)
{
	int			max_runs;

	Assert(s->status == GS_LOADING);
	gs_spill_batch(s);
	gs_spill_wait(s);
	max_runs = gs_sort_share_of_runs(s, nparts);
	if (s->nruns > max_runs)
	{
		/* merges as wide as the participant's memory allows */
		int			width = (int) Max(MERGE_MIN_ORDER,
									  Min(s->mem_limit / MERGE_MIN_BUFFER, 1024));

		gs_free_batch(s);
		if (s->overlap)
		{
			gs_swap_batches(s);
			gs_free_batch(s);
		}
		gs_merge_passes_to(s, Max(max_runs, 1), width);
	}
	if (s->load_started)
		s->rep.load_ms = gs_elapsed_ms(s->load_start);
	*nruns = s->nruns;
	*any_lossy = s->any_lossy;
	*max_tuple_len = s->max_tuple_len;
	return s->runs;
}

/* runs for the final merge, and one more for rows still in memory */
int
gs_sort_nruns(GsSortState *s)
{
	return s->nruns + (s->tuples != NULL && s->nrows > 0 ? 1 : 0);
}

/* batches written as runs so far (the rows in memory not counted) */
int
gs_sort_runs_spilled(GsSortState *s)
{
	return s->total_runs;
}

/* batches written as runs, and one more for rows still in memory */
int
gs_sort_runs_written(GsSortState *s)
{
	return s->total_runs + (s->tuples != NULL && s->nrows > 0 ? 1 : 0);
}

/*
 * How many runs the final merge will take at once, as far as the sort can
 * tell before its end: that of gs_final_merge_order, for a file the leader
 * maps (if it can't, it merges down to merge_order first).
 */
int
gs_sort_merge_order(GsSortState *s)
{
	return gs_final_merge_order(s, true);
}

/* the runs each of nparts participants may leave for the final merge */
int
gs_sort_share_of_runs(GsSortState *s, int nparts)
{
	return Max(gs_sort_merge_order(s) / Max(nparts, 1), 1);
}

/*
 * The leader takes the runs that a worker left in its shared file, from
 * the written batches it sorted (fewer if it merged some).
 */
void
gs_sort_add_runs(GsSortState *s, const GsRun *runs, int n, int written,
				 bool any_lossy, uint32 max_tuple_len)
{
	int			i;

	Assert(s->status == GS_LOADING && s->file != NULL);
	if (s->nruns + n > s->runs_cap)
	{
		s->runs_cap = Max(Max(16, s->runs_cap * 2), s->nruns + n);
		s->runs = s->runs ?
			repalloc(s->runs, s->runs_cap * sizeof(GsRun)) :
			MemoryContextAlloc(s->cxt, s->runs_cap * sizeof(GsRun));
	}
	for (i = 0; i < n; i++)
	{
		s->runs[s->nruns++] = runs[i];
		s->total_rows += runs[i].nrows;
	}
	s->total_runs += written;
	s->any_lossy |= any_lossy;
	s->max_tuple_len = Max(s->max_tuple_len, max_tuple_len);
}
