/*-------------------------------------------------------------------------
 *
 * index_spill.c
 *	  btree builds larger than maintenance_work_mem: the sorted runs, written
 *	  to a temporary file while the scan goes on.
 *
 * The build collects rows (index tuple, normalized key, flags) as long as
 * maintenance_work_mem holds them.  When it is full, the rows are sorted
 * by the engine (with the same tie-breaks and unique check as an
 * in-memory build) and written in order, as one run, to the build's
 * temporary file (spill.c's: named and placed like PostgreSQL's own,
 * counted against temp_file_limit, removed at the end of the build, on
 * error and on cancel); then the memory is reused for the next run.  A
 * serial build with exact keys splits the memory in halves and writes
 * (and, where it can, sorts) one half's run on threads while the scan
 * fills the other.  The record format is index_run.h's; the runs are
 * merged by index_merge.c.
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

#include "index_run.h"

/* ---- writing runs ---- */

/*
 * A writer of one run of total bytes.  In a file that parallel workers
 * share, the run's place is taken whole now, as other processes place
 * theirs meanwhile; in the backend's own file the run grows with each
 * buffer written (total may then be 0, unknown).
 */
void
gs_idx_rw_init(GsRunWriter *rw, GsIdxBuild *b, char *buf, Size size, int64 total)
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
void
gs_idx_rw_finish(GsRunWriter *rw)
{
	gs_rw_flush(rw);
	if (rw->reserved > 0 && rw->run.bytes != rw->reserved)
		elog(ERROR, "gpusort: a run of %lld bytes was placed for %lld",
			 (long long) rw->run.bytes, (long long) rw->reserved);
}

void
gs_idx_rw_put(GsIdxBuild *b, GsRunWriter *rw, const uint64 *key,
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
	/*
	 * Writing a slice again after an interrupt writes the same bytes.  The
	 * task is forgotten before each wait, which frees it and may throw.
	 */
	for (;;)
	{
		GsTask	   *task = bg->task;

		bg->task = NULL;
		if (gs_task_wait(task))
			break;
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
	gs_idx_rw_init(&rw, b, palloc(GS_RUN_BUFFER), GS_RUN_BUFFER, total);
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
		gs_idx_rw_put(b, &rw, (const uint64 *) (b->keys + i * b->keybytes),
				  b->tuples[r], b->flags[r]);
		if (i % GS_SPILL_CFI_EVERY == 0)
			CHECK_FOR_INTERRUPTS();
	}
	gs_idx_rw_finish(&rw);
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

/*
 * The scan is over: the rows still in memory become the last run, a run
 * written in the background is waited for, and the rows' memory goes.
 */
void
gs_idx_spill_finish(GsIdxBuild *b)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(b->cxt);

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
	MemoryContextSwitchTo(oldcxt);
}
