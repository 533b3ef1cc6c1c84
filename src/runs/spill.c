/*-------------------------------------------------------------------------
 *
 * spill.c
 *	  Temporary files for sorted runs, and work spread over threads.
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
 *	   MinimalTuples, and the backend only merges the few streams (see
 *	   spill_stream.c).
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
 * Work spread over threads (gs_task_*, gs_parallel) runs the parts of a
 * task, such as the slices of a run, each on a thread of its own.  Threads
 * never call PostgreSQL: they block every signal, touch only memory
 * allocated for them beforehand, and report failures as errno values that
 * the backend turns into errors.  The backend stops and joins them before
 * any of that memory is freed.  The streams of spill_stream.c follow the
 * same rules.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_tablespace_d.h"
#include "commands/tablespace.h"
#include "common/file_perm.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "gpusort_int.h"
#include "gpusort_spill.h"
#include "gpusort_stats.h"

/* space is given back in steps of at least this many bytes */
#define DISCARD_STEP		(1024 * 1024)
#define DISCARD_ALIGN		4096

/*
 * The file's bytes are striped over TEMP_STRIPES files of TEMP_STRIPE_BYTES
 * stretches: byte off lives in file (off / TEMP_STRIPE_BYTES) % TEMP_STRIPES.
 * File systems take a file's lock for the whole of a buffered write (ext4,
 * xfs and tmpfs all do), so the 9 participants of a parallel load writing
 * their runs into one file at once copied into the page cache one at a
 * time; writers at different offsets now mostly meet different files.
 */
#define TEMP_STRIPES		8
#define TEMP_STRIPE_BYTES	((int64) 1024 * 1024)

/* the most parts gs_parallel runs at once */
#define MAX_PARTS			GS_CPU_THREADS_MAX

struct GsTempFile
{
	int			fd;				/* the first stripe's; -1 once closed */
	int			fds[TEMP_STRIPES];	/* every stripe's, fds[0] == fd */
	char		path[MAXPGPATH];	/* the first stripe's; the others add
									 * ".1" .. ".7" */
	int64		end;			/* bytes assigned: the file's length */
	int64		held;			/* bytes on disk (updated atomically) */
	int64		peak;			/* most bytes held at once, as last seen */
	GsTempShared *shared;		/* while shared with parallel workers: where
								 * end and held are counted instead */
	bool		attached;		/* a worker's handle on the leader's file */
	/* the stripes mapped for reading (gs_temp_map), or NULL */
	char	   *maps[TEMP_STRIPES];
	size_t		maplens[TEMP_STRIPES];
	dlist_node	node;			/* in open_files */
	MemoryContextCallback cb;
};

static dlist_head open_files = DLIST_STATIC_INIT(open_files);
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

/* the path of stripe i of f */
static void
gs_temp_stripe_path(GsTempFile *f, int i, char *path)
{
	if (i == 0)
		strlcpy(path, f->path, MAXPGPATH);
	else
		snprintf(path, MAXPGPATH, "%s.%d", f->path, i);
}

/*
 * Close stripes [0, n) of f, removing them if remove.  Removed files are
 * unlinked first and closed on a thread (shm_reap.c): the last close frees
 * their page cache, GBs when a sort is canceled before its merge.
 */
static void
gs_temp_close_stripes(GsTempFile *f, int n, bool remove)
{
	int			i;

	for (i = 0; i < n && remove; i++)
	{
		char		path[MAXPGPATH];

		gs_temp_stripe_path(f, i, path);
		if (unlink(path) < 0 && errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not remove temporary file \"%s\": %m",
							path)));
	}
	if (remove)
		gs_reap_close(f->fds, n);
	for (i = 0; i < n; i++)
	{
		if (!remove)
		{
			close(f->fds[i]);
			ReleaseExternalFD();
		}
		f->fds[i] = -1;
	}
	f->fd = -1;
}

/*
 * Open every stripe of f (create: make them, as new files), or fail with
 * PostgreSQL's error, none left open.
 */
static void
gs_temp_open_stripes(GsTempFile *f, bool create)
{
	int			i;

	for (i = 0; i < TEMP_STRIPES; i++)
	{
		char		path[MAXPGPATH];

		gs_temp_stripe_path(f, i, path);
		/* descriptors fd.c does not manage, so tell it */
		ReserveExternalFD();
		f->fds[i] = open(path, create ? O_RDWR | O_CREAT | O_EXCL | PG_BINARY :
						 O_RDWR | PG_BINARY, pg_file_create_mode);
		if (f->fds[i] < 0)
		{
			int			save_errno = errno;

			ReleaseExternalFD();
			gs_temp_close_stripes(f, i, create);
			errno = save_errno;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg(create ? "could not create temporary file \"%s\": %m" :
							"could not open temporary file \"%s\": %m", path)));
		}
	}
	f->fd = f->fds[0];
}

/* where byte off of f is: its stripe's descriptor, and *local in it */
static inline int
gs_temp_locate(GsTempFile *f, int64 off, off_t *local, size_t *room)
{
	int64		stripe = off / TEMP_STRIPE_BYTES;
	int64		within = off % TEMP_STRIPE_BYTES;

	*local = (off_t) ((stripe / TEMP_STRIPES) * TEMP_STRIPE_BYTES + within);
	*room = (size_t) (TEMP_STRIPE_BYTES - within);
	return f->fds[stripe % TEMP_STRIPES];
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

	(void) MakePGDirectory(dir);	/* made on first use, as PostgreSQL does */
	gs_temp_open_stripes(f, true);
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
		off_t		local;
		size_t		room;
		int			fd = gs_temp_locate(f, off, &local, &room);
		ssize_t		n = pwrite(fd, p, Min(len, room), local);

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

/*
 * Read len bytes at off: 0, an errno value, or -1 at an early end of file.
 * From the mapping where the file is mapped (gs_temp_map), else pread.
 */
int
gs_temp_pread(GsTempFile *f, void *buf, size_t len, int64 off)
{
	char	   *p = buf;

	while (len > 0)
	{
		off_t		local;
		size_t		room;
		int			fd = gs_temp_locate(f, off, &local, &room);
		int			stripe = (int) ((off / TEMP_STRIPE_BYTES) % TEMP_STRIPES);
		ssize_t		n;

		if (f->maps[stripe] != NULL &&
			(size_t) local + Min(len, room) <= f->maplens[stripe])
		{
			n = Min(len, room);
			memcpy(p, f->maps[stripe] + local, n);
			p += n;
			len -= n;
			off += n;
			continue;
		}
		n = pread(fd, p, Min(len, room), local);

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
	{
		int64		given = 0;
		int			i;

		/*
		 * The bytes of [a, b) in one stripe file are one stretch of it:
		 * its consecutive stretches are consecutive there.
		 */
		for (i = 0; i < TEMP_STRIPES; i++)
		{
			int64		first = a / TEMP_STRIPE_BYTES;
			int64		last = (b - 1) / TEMP_STRIPE_BYTES;
			int64		s0;
			int64		s1;
			int64		from_g;
			int64		to_g;
			off_t		lo;
			off_t		hi;
			size_t		room;
			int			fd;

			/* this file's first and last stripes within [first, last] */
			s0 = first + ((i - first % TEMP_STRIPES) + TEMP_STRIPES) % TEMP_STRIPES;
			if (s0 > last)
				continue;
			s1 = last - ((last % TEMP_STRIPES - i) + TEMP_STRIPES) % TEMP_STRIPES;
			from_g = Max(a, s0 * TEMP_STRIPE_BYTES);
			to_g = Min(b, (s1 + 1) * TEMP_STRIPE_BYTES);
			fd = gs_temp_locate(f, from_g, &lo, &room);
			(void) gs_temp_locate(f, to_g - 1, &hi, &room);
			hi += 1;
			if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						  lo, hi - lo) == 0)
				given += hi - lo;
		}
		if (given > 0)
			__atomic_sub_fetch(f->shared ? &f->shared->held : &f->held, given,
							   __ATOMIC_RELAXED);
	}
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
	gs_temp_open_stripes(f, false);
	f->attached = true;
	f->shared = sh;
	dlist_push_head(&open_files, &f->node);
	f->cb.func = gs_temp_callback;
	f->cb.arg = f;
	MemoryContextRegisterResetCallback(cxt, &f->cb);
	return f;
}

/*
 * Map the file for reading (backend; once nothing more is written to it):
 * the final merge's reads then copy from the page cache without a system
 * call each, which lets a merge take thousands of runs through small read
 * buffers.  The pages are the page cache's, as a read's would be; space
 * given back (gs_temp_discard) leaves the mapping too.  False if a stripe
 * could not be mapped (reads then go through pread, as before).
 */
bool
gs_temp_map(GsTempFile *f)
{
	bool		all = true;
	int			i;

	for (i = 0; i < TEMP_STRIPES && f->fd >= 0; i++)
	{
		struct stat st;
		void	   *m;

		if (f->maps[i] != NULL)
			munmap(f->maps[i], f->maplens[i]);
		f->maps[i] = NULL;
		f->maplens[i] = 0;
		if (fstat(f->fds[i], &st) != 0)
		{
			all = false;
			continue;
		}
		if (st.st_size == 0)
			continue;
		m = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_SHARED,
				 f->fds[i], 0);
		if (m == MAP_FAILED)
		{
			all = false;
			continue;
		}
		f->maps[i] = m;
		f->maplens[i] = (size_t) st.st_size;
	}
	return all && f->fd >= 0;
}

/* the mappings go (no thread reads the file any more) */
static void
gs_temp_unmap(GsTempFile *f)
{
	int			i;

	for (i = 0; i < TEMP_STRIPES; i++)
	{
		if (f->maps[i] != NULL)
			munmap(f->maps[i], f->maplens[i]);
		f->maps[i] = NULL;
		f->maplens[i] = 0;
	}
}

/* close and remove the file (idempotent) */
void
gs_temp_close(GsTempFile *f)
{
	if (f->fd < 0)
		return;
	gs_temp_unmap(f);
	if (f->attached)
	{
		gs_temp_close_stripes(f, TEMP_STRIPES, false);
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
	gs_temp_close_stripes(f, TEMP_STRIPES, true);
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
 *
 * That deletion comes late when an error unwinds: after the abort has
 * detached the transaction's shared memory, and, in a parallel worker,
 * after the exit callbacks have closed the files.  So every live task is
 * also on a list, with the (sub)transaction level that started it, and
 * the abort of that level stops and joins it first (gs_task_xact_callback):
 * no thread of a task runs once its transaction's abort has begun.  A task
 * stopped so, and waited for later by a sort that goes on (a cursor fetched
 * in a subtransaction that failed), reports "stopped": its caller does it
 * again.
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
	int			level;			/* transaction nesting level that owns it */
	dlist_node	node;			/* in live_tasks until freed */
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

/*
 * An absolute time ms milliseconds from now, for pthread_cond_timedwait
 * (the waits of tasks and of streams).
 */
void
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

/* tasks whose threads may be running, oldest first */
static dlist_head live_tasks = DLIST_STATIC_INIT(live_tasks);
static bool task_callbacks_registered = false;

/*
 * Ask the parts to stop and wait for every thread (idempotent).  The lock
 * and condition variable stay: a later gs_task_wait still takes them.
 */
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
	t->joined = true;
}

/* the task's memory goes: its threads first */
static void
gs_task_callback(void *arg)
{
	GsTask	   *t = (GsTask *) arg;

	gs_task_join(t);
	dlist_delete(&t->node);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->lock);
}

/*
 * Stop and join the threads of every task started at transaction nesting
 * level "level" or deeper (0: every task).  Their memory stays, for the
 * context deletion that follows.  It must not fail: it runs in abort and
 * exit callbacks.
 */
void
gs_tasks_stop(int level)
{
	dlist_iter	it;

	dlist_foreach(it, &live_tasks)
	{
		GsTask	   *t = dlist_container(GsTask, node, it.cur);

		if (t->level >= level)
			gs_task_join(t);
	}
}

static void
gs_task_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		gs_tasks_stop(0);
}

/*
 * A subtransaction's abort stops what it started; its commit hands what it
 * started to its parent, whose abort stops it then.
 */
static void
gs_task_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	dlist_iter	it;

	if (event == SUBXACT_EVENT_ABORT_SUB)
		gs_tasks_stop(level);
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		dlist_foreach(it, &live_tasks)
		{
			GsTask	   *t = dlist_container(GsTask, node, it.cur);

			if (t->level >= level)
				t->level = level - 1;
		}
	}
}

/*
 * Process exit, an error's included: a parallel worker's error ends the
 * process without a transaction abort before the exit callbacks, and
 * those close files and detach segments that the threads use.  Registered
 * with the first task; gs_spill_at_exit, registered earlier or later, calls
 * it as well.
 */
static void
gs_task_at_exit(int code, Datum arg)
{
	gs_tasks_stop(0);
}

/*
 * Start fn on nparts threads, in the background; with argsize > 0, on a
 * copy of arg in the task's memory.  A part whose thread can't be started
 * runs here, before this returns.
 */
static GsTask *
gs_task_launch(MemoryContext parent, GsPartFn fn, const void *arg,
			   Size argsize, int nparts)
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
	if (argsize > 0)
	{
		t->arg = MemoryContextAlloc(cxt, argsize);
		memcpy(t->arg, arg, argsize);
	}
	else
		t->arg = unconstify(void *, arg);
	t->nparts = nparts;
	t->left = nparts;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cv, NULL);
	if (!task_callbacks_registered)
	{
		RegisterXactCallback(gs_task_xact_callback, NULL);
		RegisterSubXactCallback(gs_task_subxact_callback, NULL);
		before_shmem_exit(gs_task_at_exit, (Datum) 0);
		task_callbacks_registered = true;
	}
	t->level = GetCurrentTransactionNestLevel();
	dlist_push_tail(&live_tasks, &t->node);
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

/* Start fn(arg) on nparts threads, in the background. */
GsTask *
gs_task_start(MemoryContext parent, GsPartFn fn, void *arg, int nparts)
{
	return gs_task_launch(parent, fn, arg, 0, nparts);
}

/*
 * gs_task_start with an argument of argsize bytes copied into the task's
 * own memory: the threads never read the caller's copy, which may be on a
 * stack that an error unwinds before the abort stops them.
 */
GsTask *
gs_task_start_copy(MemoryContext parent, GsPartFn fn, const void *arg,
				   Size argsize, int nparts)
{
	return gs_task_launch(parent, fn, arg, argsize, nparts);
}

/*
 * Wait for a task to finish and free it.  The backend keeps watching for
 * interrupts: on one, it asks the parts to stop, waits for them, and
 * serves the interrupt -- which normally throws.  If it does not, false is
 * returned and the caller must do the whole task again (the parts may have
 * stopped half-way).  Either way the task is gone: a caller that keeps the
 * pointer somewhere (for an abort to stop it) clears it before calling.
 */
bool
gs_task_wait(GsTask *t)
{
	bool		stopped;

	pgstat_report_wait_start(gs_wait_event(GS_WAIT_THREADS));
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
	pgstat_report_wait_end();
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

/*
 * Backend exit: close and remove the files.  The threads of streams that
 * read them were stopped before, by spill_stream.c's exit callback (see
 * gs_stream_at_exit); the tasks' threads never outlive gs_task_wait or
 * the memory contexts of their tasks.
 */
static void
gs_spill_at_exit(int code, Datum arg)
{
	dlist_mutable_iter it;

	/* no thread may write a file being closed */
	gs_tasks_stop(0);
	dlist_foreach_modify(it, &open_files)
		gs_temp_close(dlist_container(GsTempFile, node, it.cur));
}
