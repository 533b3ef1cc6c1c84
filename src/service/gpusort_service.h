/*-------------------------------------------------------------------------
 *
 * gpusort_service.h
 *	  The gpusort service: one background worker that owns the GPUs for
 *	  the whole server, and the shared memory backends talk to it through.
 *
 * Shared memory (requested at startup when gpusort is preloaded) holds a
 * control struct, one request entry per backend and in-flight sort, a FIFO
 * of queued requests, and a pool of key memory cut into fixed-size slices.
 * A backend owns runs of contiguous slices: its key buffers (so keys are
 * encoded straight into memory the service pinned once) and, per request,
 * a run that receives the permutation.  The service reads and writes a
 * request's runs only, after checking that the backend owns them.
 *
 * Locking: ctl->lock (an LWLock) guards the slice table, the queue, the
 * request states and the counters.  A request's cancel flag is written
 * without the lock and read by the service's threads.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_SERVICE_H
#define GPUSORT_SERVICE_H

#include "postgres.h"

#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"

#include "gpusort_compat.h"

#include "gpusort_engine.h"

/* the pool's unit; a key buffer or permutation takes whole slices */
#define GS_SLICE_BYTES			((Size) 1 << 20)
#define GS_SERVICE_MAX_DEVICES	16
/* engine instances (each with its own streams) per device */
#define GS_SERVICE_STREAMS_PER_DEVICE 2
/* device buffers an engine instance keeps between sorts, at most */
#define GS_SERVICE_KEEP_DEVICE_BYTES ((uint64) 1 << 30)
/* worker threads of a service without a device (serving the fake fault) */
#define GS_SERVICE_FAKE_WORKERS	2
/* how long a waiting backend sleeps before it checks the service is alive */
#define GS_SERVICE_POLL_MS		1000
/* how long a canceled backend waits for the service to let go, at most */
#define GS_SERVICE_ABANDON_S	10
/* how long the delay fault holds a request, at most */
#define GS_SERVICE_DELAY_MS		30000
#define GS_SERVICE_ERR_SIZE		256

/* the service's state as backends see it */
typedef enum GsServiceState
{
	GS_SVC_STOPPED = 0,			/* not running (starting or restarting) */
	GS_SVC_NO_DEVICE,			/* running, no usable device */
	GS_SVC_READY				/* running with at least one device */
} GsServiceState;

typedef enum GsRequestState
{
	GS_REQ_FREE = 0,
	GS_REQ_QUEUED,
	GS_REQ_RUNNING,
	GS_REQ_DONE
} GsRequestState;

/* one sort request; entry (procno * GS_MAX_INFLIGHT + k) is procno's k-th */
typedef struct GsRequest
{
	int			state;			/* GsRequestState */
	int			owner;			/* pgprocno of the backend */
	int			owner_pid;
	int			fault;			/* GsServiceFault of the session */
	uint64		ticket;			/* the backend's ticket, never 0 */
	uint32		generation;		/* service generation it was queued under */
	Size		key_off;		/* pool offset of keys[0] */
	Size		perm_off;		/* pool offset of perm[0] */
	Size		n;
	int			key_bytes;
	int			flags;
	volatile int cancel;		/* set by the backend, read by threads */
	/* results, valid in GS_REQ_DONE */
	int			status;			/* gs_status */
	int			device;
	gs_sort_stats stats;
	char		err[GS_SERVICE_ERR_SIZE];
} GsRequest;

/* one slice of the pool */
typedef struct GsSlice
{
	int			owner;			/* pgprocno, -1 when free */
	int			owner_pid;
	int			pins;			/* requests the service still works on */
} GsSlice;

typedef struct GsServiceCtl
{
	LWLock	   *lock;
	int			state;			/* GsServiceState */
	int			service_pid;
	Latch	   *service_latch;
	uint32		generation;		/* bumped at each service start */
	int			ndevices;
	int			nworkers;
	char		devices[256];	/* device names, comma-separated */
	char		reason[GS_SERVICE_ERR_SIZE];	/* why no device */
	uint64		device_budget;	/* bytes one sort may use on a device */

	/* counters, under lock */
	int			queue_len;
	int			running;
	uint64		queued_rows;	/* rows queued or running */
	uint64		sorts_served;
	uint64		sorts_failed;
	uint64		bytes_moved;	/* keys and permutations, both ways */
	int			slices_used;
	uint64		device_sorts[GS_SERVICE_MAX_DEVICES];	/* served, per device */
	double		svc_rows_per_ms;	/* one worker's measured rate; 0 unknown */
	double		cpu_rows_per_ms;	/* backends' CPU engine rate; 0 unknown */

	/* sizes and where the arrays are */
	int			nprocs;
	int			nrequests;
	int			nslices;
	Size		pool_bytes;
	int			qhead;			/* queue: ring of request indexes */
	int			qtail;
	GsRequest  *requests;
	int		   *queue;			/* nrequests + 1 entries */
	GsSlice    *slices;
	char	   *pool;
} GsServiceCtl;

/* a CPU engine rate to compare with until backends measured one */
#define GS_CPU_ROWS_PER_MS_DEFAULT 20000.0

/* GUCs (settings.c) */

/* service.c */
extern GsServiceCtl *gs_service;	/* NULL unless preloaded */
extern void gs_service_register(void);
extern PGDLLEXPORT void gs_service_main(Datum arg);
extern void gs_service_unpin(GsRequest *req);
extern void gs_service_pin(Size off, Size len, int delta);
extern bool gs_service_range_owned(Size off, Size len, int owner, int pid);

/* service_client.c */
extern const gs_engine_ops gs_service_ops;
extern bool gs_service_usable(const char **why);
extern bool gs_service_admit(void *keys, size_t n, int key_bytes,
							 char **why);
extern void gs_service_note_cpu_rate(size_t n, double ms);
extern bool gs_service_is_engine(const gs_engine_ops *ops);
extern void gs_service_abort_but(gs_engine *eng, const char *lo,
								 const char *hi);

#endif							/* GPUSORT_SERVICE_H */
