/*-------------------------------------------------------------------------
 *
 * spill_stream.c
 *	  Threads that merge runs of the sort's temporary file into streams of
 *	  rows, and cascades: threads that merge streams into one.
 *
 * The final merge of exactly encoded keys is split into streams: each
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

#include "gpusort_spill.h"
#include "gpusort_stats.h"

/*
 * Blocks of a stream: several let the merging thread stay a few blocks
 * ahead of its reader.  Their size comes from work_mem, between these:
 * with 256 kB blocks (work_mem 64MB, 50M rows, 4 streams on the H100) the
 * backend waited 0.15-0.25 s of a 3.1-3.6 s final merge for them.  Eight,
 * not four: a cascade by reference holds its inputs' blocks until the
 * backend is past them, which left a stream with one or two to fill.
 */
#define STREAM_BLOCKS		8
#define STREAM_BLOCK_MIN	(8 * 1024)
#define STREAM_BLOCK_MAX	(256 * 1024)

/*
 * How far ahead of the record being taken a stream's reader prefetches:
 * the records were just written on another core, so each line costs a
 * transfer between cores that must start a few hundred ns early (at 512
 * bytes, some 6 records, the reader still stalled on them in a profile).
 */
#define STREAM_PREFETCH		1536

/* how many records ahead the reader of a byref cascade prefetches */
#define STREAM_REF_PREFETCH	16

static dlist_head live_streams = DLIST_STATIC_INIT(live_streams);
static bool exit_callback_set = false;

static void gs_stream_at_exit(int code, Datum arg);

/* ---------------------------------------------------------------------
 * Streams: a thread merges a group of runs into blocks of rows
 * ---------------------------------------------------------------------
 */

/* one run as a stream's thread reads it */
typedef struct GsReader
{
	int64		pos;			/* file offset of the next bytes to read */
	int64		end;			/* end of the run */
	int64		given_back;		/* space before this was discarded */
	size_t		left;			/* rows not yet taken */
	char	   *buf;
	size_t		size;
	size_t		rpos;			/* the current row starts here */
	size_t		rlen;			/* bytes in buf */
	size_t		rowlen;			/* bytes of the current row */
	uint64		k0;				/* its first key word; max at the end */
	bool		eof;
} GsReader;

struct GsStream
{
	/* fixed at start */
	GsTempFile *file;
	const GsRowFormat *fmt;		/* NULL: the sort's tape rows */
	size_t		hdr;			/* bytes before a row's key */
	int			key_bytes;
	int			nreaders;
	GsReader   *readers;
	int		   *tree;			/* loser tree: tree[0] winner */
	int			ninputs;		/* a cascade: the streams it merges */
	GsStream  **inputs;
	const char **inrec;			/* each input's current record, NULL at
								 * its end */
	uint64	   *ink0;			/* its first key word; max at the end */
	uint64	   *tree_k0;		/* each loser's first key word (streams'
								 * and cascades' trees) */
	GsStream   *owner;			/* the cascade this stream is an input of */
	size_t		keyoff;			/* a cascade: where a record's key starts */
	bool		byref;			/* a cascade handing out its inputs' records
								 * in place (see gs_stream_cascade) */
	int		   *pend;			/* byref: inputs' blocks read through since
								 * the last block was published */
	int		   *rel[STREAM_BLOCKS];	/* byref: those of each published block,
									 * given back with it */
	const char **rcur;			/* byref: each input's next record in its
								 * block (see gs_cascade_ref_take) */
	const char **rlim;			/* ... and the end of that block's records */
	size_t		block_size;
	char	   *blocks[STREAM_BLOCKS];

	/* shared with the thread, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	size_t		used[STREAM_BLOCKS];	/* bytes of each full block (byref:
										 * records) */
	int			nfull;			/* blocks filled and not yet given back */
	int			held;			/* of those, read through by a byref
								 * cascade but still pointed at */
	bool		done;			/* the thread is finished */
	int			err;			/* its failure: errno, -1 for a short read */
	bool		stop;

	pthread_t	thread;
	bool		started;
	bool		joined;
	dlist_node	node;			/* in live_streams */
	MemoryContextCallback cb;

	/*
	 * The thread's own time, in ns, read once it is done: reading the file,
	 * giving its space back, waiting for a free block (the reader is
	 * slower), and a cascade's waiting for its inputs' blocks.
	 */
	uint64		t_read;
	uint64		t_discard;
	uint64		t_full;
	uint64		t_inputs;

	/* the backend's side */
	double		wait_ms;		/* time it waited for blocks */
	int			cblk;			/* block being read */
	bool		holding;		/* cblk is full and being read */
	size_t		cpos;
};

/* a thread's clock, in ns */
static inline uint64
gs_stream_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Move a reader to its next row, which ends up whole in its buffer: 0, or
 * an error for gs_temp_error.
 */
static int
gs_reader_next(GsStream *st, GsReader *r)
{
	size_t		headlen = st->hdr + st->key_bytes;
	uint32		word;
	size_t		need;
	int			pass;

	r->rpos += r->rowlen;
	r->rowlen = 0;
	if (r->left == 0)
	{
		uint64		t0 = gs_stream_ns();

		r->eof = true;
		r->k0 = PG_UINT64_MAX;
		r->given_back = gs_temp_discard(st->file, r->given_back, r->end, true);
		st->t_discard += gs_stream_ns() - t0;
		return 0;
	}
	r->left--;
	need = headlen;
	for (pass = 0; pass < 2; pass++)
	{
		if (r->rlen - r->rpos < need)
		{
			size_t		have = r->rlen - r->rpos;
			size_t		want = Min((int64) (r->size - have), r->end - r->pos);
			int			err;
			uint64		t0;
			uint64		t1;

			if (have + want < need)
				return -1;
			memmove(r->buf, r->buf + r->rpos, have);
			t0 = gs_stream_ns();
			err = gs_temp_pread(st->file, r->buf + have, want, r->pos);
			if (err)
				return err;
			r->pos += want;
			r->rpos = 0;
			r->rlen = have + want;
			t1 = gs_stream_ns();
			/* everything before the buffer's bytes has been read */
			r->given_back = gs_temp_discard(st->file, r->given_back,
											r->pos - r->rlen, false);
			st->t_read += t1 - t0;
			st->t_discard += gs_stream_ns() - t1;
		}
		if (pass == 0)
		{
			if (st->fmt)
				need = st->fmt->row_len(r->buf + r->rpos, st->key_bytes);
			else
			{
				memcpy(&word, r->buf + r->rpos, sizeof(uint32));
				need = headlen + (word & ~TAPE_LOSSY_BIT) -
					MINIMAL_TUPLE_DATA_OFFSET;
			}
			if (need > r->size || need < headlen)
				return -1;
		}
	}
	r->rowlen = need;
	r->k0 = gs_key_word0(r->buf + r->rpos + st->hdr, st->key_bytes);

	/*
	 * This reader's turn comes again only after the other runs': with 33
	 * runs a stream, their buffers together are larger than a core's own
	 * cache, and its next row would be a miss every time.  Ask for it now
	 * (past the bytes read, this is harmless).
	 */
	__builtin_prefetch(r->buf + r->rpos + need);
	__builtin_prefetch(r->buf + r->rpos + need + 64);
	return 0;
}

/* does reader a's row come before reader b's? (exact keys: keys decide) */
static inline bool
gs_reader_before(GsStream *st, int a, int b)
{
	GsReader   *ra = &st->readers[a];
	GsReader   *rb = &st->readers[b];
	int			c;

	if (ra->k0 != rb->k0)
		return ra->k0 < rb->k0;
	if (ra->eof || rb->eof)
		return rb->eof && !ra->eof;
	c = gs_key_cmp_rest(ra->buf + ra->rpos + st->hdr,
						rb->buf + rb->rpos + st->hdr, st->key_bytes);
	if (c != 0)
		return c < 0;
	return a < b;
}

static bool
gs_reader_before_cb(void *arg, int a, int b)
{
	return gs_reader_before((GsStream *) arg, a, b);
}

/* copy the winner's row into a block as a record (see gpusort_spill.h) */
static inline size_t
gs_stream_put(GsStream *st, GsReader *r, char *dst)
{
	const char *row = r->buf + r->rpos;
	uint32		word;
	uint32		len;
	uint32		reclen;
	size_t		tupoff = gs_stream_tuple_offset(st->key_bytes);
	MinimalTuple tup = (MinimalTuple) (dst + tupoff);

	if (st->fmt)
	{
		/* other rows are given out as they are */
		memcpy(dst, row, r->rowlen);
		return r->rowlen;
	}
	memcpy(&word, row, sizeof(uint32));
	len = word & ~TAPE_LOSSY_BIT;
	reclen = tupoff + MAXALIGN(len);
	memcpy(dst, &reclen, sizeof(uint32));
	memcpy(dst + STREAM_KEY_OFFSET, row + TAPE_ROW_HDR, st->key_bytes);
	memset(tup, 0, MINIMAL_TUPLE_DATA_OFFSET);
	tup->t_len = len;
	memcpy((char *) tup + MINIMAL_TUPLE_DATA_OFFSET,
		   row + TAPE_ROW_HDR + st->key_bytes, len - MINIMAL_TUPLE_DATA_OFFSET);
	return reclen;
}

static void
gs_stream_finish(GsStream *st, int err)
{
	pthread_mutex_lock(&st->lock);
	st->err = err;
	st->done = true;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->lock);
}

/* a stream's thread waits for its next block to be free: false on stop */
static bool
gs_stream_wait_free(GsStream *st)
{
	bool		stop;

	pthread_mutex_lock(&st->lock);
	if (st->nfull == STREAM_BLOCKS && !st->stop)
	{
		uint64		t0 = gs_stream_ns();

		while (st->nfull == STREAM_BLOCKS && !st->stop)
			pthread_cond_wait(&st->cv, &st->lock);
		st->t_full += gs_stream_ns() - t0;
	}
	stop = st->stop;
	pthread_mutex_unlock(&st->lock);
	return !stop;
}

/*
 * ... and hands block *blk (used bytes, or records for a byref cascade) to
 * the reader if publish, end: the last
 */
static void
gs_stream_hand_over(GsStream *st, int *blk, size_t used, bool publish,
					bool end)
{
	pthread_mutex_lock(&st->lock);
	if (publish)
	{
		st->used[*blk] = used;
		st->nfull++;
		*blk = (*blk + 1) % STREAM_BLOCKS;
	}
	if (end)
		st->done = true;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->lock);
}

/* a block with rows is handed over; an empty one only if it ends the stream */
static inline void
gs_stream_publish(GsStream *st, int *blk, size_t used, bool end)
{
	gs_stream_hand_over(st, blk, used, used > 0, end);
}

static void *
gs_stream_thread(void *arg)
{
	GsStream   *st = (GsStream *) arg;
	int			n = st->nreaders;
	size_t		tupoff = gs_stream_tuple_offset(st->key_bytes);
	int			blk = 0;
	int			w;
	int			i;

	for (i = 0; i < n; i++)
	{
		int			err = gs_reader_next(st, &st->readers[i]);

		if (err)
		{
			gs_stream_finish(st, err);
			return NULL;
		}
	}
	w = st->tree[0] = gs_loser_tree_build(st->tree, n, gs_reader_before_cb,
										  st);
	for (i = 1; i < n; i++)
		st->tree_k0[i] = st->readers[st->tree[i]].k0;

	for (;;)
	{
		char	   *b = st->blocks[blk];
		size_t		used = 0;
		bool		end = false;

		if (!gs_stream_wait_free(st))
			break;

		for (;;)
		{
			GsReader   *r = &st->readers[w];
			size_t		rec;
			int			err;

			if (r->eof)
			{
				end = true;
				break;
			}
			if (st->fmt)
				rec = r->rowlen;
			else
				rec = tupoff + MAXALIGN(r->rowlen - TAPE_ROW_HDR -
										st->key_bytes + MINIMAL_TUPLE_DATA_OFFSET);
			if (used + rec > st->block_size)
			{
				if (used == 0)
				{
					/* can't happen: the caller sized the blocks */
					gs_stream_finish(st, -1);
					return NULL;
				}
				break;
			}
			used += gs_stream_put(st, r, b + used);

			err = gs_reader_next(st, r);
			if (err)
			{
				gs_stream_finish(st, err);
				return NULL;
			}
			w = gs_loser_tree_replay(st->tree, st->tree_k0, n, w, r->k0,
									 gs_reader_before_cb, st);
		}

		gs_stream_publish(st, &blk, used, end);
		if (end)
			break;
	}
	return NULL;
}

/* the reader is done with the block it holds: back to the thread */
static inline void
gs_stream_give_back(GsStream *st)
{
	pthread_mutex_lock(&st->lock);
	st->nfull--;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->lock);
	st->cblk = (st->cblk + 1) % STREAM_BLOCKS;
	st->holding = false;
	st->cpos = 0;
}

/*
 * The next record of the block being read, or NULL once the block is read
 * (it is then handed back to the stream's thread) or none is held.
 */
static inline const char *
gs_stream_take(GsStream *st)
{
	if (st->holding)
	{
		if (likely(st->cpos < st->used[st->cblk]))
		{
			const char *rec = st->blocks[st->cblk] + st->cpos;
			uint32		reclen;

			/*
			 * The block was written on another core: ask for the lines a
			 * few records on early, two a record, as a record may be longer
			 * than a line.  (Past the block's end this is harmless.)
			 */
			__builtin_prefetch(rec + STREAM_PREFETCH);
			__builtin_prefetch(rec + STREAM_PREFETCH + 64);
			if (st->fmt)
				reclen = st->fmt->row_len(rec, st->key_bytes);
			else
				memcpy(&reclen, rec, sizeof(uint32));
			st->cpos += reclen;
			return rec;
		}
		gs_stream_give_back(st);
	}
	return NULL;
}

/* ---------------------------------------------------------------------
 * Cascades: a thread merges streams into one
 *
 * The backend of a final merge over several streams would replay a loser
 * tree for every row it returns, on top of handing the row to the
 * executor; with 50M rows that doubled its time per row.  A cascade's
 * thread does that merge instead, copying the streams' records into
 * blocks of its own, so that the backend walks a single stream.  It costs
 * one more copy of every row, on a core that would otherwise be idle, and
 * STREAM_BLOCKS more blocks of memory.
 * ---------------------------------------------------------------------
 */

/* an error code of a cascade's input that means "stopped", not a failure */
#define CASCADE_STOPPED		(-2)

/*
 * A cascade's thread (st) takes an input's next record: NULL at its end, or,
 * with *err set, on its failure or stop.
 */
static const char *
gs_cascade_input_next(GsStream *st, GsStream *in, int *err)
{
	for (;;)
	{
		const char *rec = gs_stream_take(in);

		if (likely(rec != NULL))
			return rec;
		pthread_mutex_lock(&in->lock);
		if (in->nfull == 0 && !in->done && !in->stop)
		{
			uint64		t0 = gs_stream_ns();

			while (in->nfull == 0 && !in->done && !in->stop)
				pthread_cond_wait(&in->cv, &in->lock);
			st->t_inputs += gs_stream_ns() - t0;
		}
		if (in->stop)
			*err = CASCADE_STOPPED;
		else if (in->nfull > 0)
			in->holding = true;
		else
			*err = in->err;
		pthread_mutex_unlock(&in->lock);
		if (!in->holding)
			return NULL;
	}
}

/* does input a's record come before input b's? (exact keys) */
static inline bool
gs_cascade_before(GsStream *st, int a, int b)
{
	const char *ra = st->inrec[a];
	const char *rb = st->inrec[b];
	int			c;

	if (st->ink0[a] != st->ink0[b])
		return st->ink0[a] < st->ink0[b];
	if (ra == NULL || rb == NULL)
		return rb == NULL && ra != NULL;
	c = gs_key_cmp_rest(ra + st->keyoff, rb + st->keyoff, st->key_bytes);
	if (c != 0)
		return c < 0;
	/* equal rows in the order of the inputs, as the backend's merge does */
	return a < b;
}

static bool
gs_cascade_before_cb(void *arg, int a, int b)
{
	return gs_cascade_before((GsStream *) arg, a, b);
}

/* move input i on to its next record; false on its failure or stop */
static inline bool
gs_cascade_advance(GsStream *st, int i)
{
	int			err = 0;
	const char *rec = gs_stream_take(st->inputs[i]);

	if (unlikely(rec == NULL))
	{
		rec = gs_cascade_input_next(st, st->inputs[i], &err);
		if (err)
		{
			gs_stream_finish(st, err);
			return false;
		}
	}
	st->inrec[i] = rec;
	st->ink0[i] = rec ? gs_key_word0(rec + st->keyoff, st->key_bytes) :
		PG_UINT64_MAX;
	return true;
}

/* input w moved on: replay its path to the root */
static inline void
gs_cascade_replay(GsStream *st, int w)
{
	(void) gs_loser_tree_replay(st->tree, st->tree_k0, st->ninputs, w,
								st->ink0[w], gs_cascade_before_cb, st);
}

static void *
gs_cascade_thread(void *arg)
{
	GsStream   *st = (GsStream *) arg;
	int			n = st->ninputs;
	int			blk = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (!gs_cascade_advance(st, i))
			return NULL;
	}
	st->tree[0] = gs_loser_tree_build(st->tree, n, gs_cascade_before_cb, st);
	for (i = 1; i < n; i++)
		st->tree_k0[i] = st->ink0[st->tree[i]];

	for (;;)
	{
		char	   *b = st->blocks[blk];
		size_t		used = 0;
		bool		end = false;

		if (!gs_stream_wait_free(st))
			break;
		for (;;)
		{
			int			w = st->tree[0];
			const char *rec = st->inrec[w];
			uint32		reclen;

			if (rec == NULL)
			{
				end = true;
				break;
			}
			if (st->fmt)
				reclen = st->fmt->row_len(rec, st->key_bytes);
			else
				memcpy(&reclen, rec, sizeof(uint32));
			if (used + reclen > st->block_size)
			{
				if (used == 0)
				{
					/* can't happen: the inputs' blocks are no larger */
					gs_stream_finish(st, -1);
					return NULL;
				}
				break;
			}
			memcpy(b + used, rec, reclen);
			used += reclen;
			if (!gs_cascade_advance(st, w))
				return NULL;
			gs_cascade_replay(st, w);
		}
		gs_stream_publish(st, &blk, used, end);
		if (end)
			break;
	}
	return NULL;
}

/* ---------------------------------------------------------------------
 * Cascades by reference
 *
 * A cascade that copies is itself the bottleneck of a large final merge:
 * on the H200 it moved 80-byte records for 50M rows at about 20 ns a row,
 * and the backend waited for it a quarter of the time.  A cascade by
 * reference fills its blocks with pointers to its inputs' records
 * instead, as an in-memory sort hands out pointers to its rows.  An
 * input's block must then stay as it is until the backend has read every
 * record of it: each published block carries the count, per input, of the
 * inputs' blocks read through while it was filled, and the backend gives
 * those back when it gives the block back.  Until then they are "held":
 * full for the input's thread, and not for the cascade to read again.
 *
 * The cascade never waits for an input while it keeps records of its own
 * unpublished: it publishes what it has first.  Every held block is then
 * pointed at only by published blocks, which the backend reads and gives
 * back without waiting for the cascade, so an input's thread always gets
 * its blocks back.
 * ---------------------------------------------------------------------
 */

/* how many records a byref cascade's block points at: a few per input block */
static inline size_t
gs_cascade_ref_cap(size_t block_size)
{
	return Max(block_size / 64, 64);
}

/*
 * Input i of a byref cascade as its thread walks it: its next record and
 * the end of the records of the block it holds (both NULL while it holds
 * none).  The thread's loop keeps to these two words an input: following
 * the input's own fields (holding, cpos, cblk, used[cblk], blocks[cblk])
 * for every row made a chain of dependent loads that, with the tree's
 * replay, cost the 4-way merge of 50M rows about 30 ns a row (H100), more
 * than the backend's own time per row.
 */
static inline bool
gs_cascade_ref_take(GsStream *st, int i)
{
	const char *rec = st->rcur[i];
	uint32		reclen;

	if (unlikely(rec >= st->rlim[i]))
		return false;
	__builtin_prefetch(rec + STREAM_PREFETCH);
	__builtin_prefetch(rec + STREAM_PREFETCH + 64);
	memcpy(&reclen, rec, sizeof(uint32));
	st->rcur[i] = rec + reclen;
	st->inrec[i] = rec;
	st->ink0[i] = gs_key_word0(rec + st->keyoff, st->key_bytes);
	return true;
}

/*
 * Input i of a byref cascade has read through the block it holds (or holds
 * none): move it on to its next block.  1: it holds one (with at least one
 * record), 2: it has ended (inrec[i] is then NULL), 0: no block is ready
 * yet (the caller waits), -1: the input failed or stopped (the cascade has
 * finished).
 */
static int
gs_cascade_ref_next_block(GsStream *st, int i)
{
	GsStream   *in = st->inputs[i];
	int			err = 0;

	if (in->holding)
	{
		/* read through: held until the backend is past its records */
		in->holding = false;
		in->cblk = (in->cblk + 1) % STREAM_BLOCKS;
		in->cpos = 0;
		st->pend[i]++;
		pthread_mutex_lock(&in->lock);
		in->held++;
	}
	else
		pthread_mutex_lock(&in->lock);
	if (in->stop)
		err = CASCADE_STOPPED;
	else if (in->nfull > in->held)
		in->holding = true;
	else if (in->done)
		err = in->err;
	pthread_mutex_unlock(&in->lock);
	if (err)
	{
		gs_stream_finish(st, err);
		return -1;
	}
	st->rcur[i] = st->rlim[i] = NULL;
	if (!in->holding)
	{
		if (!in->done)
			return 0;
		st->inrec[i] = NULL;
		st->ink0[i] = PG_UINT64_MAX;
		return 2;
	}
	st->rcur[i] = in->blocks[in->cblk];
	st->rlim[i] = in->blocks[in->cblk] + in->used[in->cblk];
	return 1;
}

/*
 * Move input i of a byref cascade on to its next record: 1 done (at its end
 * inrec[i] is NULL), 0 if none is ready yet (the caller waits), -1 on the
 * input's failure or stop (the cascade has finished).
 */
static pg_attribute_always_inline int
gs_cascade_ref_advance(GsStream *st, int i)
{
	int			r;

	if (likely(gs_cascade_ref_take(st, i)))
		return 1;
	r = gs_cascade_ref_next_block(st, i);
	if (r == 1)
	{
		/* an input's block has at least one record */
		(void) gs_cascade_ref_take(st, i);
		return 1;
	}
	return r == 2 ? 1 : r;
}

/* a byref cascade waits for input i to have a block: false on stop */
static bool
gs_cascade_ref_wait(GsStream *st, int i)
{
	GsStream   *in = st->inputs[i];
	uint64		t0 = gs_stream_ns();
	bool		stop;

	pthread_mutex_lock(&in->lock);
	while (in->nfull <= in->held && !in->done && !in->stop)
		pthread_cond_wait(&in->cv, &in->lock);
	stop = in->stop;
	pthread_mutex_unlock(&in->lock);
	st->t_inputs += gs_stream_ns() - t0;
	if (stop)
		gs_stream_finish(st, CASCADE_STOPPED);
	return !stop;
}

/*
 * Publish block *blk of a byref cascade with n records and the inputs'
 * blocks read through meanwhile; end: the cascade's last.  An empty block
 * is published only to carry such blocks (or the end).
 */
static void
gs_cascade_ref_publish(GsStream *st, int *blk, size_t n, bool end)
{
	int			i;
	bool		any = n > 0;

	for (i = 0; i < st->ninputs; i++)
	{
		st->rel[*blk][i] = st->pend[i];
		any |= st->pend[i] > 0;
		st->pend[i] = 0;
	}
	gs_stream_hand_over(st, blk, n, any, end);
}

static void *
gs_cascade_ref_thread(void *arg)
{
	GsStream   *st = (GsStream *) arg;
	int			n = st->ninputs;
	size_t		cap = gs_cascade_ref_cap(st->block_size);
	const char **recs = NULL;
	size_t		used = 0;
	int			blk = 0;
	int			w;
	int			i;

	for (i = 0; i < n; i++)
	{
		int			r;

		while ((r = gs_cascade_ref_advance(st, i)) == 0)
		{
			if (!gs_cascade_ref_wait(st, i))
				return NULL;
		}
		if (r < 0)
			return NULL;
	}
	w = st->tree[0] = gs_loser_tree_build(st->tree, n, gs_cascade_before_cb,
										  st);
	for (i = 1; i < n; i++)
		st->tree_k0[i] = st->ink0[st->tree[i]];

	for (;;)
	{
		const char *rec = st->inrec[w];
		int			r;

		if (recs == NULL)
		{
			if (!gs_stream_wait_free(st))
				return NULL;
			recs = (const char **) st->blocks[blk];
			used = 0;
		}
		if (rec == NULL)
		{
			gs_cascade_ref_publish(st, &blk, used, true);
			return NULL;
		}
		recs[used++] = rec;
		while ((r = gs_cascade_ref_advance(st, w)) == 0)
		{
			/* what is pointed at must be published before waiting */
			if (recs != NULL)
			{
				gs_cascade_ref_publish(st, &blk, used, false);
				recs = NULL;
			}
			if (!gs_cascade_ref_wait(st, w))
				return NULL;
		}
		if (r < 0)
			return NULL;
		w = gs_loser_tree_replay(st->tree, st->tree_k0, n, w, st->ink0[w],
								 gs_cascade_before_cb, st);
		if (recs != NULL && used == cap)
		{
			gs_cascade_ref_publish(st, &blk, used, false);
			recs = NULL;
		}
	}
}

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
 * Start a thread merging runs[0 .. nruns-1] of f, whose keys are exact (the
 * keys alone order the rows).  Every row must fit in read_size bytes, and as
 * a record twice in block_size.  The stream's memory and thread belong to
 * cxt: its reset or deletion stops the thread first.  NULL if no thread can
 * be started (the caller merges another way).
 */
GsStream *
gs_stream_start(MemoryContext cxt, GsTempFile *f, int key_bytes,
				const GsRun *runs, int nruns, size_t block_size,
				size_t read_size)
{
	return gs_stream_start_rows(cxt, f, NULL, key_bytes, runs, nruns,
								block_size, read_size);
}

/* the same for runs of rows in format fmt (NULL: the sort's tape rows) */
GsStream *
gs_stream_start_rows(MemoryContext cxt, GsTempFile *f, const GsRowFormat *fmt,
					 int key_bytes, const GsRun *runs, int nruns,
					 size_t block_size, size_t read_size)
{
	GsStream   *st;
	int			i;

	/* the thread starts by reading its first run: every caller has one */
	if (nruns < 1)
		elog(ERROR, "gpusort: a merge stream needs at least one run");
	st = MemoryContextAllocZero(cxt, sizeof(GsStream));
	st->file = f;
	st->fmt = fmt;
	st->hdr = fmt ? fmt->hdr : TAPE_ROW_HDR;
	st->key_bytes = key_bytes;
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
 * Start a thread merging streams inputs[0 .. n-1] (all of the same rows:
 * the sort's tape rows or one row format, keys exact; not yet read) into
 * one, with blocks of block_size bytes, no smaller than the inputs'.  Its
 * records are the inputs' records, copied (an index build's rows); or,
 * byref (the sort's tape rows only), the inputs' records themselves, whose
 * addresses the reader walks.  From then on the inputs belong
 * to it: only the cascade is read, and stopping any of them stops it.
 * NULL if no thread can be started (the caller reads the inputs itself).
 */
GsStream *
gs_stream_cascade(MemoryContext cxt, GsStream **inputs, int n,
				  size_t block_size, bool byref)
{
	GsStream   *st = MemoryContextAllocZero(cxt, sizeof(GsStream));
	int			i;

	Assert(n >= 1);
	Assert(!byref || inputs[0]->fmt == NULL);
	st->file = inputs[0]->file;
	st->fmt = inputs[0]->fmt;
	st->hdr = inputs[0]->hdr;
	st->keyoff = st->fmt ? st->fmt->hdr : STREAM_KEY_OFFSET;
	st->key_bytes = inputs[0]->key_bytes;
	st->ninputs = n;
	st->byref = byref;
	st->inputs = MemoryContextAlloc(cxt, n * sizeof(GsStream *));
	st->inrec = MemoryContextAllocZero(cxt, n * sizeof(char *));
	st->ink0 = MemoryContextAllocZero(cxt, n * sizeof(uint64));
	st->tree = MemoryContextAllocZero(cxt, n * sizeof(int));
	st->tree_k0 = MemoryContextAllocZero(cxt, n * sizeof(uint64));
	if (byref)
	{
		st->pend = MemoryContextAllocZero(cxt, n * sizeof(int));
		st->rcur = MemoryContextAllocZero(cxt, n * sizeof(char *));
		st->rlim = MemoryContextAllocZero(cxt, n * sizeof(char *));
		for (i = 0; i < STREAM_BLOCKS; i++)
			st->rel[i] = MemoryContextAllocZero(cxt, n * sizeof(int));
	}
	for (i = 0; i < n; i++)
	{
		Assert(inputs[i]->fmt == st->fmt && inputs[i]->owner == NULL);
		Assert(inputs[i]->block_size <= block_size);
		st->inputs[i] = inputs[i];
	}
	if (!gs_stream_launch(cxt, st, block_size,
						  byref ? gs_cascade_ref_thread : gs_cascade_thread))
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
 * The stream's next block of records, *len bytes of them, or NULL at its
 * end: for a caller that walks the records itself.  The block handed out
 * before is done with: it goes back to the thread.
 */
const char *
gs_stream_next_block(GsStream *st, size_t *len)
{
	Assert(st->owner == NULL);
	if (st->byref)
		elog(ERROR, "gpusort: blocks of a cascade by reference requested");
	if (st->holding)
	{
		/* read through: taking past its end gives it back */
		st->cpos = st->used[st->cblk];
		(void) gs_stream_take(st);
	}
	if (!gs_stream_await(st))
	{
		*len = 0;
		return NULL;
	}
	*len = st->used[st->cblk];
	return st->blocks[st->cblk];
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
