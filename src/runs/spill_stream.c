/*-------------------------------------------------------------------------
 *
 * spill_stream.c
 *	  Threads that merge runs of the sort's temporary file into streams of
 *	  rows, and cascades: threads that merge streams into one.
 *
 * The final merge of keys that order the rows alone (or with a tie
 * function of GsTapeFormat's) is split into streams: each
 * stream's thread reads a group of runs from the temporary file of
 * spill.c (gs_temp_pread, any thread may) and merges them into blocks of
 * ready-made MinimalTuples (or of a btree build's rows as they are), and
 * the backend only merges the few streams -- or reads one cascade, whose
 * thread merges the streams' blocks in its place.  A stream hands its
 * blocks to the backend under a lock and gets them back once read; space
 * of the file that its runs no longer need is given back as it goes.
 *
 * These threads never call PostgreSQL, as the tasks of spill.c don't:
 * they block every signal, touch only memory allocated for them
 * beforehand (the blocks, the readers' buffers), and report failures as
 * errno values that the backend turns into errors when it reaches them.
 * The backend stops and joins a stream's thread before the memory it
 * reads or the file goes away: a stream's memory context stops it when
 * reset or deleted, and backend exit stops every live stream before
 * spill.c's exit callback closes the files.
 *
 * This file is the backend's side: it starts a stream's thread, takes its
 * blocks, stops it, and calls the threads' code (spill_stream_thread.c),
 * spill.c and the wait events (stats.c).  The threads run
 * spill_stream_thread.c, which never calls back here; the two share the
 * stream's layout (spill_stream_int.h).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "access/htup_details.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "gpusort_int.h"
#include "gpusort_spill.h"
#include "gpusort_stats.h"
#include "spill_stream_int.h"

/* ---------------------------------------------------------------------
 * The backend's side: streams started, read and stopped
 * ---------------------------------------------------------------------
 */

static dlist_head live_streams = DLIST_STATIC_INIT(live_streams);
static bool exit_callback_set = false;

static void gs_stream_at_exit(int code, Datum arg);

/*
 * The backend's next record of a byref cascade, or NULL once the block is
 * read: the block then goes back to the cascade, and the inputs' blocks
 * that only it still pointed at go back to their threads.
 */
static inline const char *
gs_stream_take_ref(GsStream *st)
{
	if (st->holding)
	{
		const char **recs = (const char **) st->blocks[st->cblk];
		size_t		n = st->used[st->cblk];
		int			i;

		if (likely(st->cpos < n))
		{
			const char *rec = recs[st->cpos];
			size_t		ahead = st->cpos + STREAM_REF_PREFETCH;

			/* the records were written on other cores: ask early */
			if (ahead < n)
			{
				__builtin_prefetch(recs[ahead]);
				__builtin_prefetch(recs[ahead] + 64);
			}
			st->cpos++;
			return rec;
		}
		for (i = 0; i < st->ninputs; i++)
		{
			int			c = st->rel[st->cblk][i];

			if (c > 0)
			{
				GsStream   *in = st->inputs[i];

				pthread_mutex_lock(&in->lock);
				in->nfull -= c;
				in->held -= c;
				pthread_cond_broadcast(&in->cv);
				pthread_mutex_unlock(&in->lock);
			}
		}
		gs_stream_give_back(st);
	}
	return NULL;
}

/* stop a stream's thread and wait for it (idempotent) */
static void
gs_stream_stop(GsStream *st)
{
	int			i;

	if (st->joined)
		return;
	/* a cascade reads this stream's blocks: it stops first */
	if (st->owner)
		gs_stream_stop(st->owner);
	if (st->started)
	{
		pthread_mutex_lock(&st->lock);
		st->stop = true;
		pthread_cond_broadcast(&st->cv);
		pthread_mutex_unlock(&st->lock);
		/* a cascade may be waiting for an input: wake it */
		for (i = 0; i < st->ninputs; i++)
		{
			GsStream   *in = st->inputs[i];

			pthread_mutex_lock(&in->lock);
			in->stop = true;
			pthread_cond_broadcast(&in->cv);
			pthread_mutex_unlock(&in->lock);
		}
		pthread_join(st->thread, NULL);
	}
	pthread_cond_destroy(&st->cv);
	pthread_mutex_destroy(&st->lock);
	st->joined = true;
	dlist_delete(&st->node);
}

static void
gs_stream_callback(void *arg)
{
	gs_stream_stop((GsStream *) arg);
}

/*
 * Give a stream its blocks and start its thread, which runs fn; on failure
 * the stream is stopped and false returned.
 */
static bool
gs_stream_launch(MemoryContext cxt, GsStream *st, size_t block_size,
				 void *(*fn) (void *))
{
	sigset_t	all;
	sigset_t	old;
	int			i;

	if (!exit_callback_set)
	{
		before_shmem_exit(gs_stream_at_exit, (Datum) 0);
		exit_callback_set = true;
	}
	st->block_size = block_size;
	st->slow = gpusort_sort_fault == GS_SORT_FAULT_SLOW_CASCADE;
	for (i = 0; i < STREAM_BLOCKS; i++)
		st->blocks[i] = MemoryContextAllocHuge(cxt, st->byref ?
											   gs_cascade_ref_cap(block_size) * sizeof(char *) :
											   block_size);
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->cv, NULL);
	dlist_push_head(&live_streams, &st->node);
	st->cb.func = gs_stream_callback;
	st->cb.arg = st;
	MemoryContextRegisterResetCallback(cxt, &st->cb);

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	st->started = pthread_create(&st->thread, NULL, fn, st) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!st->started)
	{
		gs_stream_stop(st);
		return false;
	}
	return true;
}

/* the block size of nstreams streams sharing mem bytes (half for blocks) */
size_t
gs_stream_block_size(int64 mem, int nstreams)
{
	int64		b = mem / 2 / (nstreams * STREAM_BLOCKS);

	b = Max(b, STREAM_BLOCK_MIN);
	b = Min(b, STREAM_BLOCK_MAX);
	return (size_t) TYPEALIGN_DOWN(MAXIMUM_ALIGNOF, b);
}

/*
 * Start a thread merging runs[0 .. nruns-1] of f, records in format tf
 * (gpusort_spill.h), whose keys order the rows alone or with the format's
 * tie function (gs_tape_cmp_rest).  Every row must fit in read_size bytes,
 * and as a record twice in block_size.  The stream's memory and thread
 * belong to cxt: its reset or deletion stops the thread first.  NULL if no
 * thread can be started (the caller merges another way).
 */
GsStream *
gs_stream_start(MemoryContext cxt, GsTempFile *f, const GsTapeFormat *tf,
				const GsRun *runs, int nruns, size_t block_size,
				size_t read_size)
{
	GsStream   *st;
	int			i;

	/* the thread starts by reading its first run: every caller has one */
	if (nruns < 1)
		elog(ERROR, "gpusort: a merge stream needs at least one run");
	st = MemoryContextAllocZero(cxt, sizeof(GsStream));
	st->file = f;
	st->hdr = TAPE_ROW_HDR;
	st->key_bytes = tf->key_bytes;
	st->tape = *tf;
	st->nreaders = nruns;
	st->readers = MemoryContextAllocZero(cxt, nruns * sizeof(GsReader));
	st->tree = MemoryContextAllocZero(cxt, Max(nruns, 1) * sizeof(int));
	st->tree_k0 = MemoryContextAllocZero(cxt, Max(nruns, 1) * sizeof(uint64));
	for (i = 0; i < nruns; i++)
	{
		GsReader   *r = &st->readers[i];

		r->pos = runs[i].offset;
		r->end = runs[i].offset + runs[i].bytes;
		r->given_back = runs[i].offset;
		r->left = runs[i].nrows;
		r->size = read_size;
		r->buf = MemoryContextAllocHuge(cxt, read_size);
	}
	return gs_stream_launch(cxt, st, block_size, gs_stream_thread) ? st : NULL;
}

/*
 * Start a thread merging streams inputs[0 .. n-1] (in the order of their
 * format, see gs_tape_cmp_rest; not yet read) into one, with blocks of
 * block_size bytes, no smaller than the inputs'.  Its records are the
 * inputs' records themselves, whose addresses the reader walks (see
 * spill_stream_thread.c's cascades).  From then on the inputs belong to
 * it: only the cascade is read, and stopping any of them stops it.  NULL
 * if no thread can be started (the caller reads the inputs itself).
 */
GsStream *
gs_stream_cascade(MemoryContext cxt, GsStream **inputs, int n,
				  size_t block_size)
{
	GsStream   *st = MemoryContextAllocZero(cxt, sizeof(GsStream));
	int			i;

	Assert(n >= 1);
	st->file = inputs[0]->file;
	st->hdr = inputs[0]->hdr;
	st->keyoff = STREAM_KEY_OFFSET;
	st->key_bytes = inputs[0]->key_bytes;
	st->tupoff = gs_stream_tuple_offset(st->key_bytes);
	/* (its inputs' format: for the tie function, see gs_tape_cmp_rest) */
	st->tape = inputs[0]->tape;
	st->body_off = gs_tape_tuple_body_off(&st->tape);
	st->ninputs = n;
	st->byref = true;
	st->inputs = MemoryContextAlloc(cxt, n * sizeof(GsStream *));
	st->inrec = MemoryContextAllocZero(cxt, n * sizeof(char *));
	st->ink0 = MemoryContextAllocZero(cxt, n * sizeof(uint64));
	st->tree = MemoryContextAllocZero(cxt, n * sizeof(int));
	st->tree_k0 = MemoryContextAllocZero(cxt, n * sizeof(uint64));
	st->pend = MemoryContextAllocZero(cxt, n * sizeof(int));
	st->rcur = MemoryContextAllocZero(cxt, n * sizeof(char *));
	st->rlim = MemoryContextAllocZero(cxt, n * sizeof(char *));
	for (i = 0; i < STREAM_BLOCKS; i++)
		st->rel[i] = MemoryContextAllocZero(cxt, n * sizeof(int));
	for (i = 0; i < n; i++)
	{
		Assert(inputs[i]->owner == NULL);
		Assert(inputs[i]->block_size <= block_size);
		st->inputs[i] = inputs[i];
	}
	if (!gs_stream_launch(cxt, st, block_size, gs_cascade_ref_thread))
		return NULL;
	for (i = 0; i < n; i++)
		inputs[i]->owner = st;
	return st;
}

/*
 * Wait until the stream's thread has a full block for the backend, and
 * hold it: false at the stream's end.  Waits let the backend serve
 * interrupts; a failure of the thread is raised here.
 */
static bool
gs_stream_await(GsStream *st)
{
	int			err;
	instr_time	t0;

	pthread_mutex_lock(&st->lock);
	if (st->nfull == 0 && !st->done)
		INSTR_TIME_SET_CURRENT(t0);
	else
		INSTR_TIME_SET_ZERO(t0);
	if (st->nfull == 0 && !st->done)
		pgstat_report_wait_start(gs_wait_event(GS_WAIT_THREADS));
	while (st->nfull == 0 && !st->done)
	{
		struct timespec ts;

		gs_deadline(&ts, WAIT_POLL_MS);
		(void) pthread_cond_timedwait(&st->cv, &st->lock, &ts);
		if (INTERRUPTS_PENDING_CONDITION())
		{
			pthread_mutex_unlock(&st->lock);
			CHECK_FOR_INTERRUPTS();
			pthread_mutex_lock(&st->lock);
		}
	}
	pgstat_report_wait_end();
	err = st->err;
	if (st->nfull > 0)
		st->holding = true;
	pthread_mutex_unlock(&st->lock);
	if (!INSTR_TIME_IS_ZERO(t0))
	{
		instr_time	now;

		INSTR_TIME_SET_CURRENT(now);
		INSTR_TIME_SUBTRACT(now, t0);
		st->wait_ms += INSTR_TIME_GET_MILLISEC(now);
	}
	if (!st->holding && err)
		gs_temp_error(st->file, err, false);
	return st->holding;
}

/*
 * The stream's next record, or NULL at its end.  The previous record is
 * done with (its block may be handed back to the thread).
 */
const char *
gs_stream_next(GsStream *st)
{
	Assert(st->owner == NULL);
	for (;;)
	{
		const char *rec = st->byref ? gs_stream_take_ref(st) :
			gs_stream_take(st);

		if (likely(rec != NULL))
			return rec;
		if (!gs_stream_await(st))
			return NULL;
	}
}

/*
 * The next block of a cascade by reference, as its records' addresses, *n
 * of them (never none), or NULL at its end: for a caller that walks them
 * itself, as the backend walks a sorted array.  The block handed out
 * before is done with: it goes back, and the inputs' blocks only it still
 * pointed at go back to their threads.
 */
const char *const *
gs_stream_next_refs(GsStream *st, size_t *n)
{
	Assert(st->owner == NULL && st->byref);
	for (;;)
	{
		if (st->holding)
		{
			/* read through: taking past its end gives it back */
			st->cpos = st->used[st->cblk];
			(void) gs_stream_take_ref(st);
		}
		if (!gs_stream_await(st))
		{
			*n = 0;
			return NULL;
		}
		/* a block carrying only blocks to give back is passed over */
		if (st->used[st->cblk] > 0)
		{
			*n = st->used[st->cblk];
			return (const char *const *) st->blocks[st->cblk];
		}
	}
}

/*
 * Backend exit: stop the threads, before spill.c's exit callback closes
 * and removes the files they read.  This callback is registered when the
 * first stream of the backend starts, so after spill.c's (registered by
 * the first gs_temp_create or gs_temp_attach: a stream reads a file that
 * exists already), and before_shmem_exit callbacks run in the reverse
 * order of their registration: this one runs first.
 */
static void
gs_stream_at_exit(int code, Datum arg)
{
	/* stopping an input stops its cascade too: not an iteration */
	while (!dlist_is_empty(&live_streams))
		gs_stream_stop(dlist_head_element(GsStream, node, &live_streams));
}

/*
 * Append where a finished stream's thread spent its time (and, for a
 * cascade, its inputs'): "read/discard/blocked[/inputs] ms".
 */
void
gs_stream_report(GsStream *st, StringInfo buf)
{
	int			i;

	appendStringInfo(buf, "%s read %.0f, discard %.0f, blocked %.0f",
					 st->ninputs > 0 ? "cascade" : "stream",
					 st->t_read / 1e6, st->t_discard / 1e6, st->t_full / 1e6);
	if (st->ninputs > 0)
	{
		appendStringInfo(buf, ", inputs %.0f ms [", st->t_inputs / 1e6);
		for (i = 0; i < st->ninputs; i++)
		{
			if (i > 0)
				appendStringInfoString(buf, "; ");
			gs_stream_report(st->inputs[i], buf);
		}
		appendStringInfoChar(buf, ']');
	}
	else
		appendStringInfoString(buf, " ms");
}

/* how long the backend waited for this stream's thread, in ms */
double
gs_stream_wait_ms(GsStream *st)
{
	return st->wait_ms;
}
