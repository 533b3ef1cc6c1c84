/*-------------------------------------------------------------------------
 *
 * spill.c
 *	  Temporary files for sorted runs, work spread over threads, and the
 *	  threads that merge runs into streams of rows.
 *
 * A sort that outgrows work_mem writes its runs to one temporary file of
 * its own, at offsets the sort assigns, with pwrite and pread.  Unlike
 * PostgreSQL's BufFile (one 8 kB block per call, one caller), such a file
 * can be written and read by several threads at once, which is what lets
 * the spill and the final merge use more than the backend's one core:
 *
 *	 - A run is written by gpusort.cpu_threads threads, each formatting a
 *	   slice of the rows in sorted order into a buffer of its own and
 *	   writing it at the slice's place in the file (see sort_runs.c).
 *	 - The final merge of exactly encoded keys is split into streams: each
 *	   stream's thread merges a group of runs into blocks of ready-made
 *	   MinimalTuples, and the backend only merges the few streams.
 *
 * The file lives where PostgreSQL puts its own temporary files (the
 * temp_tablespaces, else the database's tablespace, under pgsql_tmp) and is
 * named like them, so a crash leaves nothing that the postmaster's restart
 * does not remove and pg_ls_tmpdir() shows it.  Its bytes are counted
 * against temp_file_limit, reported to log_temp_files and the statistics
 * like PostgreSQL's, and it is closed and removed when the memory context
 * that owns it goes away (end of the sort, error, cancel) or at backend
 * exit.  Space a merge has read is given back as it goes (hole punching
 * where the file system can), so merge passes need little more disk than
 * the data.
 *
 * Threads never call PostgreSQL: they block every signal, touch only
 * memory allocated for them beforehand, and report failures as errno
 * values that the backend turns into errors.  The backend stops and joins
 * them before any of that memory is freed.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "catalog/pg_tablespace_d.h"
#include "commands/tablespace.h"
#include "common/file_perm.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "gpusort_int.h"
#include "gpusort_spill.h"

/* space is given back in steps of at least this many bytes */
#define DISCARD_STEP		(1024 * 1024)
#define DISCARD_ALIGN		4096

/* how often a waiting backend looks for interrupts */
#define WAIT_POLL_MS		10

/* the most parts gs_parallel runs at once */
#define MAX_PARTS			GS_CPU_THREADS_MAX

/*
 * Blocks of a stream: four let the merging thread stay a block or two
 * ahead of the backend.  Their size comes from work_mem, between these:
 * with 256 kB blocks (work_mem 64MB, 50M rows, 4 streams on the H100) the
 * backend waited 0.15-0.25 s of a 3.1-3.6 s final merge for them.
 */
#define STREAM_BLOCKS		4
#define STREAM_BLOCK_MIN	(8 * 1024)
#define STREAM_BLOCK_MAX	(256 * 1024)

/* how far ahead of the record being taken a stream's reader prefetches */
#define STREAM_PREFETCH		512

struct GsTempFile
{
	int			fd;				/* -1 once closed */
	char		path[MAXPGPATH];
	int64		end;			/* bytes assigned: the file's length */
	int64		held;			/* bytes on disk (updated atomically) */
	int64		peak;			/* most bytes held at once, as last seen */
	GsTempShared *shared;		/* while shared with parallel workers: where
								 * end and held are counted instead */
	bool		attached;		/* a worker's handle on the leader's file */
	dlist_node	node;			/* in open_files */
	MemoryContextCallback cb;
};

static dlist_head open_files = DLIST_STATIC_INIT(open_files);
static dlist_head live_streams = DLIST_STATIC_INIT(live_streams);
static bool exit_callback_set = false;
static uint32 temp_file_counter = 0;

static void gs_spill_at_exit(int code, Datum arg);

/* ---------------------------------------------------------------------
 * The temporary file
 * ---------------------------------------------------------------------
 */

static void
gs_temp_callback(void *arg)
{
	gs_temp_close((GsTempFile *) arg);
}

/*
 * Create the sort's temporary file; it is closed and removed when cxt is
 * reset or deleted, or by gs_temp_close.
 */
GsTempFile *
gs_temp_create(MemoryContext cxt)
{
	GsTempFile *f;
	char		dir[MAXPGPATH];
	Oid			spc;

	if (!exit_callback_set)
	{
		before_shmem_exit(gs_spill_at_exit, (Datum) 0);
		exit_callback_set = true;
	}

	/* where PostgreSQL's own temporary files for this query would go */
	PrepareTempTablespaces();
	spc = GetNextTempTableSpace();
	if (!OidIsValid(spc))
		spc = MyDatabaseTableSpace ? MyDatabaseTableSpace : DEFAULTTABLESPACE_OID;
	TempTablespacePath(dir, spc);

	f = MemoryContextAllocZero(cxt, sizeof(GsTempFile));
	snprintf(f->path, sizeof(f->path), "%s/%s%d.gpusort.%u", dir,
			 PG_TEMP_FILE_PREFIX, MyProcPid, temp_file_counter++);

	/* a descriptor fd.c does not manage, so tell it */
	ReserveExternalFD();
	f->fd = open(f->path, O_RDWR | O_CREAT | O_EXCL | PG_BINARY,
				 pg_file_create_mode);
	if (f->fd < 0 && errno == ENOENT)
	{
		/* the directory is made on first use, as PostgreSQL does */
		(void) MakePGDirectory(dir);
		f->fd = open(f->path, O_RDWR | O_CREAT | O_EXCL | PG_BINARY,
					 pg_file_create_mode);
	}
	if (f->fd < 0)
	{
		int			save_errno = errno;

		ReleaseExternalFD();
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create temporary file \"%s\": %m",
						f->path)));
	}
	dlist_push_head(&open_files, &f->node);
	f->cb.func = gs_temp_callback;
	f->cb.arg = f;
	MemoryContextRegisterResetCallback(cxt, &f->cb);
	return f;
}

/*
 * Count len more bytes on disk (backend only).  Like PostgreSQL's
 * temporary files, the bytes count against temp_file_limit, with the same
 * error when they would exceed it.  A shared file counts every process's
 * bytes together.
 */
void
gs_temp_charge(GsTempFile *f, int64 len)
{
	int64	   *held = f->shared ? &f->shared->held : &f->held;
	int64		now = __atomic_add_fetch(held, len, __ATOMIC_RELAXED);

	if (temp_file_limit >= 0 && now > (int64) temp_file_limit * 1024)
	{
		__atomic_sub_fetch(held, len, __ATOMIC_RELAXED);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg(GS_MSG_TEMP_FILE_LIMIT, temp_file_limit)));
	}
	if (f->shared == NULL)
		f->peak = Max(f->peak, now);
	else
	{
		int64		peak = __atomic_load_n(&f->shared->peak, __ATOMIC_RELAXED);

		while (now > peak &&
			   !__atomic_compare_exchange_n(&f->shared->peak, &peak, now, false,
											__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
}

/*
 * Place the next len bytes of the file, without counting them yet
 * (backend only): their offset.  Processes sharing the file place their
 * bytes at once.
 */
int64
gs_temp_place(GsTempFile *f, int64 len)
{
	int64		off;

	if (f->shared)
		return __atomic_fetch_add(&f->shared->end, len, __ATOMIC_RELAXED);
	off = f->end;
	f->end += len;
	return off;
}

/* do parallel workers place bytes in the file too (gs_temp_share)? */
bool
gs_temp_is_shared(GsTempFile *f)
{
	return f->shared != NULL;
}

/* place the next len bytes of the file and count them (backend only) */
int64
gs_temp_extend(GsTempFile *f, int64 len)
{
	gs_temp_charge(f, len);
	return gs_temp_place(f, len);
}

/* write all of buf at off: 0, or an errno value (any thread) */
int
gs_temp_pwrite(GsTempFile *f, const void *buf, size_t len, int64 off)
{
	const char *p = buf;

	while (len > 0)
	{
		ssize_t		n = pwrite(f->fd, p, len, (off_t) off);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (n == 0)
			return ENOSPC;		/* as fd.c assumes of a short write */
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

/* read len bytes at off: 0, an errno value, or -1 at an early end of file */
int
gs_temp_pread(GsTempFile *f, void *buf, size_t len, int64 off)
{
	char	   *p = buf;

	while (len > 0)
	{
		ssize_t		n = pread(f->fd, p, len, (off_t) off);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (n == 0)
			return -1;
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

/*
 * The bytes [from, to) were read for the last time: give back the whole
 * pages among them (best effort, any thread), in steps of DISCARD_STEP
 * unless all (the run is finished).  Returns how far space was given
 * back, for the next call's from.
 */
int64
gs_temp_discard(GsTempFile *f, int64 from, int64 to, bool all)
{
	int64		a = TYPEALIGN(DISCARD_ALIGN, from);
	int64		b = TYPEALIGN_DOWN(DISCARD_ALIGN, to);

	if (b <= a || (!all && b - a < DISCARD_STEP))
		return from;
#ifdef FALLOC_FL_PUNCH_HOLE
	if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  (off_t) a, (off_t) (b - a)) == 0)
		__atomic_sub_fetch(f->shared ? &f->shared->held : &f->held, b - a,
						   __ATOMIC_RELAXED);
#endif
	return b;
}

/* report a failed gs_temp_pwrite or gs_temp_pread (backend only) */
void
gs_temp_error(GsTempFile *f, int err, bool writing)
{
	if (err < 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("could not read from temporary file \"%s\": unexpected end of file",
						f->path)));
	errno = err;
	if (writing)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write to temporary file \"%s\": %m",
						f->path)));
	ereport(ERROR,
			(errcode_for_file_access(),
			 errmsg("could not read from temporary file \"%s\": %m",
					f->path)));
}

/* the most disk space the file held at once, in bytes */
int64
gs_temp_peak(GsTempFile *f)
{
	return f->peak;
}

/*
 * Share the file with parallel workers (gs_temp_attach): until
 * gs_temp_unshare, its bytes are placed and counted in sh, which every
 * process extends at once.
 */
void
gs_temp_share(GsTempFile *f, GsTempShared *sh)
{
	Assert(!f->attached && f->shared == NULL);
	strlcpy(sh->path, f->path, sizeof(sh->path));
	sh->end = f->end;
	sh->held = __atomic_load_n(&f->held, __ATOMIC_RELAXED);
	sh->peak = Max(f->peak, sh->held);
	f->shared = sh;
}

/* the workers are done: take the counts back (the leader) */
void
gs_temp_unshare(GsTempFile *f)
{
	GsTempShared *sh = f->shared;

	if (sh == NULL)
		return;
	f->end = __atomic_load_n(&sh->end, __ATOMIC_RELAXED);
	__atomic_store_n(&f->held, __atomic_load_n(&sh->held, __ATOMIC_RELAXED),
					 __ATOMIC_RELAXED);
	f->peak = Max(f->peak, __atomic_load_n(&sh->peak, __ATOMIC_RELAXED));
	f->shared = NULL;
}

/*
 * A parallel worker's handle on the leader's shared file: it writes runs
 * at offsets placed through sh.  Closing it (with cxt, or at exit) closes
 * the descriptor only: the leader removes the file and reports it.
 */
GsTempFile *
gs_temp_attach(MemoryContext cxt, GsTempShared *sh)
{
	GsTempFile *f;

	if (!exit_callback_set)
	{
		before_shmem_exit(gs_spill_at_exit, (Datum) 0);
		exit_callback_set = true;
	}
	f = MemoryContextAllocZero(cxt, sizeof(GsTempFile));
	strlcpy(f->path, sh->path, sizeof(f->path));
	ReserveExternalFD();
	f->fd = open(f->path, O_RDWR | PG_BINARY);
	if (f->fd < 0)
	{
		int			save_errno = errno;

		ReleaseExternalFD();
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open temporary file \"%s\": %m",
						f->path)));
	}
	f->attached = true;
	f->shared = sh;
	dlist_push_head(&open_files, &f->node);
	f->cb.func = gs_temp_callback;
	f->cb.arg = f;
	MemoryContextRegisterResetCallback(cxt, &f->cb);
	return f;
}

/* close and remove the file (idempotent) */
void
gs_temp_close(GsTempFile *f)
{
	if (f->fd < 0)
		return;
	if (f->attached)
	{
		close(f->fd);
		f->fd = -1;
		ReleaseExternalFD();
		dlist_delete(&f->node);
		return;
	}
	/* shared counters may be gone with their segment (an error) */
	f->shared = NULL;
	/* what PostgreSQL reports when it deletes a temporary file */
	pgstat_report_tempfile((size_t) f->end);
	if (log_temp_files >= 0 && f->end / 1024 >= log_temp_files)
		ereport(LOG,
				(errmsg("temporary file: path \"%s\", size %lu",
						f->path, (unsigned long) f->end)));
	close(f->fd);
	f->fd = -1;
	ReleaseExternalFD();
	if (unlink(f->path) < 0 && errno != ENOENT)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not remove temporary file \"%s\": %m",
						f->path)));
	dlist_delete(&f->node);
}

/* ---------------------------------------------------------------------
 * Work spread over threads
 * ---------------------------------------------------------------------
 */

/*
 * A task: fn(arg, part, nparts, stop) for every part, each on a thread of
 * its own.  It lives in a memory context of its own, a child of the one
 * given, whose deletion (by gs_task_wait, or with its parent when an error
 * unwinds) stops and joins the threads.  Being the parent's newest child,
 * it goes before any older sibling whose memory the threads may read.
 */
struct GsTask
{
	MemoryContext cxt;
	GsPartFn	fn;
	void	   *arg;
	int			nparts;
	volatile bool stop;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int			left;			/* parts not finished */
	bool		joined;
	MemoryContextCallback cb;
	struct GsTaskPart
	{
		struct GsTask *task;
		int			part;
		pthread_t	thread;
		bool		started;
	}			parts[FLEXIBLE_ARRAY_MEMBER];
};

static void
gs_part_run(struct GsTaskPart *pt)
{
	GsTask	   *t = pt->task;

	t->fn(t->arg, pt->part, t->nparts, &t->stop);
	pthread_mutex_lock(&t->lock);
	t->left--;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->lock);
}

static void *
gs_part_thread(void *arg)
{
	gs_part_run((struct GsTaskPart *) arg);
	return NULL;
}

/* an absolute time ms milliseconds from now, for pthread_cond_timedwait */
static void
gs_deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_nsec += (long) ms * 1000000L;
	if (ts->tv_nsec >= 1000000000L)
	{
		ts->tv_sec += ts->tv_nsec / 1000000000L;
		ts->tv_nsec %= 1000000000L;
	}
}

/* ask the parts to stop and wait for every thread (idempotent) */
static void
gs_task_join(GsTask *t)
{
	int			i;

	if (t->joined)
		return;
	t->stop = true;
	for (i = 0; i < t->nparts; i++)
	{
		if (t->parts[i].started)
			pthread_join(t->parts[i].thread, NULL);
	}
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->lock);
	t->joined = true;
}

static void
gs_task_callback(void *arg)
{
	gs_task_join((GsTask *) arg);
}

/*
 * Start fn on nparts threads, in the background.  A part whose thread
 * can't be started runs here, before this returns.
 */
GsTask *
gs_task_start(MemoryContext parent, GsPartFn fn, void *arg, int nparts)
{
	MemoryContext cxt;
	GsTask	   *t;
	sigset_t	all;
	sigset_t	old;
	int			i;

	Assert(nparts >= 1 && nparts <= MAX_PARTS);
	cxt = AllocSetContextCreate(parent, "GpuSort task",
								ALLOCSET_SMALL_SIZES);
	t = MemoryContextAllocZero(cxt, offsetof(GsTask, parts) +
							   nparts * sizeof(struct GsTaskPart));
	t->cxt = cxt;
	t->fn = fn;
	t->arg = arg;
	t->nparts = nparts;
	t->left = nparts;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cv, NULL);
	t->cb.func = gs_task_callback;
	t->cb.arg = t;
	MemoryContextRegisterResetCallback(cxt, &t->cb);

	/* the threads take no signal: the backend's handlers stay its own */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < nparts; i++)
	{
		t->parts[i].task = t;
		t->parts[i].part = i;
		t->parts[i].started = pthread_create(&t->parts[i].thread, NULL,
											 gs_part_thread,
											 &t->parts[i]) == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (i = 0; i < nparts; i++)
	{
		if (!t->parts[i].started)
			gs_part_run(&t->parts[i]);
	}
	return t;
}

/*
 * Wait for a task to finish and free it.  The backend keeps watching for
 * interrupts: on one, it asks the parts to stop, waits for them, and
 * serves the interrupt -- which normally throws.  If it does not, false is
 * returned and the caller must do the whole task again (the parts may have
 * stopped half-way).
 */
bool
gs_task_wait(GsTask *t)
{
	bool		stopped;

	pthread_mutex_lock(&t->lock);
	while (t->left > 0)
	{
		struct timespec ts;

		gs_deadline(&ts, WAIT_POLL_MS);
		(void) pthread_cond_timedwait(&t->cv, &t->lock, &ts);
		if (!t->stop && INTERRUPTS_PENDING_CONDITION() &&
			INTERRUPTS_CAN_BE_PROCESSED())
			t->stop = true;
	}
	pthread_mutex_unlock(&t->lock);
	stopped = t->stop;
	MemoryContextDelete(t->cxt);	/* joins the threads */
	if (stopped)
	{
		CHECK_FOR_INTERRUPTS();
		return false;
	}
	return true;
}

/* stop a task's parts where they are, join them and free the task */
void
gs_task_cancel(GsTask *t)
{
	MemoryContextDelete(t->cxt);	/* stops and joins the threads */
}

/* run a task and wait for it (see gs_task_wait for the result) */
bool
gs_parallel(GsPartFn fn, void *arg, int nparts)
{
	if (nparts == 1)
	{
		bool		stop = false;

		fn(arg, 0, 1, &stop);
		return true;
	}
	return gs_task_wait(gs_task_start(CurrentMemoryContext, fn, arg, nparts));
}

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
	uint64	   *tree_k0;		/* each loser's first key word */
	GsStream   *owner;			/* the cascade this stream is an input of */
	size_t		keyoff;			/* a cascade: where a record's key starts */
	size_t		block_size;
	char	   *blocks[STREAM_BLOCKS];

	/* shared with the thread, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	size_t		used[STREAM_BLOCKS];	/* bytes of each full block */
	int			nfull;			/* blocks filled and not yet given back */
	bool		done;			/* the thread is finished */
	int			err;			/* its failure: errno, -1 for a short read */
	bool		stop;

	pthread_t	thread;
	bool		started;
	bool		joined;
	dlist_node	node;			/* in live_streams */
	MemoryContextCallback cb;

	/* the backend's side */
	double		wait_ms;		/* time it waited for blocks */
	int			cblk;			/* block being read */
	bool		holding;		/* cblk is full and being read */
	size_t		cpos;
};

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
		r->eof = true;
		r->k0 = PG_UINT64_MAX;
		r->given_back = gs_temp_discard(st->file, r->given_back, r->end, true);
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

			if (have + want < need)
				return -1;
			memmove(r->buf, r->buf + r->rpos, have);
			err = gs_temp_pread(st->file, r->buf + have, want, r->pos);
			if (err)
				return err;
			r->pos += want;
			r->rpos = 0;
			r->rlen = have + want;
			/* everything before the buffer's bytes has been read */
			r->given_back = gs_temp_discard(st->file, r->given_back,
											r->pos - r->rlen, false);
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
	return 0;
}

/* does reader a's row come before reader b's? (exact keys: keys decide) */
static inline bool
gs_reader_before(GsStream *st, int a, int b)
{
	GsReader   *ra = &st->readers[a];
	GsReader   *rb = &st->readers[b];
	int			w;

	if (ra->k0 != rb->k0)
		return ra->k0 < rb->k0;
	if (ra->eof || rb->eof)
		return rb->eof && !ra->eof;
	for (w = 8; w < st->key_bytes; w += 8)
	{
		uint64		x;
		uint64		y;

		memcpy(&x, ra->buf + ra->rpos + st->hdr + w, 8);
		memcpy(&y, rb->buf + rb->rpos + st->hdr + w, 8);
		if (x != y)
			return x < y;
	}
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
	while (st->nfull == STREAM_BLOCKS && !st->stop)
		pthread_cond_wait(&st->cv, &st->lock);
	stop = st->stop;
	pthread_mutex_unlock(&st->lock);
	return !stop;
}

/* ... and hands block *blk (used bytes) to the reader, end: the last */
static void
gs_stream_publish(GsStream *st, int *blk, size_t used, bool end)
{
	pthread_mutex_lock(&st->lock);
	if (used > 0)
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

static void *
gs_stream_thread(void *arg)
{
	GsStream   *st = (GsStream *) arg;
	int			n = st->nreaders;
	size_t		tupoff = gs_stream_tuple_offset(st->key_bytes);
	int			blk = 0;
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
	st->tree[0] = gs_loser_tree_build(st->tree, n, gs_reader_before_cb, st);

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
			GsReader   *r = &st->readers[w];
			size_t		rec;
			int			node;
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
			for (node = (w + n) / 2; node >= 1; node /= 2)
			{
				int			l = st->tree[node];

				if (gs_reader_before(st, l, w))
				{
					st->tree[node] = w;
					w = l;
				}
			}
			st->tree[0] = w;
		}

		gs_stream_publish(st, &blk, used, end);
		if (end)
			break;
	}
	return NULL;
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
			 * few records on early.  (Past the block's end this is
			 * harmless.)
			 */
			__builtin_prefetch(rec + STREAM_PREFETCH);
			if (st->fmt)
				reclen = st->fmt->row_len(rec, st->key_bytes);
			else
				memcpy(&reclen, rec, sizeof(uint32));
			st->cpos += reclen;
			return rec;
		}
		pthread_mutex_lock(&st->lock);
		st->nfull--;
		pthread_cond_broadcast(&st->cv);
		pthread_mutex_unlock(&st->lock);
		st->cblk = (st->cblk + 1) % STREAM_BLOCKS;
		st->holding = false;
		st->cpos = 0;
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
 * A cascade's thread takes an input's next record: NULL at its end, or,
 * with *err set, on its failure or stop.
 */
static const char *
gs_cascade_input_next(GsStream *in, int *err)
{
	for (;;)
	{
		const char *rec = gs_stream_take(in);

		if (likely(rec != NULL))
			return rec;
		pthread_mutex_lock(&in->lock);
		while (in->nfull == 0 && !in->done && !in->stop)
			pthread_cond_wait(&in->cv, &in->lock);
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
	int			w;

	if (st->ink0[a] != st->ink0[b])
		return st->ink0[a] < st->ink0[b];
	if (ra == NULL || rb == NULL)
		return rb == NULL && ra != NULL;
	for (w = 8; w < st->key_bytes; w += 8)
	{
		uint64		x;
		uint64		y;

		memcpy(&x, ra + st->keyoff + w, 8);
		memcpy(&y, rb + st->keyoff + w, 8);
		if (x != y)
			return x < y;
	}
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
		rec = gs_cascade_input_next(st->inputs[i], &err);
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

/*
 * Input w moved on: replay its path to the root.  Random keys make each
 * match a coin toss, which a branch mispredicts half the time; so, as in
 * the backend's merges, the first key words are kept in the tree and the
 * winner chosen with masks, the full comparison only for equal words.
 */
static inline void
gs_cascade_replay(GsStream *st, int w)
{
	uint64		wk = st->ink0[w];
	int			node;

	for (node = (w + st->ninputs) / 2; node >= 1; node /= 2)
	{
		int			l = st->tree[node];
		uint64		lk = st->tree_k0[node];
		bool		swap = lk < wk;
		uint64		mask;
		int			imask;

		if (unlikely(lk == wk))
			swap = gs_cascade_before(st, l, w);
		mask = (uint64) 0 - (uint64) swap;
		imask = (int) (uint32) mask;
		st->tree[node] = l ^ ((l ^ w) & imask);
		st->tree_k0[node] = lk ^ ((lk ^ wk) & mask);
		w ^= (l ^ w) & imask;
		wk ^= (lk ^ wk) & mask;
	}
	st->tree[0] = w;
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

	st->block_size = block_size;
	for (i = 0; i < STREAM_BLOCKS; i++)
		st->blocks[i] = MemoryContextAllocHuge(cxt, block_size);
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
	GsStream   *st = MemoryContextAllocZero(cxt, sizeof(GsStream));
	int			i;

	st->file = f;
	st->fmt = fmt;
	st->hdr = fmt ? fmt->hdr : TAPE_ROW_HDR;
	st->key_bytes = key_bytes;
	st->nreaders = nruns;
	st->readers = MemoryContextAllocZero(cxt, nruns * sizeof(GsReader));
	st->tree = MemoryContextAllocZero(cxt, Max(nruns, 1) * sizeof(int));
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
 * records are the inputs' records, copied.  From then on the inputs belong
 * to it: only the cascade is read, and stopping any of them stops it.
 * NULL if no thread can be started (the caller reads the inputs itself).
 */
GsStream *
gs_stream_cascade(MemoryContext cxt, GsStream **inputs, int n,
				  size_t block_size)
{
	GsStream   *st = MemoryContextAllocZero(cxt, sizeof(GsStream));
	int			i;

	Assert(n >= 1);
	st->file = inputs[0]->file;
	st->fmt = inputs[0]->fmt;
	st->hdr = inputs[0]->hdr;
	st->keyoff = st->fmt ? st->fmt->hdr : STREAM_KEY_OFFSET;
	st->key_bytes = inputs[0]->key_bytes;
	st->ninputs = n;
	st->inputs = MemoryContextAlloc(cxt, n * sizeof(GsStream *));
	st->inrec = MemoryContextAllocZero(cxt, n * sizeof(char *));
	st->ink0 = MemoryContextAllocZero(cxt, n * sizeof(uint64));
	st->tree = MemoryContextAllocZero(cxt, n * sizeof(int));
	st->tree_k0 = MemoryContextAllocZero(cxt, n * sizeof(uint64));
	for (i = 0; i < n; i++)
	{
		Assert(inputs[i]->fmt == st->fmt && inputs[i]->owner == NULL);
		Assert(inputs[i]->block_size <= block_size);
		st->inputs[i] = inputs[i];
	}
	if (!gs_stream_launch(cxt, st, block_size, gs_cascade_thread))
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
		const char *rec = gs_stream_take(st);

		if (likely(rec != NULL))
			return rec;
		if (!gs_stream_await(st))
			return NULL;
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

/* backend exit: stop the threads, then close and remove the files */
static void
gs_spill_at_exit(int code, Datum arg)
{
	dlist_mutable_iter it;

	/* stopping an input stops its cascade too: not an iteration */
	while (!dlist_is_empty(&live_streams))
		gs_stream_stop(dlist_head_element(GsStream, node, &live_streams));
	dlist_foreach_modify(it, &open_files)
		gs_temp_close(dlist_container(GsTempFile, node, it.cur));
}

/* how long the backend waited for this stream's thread, in ms */
double
gs_stream_wait_ms(GsStream *st)
{
	return st->wait_ms;
}
