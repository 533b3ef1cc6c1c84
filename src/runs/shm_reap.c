/*-------------------------------------------------------------------------
 *
 * shm_reap.c
 *	  Giving large dynamic shared memory segments' pages back to the kernel
 *	  on a thread, after the backend has detached from them.
 *
 * A parallel load leaves the sort's rows in DSA areas of several GB.
 * When the last process detaches from such a segment, PostgreSQL unmaps
 * and unlinks it, and the kernel then frees its pages in that process:
 * on the H200 some 0.3-0.4 s for 3.5 GB of 4 kB pages, spent by the
 * leader after a cancel (past the 100 ms that a cancel may take) or at the
 * end of the sort.  The pages of a file are freed only when its last
 * reference goes, and an open descriptor is one: so before the detach the
 * backend opens the large segments it maps (gs_reap_begin), and after it
 * a thread closes them (gs_reap_end), the freeing happening there.
 *
 * The same thread closes a canceled external sort's temporary files,
 * unlinked first (gs_reap_close).
 *
 * Only segments of dynamic_shared_memory_type posix are found this way
 * (by their names in /proc/self/maps); any failure leaves the freeing
 * where it was, in the detach.  A descriptor opened for a segment that
 * stays mapped is harmless: its close frees nothing.  Backend exit closes
 * whatever a thread has not yet closed.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port/atomics.h"
#include "storage/fd.h"

#include "gpusort_int.h"

/* segments smaller than this are freed where they are */
#define REAP_MIN_BYTES		((size_t) 1024 * 1024)
#define REAP_MAX_FDS		256

/* where PostgreSQL's posix segments are, as the kernel names them */
#define REAP_SHM_PREFIX		"/dev/shm/PostgreSQL."

/* threads (the backend among them) that drop page table entries, and how
 * much each takes at a time */
#define ZAP_THREADS			4
#define ZAP_CHUNK			((size_t) 16 * 1024 * 1024)

struct GsReap
{
	int			nfds;
	int			fds[REAP_MAX_FDS];
	int			nranges;		/* the large mappings, for gs_reap_zap */
	char	   *lo[REAP_MAX_FDS];
	size_t		len[REAP_MAX_FDS];
	pg_atomic_uint64 next_chunk;
};

/*
 * Open the large dynamic shared memory segments this process maps, before
 * it detaches from them: NULL if there are none (or on any failure).
 * Allocates with malloc: it may run in an abort callback, and the thread
 * frees it.
 */
GsReap *
gs_reap_begin(void)
{
	FILE	   *maps;
	char		line[MAXPGPATH + 128];
	GsReap	   *r;
	dev_t		seen_dev[REAP_MAX_FDS];
	ino_t		seen_ino[REAP_MAX_FDS];

	r = malloc(sizeof(GsReap));
	if (r == NULL)
		return NULL;
	r->nfds = 0;
	r->nranges = 0;
	maps = fopen("/proc/self/maps", "r");
	if (maps == NULL)
	{
		free(r);
		return NULL;
	}
	while (r->nfds < REAP_MAX_FDS && r->nranges < REAP_MAX_FDS &&
		   fgets(line, sizeof(line), maps) != NULL)
	{
		unsigned long lo;
		unsigned long hi;
		char	   *path = strchr(line, '/');
		char	   *nl;
		struct stat st;
		int			fd;
		int			i;

		if (path == NULL || strncmp(path, REAP_SHM_PREFIX,
									strlen(REAP_SHM_PREFIX)) != 0)
			continue;
		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || hi - lo < REAP_MIN_BYTES)
			continue;
		nl = strchr(path, '\n');
		if (nl)
			*nl = '\0';
		/* a segment already unlinked is being freed by someone else */
		if (strstr(path, " (deleted)") != NULL)
			continue;
		r->lo[r->nranges] = (char *) lo;
		r->len[r->nranges++] = hi - lo;
		if (!AcquireExternalFD())
			break;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) != 0)
		{
			if (fd >= 0)
				close(fd);
			ReleaseExternalFD();
			continue;
		}
		/* a segment mapped twice is kept once */
		for (i = 0; i < r->nfds; i++)
		{
			if (seen_dev[i] == st.st_dev && seen_ino[i] == st.st_ino)
				break;
		}
		if (i < r->nfds)
		{
			close(fd);
			ReleaseExternalFD();
			continue;
		}
		seen_dev[r->nfds] = st.st_dev;
		seen_ino[r->nfds] = st.st_ino;
		r->fds[r->nfds++] = fd;
	}
	fclose(maps);
	if (r->nfds == 0 && r->nranges == 0)
	{
		free(r);
		return NULL;
	}
	return r;
}

/*
 * Unmapping a segment also costs removing the page table entries of every
 * page this process touched: for the 3.5 GB of rows of an 8-worker load,
 * some 100 ms of a canceled leader's exit, or of the end of its sort.
 * gs_reap_zap, called before the detach, removes them on ZAP_THREADS
 * threads at once (MADV_DONTNEED: on a shared mapping the pages and their
 * contents stay, and a later touch would map them again), so that the
 * detach finds little left to do.  It returns only when they are done:
 * the mappings must still be there while the threads work on them.
 */
static void *
gs_zap_work(void *arg)
{
	GsReap	   *r = (GsReap *) arg;

	for (;;)
	{
		uint64		c = pg_atomic_fetch_add_u64(&r->next_chunk, 1);
		int			i;

		for (i = 0; i < r->nranges; i++)
		{
			uint64		n = (r->len[i] + ZAP_CHUNK - 1) / ZAP_CHUNK;

			if (c < n)
				break;
			c -= n;
		}
		if (i == r->nranges)
			return NULL;
		(void) madvise(r->lo[i] + c * ZAP_CHUNK,
					   Min(ZAP_CHUNK, r->len[i] - c * ZAP_CHUNK), MADV_DONTNEED);
	}
}

void
gs_reap_zap(GsReap *r)
{
	pthread_t	threads[ZAP_THREADS - 1];
	sigset_t	all;
	sigset_t	old;
	int			started = 0;
	int			i;

	if (r == NULL || r->nranges == 0)
		return;
	pg_atomic_init_u64(&r->next_chunk, 0);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < ZAP_THREADS - 1; i++)
	{
		if (pthread_create(&threads[started], NULL, gs_zap_work, r) == 0)
			started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	(void) gs_zap_work(r);
	for (i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
}

static void *
gs_reap_thread(void *arg)
{
	GsReap	   *r = (GsReap *) arg;
	int			i;

	for (i = 0; i < r->nfds; i++)
		close(r->fds[i]);
	free(r);
	return NULL;
}

/*
 * Close n descriptors (counted by fd.c as external ones) of files already
 * unlinked on a thread, as gs_reap_end does: their last close frees their
 * pages there.  A canceled external sort's temporary files (spill.c) hold
 * up to GBs of page cache.
 */
void
gs_reap_close(const int *fds, int n)
{
	GsReap	   *r = malloc(sizeof(GsReap));
	int			i;

	for (i = 0; i < n && r == NULL; i++)
	{
		close(fds[i]);
		ReleaseExternalFD();
	}
	if (r == NULL)
		return;
	r->nfds = 0;
	r->nranges = 0;
	for (i = 0; i < n; i++)
	{
		if (r->nfds < REAP_MAX_FDS)
			r->fds[r->nfds++] = fds[i];
		else
		{
			close(fds[i]);
			ReleaseExternalFD();
		}
	}
	gs_reap_end(r);
}

/*
 * The segments have been detached: close their descriptors on a thread of
 * its own, which frees the pages of those nobody maps any more.  Where no
 * thread can be had they are closed here.
 */
void
gs_reap_end(GsReap *r)
{
	pthread_attr_t attr;
	pthread_t	thread;
	sigset_t	all;
	sigset_t	old;
	int			n;
	int			i;
	bool		started = false;

	if (r == NULL)
		return;
	n = r->nfds;
	if (pthread_attr_init(&attr) == 0)
	{
		(void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		started = pthread_create(&thread, &attr, gs_reap_thread, r) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
	}
	if (!started)
		gs_reap_thread(r);
	/* fd.c's count of descriptors it does not manage: they are going */
	for (i = 0; i < n; i++)
		ReleaseExternalFD();
}
