/*-------------------------------------------------------------------------
 *
 * index_spill.c
 *	  btree builds larger than maintenance_work_mem: sorted runs in a
 *	  temporary file, merged straight into the page writer.
 *
 * The build collects rows (index tuple, normalized key, flags) as long as
 * maintenance_work_mem holds them.  When it is full, the rows are sorted
 * by the engine (with the same tie-breaks and unique check as an
 * in-memory build) and written in order, as one run, to the build's
 * temporary file (spill.c's: named and placed like PostgreSQL's own,
 * counted against temp_file_limit, removed at the end of the build, on
 * error and on cancel); then the memory is reused for the next run.
 *
 * After the heap scan the runs are merged.  A merge reads each run through
 * a buffer of its own, so memory bounds how many runs one merge can take
 * (its fan-in): while there are more, groups of runs are merged into
 * longer runs (a merge pass, reading and writing the data once more).  The
 * last merge hands each tuple to the page writer as it comes out, so the
 * index itself is written once.  The unique check of the final merge sees
 * every row in order, as the one over an in-memory sort.
 *
 * A row in a run: uint32 holding the tuple's size (low 16 bits) and the
 * row's flags (next 8 bits), 4 bytes of padding, the key (keybytes, a
 * multiple of 8), the index tuple (and its payload, when rows have one:
 * then the size covers both) padded to MAXALIGN.  Every record is a
 * multiple of 8 bytes, so records read into an aligned buffer can be used
 * where they lie.
 *
 * Order in a merge: the column words of the keys, compared as the engine
 * compares them; when they are equal and the keys are not exact (or one of
 * them was encoded lossily), the index's comparators; then the heap TID,
 * the key's last word.  That is the order of the in-memory sort.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <time.h>

#include "access/nbtree.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/wait_event.h"

#include "gpusort_spill.h"
#include "index_int.h"

/* a record's header: size and flags, then padding up to the key */
#define GS_RUN_HDR			8
#define GS_RUN_SIZE_MASK	0xFFFF
#define GS_RUN_FLAGS_SHIFT	16

/*
 * Read buffers of a merge: about this size each, so that memory bounds the
 * fan-in (as PostgreSQL's tuplesort, which gives each input 256 kB and
 * merges at least 6 runs at a time); the output buffer of a merge pass
 * and of a run is of the same size.
 */
#define GS_RUN_BUFFER		((Size) 256 * 1024)
#define GS_RUN_BUFFER_MIN	((Size) 32 * 1024)
#define GS_MERGE_MIN_FANIN	6
#define GS_MERGE_MAX_FANIN	1024

/* how far ahead writing a run prefetches rows */
#define GS_SPILL_PREFETCH	8

/* rows between interrupt checks in the merge loops */
#define GS_SPILL_CFI_EVERY	4096

/*
 * Writes one run at the end of the build's file: its temporary file, or
 * in a parallel worker its file of the shared file set.
 */
typedef struct GsRunWriter
{
	GsIdxBuild *b;
	char	   *buf;
	Size		size;
	Size		used;
	GsIdxRun	run;
	bool		started;
	int64		reserved;		/* bytes placed up front, or 0 */
} GsRunWriter;

/* reads one run; rec is its current record, NULL once it is exhausted */
typedef struct GsRunReader
{
	GsTempFile *file;			/* the run's file */
	char	   *buf;
	Size		size;
	Size		pos;			/* rec's offset in buf */
	Size		len;			/* bytes of buf that hold data */
	int64		cur;			/* file offset of the next read */
	int64		end;
	int64		given_back;		/* space discarded up to here */
	char	   *rec;
} GsRunReader;

typedef struct GsMerge
{
	GsIdxBuild *b;
	GsRunReader *in;
	int			n;
	int		   *tree;			/* tree[0] the winner, see gs_loser_tree_build */

	/*
	 * The first key word of each input's record (PG_UINT64_MAX once it is
	 * exhausted): most matches are decided here, without touching the
	 * records in their buffers.
	 */
	uint64	   *k0;
} GsMerge;

static inline Size
gs_rec_len(GsIdxBuild *b, uint32 hdr)
{
	return GS_RUN_HDR + b->keybytes + MAXALIGN(hdr & GS_RUN_SIZE_MASK);
}

static inline const uint64 *
gs_rec_key(const char *rec)
{
	return (const uint64 *) (rec + GS_RUN_HDR);
}

static inline IndexTuple
gs_rec_tuple(GsIdxBuild *b, char *rec)
{
	return (IndexTuple) (rec + GS_RUN_HDR + b->keybytes);
}

static inline uint8
gs_rec_flags(const char *rec)
{
	uint32		hdr;

	memcpy(&hdr, rec, sizeof(hdr));
	return (uint8) (hdr >> GS_RUN_FLAGS_SHIFT);
}

/* ---- writing runs ---- */

/*
 * A writer of one run of total bytes.  In a file that parallel workers
 * share, the run's place is taken whole now, as other processes place
 * theirs meanwhile; in the backend's own file the run grows with each
 * buffer written (total may then be 0, unknown).
 */
static void
gs_rw_init(GsRunWriter *rw, GsIdxBuild *b, char *buf, Size size, int64 total)
{
	rw->b = b;
	rw->buf = buf;
	rw->size = size;
	rw->used = 0;
	rw->run.offset = 0;
	rw->run.bytes = 0;
	rw->run.nrows = 0;
	rw->started = false;
	rw->reserved = 0;
	if (gs_temp_is_shared(b->file) && total > 0)
	{
		rw->run.offset = gs_temp_extend(b->file, total);
		rw->started = true;
		rw->reserved = total;
	}
	else
		Assert(!gs_temp_is_shared(b->file) || total == 0);
}

/*
 * Write out the buffer, where the run goes on: its pieces lie one after
 * another (the backend's own file grows only through the writer of the
 * moment).
 */
static void
gs_rw_flush(GsRunWriter *rw)
{
	int64		off;
	int			err;

	GsIdxBuild *b = rw->b;

	if (rw->used == 0)
		return;
	if (rw->reserved > 0)
	{
		off = rw->run.offset + rw->run.bytes;
		if (rw->run.bytes + (int64) rw->used > rw->reserved)
			elog(ERROR, "gpusort: a run outgrew the space placed for it");
	}
	else
		off = gs_temp_extend(b->file, rw->used);
	err = gs_temp_pwrite(b->file, rw->buf, rw->used, off);
	if (err != 0)
		gs_temp_error(b->file, err, true);
	if (!rw->started)
	{
		rw->run.offset = off;
		rw->started = true;
	}
	Assert(off == rw->run.offset + rw->run.bytes);
	rw->run.bytes += rw->used;
	rw->used = 0;
}

/* the run is complete: write the rest */
static void
gs_rw_finish(GsRunWriter *rw)
{
	gs_rw_flush(rw);
	if (rw->reserved > 0 && rw->run.bytes != rw->reserved)
		elog(ERROR, "gpusort: a run of %lld bytes was placed for %lld",
			 (long long) rw->run.bytes, (long long) rw->reserved);
}

static void
gs_rw_put(GsIdxBuild *b, GsRunWriter *rw, const uint64 *key,
		  IndexTuple itup, uint8 flags)
{
	Size		tsize = gs_idx_row_size(b, itup);
	uint32		hdr = (uint32) tsize | ((uint32) flags << GS_RUN_FLAGS_SHIFT);
	Size		len = gs_rec_len(b, hdr);
	char	   *p;

	if (rw->used + len > rw->size)
		gs_rw_flush(rw);
	Assert(len <= rw->size);
	p = rw->buf + rw->used;
	memcpy(p, &hdr, sizeof(hdr));
	memset(p + sizeof(hdr), 0, GS_RUN_HDR - sizeof(hdr));
	memcpy(p + GS_RUN_HDR, key, b->keybytes);
	memcpy(p + GS_RUN_HDR + b->keybytes, itup, tsize);
	if (MAXALIGN(tsize) > tsize)
		memset(p + GS_RUN_HDR + b->keybytes + tsize, 0,
			   MAXALIGN(tsize) - tsize);
	rw->used += len;
	rw->run.nrows++;
}

void
gs_idx_add_run(GsIdxBuild *b, const GsIdxRun *run)
{
	if (b->nruns == b->maxruns)
	{
		b->maxruns = Max(16, b->maxruns * 2);
		if (b->runs == NULL)
			b->runs = (GsIdxRun *) MemoryContextAlloc(b->cxt,
													  b->maxruns * sizeof(GsIdxRun));
		else
			b->runs = (GsIdxRun *) repalloc(b->runs,
											b->maxruns * sizeof(GsIdxRun));
	}
	b->runs[b->nruns++] = *run;
}

/* the rows' arrays, for b->cap rows (huge pages where the kernel has them) */
static void
gs_idx_alloc_arrays(GsIdxBuild *b)
{
	b->keys = gs_keybuf_alloc(b->eng, b->cap * b->keybytes, b->cxt);
	b->tuples = (IndexTuple *) MemoryContextAllocExtended(b->cxt,
														  b->cap * sizeof(IndexTuple),
														  MCXT_ALLOC_HUGE);
	b->flags = (uint8 *) MemoryContextAllocExtended(b->cxt, b->cap,
													MCXT_ALLOC_HUGE);
	gs_advise_huge(b->tuples, b->cap * sizeof(IndexTuple));
	if (!b->eng->is_gpu)
		gs_advise_huge(b->keys, b->cap * b->keybytes);
}

/* the rows' size in memory that the next run's arrays should be made for */
static void
gs_idx_spill_resize(GsIdxBuild *b, Size arena_bytes, size_t nrows)
{
	Size		per_row = GS_IDX_ROW_BYTES(b) + arena_bytes / Max(nrows, 1);
	size_t		newcap;

	newcap = (b->mem_limit - Min(b->mem_limit / 2, b->arena_block)) / per_row;
	newcap = Max(newcap, 1024);
	newcap = Min(newcap, GS_MAX_ROWS);
	if (newcap * 4 >= b->cap * 5 || newcap * 5 <= b->cap * 4)
	{
		/* nothing in the arrays is needed any more: allocate afresh */
		gs_idx_prefault_wait(b);
		b->prefault_rows = 0;
		gs_keybuf_free(b->eng, b->keys);
		pfree(b->tuples);
		pfree(b->flags);
		b->cap = newcap;
		gs_idx_alloc_arrays(b);
	}
}

/*
 * A run written by threads: first each thread sums the record sizes of its
 * slice of the sorted rows, so that every slice knows its place in the
 * file; then each formats its slice into a buffer of its own and writes it
 * there.  The threads read the build's arrays and tuples and call nothing
 * of PostgreSQL's; write errors come back as errno values.
 */
typedef struct GsRunSlice
{
	size_t		from;
	size_t		to;
	int64		bytes;
	int64		off;
	char	   *buf;
	int			err;
	bool		sized;			/* bytes and off are set (see GsRunSync) */
} GsRunSlice;

/*
 * The parts of a run written in the background, in step.  sort: the first
 * part sorts the run before any writes, when no tie-break or check needs
 * the backend (exact keys, no unique check) and the CPU engine sorts; the
 * others wait for it.  The keys then stay as they were (no
 * GS_SORT_KEYS_OUT): the records take each row's key through perm.
 * chain: records of several sizes; each part sums its slice's, then takes
 * its place after the slices before it (their sums), from start on.
 */
typedef struct GsRunSync
{
	bool		sort;
	bool		chain;
	int64		start;
	GsEngine   *eng;			/* an instance for this thread alone */
	char	   *keys;
	size_t		n;
	int			keybytes;
	uint32	   *perm;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool		done;			/* under lock: status is set */
	gs_status	status;
	char		errbuf[256];
} GsRunSync;

typedef struct GsRunJob
{
	GsIdxBuild *b;
	GsRunSync  *sync;			/* a background run's, else NULL */
	/* the rows' arrays (b's own may be another half's meanwhile) */
	const char *keys;
	IndexTuple *tuples;
	const uint8 *flags;
	const uint32 *perm;
	GsRunSlice *slices;
	bool		sizing;
} GsRunJob;

/* runs of fewer rows are written by the backend alone */
#define GS_RUN_THREADS_MIN_ROWS		16384

/* wait on rs->cv (lock held) for at most 10 ms: long enough to see stop */
static void
gs_run_sync_wait(GsRunSync *rs)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 10 * 1000 * 1000;
	if (ts.tv_nsec >= 1000 * 1000 * 1000)
	{
		ts.tv_sec++;
		ts.tv_nsec -= 1000 * 1000 * 1000;
	}
	(void) pthread_cond_timedwait(&rs->cv, &rs->lock, &ts);
}

/* the engine's cancel callback on a background part: the task's stop */
static int
gs_run_stop(void *arg)
{
	return *(volatile bool *) arg;
}

/*
 * Part 0 sorts the run, the others wait for it; true when it is sorted.
 * Waits wake now and then to see stop.
 */
static bool
gs_run_sorted(GsRunSync *rs, int part, volatile bool *stop)
{
	bool		ok;

	if (part == 0)
	{
		gs_status	st;

		st = rs->eng->ops->sort(rs->eng->eng, rs->keys, rs->n, rs->keybytes,
								rs->perm, 0, gs_run_stop, (void *) stop,
								NULL, rs->errbuf, sizeof(rs->errbuf));
		pthread_mutex_lock(&rs->lock);
		rs->status = st;
		rs->done = true;
		pthread_cond_broadcast(&rs->cv);
		pthread_mutex_unlock(&rs->lock);
		return st == GS_OK;
	}
	pthread_mutex_lock(&rs->lock);
	while (!rs->done && !*stop)
		gs_run_sync_wait(rs);
	ok = rs->done && rs->status == GS_OK;
	pthread_mutex_unlock(&rs->lock);
	return ok;
}

/* the bytes of a slice's records; -1 when stopped */
static int64
gs_run_slice_size(GsRunJob *j, GsRunSlice *sl, volatile bool *stop)
{
	GsIdxBuild *b = j->b;
	int64		sum = 0;
	size_t		i;

	for (i = sl->from; i < sl->to; i++)
	{
		if ((i & 4095) == 0 && *stop)
			return -1;
		if (i + 2 * GS_SPILL_PREFETCH < sl->to)
			__builtin_prefetch(&j->tuples[j->perm[i + 2 * GS_SPILL_PREFETCH]]);
		if (i + GS_SPILL_PREFETCH < sl->to)
			__builtin_prefetch(j->tuples[j->perm[i + GS_SPILL_PREFETCH]]);
		sum += GS_RUN_HDR + b->keybytes +
			MAXALIGN(gs_idx_row_size(b, j->tuples[j->perm[i]]));
	}
	return sum;
}

/*
 * A background part may write: the run is sorted, and the slice's place
 * known (sl->off); false when stopped or the sort failed.
 */
static bool
gs_run_ready(GsRunJob *j, int part, volatile bool *stop)
{
	GsRunSync  *rs = j->sync;
	GsRunSlice *sl = &j->slices[part];
	int64		sum;
	int64		off;
	int			t;
	bool		ok = true;

	if (rs->sort && !gs_run_sorted(rs, part, stop))
		return false;
	if (!rs->chain)
		return true;
	sum = gs_run_slice_size(j, sl, stop);
	if (sum < 0)
		return false;
	pthread_mutex_lock(&rs->lock);
	sl->bytes = sum;
	sl->sized = true;
	pthread_cond_broadcast(&rs->cv);
	off = rs->start;
	for (t = 0; t < part && ok; t++)
	{
		while (!j->slices[t].sized && !*stop)
			gs_run_sync_wait(rs);
		ok = j->slices[t].sized;
		off += j->slices[t].bytes;
	}
	sl->off = off;
	pthread_mutex_unlock(&rs->lock);
	return ok;
}

static void
gs_run_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsRunJob   *j = (GsRunJob *) arg;
	GsIdxBuild *b = j->b;
	GsRunSlice *sl = &j->slices[part];
	Size		used = 0;
	int64		off;
	bool		by_perm = j->sync != NULL && j->sync->sort;
	size_t		i;

	if (j->sizing)
	{
		int64		sum = gs_run_slice_size(j, sl, stop);

		if (sum >= 0)
			sl->bytes = sum;
		return;
	}
	if (j->sync != NULL && !gs_run_ready(j, part, stop))
		return;
	off = sl->off;
	for (i = sl->from; i < sl->to; i++)
	{
		IndexTuple	itup;
		Size		tsize;
		uint32		hdr;
		Size		len;
		char	   *p;

		if ((i & 4095) == 0 && *stop)
			return;
		if (i + 2 * GS_SPILL_PREFETCH < sl->to)
			__builtin_prefetch(&j->tuples[j->perm[i + 2 * GS_SPILL_PREFETCH]]);
		if (i + GS_SPILL_PREFETCH < sl->to)
		{
			__builtin_prefetch(j->tuples[j->perm[i + GS_SPILL_PREFETCH]]);
			if (by_perm)
				__builtin_prefetch(j->keys + (size_t) j->perm[i + GS_SPILL_PREFETCH] * b->keybytes);
		}
		itup = j->tuples[j->perm[i]];
		tsize = gs_idx_row_size(b, itup);
		hdr = (uint32) tsize | ((uint32) j->flags[j->perm[i]] << GS_RUN_FLAGS_SHIFT);
		len = gs_rec_len(b, hdr);
		if (used + len > GS_RUN_BUFFER)
		{
			sl->err = gs_temp_pwrite(b->file, sl->buf, used, off);
			if (sl->err != 0)
				return;
			off += used;
			used = 0;
		}
		p = sl->buf + used;
		memcpy(p, &hdr, sizeof(hdr));
		memset(p + sizeof(hdr), 0, GS_RUN_HDR - sizeof(hdr));
		memcpy(p + GS_RUN_HDR,
			   j->keys + (by_perm ? (size_t) j->perm[i] : i) * b->keybytes,
			   b->keybytes);
		memcpy(p + GS_RUN_HDR + b->keybytes, itup, tsize);
		if (MAXALIGN(tsize) > tsize)
			memset(p + GS_RUN_HDR + b->keybytes + tsize, 0,
				   MAXALIGN(tsize) - tsize);
		used += len;
	}
	if (used > 0)
		sl->err = gs_temp_pwrite(b->file, sl->buf, used, off);
}

/* write the sorted rows as one run on threads; false: too few for that */
static bool
gs_idx_write_run_threads(GsIdxBuild *b, const uint32 *perm)
{
	int			nparts = Min(gpusort_cpu_threads, 64);
	GsRunSlice *slices;
	GsRunJob	job;
	GsIdxRun	run;
	int64		total = 0;
	int64		start;
	int			t;

	if (nparts < 2 || b->n < GS_RUN_THREADS_MIN_ROWS)
		return false;
	slices = (GsRunSlice *) palloc0(nparts * sizeof(GsRunSlice));
	for (t = 0; t < nparts; t++)
	{
		slices[t].from = b->n * t / nparts;
		slices[t].to = b->n * (t + 1) / nparts;
		slices[t].buf = palloc(GS_RUN_BUFFER);
	}
	job.b = b;
	job.sync = NULL;
	job.keys = b->keys;
	job.tuples = b->tuples;
	job.flags = b->flags;
	job.perm = perm;
	job.slices = slices;

	/* every slice's bytes, then its place in the file */
	job.sizing = true;
	while (!gs_parallel(gs_run_part, &job, nparts))
		;
	for (t = 0; t < nparts; t++)
		total += slices[t].bytes;
	start = gs_temp_extend(b->file, total);
	for (t = 0; t < nparts; t++)
	{
		slices[t].off = start;
		start += slices[t].bytes;
	}

	/* writing a slice again after an interrupt writes the same bytes */
	job.sizing = false;
	while (!gs_parallel(gs_run_part, &job, nparts))
		;
	for (t = 0; t < nparts; t++)
	{
		if (slices[t].err != 0)
			gs_temp_error(b->file, slices[t].err, true);
		pfree(slices[t].buf);
	}
	pfree(slices);

	run.offset = start - total;
	run.bytes = total;
	run.nrows = b->n;
	gs_idx_add_run(b, &run);
	return true;
}

/*
 * A run written in the background, by threads that format the sorted rows
 * of one half of the memory and write them, while the scan fills the other
 * half.  Its place in the file is taken before they start (so a
 * temp_file_limit error comes from the backend, and the file grows only
 * there).  The task lives in a child of the build's context: an error
 * stops and joins its threads before the rows' memory and the file go.
 */
struct GsRunBg
{
	GsRunJob	job;
	GsRunSync	sync;
	GsTask	   *task;
	int			nparts;
	GsIdxRun	run;
	uint32	   *perm;
};

/*
 * Start writing the rows in memory (b->n) as a run, in perm's order; sort:
 * the threads sort them first, into perm (see GsRunSync).
 */
static void
gs_idx_run_bg_start(GsIdxBuild *b, uint32 *perm, bool sort)
{
	GsRunBg    *bg = (GsRunBg *) palloc0(sizeof(GsRunBg));
	GsRunSlice *slices;
	int			nparts = Min(Max(gpusort_cpu_threads, 1), 64);
	int64		total = 0;
	int64		start;
	int			t;

	Assert(b->bg == NULL);
	if (b->n < GS_RUN_THREADS_MIN_ROWS)
		nparts = 1;
	slices = (GsRunSlice *) palloc0(nparts * sizeof(GsRunSlice));
	for (t = 0; t < nparts; t++)
	{
		slices[t].from = b->n * t / nparts;
		slices[t].to = b->n * (t + 1) / nparts;
		slices[t].buf = palloc(GS_RUN_BUFFER);
	}
	bg->nparts = nparts;
	bg->perm = perm;
	bg->job.b = b;
	bg->job.keys = b->keys;
	bg->job.tuples = b->tuples;
	bg->job.flags = b->flags;
	bg->job.perm = perm;
	bg->job.slices = slices;
	bg->job.sync = &bg->sync;
	bg->sync.sort = sort;
	bg->sync.chain = b->rec_varlen;
	if (sort)
	{
		bg->sync.eng = gs_engine_cpu_thread();
		bg->sync.keys = b->keys;
		bg->sync.n = b->n;
		bg->sync.keybytes = b->keybytes;
		bg->sync.perm = perm;
	}
	pthread_mutex_init(&bg->sync.lock, NULL);
	pthread_cond_init(&bg->sync.cv, NULL);

	/* the records' bytes do not depend on their order */
	total = (int64) b->n * (GS_RUN_HDR + b->keybytes) + b->rec_bytes;
	start = gs_temp_extend(b->file, total);
	bg->run.offset = start;
	bg->run.bytes = total;
	bg->run.nrows = b->n;
	bg->sync.start = start;

	/* records of one size: each slice's place is known now */
	if (!b->rec_varlen)
	{
		for (t = 0; t < nparts; t++)
		{
			slices[t].bytes = (int64) (slices[t].to - slices[t].from) *
				(GS_RUN_HDR + b->keybytes + b->rec_tlen);
			slices[t].off = start;
			slices[t].sized = true;
			start += slices[t].bytes;
		}
	}

	bg->job.sizing = false;
	bg->task = gs_task_start(b->cxt, gs_run_part, &bg->job, nparts);
	b->bg = bg;
	gs_index_fault_point(GS_INDEX_FAULT_CANCEL_IN_RUN);
}

void
gs_idx_run_bg_finish(GsIdxBuild *b)
{
	GsRunBg    *bg = b->bg;
	int			t;
	int			err = 0;
	int64		sum = 0;

	if (bg == NULL)
		return;
	/* writing a slice again after an interrupt writes the same bytes */
	while (!gs_task_wait(bg->task))
	{
		bg->sync.done = false;
		if (bg->sync.chain)
		{
			for (t = 0; t < bg->nparts; t++)
				bg->job.slices[t].sized = false;
		}
		bg->task = gs_task_start(b->cxt, gs_run_part, &bg->job, bg->nparts);
	}
	b->bg = NULL;
	pthread_cond_destroy(&bg->sync.cv);
	pthread_mutex_destroy(&bg->sync.lock);
	if (bg->sync.sort && bg->sync.status != GS_OK)
		ereport(ERROR,
				(errcode(bg->sync.status == GS_ERR_NOMEM ?
						 ERRCODE_OUT_OF_MEMORY : ERRCODE_INTERNAL_ERROR),
				 errmsg("gpusort: the sort of a run failed: %s",
						bg->sync.errbuf)));
	for (t = 0; t < bg->nparts; t++)
		sum += bg->job.slices[t].bytes;
	if (sum != bg->run.bytes)
		elog(ERROR, "gpusort: a run of %lld bytes was placed for %lld",
			 (long long) sum, (long long) bg->run.bytes);
	for (t = 0; t < bg->nparts; t++)
	{
		if (bg->job.slices[t].err != 0 && err == 0)
			err = bg->job.slices[t].err;
		pfree(bg->job.slices[t].buf);
	}
	if (err != 0)
		gs_temp_error(b->file, err, true);
	gs_idx_add_run(b, &bg->run);
	b->nruns_written++;
	pfree(bg->job.slices);
	pfree(bg->perm);
	pfree(bg);
}

/* swap the rows' memory with the other half's, free now */
static void
gs_idx_set_swap(GsIdxBuild *b)
{
	GsIdxSet	cur;

	cur.keys = b->keys;
	cur.tuples = b->tuples;
	cur.flags = b->flags;
	cur.cap = b->cap;
	cur.blocks = b->blocks;
	cur.blocks_raw = b->blocks_raw;
	cur.nblocks = b->nblocks;
	cur.blocks_cap = b->blocks_cap;
	cur.arenacxt = b->arenacxt;

	b->keys = b->other.keys;
	b->tuples = b->other.tuples;
	b->flags = b->other.flags;
	b->cap = b->other.cap;
	b->blocks = b->other.blocks;
	b->blocks_raw = b->other.blocks_raw;
	b->nblocks = b->other.nblocks;
	b->blocks_cap = b->other.blocks_cap;
	b->arenacxt = b->other.arenacxt;
	b->other = cur;

	/* the first time, the other half has no arrays yet */
	if (b->keys == NULL)
	{
		b->cap = cur.cap;
		gs_idx_alloc_arrays(b);
	}
	if (b->arenacxt == NULL)
		b->arenacxt = AllocSetContextCreate(b->cxt, "gpusort index tuples",
											ALLOCSET_DEFAULT_SIZES);
}

/*
 * From now on runs are written in the background, each of half the memory:
 * the arena blocks kept so far are shared out between the halves.
 */
static void
gs_idx_overlap_begin(GsIdxBuild *b)
{
	int			keep = (b->nblocks + 1) / 2;
	int			i;

	gs_idx_prefault_wait(b);
	b->overlap = true;
	b->mem_limit /= 2;
	b->other.blocks_cap = Max(16, b->nblocks - keep);
	b->other.blocks = MemoryContextAlloc(b->cxt,
										 b->other.blocks_cap * sizeof(char *));
	b->other.blocks_raw = MemoryContextAlloc(b->cxt,
											 b->other.blocks_cap * sizeof(char *));
	for (i = keep; i < b->nblocks; i++)
	{
		b->other.blocks[i - keep] = b->blocks[i];
		b->other.blocks_raw[i - keep] = b->blocks_raw[i];
	}
	b->other.nblocks = b->nblocks - keep;
	b->nblocks = keep;
}

/* the other half's memory goes: the scan and its runs are over */
static void
gs_idx_overlap_end(GsIdxBuild *b)
{
	int			i;

	gs_idx_run_bg_finish(b);
	for (i = 0; i < b->other.nblocks; i++)
		pfree(b->other.blocks_raw[i]);
	b->other.nblocks = 0;
	if (b->other.keys != NULL)
	{
		gs_keybuf_free(b->eng, b->other.keys);
		pfree(b->other.tuples);
		pfree(b->other.flags);
		b->other.keys = NULL;
		b->other.tuples = NULL;
		b->other.flags = NULL;
	}
	if (b->other.arenacxt != NULL)
		MemoryContextDelete(b->other.arenacxt);
	b->other.arenacxt = NULL;
}

void
gs_idx_run_write(GsIdxBuild *b)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(b->cxt);
	uint32	   *perm;
	GsRunWriter rw;
	instr_time	t0;
	size_t		i;
	int64		total = 0;

	INSTR_TIME_SET_CURRENT(t0);
	if (b->file == NULL)
		b->file = gs_temp_create(b->cxt);

	/* sorted keys come back: the merges need each row's key */
	perm = gs_idx_sort(b, true);

	/* the backend's own file takes runs written by threads */
	if (gs_idx_write_run_threads(b, perm))
	{
		b->nruns_written++;
		pfree(perm);
		b->runs_ms += gs_idx_ms_since(t0);
		MemoryContextSwitchTo(oldcxt);
		return;
	}
	/* in a shared file, the run's bytes are placed first */
	if (gs_temp_is_shared(b->file))
	{
		for (i = 0; i < b->n; i++)
			total += GS_RUN_HDR + b->keybytes +
				MAXALIGN(gs_idx_row_size(b, b->tuples[perm[i]]));
	}
	gs_rw_init(&rw, b, palloc(GS_RUN_BUFFER), GS_RUN_BUFFER, total);
	for (i = 0; i < b->n; i++)
	{
		uint32		r = perm[i];

		/* rows are scattered over memory: fetch ahead, in two steps */
		if (i + 2 * GS_SPILL_PREFETCH < b->n)
		{
			__builtin_prefetch(&b->tuples[perm[i + 2 * GS_SPILL_PREFETCH]]);
			__builtin_prefetch(&b->flags[perm[i + 2 * GS_SPILL_PREFETCH]]);
		}
		if (i + GS_SPILL_PREFETCH < b->n)
			__builtin_prefetch(b->tuples[perm[i + GS_SPILL_PREFETCH]]);
		gs_rw_put(b, &rw, (const uint64 *) (b->keys + i * b->keybytes),
				  b->tuples[r], b->flags[r]);
		if (i % GS_SPILL_CFI_EVERY == 0)
			CHECK_FOR_INTERRUPTS();
	}
	gs_rw_finish(&rw);
	gs_idx_add_run(b, &rw.run);
	b->nruns_written++;
	pfree(rw.buf);
	pfree(perm);
	b->runs_ms += gs_idx_ms_since(t0);
	MemoryContextSwitchTo(oldcxt);
}

void
gs_idx_spill_run(GsIdxBuild *b)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(b->cxt);
	Size		arena_bytes = b->mem_arena - b->arena_left;
	size_t		nrows = b->n;

	if (b->overlap)
	{
		instr_time	t0;
		uint32	   *perm;

		/*
		 * Sort this half's rows; once the other half's run is written,
		 * write this one in the background and let the scan fill the other
		 */
		bool		bg_sort;

		INSTR_TIME_SET_CURRENT(t0);
		if (b->file == NULL)
			b->file = gs_temp_create(b->cxt);

		/*
		 * The threads sort too when the engine's order is final and the
		 * CPU engine's: a GPU engine is reached through the service,
		 * which only the backend may call.  Records of one size are
		 * placed without a pass over the sorted rows.
		 */
		bg_sort = !b->eng->is_gpu && b->exact && !b->anylossy &&
			!b->isunique;
		if (bg_sort)
			perm = (uint32 *) palloc_extended(b->n * sizeof(uint32),
											  MCXT_ALLOC_HUGE);
		else
			perm = gs_idx_sort(b, true);
		gs_idx_run_bg_finish(b);
		gs_idx_prefault_wait(b);
		gs_idx_run_bg_start(b, perm, bg_sort);
		gs_idx_set_swap(b);
		b->prefault_rows = 0;
		b->runs_ms += gs_idx_ms_since(t0);
	}
	else
	{
		gs_idx_run_write(b);
		/* a lossy run: the backend will merge the runs, fewer is better */
		if (b->overlap_ok && !b->anylossy && !b->runs_lossy)
			gs_idx_overlap_begin(b);
	}

	/* the memory is free for the next run; it reuses the arena's blocks */
	MemoryContextReset(b->arenacxt);
	b->blk_next = 0;
	b->arena = NULL;
	b->arena_left = 0;
	b->mem_arena = 0;
	MemoryContextReset(b->scratch);
	b->scratch_used = 0;
	b->n = 0;
	b->rec_tlen = 0;
	b->rec_varlen = false;
	b->rec_bytes = 0;
	b->runs_lossy |= b->anylossy;
	b->anylossy = false;
	gs_idx_spill_resize(b, arena_bytes, nrows);
	MemoryContextSwitchTo(oldcxt);
}

/* ---- reading runs ---- */

static void
gs_rr_fill(GsRunReader *rd)
{
	Size		keep = rd->len - rd->pos;
	Size		want;
	int			err;

	if (rd->pos > 0 && keep > 0)
		memmove(rd->buf, rd->buf + rd->pos, keep);
	rd->pos = 0;
	rd->len = keep;
	want = Min((int64) (rd->size - keep), rd->end - rd->cur);
	if (want > 0)
	{
		err = gs_temp_pread(rd->file, rd->buf + keep, want, rd->cur);
		if (err != 0)
			gs_temp_error(rd->file, err, false);
		rd->cur += want;
		rd->len += want;
		rd->given_back = gs_temp_discard(rd->file, rd->given_back, rd->cur,
										 rd->cur == rd->end);
	}
}

/* make rec the record at pos, or NULL at the end of the run */
static void
gs_rr_settle(GsIdxBuild *b, GsRunReader *rd)
{
	uint32		hdr;

	if (rd->len - rd->pos < GS_RUN_HDR)
		gs_rr_fill(rd);
	if (rd->len == rd->pos)
	{
		rd->rec = NULL;
		return;
	}
	memcpy(&hdr, rd->buf + rd->pos, sizeof(hdr));
	if (rd->len - rd->pos < gs_rec_len(b, hdr))
		gs_rr_fill(rd);
	if (rd->len - rd->pos < gs_rec_len(b, hdr))
		elog(ERROR, "truncated record in gpusort index run");
	rd->rec = rd->buf + rd->pos;
}

static void
gs_rr_open(GsIdxBuild *b, GsRunReader *rd, const GsIdxRun *run, char *buf,
		   Size size)
{
	rd->file = b->file;
	rd->buf = buf;
	rd->size = size;
	rd->pos = 0;
	rd->len = 0;
	rd->cur = run->offset;
	rd->end = run->offset + run->bytes;
	rd->given_back = run->offset;
	gs_rr_settle(b, rd);
}

static inline void
gs_rr_next(GsIdxBuild *b, GsRunReader *rd)
{
	uint32		hdr;

	memcpy(&hdr, rd->rec, sizeof(hdr));
	rd->pos += gs_rec_len(b, hdr);

	/* most records lie whole in the buffer, after the one just read */
	if (likely(rd->len - rd->pos >= GS_RUN_HDR))
	{
		memcpy(&hdr, rd->buf + rd->pos, sizeof(hdr));
		if (likely(rd->len - rd->pos >= gs_rec_len(b, hdr)))
		{
			rd->rec = rd->buf + rd->pos;
			return;
		}
	}
	gs_rr_settle(b, rd);
}

/* ---- merging ---- */

/* are the first n words of two keys equal? (a call to memcmp costs more) */
static inline bool
gs_words_equal(const uint64 *k1, const uint64 *k2, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (k1[i] != k2[i])
			return false;
	return true;
}

/* does record r1 come before record r2? */
static inline bool
gs_rec_before(GsIdxBuild *b, char *r1, char *r2)
{
	const uint64 *k1 = gs_rec_key(r1);
	const uint64 *k2 = gs_rec_key(r2);
	int			i;

	for (i = 0; i < b->colwords; i++)
		if (k1[i] != k2[i])
			return k1[i] < k2[i];
	if (!b->exact || ((gs_rec_flags(r1) | gs_rec_flags(r2)) & GS_ROW_LOSSY))
	{
		int			c = gs_idx_cmp_cols(b, gs_rec_tuple(b, r1),
										gs_rec_tuple(b, r2));

		if (c != 0)
			return c < 0;
	}
	/* the heap TID */
	return k1[b->colwords] < k2[b->colwords];
}

/* does input a's record come before input bb's? (exhausted ones last) */
static pg_attribute_always_inline bool
gs_merge_before(GsMerge *m, int a, int bb)
{
	if (likely(m->k0[a] != m->k0[bb]))
		return m->k0[a] < m->k0[bb];
	if (m->in[a].rec == NULL)
		return false;
	if (m->in[bb].rec == NULL)
		return true;
	return gs_rec_before(m->b, m->in[a].rec, m->in[bb].rec);
}

static bool
gs_merge_before_cb(void *arg, int a, int bb)
{
	return gs_merge_before((GsMerge *) arg, a, bb);
}

/* input i's first key word, after its reader moved */
static inline void
gs_merge_set_k0(GsMerge *m, int i)
{
	const char *rec = m->in[i].rec;

	m->k0[i] = rec ? gs_rec_key(rec)[0] : PG_UINT64_MAX;
}

/* open runs[0 .. n-1] for a merge, each with a buffer of bufsize */
static void
gs_merge_start(GsIdxBuild *b, GsMerge *m, const GsIdxRun *runs, int n,
			   Size bufsize)
{
	int			i;

	m->b = b;
	m->n = n;
	m->in = (GsRunReader *) palloc(n * sizeof(GsRunReader));
	m->tree = (int *) palloc0(2 * n * sizeof(int));
	m->k0 = (uint64 *) palloc(n * sizeof(uint64));
	for (i = 0; i < n; i++)
	{
		gs_rr_open(b, &m->in[i], &runs[i], palloc(bufsize), bufsize);
		gs_merge_set_k0(m, i);
	}
	m->tree[0] = gs_loser_tree_build(m->tree, n, gs_merge_before_cb, m);
	gs_index_fault_point(GS_INDEX_FAULT_CANCEL_IN_MERGE);
}

/* the winner's record, or NULL when every run is exhausted */
static inline char *
gs_merge_top(GsMerge *m)
{
	return m->in[m->tree[0]].rec;
}

/* the winner moved on: replay its path to the root */
static void
gs_merge_advance(GsMerge *m)
{
	int			w = m->tree[0];
	int			node;

	gs_rr_next(m->b, &m->in[w]);
	gs_merge_set_k0(m, w);
	for (node = (m->n + w) / 2; node >= 1; node /= 2)
	{
		int			l = m->tree[node];
		int			mask = -(int) gs_merge_before(m, l, w);
		int			loser = (w & mask) | (l & ~mask);

		/* as good as random: the winner is chosen without a branch */
		w ^= l ^ loser;
		m->tree[node] = loser;
	}
	m->tree[0] = w;
}

static void
gs_merge_end(GsMerge *m)
{
	int			i;

	for (i = 0; i < m->n; i++)
		pfree(m->in[i].buf);
	pfree(m->in);
	pfree(m->tree);
	pfree(m->k0);
}

/* merge runs[0 .. n-1] into one run at the end of the file */
static GsIdxRun
gs_merge_pass_group(GsIdxBuild *b, const GsIdxRun *runs, int n, Size bufsize)
{
	GsMerge		m;
	GsRunWriter rw;
	char	   *rec;
	uint64		count = 0;
	int64		total = 0;
	int			i;

	/* the output is the runs' records, byte for byte */
	for (i = 0; i < n; i++)
		total += runs[i].bytes;
	gs_merge_start(b, &m, runs, n, bufsize);
	gs_rw_init(&rw, b, palloc(bufsize), bufsize, total);
	while ((rec = gs_merge_top(&m)) != NULL)
	{
		gs_rw_put(b, &rw, gs_rec_key(rec), gs_rec_tuple(b, rec),
				  gs_rec_flags(rec));
		gs_merge_advance(&m);
		if (++count % GS_SPILL_CFI_EVERY == 0)
			CHECK_FOR_INTERRUPTS();
	}
	gs_rw_finish(&rw);
	pfree(rw.buf);
	gs_merge_end(&m);
	return rw.run;
}

/*
 * The final merge hands rows, in order, to the page writer (or the sink),
 * with the unique check: two live rows with equal key columns (none of
 * them NULL, unless NULLS NOT DISTINCT) raise btbuild's error.
 */
typedef struct GsFinal
{
	GsIdxBuild *b;
	GsBtWriter *w;
	uint64	   *prevkey;
	IndexTuple	prev;
	IndexTuple	first_alive;
	uint8		prevflags;
	int			alive;
	bool		first;
	uint64		count;
} GsFinal;

static void
gs_final_begin(GsIdxBuild *b, GsFinal *f)
{
	memset(f, 0, sizeof(GsFinal));
	f->b = b;
	f->first = true;
	f->prevkey = (uint64 *) palloc(b->keybytes);
	if (b->isunique)
	{
		f->prev = (IndexTuple) palloc(MAXALIGN(INDEX_SIZE_MASK + 1));
		f->first_alive = (IndexTuple) palloc(MAXALIGN(INDEX_SIZE_MASK + 1));
	}
	if (b->sink == NULL)
	{
		f->w = gs_btw_begin(b->heap, b->index, b->isunique);
		gs_btw_tuples_transient(f->w);
	}
}

/* the next record of the merge; it need not outlive the call */
static inline void
gs_final_put(GsFinal *f, char *rec)
{
	GsIdxBuild *b = f->b;
	const uint64 *key = gs_rec_key(rec);
	IndexTuple	itup = gs_rec_tuple(b, rec);
	uint8		flags = gs_rec_flags(rec);
	bool		samecols;

	samecols = !f->first && gs_words_equal(f->prevkey, key, b->colwords);

	if (b->isunique)
	{
		bool		equal = samecols;

		if (equal && !(b->exact && !((f->prevflags | flags) & GS_ROW_LOSSY)))
			equal = gs_idx_cmp_cols(b, f->prev, itup) == 0;
		if (!equal)
			f->alive = 0;
		if (flags & GS_ROW_ALIVE)
		{
			if (f->alive == 0)
				memcpy(f->first_alive, itup, IndexTupleSize(itup));
			else if (b->nulls_not_distinct ||
					 !gs_idx_key_has_null(b, f->first_alive))
				gs_idx_unique_violation(b, f->first_alive);
			f->alive++;
		}
		memcpy(f->prev, itup, IndexTupleSize(itup));
		f->prevflags = flags;
	}

	/* column words that differ: key columns that differ */
	if (b->sink != NULL)
		b->sink(b->sink_arg, itup);
	else
		gs_btw_add(f->w, itup, samecols);
	memcpy(f->prevkey, key, b->colwords * sizeof(uint64));
	f->first = false;

	if (++f->count % GS_SPILL_CFI_EVERY == 0)
		CHECK_FOR_INTERRUPTS();
}

static void
gs_final_end(GsFinal *f)
{
	if (f->w != NULL)
		gs_btw_finish(f->w);
}

/* the final merge of runs[0 .. n-1], in the backend alone */
static void
gs_merge_final(GsIdxBuild *b, const GsIdxRun *runs, int n, Size bufsize)
{
	GsMerge		m;
	GsFinal		f;
	char	   *rec;

	gs_merge_start(b, &m, runs, n, bufsize);
	gs_final_begin(b, &f);
	while ((rec = gs_merge_top(&m)) != NULL)
	{
		gs_final_put(&f, rec);
		gs_merge_advance(&m);
	}
	gs_final_end(&f);
	gs_merge_end(&m);
}

/*
 * The final merge on threads, when the keys alone order the rows (exact
 * keys, no lossy row): each of a few streams (spill_stream.c) merges a
 * group of the runs on a thread of its own, reading the file and copying
 * rows into blocks; from three threads on a cascade merges the streams
 * into one, else the backend merges them.  The backend's share of a row is
 * then the page writer's work and at most a comparison or two, where a
 * merge of tens of runs costs it several times that.  Memory: half of it
 * reads the runs, half holds the blocks.
 */
static size_t
gs_idx_row_len(const char *row, int key_bytes)
{
	uint32		hdr;

	memcpy(&hdr, row, sizeof(hdr));
	return GS_RUN_HDR + key_bytes + MAXALIGN(hdr & GS_RUN_SIZE_MASK);
}

static const GsRowFormat gs_idx_row_format = {GS_RUN_HDR, gs_idx_row_len};

/* how far ahead of the merge a stream's block is fetched, in bytes */
#define GS_STREAM_PREFETCH		512

/* runs a stream merges at least */
#define GS_STREAM_MIN_RUNS		2

/*
 * One stream as the backend merges it: it walks the stream's blocks
 * itself, record by record, and keeps the current record's first key word
 * at hand, where most matches are decided.
 */
typedef struct GsStreamIn
{
	const char *rec;			/* current record, NULL once exhausted */
	const char *end;			/* end of the block it lies in */
	uint64		k0;				/* its first key word; max once exhausted */
} GsStreamIn;

typedef struct GsStreamMerge
{
	GsIdxBuild *b;
	GsStream  **st;
	GsStreamIn *in;
} GsStreamMerge;

/* move input i to its stream's next record */
static inline void
gs_stream_in_next(GsStreamMerge *sm, int i)
{
	GsStreamIn *in = &sm->in[i];
	const char *rec = in->rec;

	if (rec != NULL)
		rec += gs_idx_row_len(rec, sm->b->keybytes);
	if (unlikely(rec == NULL || rec >= in->end))
	{
		size_t		len;

		/* the block is done with: the stream takes it back */
		rec = gs_stream_next_block(sm->st[i], &len);
		in->end = rec + len;
	}
	in->rec = rec;
	in->k0 = rec ? gs_rec_key(rec)[0] : PG_UINT64_MAX;

	/* the block was written on another core: fetch ahead */
	if (rec != NULL)
		__builtin_prefetch(rec + GS_STREAM_PREFETCH);
}

/*
 * Does input a's record come before input bb's, their first key words
 * being equal?  (Keys are exact and complete, the heap TID last.)
 */
static pg_noinline bool
gs_stream_before_tie(GsStreamMerge *sm, int a, int bb)
{
	const uint64 *k1;
	const uint64 *k2;
	int			i;

	if (sm->in[a].rec == NULL)
		return false;
	if (sm->in[bb].rec == NULL)
		return true;
	k1 = gs_rec_key(sm->in[a].rec);
	k2 = gs_rec_key(sm->in[bb].rec);
	for (i = 1; i <= sm->b->colwords; i++)
		if (k1[i] != k2[i])
			return k1[i] < k2[i];
	return false;
}

static inline bool
gs_stream_before(GsStreamMerge *sm, int a, int bb)
{
	if (likely(sm->in[a].k0 != sm->in[bb].k0))
		return sm->in[a].k0 < sm->in[bb].k0;
	return gs_stream_before_tie(sm, a, bb);
}

static bool
gs_stream_before_cb(void *arg, int a, int bb)
{
	return gs_stream_before((GsStreamMerge *) arg, a, bb);
}

/*
 * The streams a final merge of n runs takes: groups of at least
 * GS_STREAM_MIN_RUNS runs where there are enough, else a run each, as long
 * as there are two.  A stream of one run still takes the reading of the
 * file and the parsing of its records off the backend.
 */
static int
gs_merge_nstreams(int n)
{
	int			ns = n / GS_STREAM_MIN_RUNS;

	if (ns < 2)
		ns = n;
	ns = Min(ns, gpusort_cpu_threads);
	return Min(ns, 16);
}

static bool
gs_merge_final_streams(GsIdxBuild *b, const GsIdxRun *runs, int n, Size mem)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	GsStreamMerge sm;
	GsFinal		f;
	size_t		rows = 0;
	Size		read_size;
	size_t		block_size;
	int		   *tree;
	int			ns;
	bool		cascade;
	int			i;

	/* the rows of every run known exact */
	if (!b->exact || b->runs_lossy || b->anylossy)
		return false;
	for (i = 0; i < n; i++)
		rows += runs[i].nrows;
	ns = gs_merge_nstreams(n);
	if (ns < 2)
		return false;

	/*
	 * From three threads on, one of them merges the streams and the
	 * backend reads its one stream: the merge is then off the backend
	 * entirely, which is left with the pages, the final phase's
	 * bottleneck.  A stream fewer is well worth that.
	 */
	cascade = gpusort_cpu_threads >= 3;
	if (cascade)
		ns = Min(ns, gpusort_cpu_threads - 1);

	read_size = Max(GS_RUN_BUFFER_MIN, mem / 2 / n);
	read_size = MAXALIGN_DOWN(Min(read_size, GS_RUN_BUFFER));
	block_size = gs_stream_block_size((int64) mem, ns + (cascade ? 1 : 0));

	/* the streams' threads stop when this goes, on error too */
	cxt = AllocSetContextCreate(CurrentMemoryContext,
								"gpusort index merge streams",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	sm.b = b;
	sm.st = (GsStream **) palloc0(ns * sizeof(GsStream *));
	sm.in = (GsStreamIn *) palloc0(ns * sizeof(GsStreamIn));
	for (i = 0; i < ns; i++)
	{
		/* groups of runs of nearly equal counts */
		int			from = (int) ((int64) n * i / ns);
		int			to = (int) ((int64) n * (i + 1) / ns);

		GsRun	   *group = (GsRun *) palloc(Max(to - from, 1) * sizeof(GsRun));
		int			r;

		for (r = from; r < to; r++)
		{
			group[r - from].offset = runs[r].offset;
			group[r - from].bytes = runs[r].bytes;
			group[r - from].nrows = runs[r].nrows;
		}
		sm.st[i] = gs_stream_start_rows(cxt, b->file, &gs_idx_row_format,
										b->keybytes, group, to - from,
										block_size, read_size);
		if (sm.st[i] == NULL)
		{
			/* no thread: the backend merges alone */
			MemoryContextSwitchTo(oldcxt);
			MemoryContextDelete(cxt);
			return false;
		}
	}
	b->nstreams = ns;
	if (cascade)
	{
		GsStream   *top = gs_stream_cascade(cxt, sm.st, ns, block_size);

		/* without its thread, the backend merges the streams itself */
		if (top != NULL)
		{
			sm.st[0] = top;
			ns = 1;
			b->nstreams++;
		}
	}
	gs_index_fault_point(GS_INDEX_FAULT_CANCEL_IN_MERGE);
	for (i = 0; i < ns; i++)
		gs_stream_in_next(&sm, i);
	tree = (int *) palloc0(2 * ns * sizeof(int));
	tree[0] = gs_loser_tree_build(tree, ns, gs_stream_before_cb, &sm);

	gs_final_begin(b, &f);
	for (;;)
	{
		int			w = tree[0];
		int			node;

		if (sm.in[w].rec == NULL)
			break;
		gs_final_put(&f, (char *) sm.in[w].rec);
		gs_stream_in_next(&sm, w);

		/*
		 * Replay the winner's path.  Which of two records comes first is
		 * as good as random: the winner is chosen without a branch.
		 */
		for (node = (ns + w) / 2; node >= 1; node /= 2)
		{
			int			l = tree[node];
			int			mask = -(int) gs_stream_before(&sm, l, w);
			int			loser = (w & mask) | (l & ~mask);

			w ^= l ^ loser;
			tree[node] = loser;
		}
		tree[0] = w;
	}
	gs_final_end(&f);
	if (f.count != rows)
		elog(ERROR, "gpusort: the index merge lost rows");
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);
	return true;
}

/* one merge pass: groups of at most fanin runs, each into one run */
static void
gs_merge_pass(GsIdxBuild *b, int fanin, Size bufsize)
{
	int			ngroups = (b->nruns + fanin - 1) / fanin;
	GsIdxRun   *out = (GsIdxRun *) palloc(ngroups * sizeof(GsIdxRun));
	int			g;
	int			start = 0;

	for (g = 0; g < ngroups; g++)
	{
		/* groups of nearly equal sizes */
		int			end = (int) (((int64) b->nruns * (g + 1)) / ngroups);

		out[g] = gs_merge_pass_group(b, b->runs + start, end - start,
									 bufsize);
		start = end;
	}
	pfree(b->runs);
	b->runs = out;
	b->nruns = ngroups;
	b->maxruns = ngroups;
	b->npasses++;
}

void
gs_idx_spill_reduce(GsIdxBuild *b)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(b->cxt);
	instr_time	t0;

	INSTR_TIME_SET_CURRENT(t0);
	while (b->nruns > 1)
	{
		Size		bufsize;
		int			fanin;

		/* as many runs at once as buffers of 32 kB or more allow */
		bufsize = b->mem_limit / (b->nruns + 1);
		bufsize = MAXALIGN_DOWN(Min(Max(bufsize, GS_RUN_BUFFER_MIN),
									GS_RUN_BUFFER));
		fanin = (int) Min(b->mem_limit / bufsize, (Size) GS_MERGE_MAX_FANIN) - 1;
		fanin = Max(fanin, GS_MERGE_MIN_FANIN);
		gs_merge_pass(b, fanin, bufsize);
		CHECK_FOR_INTERRUPTS();
	}
	b->passes_ms += gs_idx_ms_since(t0);
	MemoryContextSwitchTo(oldcxt);
}

void
gs_idx_spill_build(GsIdxBuild *b)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(b->cxt);
	Size		mem = b->mem_limit;
	int			fanin;
	Size		bufsize;
	instr_time	t0;

	/* the rows still in memory are the last run; free what they took */
	if (b->n > 0)
		gs_idx_spill_run(b);
	if (b->overlap)
		gs_idx_overlap_end(b);
	b->nruns_merged = b->nruns;
	if (b->file == NULL)
		b->file = gs_temp_create(b->cxt);
	gs_idx_arena_free(b);
	gs_keybuf_free(b->eng, b->keys);
	b->keys = NULL;
	pfree(b->tuples);
	b->tuples = NULL;
	pfree(b->flags);
	b->flags = NULL;

	/* fan-in from memory: a read buffer per run, one for the output */
	fanin = (int) Min(mem / GS_RUN_BUFFER, (Size) GS_MERGE_MAX_FANIN) - 1;
	fanin = Max(fanin, GS_MERGE_MIN_FANIN);
	bufsize = Max(GS_RUN_BUFFER_MIN, mem / (fanin + 1));
	bufsize = Min(bufsize, GS_RUN_BUFFER);
	bufsize = MAXALIGN_DOWN(bufsize);

	if (b->sink == NULL)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE,
									 PROGRESS_BTREE_PHASE_PERFORMSORT_1);

	/* merge passes: groups of runs into longer runs, until few are left */
	b->npasses = 0;
	INSTR_TIME_SET_CURRENT(t0);
	while (b->nruns > fanin)
		gs_merge_pass(b, fanin, bufsize);
	b->passes_ms += gs_idx_ms_since(t0);
	if (!gs_merge_final_streams(b, b->runs, b->nruns, mem))
		gs_merge_final(b, b->runs, b->nruns, bufsize);
	gs_temp_close(b->file);
	MemoryContextSwitchTo(oldcxt);
}
