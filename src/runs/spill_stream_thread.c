/*-------------------------------------------------------------------------
 *
 * spill_stream_thread.c
 *	  What the threads of spill_stream.c run: a stream's merge of runs
 *	  read from the temporary file into blocks of rows, and a cascade's
 *	  merge of streams into one (copying their records, or by reference).
 *
 * These functions run on the streams' threads only, never in the backend,
 * and so never call PostgreSQL (spill_stream.c says how the threads are
 * kept apart from it).  They call the temporary files (spill.c) and the
 * loser tree (loser_tree.c) only; the backend's side (spill_stream.c)
 * starts them and never gets called back.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <time.h>

#include "access/htup_details.h"

#include "gpusort_spill.h"
#include "spill_stream_int.h"


/* ---------------------------------------------------------------------
 * Streams: a thread merges a group of runs into blocks of rows
 * ---------------------------------------------------------------------
 */

/*
 * Fault "slow_cascade" (st->slow): a stream's thread pauses before it
 * publishes its last block, and a cascade's after it finds an input with
 * no block ready, so that the one publishes while the other decides.
 */
#define SLOW_STREAM_END_MS		5
#define SLOW_CASCADE_WAIT_MS	20

static void
gs_stream_pause(int ms)
{
	struct timespec ts;

	ts.tv_sec = 0;
	ts.tv_nsec = (long) ms * 1000000;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * A thread's clock, in ns.  Not inlined: its timespec on the stack would
 * give gs_reader_next, which reads it only on a refill, a stack
 * protector's check on every row.
 */
static pg_noinline uint64
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
	/* a tape row's word says whether its key follows */
	need = TAPE_ROW_HDR;
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
			memcpy(&r->word, r->buf + r->rpos, sizeof(uint32));
			gs_tape_decode(&st->tape, r->word, &r->rec);
			headlen = r->rec.head;
			need = headlen + r->rec.body_len;
			if ((r->word & TAPE_NOKEY_BIT) && st->tape.derive == NULL)
				return -1;
			if (need > r->size || need < headlen)
				return -1;
		}
	}
	r->rowlen = need;
	if (!(r->word & TAPE_NOKEY_BIT))
		r->key = r->buf + r->rpos + st->hdr;
	else
	{
		(void) st->tape.derive(st->tape.derive_arg,
							   r->buf + r->rpos + r->rec.head,
							   r->rec.body_off, r->keybuf);
		r->key = r->keybuf;
	}
	r->k0 = gs_key_word0(r->key, st->key_bytes);

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

/*
 * does reader a's row come before reader b's? (the keys decide, or, where
 * they may be lossy, the format's tie function: gs_tape_cmp_rest)
 */
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
	c = gs_tape_cmp_rest(&st->tape, ra->key, rb->key,
						 ra->buf + ra->rpos + ra->rec.head, ra->rec.body_off,
						 rb->buf + rb->rpos + rb->rec.head, rb->rec.body_off);
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
	uint32		reclen;
	size_t		tupoff = gs_stream_tuple_offset(st->key_bytes);
	char	   *tup = dst + tupoff;

	reclen = tupoff + MAXALIGN(r->rec.t_len);
	memcpy(dst, &reclen, sizeof(uint32));
	/* the key, whether read or derived */
	memcpy(dst + STREAM_KEY_OFFSET, r->key, st->key_bytes);
	gs_tape_restore(&st->tape, r->word, &r->rec, tup);
	memcpy(tup + r->rec.body_off, row + r->rec.head, r->rec.body_len);
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

void *
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
			rec = tupoff + MAXALIGN(r->rec.t_len);
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

		if (end && unlikely(st->slow))
			gs_stream_pause(SLOW_STREAM_END_MS);
		gs_stream_publish(st, &blk, used, end);
		if (end)
			break;
	}
	return NULL;
}

/* ---------------------------------------------------------------------
 * Cascades: a thread merges streams into one, by reference
 *
 * The backend of a final merge over several streams would replay a loser
 * tree for every row it returns, on top of handing the row to the
 * executor; with 50M rows that doubled its time per row.  A cascade's
 * thread does that merge instead, so that the backend walks a single
 * stream.  Copying the streams' records into blocks of its own made the
 * cascade itself the bottleneck (on the H200 it moved 80-byte records for
 * 50M rows at about 20 ns a row, and the backend waited for it a quarter
 * of the time), so a cascade fills its blocks with pointers to its inputs'
 * records instead, as an in-memory sort hands out pointers to its rows.  An
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

/* an error code of a cascade's input that means "stopped", not a failure */
#define CASCADE_STOPPED		(-2)

/* does input a's record come before input b's? (as gs_reader_before) */
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
	c = gs_tape_cmp_rest(&st->tape, ra + st->keyoff, rb + st->keyoff,
						 ra + st->tupoff + st->body_off, st->body_off,
						 rb + st->tupoff + st->body_off, st->body_off);
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
	bool		done;

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

	/*
	 * Whether the input had ended is what it was under the lock, with nfull:
	 * its thread publishes its last block and ends in one step, so a look at
	 * done after the unlock could pass over that block's rows.
	 */
	done = in->done;
	pthread_mutex_unlock(&in->lock);
	if (unlikely(st->slow) && !in->holding && !done && err == 0)
		gs_stream_pause(SLOW_CASCADE_WAIT_MS);
	if (err)
	{
		gs_stream_finish(st, err);
		return -1;
	}
	st->rcur[i] = st->rlim[i] = NULL;
	if (!in->holding)
	{
		if (!done)
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

void *
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
