/*-------------------------------------------------------------------------
 *
 * engine_cpu_int.h
 *	  Declarations shared by the CPU engine's files (engine_cpu.c,
 *	  engine_cpu_async.c, engine_cpu_radix.c); not part of the engine API.
 *
 * Like gpusort_engine.h it includes no PostgreSQL header.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ENGINE_CPU_INT_H
#define ENGINE_CPU_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusort_engine.h"

typedef enum gs_job_state
{
	GS_JOB_FREE = 0,			/* slot not in use */
	GS_JOB_QUEUED,				/* submitted, the worker has not taken it */
	GS_JOB_RUNNING,				/* the worker is sorting it */
	GS_JOB_DONE					/* finished (or discarded), not yet waited */
} gs_job_state;

/* one asynchronous sort */
typedef struct gs_cpu_job
{
	gs_ticket	ticket;
	void	   *keys;
	size_t		n;
	int			key_bytes;
	uint32_t   *perm;
	int			flags;
	gs_job_state state;
	int			abort;			/* non-zero: stop; accessed with __atomic */
	gs_status	status;			/* result, valid in state DONE */
	gs_sort_stats stats;
	char		errbuf[GS_ERRBUF_SIZE];
} gs_cpu_job;

/*
 * The engine instance.  The sort itself keeps no state between calls; the
 * rest serves the asynchronous sorts.  lock protects the job slots (state,
 * status, the slot ring) and quit.  head and nout change only on the
 * caller's thread (submit, wait, abort) under lock; the worker reads them
 * under lock, and the caller may read them without it.
 */
struct gs_engine
{
	pthread_mutex_t lock;
	pthread_cond_t work;		/* to the worker: a job was queued, or quit */
	pthread_cond_t done;		/* from the worker: a job finished */
	int			worker_started;
	int			quit;
	pthread_t	worker;
	gs_cpu_job	jobs[GS_MAX_INFLIGHT];
	int			head;			/* slot of the oldest outstanding job */
	int			nout;			/* outstanding jobs: submitted, not waited */
	gs_ticket	last_ticket;
};

#if defined(__GNUC__) || defined(__clang__)
#define GS_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define GS_PRINTF_LIKE(f, a)
#endif

/* engine_cpu_radix.c */
extern void gs_cpu_set_error(char *errbuf, size_t errlen, const char *fmt,...)
			GS_PRINTF_LIKE(3, 4);
extern void gs_cpu_advise_huge(void *p, size_t len);
extern gs_status gs_cpu_check_args(const void *keys, size_t n, int key_bytes,
								   const uint32_t *perm, char *errbuf,
								   size_t errlen);
extern gs_status gs_cpu_sort_keys(void *keys, size_t n, int key_bytes,
								  uint32_t *perm, int flags,
								  gs_cancel_fn cancel, void *cancel_arg,
								  gs_sort_stats *stats, char *errbuf,
								  size_t errlen);

/* engine_cpu_async.c */
extern gs_status gs_cpu_sort_submit(gs_engine *eng, void *keys, size_t n,
									int key_bytes, uint32_t *perm, int flags,
									gs_ticket *ticket, char *errbuf,
									size_t errlen);
extern gs_status gs_cpu_sort_wait(gs_engine *eng, gs_ticket ticket,
								  gs_cancel_fn cancel, void *cancel_arg,
								  gs_sort_stats *stats, char *errbuf,
								  size_t errlen);
extern void gs_cpu_sort_abort(gs_engine *eng);
extern void gs_cpu_worker_stop(gs_engine *eng);

#endif							/* ENGINE_CPU_INT_H */
