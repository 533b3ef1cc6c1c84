/*-------------------------------------------------------------------------
 *
 * spill_stream_int.h
 *	  A stream's insides, shared by the backend's side (spill_stream.c:
 *	  start, read, stop) and its thread's (spill_stream_thread.c: the
 *	  merges of runs and of streams).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SPILL_STREAM_INT_H
#define SPILL_STREAM_INT_H

#include "postgres.h"

#include <pthread.h>

#include "lib/ilist.h"
#include "utils/memutils.h"

#include "gpusort_engine.h"
#include "gpusort_spill.h"


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
	uint32		word;			/* its record's word (tape rows) */
	GsTapeRec	rec;			/* and what that says */
	const char *key;			/* its key: in buf, or keybuf if derived */
	uint64		k0;				/* its first key word; max at the end */
	bool		eof;
	char		keybuf[GS_MAX_KEY_BYTES];	/* a key left out of the run */
} GsReader;

struct GsStream
{
	/* fixed at start */
	GsTempFile *file;
	size_t		hdr;			/* bytes before a row's key */
	int			key_bytes;
	GsTapeFormat tape;			/* of the runs read */
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
	size_t		tupoff;			/* ... and its tuple */
	size_t		body_off;		/* ... and, in the tuple, what the tie
								 * function reads (gs_tape_tuple_body_off) */
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
	bool		slow;			/* fault "slow_cascade": pause at a
								 * stream's end and a cascade's wait */

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

/* ---- taking records from a stream's blocks: the backend and a cascade's thread ---- */

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
			memcpy(&reclen, rec, sizeof(uint32));
			st->cpos += reclen;
			return rec;
		}
		gs_stream_give_back(st);
	}
	return NULL;
}

/* how many records a byref cascade's block points at: a few per input block */
static inline size_t
gs_cascade_ref_cap(size_t block_size)
{
	return Max(block_size / 64, 64);
}

/* ---- spill_stream_thread.c: what a stream's thread runs ---- */
extern void *gs_stream_thread(void *arg);
extern void *gs_cascade_ref_thread(void *arg);

#endif							/* SPILL_STREAM_INT_H */
