/*-------------------------------------------------------------------------
 *
 * service.c
 *	  The gpusort service: a background worker that owns the GPUs.
 *
 * Registered from _PG_init when gpusort is in shared_preload_libraries, it
 * opens the CUDA engine once (dlopen, as backends used to), creates
 * GS_SERVICE_STREAMS_PER_DEVICE engine instances on every visible device,
 * pins the shared key pool once, and serves the sort requests of every
 * backend (see gpusort_service.h and service_client.c for the backend's
 * side).  Backends never initialise CUDA.
 *
 * The main loop sleeps on a WaitEventSet: its latch (a backend queued a
 * request), postmaster death, and an eventfd the worker threads write when
 * a sort ends.  It moves queued requests, after checking each one's key
 * and permutation offsets against the slices its backend owns, to a list
 * the worker threads take jobs from (one thread per engine instance, so
 * requests overlap on several streams and spread over every device).
 * Finished jobs go back to the main loop, which publishes the result and
 * sets the requesting backend's latch.  The threads call nothing of
 * PostgreSQL's and block every signal.
 *
 * Without a device the service still runs: it says "no device" in shared
 * memory (backends then use the CPU engine without asking it), and starts
 * GS_SERVICE_FAKE_WORKERS threads that serve requests of sessions that set
 * the fault-injection setting gpusort.service_fault.
 *
 * When the service exits (an error, pg_terminate_backend, the crash fault)
 * it stops its threads and fails every request it had, so that waiting
 * backends sort on the CPU engine; postmaster starts it again after
 * bgw_restart_time.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"

#include "gpusort_int.h"
#include "gpusort_service.h"

GsServiceCtl *gs_service = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* ---- the service process's own state ---- */

/* one request being worked on; indexed like the requests */
typedef struct GsJob
{
	int			req;
	void	   *keys;
	uint32_t   *perm;
	size_t		n;
	int			key_bytes;
	int			flags;
	int			fault;
	volatile int *cancel;
	/* results */
	int			status;
	int			device;
	gs_sort_stats stats;
	double		run_ms;
	char		err[GS_SERVICE_ERR_SIZE];
	struct GsJob *next;
} GsJob;

typedef struct GsWorker
{
	pthread_t	thread;
	bool		started;
	int			device;			/* -1: no device (fake faults only) */
	gs_engine  *gpu;
	gs_engine  *cpu;
} GsWorker;

static const gs_engine_ops *svc_gpu_ops = NULL;
static const gs_engine_ops *svc_cpu_ops = NULL;
static GsWorker *svc_workers = NULL;
static int	svc_nworkers = 0;
static GsJob *svc_jobs = NULL;
static int	svc_efd = -1;

/* shared with the threads, under svc_mu */
static pthread_mutex_t svc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t svc_cv = PTHREAD_COND_INITIALIZER;
static GsJob *svc_todo_head = NULL;
static GsJob *svc_todo_tail = NULL;
static GsJob *svc_done = NULL;
/* read by threads without the mutex */
static volatile int svc_stopping = 0;
static volatile int svc_crash = 0;

/* ---------------------------------------------------------------------
 * shared memory
 * --------------------------------------------------------------------- */

static int
gs_service_nprocs(void)
{
	return MaxBackends;
}

/*
 * What the postmaster found when it sized the pool (gs_gpu_probe): with no
 * GPU the pool is GS_SERVICE_NO_GPU_POOL_MB, enough for the sessions that
 * make the service sort on its CPU engine (gpusort.service_fault, for the
 * tests), rather than gpusort.service_memory.  Children inherit it.
 */
static bool svc_probed = false;
static GsGpuProbe svc_probe = GS_GPU_MAYBE;

static int
gs_service_pool_mb(void)
{
	if (!svc_probed)
	{
		svc_probe = gs_gpu_probe();
		svc_probed = true;
	}
	if (svc_probe != GS_GPU_MAYBE)
		return Min(gpusort_service_memory_mb, GS_SERVICE_NO_GPU_POOL_MB);
	return gpusort_service_memory_mb;
}

static Size
gs_service_ctl_size(int nprocs)
{
	int			nreq = nprocs * GS_MAX_INFLIGHT;
	int			nslices = (int) (((Size) gs_service_pool_mb() << 20) / GS_SLICE_BYTES);
	Size		sz;

	sz = MAXALIGN(sizeof(GsServiceCtl));
	sz = add_size(sz, MAXALIGN(mul_size(nreq, sizeof(GsRequest))));
	sz = add_size(sz, MAXALIGN(mul_size(nreq + 1, sizeof(int))));
	sz = add_size(sz, MAXALIGN(mul_size(nslices, sizeof(GsSlice))));
	return sz;
}

static Size
gs_service_pool_size(void)
{
	Size		pool = (Size) gs_service_pool_mb() << 20;

	/* room to align the pool to a slice */
	return pool > 0 ? add_size(pool, GS_SLICE_BYTES) : 0;
}

static void
gs_service_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(gs_service_ctl_size(gs_service_nprocs()));
	RequestAddinShmemSpace(gs_service_pool_size());
	RequestNamedLWLockTranche("gpusort service", 1);
}

static void
gs_service_shmem_startup(void)
{
	bool		found;
	int			nprocs = gs_service_nprocs();
	GsServiceCtl *ctl;
	char	   *p;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	ctl = ShmemInitStruct("gpusort service", gs_service_ctl_size(nprocs), &found);
	if (!found)
	{
		int			i;

		memset(ctl, 0, sizeof(GsServiceCtl));
		ctl->lock = &(GetNamedLWLockTranche("gpusort service"))->lock;
		ctl->state = GS_SVC_STOPPED;
		ctl->nprocs = nprocs;
		ctl->nrequests = nprocs * GS_MAX_INFLIGHT;
		ctl->nslices = (int) (((Size) gs_service_pool_mb() << 20) / GS_SLICE_BYTES);
		ctl->pool_bytes = (Size) ctl->nslices * GS_SLICE_BYTES;
		p = (char *) ctl + MAXALIGN(sizeof(GsServiceCtl));
		ctl->requests = (GsRequest *) p;
		memset(p, 0, ctl->nrequests * sizeof(GsRequest));
		p += MAXALIGN(mul_size(ctl->nrequests, sizeof(GsRequest)));
		ctl->queue = (int *) p;
		p += MAXALIGN(mul_size(ctl->nrequests + 1, sizeof(int)));
		ctl->slices = (GsSlice *) p;
		for (i = 0; i < ctl->nslices; i++)
		{
			ctl->slices[i].owner = -1;
			ctl->slices[i].owner_pid = 0;
			ctl->slices[i].pins = 0;
		}
		if (ctl->pool_bytes > 0)
		{
			p = ShmemInitStruct("gpusort service pool", gs_service_pool_size(),
								&found);
			ctl->pool = (char *) TYPEALIGN(GS_SLICE_BYTES, p);
		}
	}
	LWLockRelease(AddinShmemInitLock);
	gs_service = ctl;
}

void
gs_service_register(void)
{
	BackgroundWorker w;

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = gs_service_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = gs_service_shmem_startup;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_ConsistentState;
	w.bgw_restart_time = 1;
	strlcpy(w.bgw_library_name, "gpusort", sizeof(w.bgw_library_name));
	strlcpy(w.bgw_function_name, "gs_service_main", sizeof(w.bgw_function_name));
	strlcpy(w.bgw_name, "gpusort service", sizeof(w.bgw_name));
	strlcpy(w.bgw_type, "gpusort service", sizeof(w.bgw_type));
	RegisterBackgroundWorker(&w);
}

/* slice index range [*first, *last] covering [off, off + len); len > 0 */
static inline void
gs_slice_span(Size off, Size len, int *first, int *last)
{
	*first = (int) (off / GS_SLICE_BYTES);
	*last = (int) ((off + len - 1) / GS_SLICE_BYTES);
}

/* does backend (owner, pid) own every slice of [off, off + len)?  Under lock. */
bool
gs_service_range_owned(Size off, Size len, int owner, int pid)
{
	GsServiceCtl *ctl = gs_service;
	int			first,
				last,
				i;

	if (len == 0 || off >= ctl->pool_bytes || len > ctl->pool_bytes - off)
		return false;
	gs_slice_span(off, len, &first, &last);
	for (i = first; i <= last; i++)
		if (ctl->slices[i].owner != owner || ctl->slices[i].owner_pid != pid)
			return false;
	return true;
}

void
gs_service_pin(Size off, Size len, int delta)
{
	int			first,
				last,
				i;

	if (len == 0 || off >= gs_service->pool_bytes)
		return;
	gs_slice_span(off, Min(len, gs_service->pool_bytes - off), &first, &last);
	for (i = first; i <= last; i++)
	{
		gs_service->slices[i].pins += delta;
		if (gs_service->slices[i].pins < 0)
			gs_service->slices[i].pins = 0;
	}
}

/* the service is done with a request's memory (lock held exclusively) */
void
gs_service_unpin(GsRequest *req)
{
	gs_service_pin(req->key_off, req->n * (Size) req->key_bytes, -1);
	gs_service_pin(req->perm_off, req->n * sizeof(uint32), -1);
}

/* ---------------------------------------------------------------------
 * worker threads: nothing of PostgreSQL's below until the main loop
 * --------------------------------------------------------------------- */

static int
gs_job_cancel(void *arg)
{
	GsJob	   *job = (GsJob *) arg;

	return *job->cancel || svc_stopping;
}

static double
gs_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void
gs_notify_main(void)
{
	uint64_t	one = 1;

	if (write(svc_efd, &one, sizeof(one)) < 0)
	{
		/* the counter is full: the main loop has plenty to wake for */
	}
}

static void
gs_job_cpu_sort(GsWorker *w, GsJob *job)
{
	job->status = svc_cpu_ops->sort(w->cpu, job->keys, job->n, job->key_bytes,
									 job->perm, job->flags, gs_job_cancel, job,
									 &job->stats, job->err, sizeof(job->err));
}

static void
gs_job_run(GsWorker *w, GsJob *job)
{
	double		t0 = gs_now_ms();

	job->err[0] = '\0';
	job->device = w->device;
	memset(&job->stats, 0, sizeof(job->stats));
	switch (job->fault)
	{
		case GS_FAULT_DEVICE_ERROR:
			job->status = GS_ERR_DEVICE;
			snprintf(job->err, sizeof(job->err),
					 "device error injected by gpusort.service_fault");
			break;
		case GS_FAULT_DELAY:
			while (!gs_job_cancel(job) && gs_now_ms() - t0 < GS_SERVICE_DELAY_MS)
			{
				struct timespec ts = {0, 5 * 1000 * 1000};

				nanosleep(&ts, NULL);
			}
			if (gs_job_cancel(job))
			{
				job->status = GS_ERR_CANCELED;
				snprintf(job->err, sizeof(job->err), "canceled");
				break;
			}
			gs_job_cpu_sort(w, job);
			break;
		case GS_FAULT_FAKE:
			gs_job_cpu_sort(w, job);
			break;
		default:
			if (w->gpu == NULL && w->device >= 0)
			{
				gs_engine  *fresh = NULL;

				/* its engine could not be started again last time: try now */
				if (svc_gpu_ops->create_on_device(&fresh, w->device, job->err,
												  sizeof(job->err)) == GS_OK)
					w->gpu = fresh;
			}
			if (w->gpu == NULL)
			{
				job->status = GS_ERR_NODEVICE;
				snprintf(job->err, sizeof(job->err), "the gpusort service has no device");
				break;
			}
			job->status = svc_gpu_ops->sort(w->gpu, job->keys, job->n,
											 job->key_bytes, job->perm,
											 job->flags, gs_job_cancel, job,
											 &job->stats, job->err,
											 sizeof(job->err));
			/*
			 * After a device error, start this stream's engine afresh; after
			 * a sort that grew its device buffers past what the service keeps
			 * between sorts, too (so one big sort does not hold the memory).
			 */
			if (job->status == GS_ERR_DEVICE || job->status == GS_ERR_INTERNAL ||
				job->stats.device_bytes > GS_SERVICE_KEEP_DEVICE_BYTES)
			{
				char		e2[GS_ERRBUF_SIZE];
				gs_engine  *fresh = NULL;

				svc_gpu_ops->destroy(w->gpu);
				w->gpu = NULL;
				if (svc_gpu_ops->create_on_device(&fresh, w->device, e2,
												  sizeof(e2)) == GS_OK)
					w->gpu = fresh;
			}
			break;
	}
	/* a sort the service's stop interrupted failed; the backend did not cancel */
	if (job->status == GS_ERR_CANCELED && !*job->cancel)
	{
		job->status = GS_ERR_NODEVICE;
		snprintf(job->err, sizeof(job->err), "the gpusort service stopped");
	}
	job->run_ms = gs_now_ms() - t0;
}

static void *
gs_worker_main(void *arg)
{
	GsWorker   *w = (GsWorker *) arg;

	for (;;)
	{
		GsJob	   *job;

		pthread_mutex_lock(&svc_mu);
		while (svc_todo_head == NULL && !svc_stopping)
			pthread_cond_wait(&svc_cv, &svc_mu);
		if (svc_stopping)
		{
			pthread_mutex_unlock(&svc_mu);
			break;
		}
		job = svc_todo_head;
		svc_todo_head = job->next;
		if (svc_todo_head == NULL)
			svc_todo_tail = NULL;
		pthread_mutex_unlock(&svc_mu);

		if (job->fault == GS_FAULT_CRASH)
		{
			/* the main loop exits; the request fails with the service */
			svc_crash = 1;
			gs_notify_main();
			continue;
		}
		gs_job_run(w, job);

		pthread_mutex_lock(&svc_mu);
		job->next = svc_done;
		svc_done = job;
		pthread_mutex_unlock(&svc_mu);
		gs_notify_main();
	}
	return NULL;
}

/* ---------------------------------------------------------------------
 * the main loop (PostgreSQL side)
 * --------------------------------------------------------------------- */

static void gs_service_collect(void);

static void
gs_wake_backend(int procno)
{
	if (procno >= 0 && procno < gs_service->nprocs)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

/* stop the threads and fail every request this service had */
static void
gs_service_exit(int code, Datum arg)
{
	GsServiceCtl *ctl = gs_service;
	int			i;
	int		   *wake;
	int			nwake = 0;

	pthread_mutex_lock(&svc_mu);
	svc_stopping = 1;
	pthread_cond_broadcast(&svc_cv);
	pthread_mutex_unlock(&svc_mu);
	for (i = 0; i < svc_nworkers; i++)
		if (svc_workers[i].started)
			pthread_join(svc_workers[i].thread, NULL);
	svc_nworkers = 0;

	LWLockReleaseAll();
	/* sorts that ended are answered: their keys may already be sorted */
	gs_service_collect();
	wake = malloc(sizeof(int) * (ctl->nrequests + 1));
	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	ctl->state = GS_SVC_STOPPED;
	ctl->service_pid = 0;
	ctl->service_latch = NULL;
	for (i = 0; i < ctl->nrequests; i++)
	{
		GsRequest  *req = &ctl->requests[i];

		if (req->state != GS_REQ_QUEUED && req->state != GS_REQ_RUNNING)
			continue;
		gs_service_unpin(req);
		req->status = GS_ERR_NODEVICE;
		strlcpy(req->err, "the gpusort service stopped", sizeof(req->err));
		memset(&req->stats, 0, sizeof(req->stats));
		req->state = GS_REQ_DONE;
		ctl->sorts_failed++;
		if (wake)
			wake[nwake++] = req->owner;
	}
	ctl->qhead = ctl->qtail = 0;
	ctl->queue_len = 0;
	ctl->running = 0;
	ctl->queued_rows = 0;
	LWLockRelease(ctl->lock);
	for (i = 0; i < nwake; i++)
		gs_wake_backend(wake[i]);
	free(wake);
}

/* open the CUDA engine on every device; on failure say why in ctl->reason */
static void
gs_service_open_devices(void)
{
	GsServiceCtl *ctl = gs_service;
	char		errbuf[GS_ERRBUF_SIZE];
	char	   *path = gs_cuda_library_path();
	void	   *dl;
	gs_engine_entry_fn entry;
	gs_engine  *first = NULL;
	gs_device_info info;
	int			ndev,
				d,
				s;

	errbuf[0] = '\0';
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (dl == NULL)
	{
		const char *e = dlerror();

		snprintf(ctl->reason, sizeof(ctl->reason), "could not load \"%s\": %s",
				 path, e ? e : "unknown error");
		return;
	}
	entry = (gs_engine_entry_fn) dlsym(dl, GS_CUDA_ENTRY_SYMBOL);
	if (entry == NULL)
	{
		snprintf(ctl->reason, sizeof(ctl->reason), "\"%s\" does not export %s",
				 path, GS_CUDA_ENTRY_SYMBOL);
		return;
	}
	svc_gpu_ops = entry(GS_ENGINE_ABI_VERSION);
	if (svc_gpu_ops == NULL)
	{
		snprintf(ctl->reason, sizeof(ctl->reason),
				 "the CUDA engine library was built for another engine ABI version (want %d)",
				 GS_ENGINE_ABI_VERSION);
		return;
	}
	if (svc_gpu_ops->create_on_device(&first, 0, errbuf, sizeof(errbuf)) != GS_OK ||
		svc_gpu_ops->device_info(first, &info, errbuf, sizeof(errbuf)) != GS_OK)
	{
		if (first)
			svc_gpu_ops->destroy(first);
		strlcpy(ctl->reason, errbuf[0] ? errbuf : "no usable device",
				sizeof(ctl->reason));
		svc_gpu_ops = NULL;
		return;
	}
	ndev = Min(Max(info.device_count, 1), GS_SERVICE_MAX_DEVICES);
	ctl->device_budget = info.free_mem / (2 * GS_SERVICE_STREAMS_PER_DEVICE);

	/* page-lock the pool once, for every device */
	if (ctl->pool_bytes > 0 &&
		svc_gpu_ops->host_register(first, ctl->pool, ctl->pool_bytes, errbuf,
								   sizeof(errbuf)) != GS_OK)
		ereport(WARNING,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("gpusort service could not pin its key memory"),
				 errdetail("%s", errbuf),
				 errhint("Keys still move, more slowly; lower gpusort.service_memory or raise the locked memory limit.")));

	svc_workers = MemoryContextAllocZero(TopMemoryContext,
										 sizeof(GsWorker) * ndev * GS_SERVICE_STREAMS_PER_DEVICE);
	ctl->devices[0] = '\0';
	for (d = 0; d < ndev; d++)
	{
		gs_device_info di;

		for (s = 0; s < GS_SERVICE_STREAMS_PER_DEVICE; s++)
		{
			GsWorker   *w = &svc_workers[svc_nworkers];
			gs_engine  *eng = NULL;

			if (d == 0 && s == 0)
				eng = first;
			else if (svc_gpu_ops->create_on_device(&eng, d, errbuf, sizeof(errbuf)) != GS_OK)
			{
				ereport(LOG,
						(errmsg("gpusort service could not open device %d", d),
						 errdetail("%s", errbuf)));
				break;
			}
			w->device = d;
			w->gpu = eng;
			svc_nworkers++;
			if (s == 0 && svc_gpu_ops->device_info(eng, &di, errbuf, sizeof(errbuf)) == GS_OK)
			{
				if (ctl->devices[0])
					strlcat(ctl->devices, ", ", sizeof(ctl->devices));
				strlcat(ctl->devices, di.name, sizeof(ctl->devices));
				ctl->device_budget = Min(ctl->device_budget,
										 di.free_mem / (2 * GS_SERVICE_STREAMS_PER_DEVICE));
			}
		}
		if (s > 0)
			ctl->ndevices++;
	}
}

/* the worker threads, with every signal blocked */
static void
gs_service_start_workers(void)
{
	sigset_t	all,
				old;
	char		errbuf[GS_ERRBUF_SIZE];
	int			i;

	svc_cpu_ops = gpusort_cpu_engine(GS_ENGINE_ABI_VERSION);
	if (svc_nworkers == 0)
	{
		svc_workers = MemoryContextAllocZero(TopMemoryContext,
											 sizeof(GsWorker) * GS_SERVICE_FAKE_WORKERS);
		for (i = 0; i < GS_SERVICE_FAKE_WORKERS; i++)
			svc_workers[i].device = -1;
		svc_nworkers = GS_SERVICE_FAKE_WORKERS;
	}
	for (i = 0; i < svc_nworkers; i++)
		if (svc_cpu_ops->create(&svc_workers[i].cpu, errbuf, sizeof(errbuf)) != GS_OK)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("could not start the gpusort CPU engine"),
					 errdetail("%s", errbuf)));

	svc_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (svc_efd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create an eventfd: %m")));

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < svc_nworkers; i++)
	{
		if (pthread_create(&svc_workers[i].thread, NULL, gs_worker_main,
						   &svc_workers[i]) != 0)
			break;
		svc_workers[i].started = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (i < svc_nworkers)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start the gpusort service's threads")));
}

/* take finished jobs from the threads and answer their backends */
static void
gs_service_collect(void)
{
	GsServiceCtl *ctl = gs_service;
	GsJob	   *done,
			   *job;

	pthread_mutex_lock(&svc_mu);
	done = svc_done;
	svc_done = NULL;
	pthread_mutex_unlock(&svc_mu);
	if (done == NULL)
		return;

	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	for (job = done; job != NULL; job = job->next)
	{
		GsRequest  *req = &ctl->requests[job->req];

		req->status = job->status;
		req->device = job->device;
		req->stats = job->stats;
		strlcpy(req->err, job->err, sizeof(req->err));
		gs_service_unpin(req);
		req->state = GS_REQ_DONE;
		ctl->running--;
		ctl->queued_rows -= Min(ctl->queued_rows, (uint64) req->n);
		if (job->status == GS_OK)
		{
			ctl->sorts_served++;
			if (job->device >= 0 && job->device < GS_SERVICE_MAX_DEVICES)
				ctl->device_sorts[job->device]++;
			ctl->bytes_moved += req->n * (uint64) (req->key_bytes *
												   ((req->flags & GS_SORT_KEYS_OUT) ? 2 : 1) +
												   sizeof(uint32));
			/* one worker's rate, from sorts big enough to measure */
			if (job->n >= 50000 && job->run_ms > 0 && job->fault == GS_FAULT_NONE)
			{
				double		rate = job->n / job->run_ms;

				ctl->svc_rows_per_ms = ctl->svc_rows_per_ms <= 0 ? rate :
					0.8 * ctl->svc_rows_per_ms + 0.2 * rate;
			}
		}
		else
			ctl->sorts_failed++;
	}
	LWLockRelease(ctl->lock);
	for (job = done; job != NULL; job = job->next)
		gs_wake_backend(ctl->requests[job->req].owner);
}

/* check queued requests and hand them to the threads */
static void
gs_service_dispatch(void)
{
	GsServiceCtl *ctl = gs_service;
	GsJob	   *head = NULL,
			   *tail = NULL;
	int		   *wake;
	int			nwake = 0;
	int			i;

	if (ctl->qhead == ctl->qtail)
		return;
	wake = palloc(sizeof(int) * (ctl->nrequests + 1));
	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	while (ctl->qhead != ctl->qtail)
	{
		int			idx = ctl->queue[ctl->qhead];
		GsRequest  *req;
		GsJob	   *job;
		const char *bad = NULL;

		ctl->qhead = (ctl->qhead + 1) % (ctl->nrequests + 1);
		ctl->queue_len--;
		if (idx < 0 || idx >= ctl->nrequests)
			continue;
		req = &ctl->requests[idx];
		if (req->state != GS_REQ_QUEUED)
			continue;

		/* a request may touch its own slices only */
		if (!GS_KEY_BYTES_VALID(req->key_bytes) || req->n == 0 ||
			req->n > GS_MAX_ROWS)
			bad = "invalid sort size";
		else if (!gs_service_range_owned(req->key_off, req->n * (Size) req->key_bytes,
										 req->owner, req->owner_pid) ||
				 !gs_service_range_owned(req->perm_off, req->n * sizeof(uint32),
										 req->owner, req->owner_pid))
			bad = "the request's keys or permutation lie outside its slices";
		if (bad || req->cancel)
		{
			gs_service_unpin(req);
			req->status = bad ? GS_ERR_INVALID : GS_ERR_CANCELED;
			strlcpy(req->err, bad ? bad : "canceled", sizeof(req->err));
			req->state = GS_REQ_DONE;
			ctl->queued_rows -= Min(ctl->queued_rows, (uint64) req->n);
			ctl->sorts_failed++;
			wake[nwake++] = req->owner;
			continue;
		}

		req->state = GS_REQ_RUNNING;
		ctl->running++;
		job = &svc_jobs[idx];
		memset(job, 0, sizeof(*job));
		job->req = idx;
		job->keys = ctl->pool + req->key_off;
		job->perm = (uint32_t *) (ctl->pool + req->perm_off);
		job->n = req->n;
		job->key_bytes = req->key_bytes;
		job->flags = req->flags;
		job->fault = req->fault;
		job->cancel = &req->cancel;
		if (tail)
			tail->next = job;
		else
			head = job;
		tail = job;
	}
	LWLockRelease(ctl->lock);
	for (i = 0; i < nwake; i++)
		gs_wake_backend(wake[i]);
	pfree(wake);

	if (head)
	{
		pthread_mutex_lock(&svc_mu);
		if (svc_todo_tail)
			svc_todo_tail->next = head;
		else
			svc_todo_head = head;
		svc_todo_tail = tail;
		pthread_cond_broadcast(&svc_cv);
		pthread_mutex_unlock(&svc_mu);
	}
}

/* slices and requests of backends that are gone */
static void
gs_service_reclaim(void)
{
	GsServiceCtl *ctl = gs_service;
	int			i;

	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	for (i = 0; i < ctl->nslices; i++)
	{
		GsSlice    *sl = &ctl->slices[i];

		if (sl->owner >= 0 &&
			(sl->owner >= ctl->nprocs ||
			 ProcGlobal->allProcs[sl->owner].pid != sl->owner_pid))
		{
			sl->owner = -1;
			sl->owner_pid = 0;
		}
	}
	for (i = 0; i < ctl->nrequests; i++)
	{
		GsRequest  *req = &ctl->requests[i];

		if (req->state == GS_REQ_DONE &&
			ProcGlobal->allProcs[req->owner].pid != req->owner_pid)
			req->state = GS_REQ_FREE;
	}
	LWLockRelease(ctl->lock);
}

/* requests left over by a service that stopped without failing them */
static void
gs_service_reset(void)
{
	GsServiceCtl *ctl = gs_service;
	int			i;

	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	for (i = 0; i < ctl->nrequests; i++)
	{
		GsRequest  *req = &ctl->requests[i];

		if (req->state == GS_REQ_QUEUED || req->state == GS_REQ_RUNNING)
		{
			req->status = GS_ERR_NODEVICE;
			strlcpy(req->err, "the gpusort service stopped", sizeof(req->err));
			req->state = GS_REQ_DONE;
		}
	}
	/* no service is alive, so nothing pins a slice */
	for (i = 0; i < ctl->nslices; i++)
		ctl->slices[i].pins = 0;
	ctl->qhead = ctl->qtail = 0;
	ctl->queue_len = 0;
	ctl->running = 0;
	ctl->queued_rows = 0;
	ctl->ndevices = 0;
	ctl->devices[0] = '\0';
	ctl->reason[0] = '\0';
	ctl->device_budget = 0;
	ctl->svc_rows_per_ms = 0;
	memset(ctl->device_sorts, 0, sizeof(ctl->device_sorts));
	LWLockRelease(ctl->lock);
}

static WaitEventSet *
gs_service_wait_set(void)
{
	WaitEventSet *wes;

	wes = gs_CreateWaitEventSet(3);
	AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(wes, WL_SOCKET_READABLE, svc_efd, NULL, NULL);
	return wes;
}

/*
 * The service's line in the server log.  Without a GPU it is said once,
 * at the first start after the server's; the service's restarts say it
 * at DEBUG1 only.
 */
static void
gs_service_log_start(GsGpuProbe probe, bool first_start)
{
	GsServiceCtl *ctl = gs_service;

	if (ctl->ndevices > 0)
		ereport(LOG,
				(errmsg("gpusort service started with %d device(s): %s",
						ctl->ndevices, ctl->devices)));
	else if (probe == GS_GPU_NO_DRIVER)
		ereport(first_start ? LOG : DEBUG1,
				(errmsg("gpusort found no NVIDIA GPU, sorts run on the CPU engine"),
				 errdetail("No NVIDIA driver is loaded (neither /dev/nvidiactl nor /proc/driver/nvidia/gpus exists); the gpusort service keeps %d MB of shared memory for keys.",
						   gs_service_pool_mb())));
	else if (probe == GS_GPU_NO_LIBRARY)
	{
		char	   *path = gs_cuda_library_path();

		ereport(first_start ? LOG : DEBUG1,
				(errmsg("gpusort has no CUDA engine, sorts run on the CPU engine"),
				 errdetail("The CUDA engine library \"%s\" is not installed: gpusort was built without nvcc; the gpusort service keeps %d MB of shared memory for keys.",
						   path, gs_service_pool_mb())));
		pfree(path);
	}
	else
		ereport(LOG,
				(errmsg("gpusort service started without a device, backends sort on the CPU"),
				 errdetail("%s", ctl->reason[0] ? ctl->reason : "no usable device")));
}

void
gs_service_main(Datum arg)
{
	GsServiceCtl *ctl;
	WaitEventSet *wes;
	time_t		last_reclaim = time(NULL);
	GsGpuProbe	probe;
	bool		first_start;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* a connection without a database, so it shows in pg_stat_activity */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	ctl = gs_service;
	if (ctl == NULL)
		elog(ERROR, "gpusort service started without its shared memory");
	gs_service_reset();
	before_shmem_exit(gs_service_exit, (Datum) 0);

	svc_jobs = MemoryContextAllocZero(TopMemoryContext,
									  sizeof(GsJob) * ctl->nrequests);
	/* no GPU (file checks): the CUDA library is not even opened */
	probe = gs_gpu_probe();
	if (probe == GS_GPU_MAYBE)
		gs_service_open_devices();
	else
		strlcpy(ctl->reason, gs_gpu_probe_reason(probe), sizeof(ctl->reason));
	gs_service_start_workers();
	wes = gs_service_wait_set();

	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	first_start = ctl->generation == 0;
	ctl->nworkers = svc_nworkers;
	ctl->service_pid = MyProcPid;
	ctl->service_latch = MyLatch;
	ctl->generation++;
	ctl->state = ctl->ndevices > 0 ? GS_SVC_READY : GS_SVC_NO_DEVICE;
	LWLockRelease(ctl->lock);
	gs_service_log_start(probe, first_start);

	for (;;)
	{
		WaitEvent	ev[3];
		int			nev;
		uint64_t	cnt;

		nev = WaitEventSetWait(wes, GS_SERVICE_POLL_MS, ev, lengthof(ev),
							   PG_WAIT_EXTENSION);
		(void) nev;
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		while (read(svc_efd, &cnt, sizeof(cnt)) > 0)
			;
		if (svc_crash)
		{
			ereport(LOG,
					(errmsg("gpusort service exiting in the middle of a request"),
					 errdetail("The crash fault was injected by gpusort.service_fault.")));
			proc_exit(1);
		}
		gs_service_collect();
		gs_service_dispatch();
		if (time(NULL) != last_reclaim)
		{
			gs_service_reclaim();
			last_reclaim = time(NULL);
		}
	}
}
