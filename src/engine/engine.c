/*-------------------------------------------------------------------------
 *
 * engine.c
 *	  Choosing, loading and calling sort engines.
 *
 * The CPU engine is linked in and always works.  The GPU belongs to the
 * gpusort service (service.c), which opens the CUDA engine library once for
 * the whole server; here the GPU engine is the service client
 * (service_client.c).  When the service has no device, is restarting or
 * does not exist, sorts run on the CPU engine, and per sort the admission
 * check (gs_service_admit) may send one there when the GPU's queue is too
 * long.
 *
 * Engines report failures as status codes plus text; here they become
 * PostgreSQL errors, or a transparent switch to the CPU engine.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"


#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "gpusort_int.h"
#include "gpusort_service.h"
#include "gpusort_stats.h"

/* the two engines of this backend */
static GsEngine cpu_engine;
static bool cpu_ready = false;

/* the service client: this backend's way to the GPU */
static GsEngine gpu_engine;
static bool gpu_ready = false;
static char gpu_error[GS_ERRBUF_SIZE];
static bool gpu_warned = false;

/* a live key buffer, freed with the memory context that owns it */
typedef struct GsKeyBuf
{
	GsEngine   *engine;
	void	   *ptr;
	size_t		bytes;
	MemoryContextCallback cb;
	struct GsKeyBuf *next;
	struct GsKeyBuf *prev;
} GsKeyBuf;

static GsKeyBuf *live_bufs = NULL;

/* asynchronous jobs outstanding on an engine, oldest first */
static GsSortJob *pending_jobs = NULL;

static void gs_engine_stop_all(void);
static void gs_engine_stop_all_but(const char *lo, const char *hi);

GsEngine *
gs_engine_cpu(void)
{
	if (!cpu_ready)
	{
		char		errbuf[GS_ERRBUF_SIZE];
		gs_status	st;

		cpu_engine.ops = gpusort_cpu_engine(GS_ENGINE_ABI_VERSION);
		if (cpu_engine.ops == NULL)
			elog(ERROR, "gpusort: CPU engine has another ABI version");
		errbuf[0] = '\0';
		st = cpu_engine.ops->create(&cpu_engine.eng, errbuf, sizeof(errbuf));
		if (st != GS_OK)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("could not start the gpusort CPU engine"),
					 errdetail("%s", errbuf)));
		memset(&cpu_engine.info, 0, sizeof(cpu_engine.info));
		(void) cpu_engine.ops->device_info(cpu_engine.eng, &cpu_engine.info,
										   errbuf, sizeof(errbuf));
		if (cpu_engine.info.name[0] == '\0')
			strlcpy(cpu_engine.info.name, "CPU", sizeof(cpu_engine.info.name));
		cpu_engine.is_gpu = false;
		cpu_ready = true;
	}
	return &cpu_engine;
}

/*
 * A CPU engine instance of its own for sorts that a thread of the backend's
 * makes (an instance is used by one thread at a time): created here, in the
 * backend, and kept for the process's life as gs_engine_cpu's is.
 */
GsEngine *
gs_engine_cpu_thread(void)
{
	static GsEngine thread_engine;
	static bool thread_ready = false;

	if (!thread_ready)
	{
		GsEngine   *cpu = gs_engine_cpu();
		char		errbuf[GS_ERRBUF_SIZE];

		thread_engine = *cpu;
		errbuf[0] = '\0';
		if (cpu->ops->create(&thread_engine.eng, errbuf,
							 sizeof(errbuf)) != GS_OK)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("could not start the gpusort CPU engine"),
					 errdetail("%s", errbuf)));
		thread_ready = true;
	}
	return &thread_engine;
}


/*
 * No GPU here: the service runs without a device (or does not exist).
 * Only EXPLAIN's engine line asks; a sort on the CPU engine then says
 * "no GPU".
 */
bool
gs_gpu_absent(void)
{
	return gs_service == NULL || gs_service->state == GS_SVC_NO_DEVICE;
}

/*
 * The GPU is the gpusort service's (service.c): a backend never loads the
 * CUDA library nor creates a CUDA context.  Its GPU engine is the service
 * client (service_client.c), usable when the service runs with a device
 * (or fakes one for tests), which shared memory tells without asking it.
 */
static GsEngine *
gs_service_engine(void)
{
	char		errbuf[GS_ERRBUF_SIZE];

	if (!gpu_ready)
	{
		errbuf[0] = '\0';
		gpu_engine.ops = &gs_service_ops;
		if (gpu_engine.ops->create(&gpu_engine.eng, errbuf, sizeof(errbuf)) != GS_OK)
			return NULL;
		gpu_engine.is_gpu = true;
		gpu_ready = true;
	}
	/* the service may have restarted with other devices */
	(void) gpu_engine.ops->device_info(gpu_engine.eng, &gpu_engine.info,
									   errbuf, sizeof(errbuf));
	return &gpu_engine;
}

bool
gs_cuda_loaded(void)
{
	return gs_service != NULL && gs_service->state == GS_SVC_READY;
}

const char *
gs_cuda_load_error(void)
{
	const char *why = NULL;

	if (gs_service_usable(&why))
		return NULL;
	return why;
}

GsEngine *
gs_engine_choose(double nrows, const char **fallback)
{
	const char *why = NULL;
	GsEngine   *e;

	if (fallback)
		*fallback = NULL;
	if (gpusort_engine_choice == GS_ENGINE_CPU)
		return gs_engine_cpu();
	if (gpusort_engine_choice == GS_ENGINE_AUTO &&
		nrows < (double) gpusort_gpu_min_rows &&
		gpusort_service_fault == GS_FAULT_NONE)
		return gs_engine_cpu();

	if (gs_service_usable(&why) && (e = gs_service_engine()) != NULL)
		return e;
	if (why == NULL)
		why = "the gpusort service is not available in this process";
	strlcpy(gpu_error, why, sizeof(gpu_error));

	/*
	 * Wanted the GPU and can't have it: a WARNING once a session, from the
	 * backend the client talks to (not from each parallel worker); EXPLAIN
	 * says it for every sort.  A service that is restarting is back in a
	 * second: only EXPLAIN tells about that.  One that has no memory to
	 * serve from (gpusort.service_memory 0) is stopped for good.
	 */
	if (gpusort_engine_choice == GS_ENGINE_GPU && !gpu_warned &&
		!IsParallelWorker() &&
		!(gs_service != NULL && gs_service->nslices > 0 &&
		  gs_service->state == GS_SVC_STOPPED))
	{
		gpu_warned = true;
		ereport(WARNING,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gpusort GPU engine is not available, sorting on the CPU"),
				 errdetail("%s", gpu_error),
				 errhint("Check that the NVIDIA driver is loaded and a device is visible, or set gpusort.engine to \"auto\" or \"cpu\".")));
	}
	/*
	 * Under "auto", a server without a GPU (no device, no driver, or a
	 * build without the CUDA library) says so on EXPLAIN's engine line
	 * ("cpu (no GPU)"), not in a fallback line on every sort.  A GPU that
	 * is there but can't be used now (the service restarting) is worth
	 * that line.
	 */
	if (fallback &&
		(gpusort_engine_choice == GS_ENGINE_GPU ||
		 (!gs_gpu_absent() && gs_cuda_built())))
		*fallback = gpu_error;
	return gs_engine_cpu();
}

static void
gs_keybuf_release(void *arg)
{
	GsKeyBuf   *kb = (GsKeyBuf *) arg;

	/*
	 * Nothing may still be sorting what is about to be freed; the keys of
	 * this buffer need not be put back as they were.
	 */
	if (kb->ptr)
		gs_engine_stop_all_but((const char *) kb->ptr,
							   (const char *) kb->ptr + kb->bytes);
	else
		gs_engine_stop_all();
	if (kb->ptr)
		kb->engine->ops->keybuf_free(kb->engine->eng, kb->ptr, kb->bytes);
	kb->ptr = NULL;
	if (kb->prev)
		kb->prev->next = kb->next;
	else
		live_bufs = kb->next;
	if (kb->next)
		kb->next->prev = kb->prev;
}

static GsKeyBuf *
gs_keybuf_find(void *ptr)
{
	GsKeyBuf   *kb;

	for (kb = live_bufs; kb != NULL; kb = kb->next)
		if (kb->ptr == ptr)
			return kb;
	elog(ERROR, "gpusort: unknown key buffer %p", ptr);
	return NULL;				/* keep compiler quiet */
}

static void
gs_keybuf_oom(size_t bytes, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("out of memory"),
			 errdetail("Failed on request of size %zu for gpusort keys: %s",
					   bytes, detail)));
}

void *
gs_keybuf_alloc(GsEngine *e, size_t bytes, MemoryContext owner)
{
	GsKeyBuf   *kb = MemoryContextAllocZero(owner, sizeof(GsKeyBuf));
	char		errbuf[GS_ERRBUF_SIZE];
	void	   *ptr = NULL;
	gs_status	st;

	if (bytes == 0)
		bytes = 1;
	errbuf[0] = '\0';
	st = e->ops->keybuf_alloc(e->eng, bytes, &ptr, errbuf, sizeof(errbuf));
	if (st != GS_OK && e->is_gpu)
	{
		/* pinned memory is scarce; ordinary memory still sorts */
		e = gs_engine_cpu();
		st = e->ops->keybuf_alloc(e->eng, bytes, &ptr, errbuf, sizeof(errbuf));
	}
	if (st != GS_OK)
		gs_keybuf_oom(bytes, errbuf);

	kb->engine = e;
	kb->ptr = ptr;
	kb->bytes = bytes;
	kb->next = live_bufs;
	if (live_bufs)
		live_bufs->prev = kb;
	live_bufs = kb;
	kb->cb.func = gs_keybuf_release;
	kb->cb.arg = kb;
	MemoryContextRegisterResetCallback(owner, &kb->cb);
	return ptr;
}

void *
gs_keybuf_grow(GsEngine *e, void *ptr, size_t old_bytes, size_t new_bytes)
{
	GsKeyBuf   *kb = gs_keybuf_find(ptr);
	char		errbuf[GS_ERRBUF_SIZE];
	void	   *p = ptr;
	gs_status	st;

	/* callers wait for their jobs first; this is only a safety net */
	gs_engine_stop_all();
	errbuf[0] = '\0';
	st = kb->engine->ops->keybuf_realloc(kb->engine->eng, &p, old_bytes,
										 new_bytes, errbuf, sizeof(errbuf));
	if (st != GS_OK)
		gs_keybuf_oom(new_bytes, errbuf);
	kb->ptr = p;
	kb->bytes = new_bytes;
	return p;
}

void
gs_keybuf_free(GsEngine *e, void *ptr)
{
	GsKeyBuf   *kb = gs_keybuf_find(ptr);

	gs_engine_stop_all();
	kb->engine->ops->keybuf_free(kb->engine->eng, kb->ptr, kb->bytes);
	kb->ptr = NULL;
	/* the list entry goes when its context does */
}

/* engines poll this; it must not longjmp */
static int
gs_cancel_requested(void *arg)
{
	return INTERRUPTS_PENDING_CONDITION() && INTERRUPTS_CAN_BE_PROCESSED() &&
		(QueryCancelPending || ProcDiePending);
}

GsEngine *
gs_engine_sort(GsEngine *e, void *keys, size_t n, int key_bytes,
			   uint32 *perm, int flags, gs_sort_stats *stats,
			   char **fallback)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_sort_stats local_stats;
	gs_status	st;

	if (stats == NULL)
		stats = &local_stats;
	if (n > GS_MAX_ROWS || !GS_KEY_BYTES_VALID(key_bytes))
		elog(ERROR, "gpusort: invalid sort of %zu rows of %d-byte keys",
			 n, key_bytes);

	/*
	 * An engine sorts synchronously only with nothing outstanding.  Jobs
	 * of another sort (one whose input contains this one) are stopped;
	 * their waits sort them again.
	 */
	gs_engine_stop_all();

	/* the GPU's queue may be too long for this sort: then the CPU now */
	if (gs_service_is_engine(e->ops))
	{
		char	   *why = NULL;

		if (!gs_service_admit(keys, n, key_bytes, &why))
		{
			if (fallback)
				*fallback = why;
			e = gs_engine_cpu();
		}
	}

	for (;;)
	{
		instr_time	t0;

		memset(stats, 0, sizeof(*stats));
		errbuf[0] = '\0';
		INSTR_TIME_SET_CURRENT(t0);
		st = e->ops->sort(e->eng, keys, n, key_bytes, perm, flags,
						  gs_cancel_requested, NULL, stats,
						  errbuf, sizeof(errbuf));
		if (st == GS_OK)
		{
			if (!e->is_gpu)
			{
				instr_time	t1;

				INSTR_TIME_SET_CURRENT(t1);
				INSTR_TIME_SUBTRACT(t1, t0);
				gs_service_note_cpu_rate(n, INSTR_TIME_GET_MILLISEC(t1));
			}
			return e;
		}
		if (st == GS_ERR_CANCELED)
		{
			/* throws if it really was a cancel; else just try again */
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		if (!e->is_gpu)
			break;

		/*
		 * The service failed the sort (a device error, the service
		 * stopping, no free slice): the keys are as given, so the CPU
		 * engine sorts them.  The service recovers by itself, so only
		 * EXPLAIN tells; later sorts try it again.
		 */
		if (fallback)
			*fallback = psprintf(GS_FALLBACK_ERROR_TEXT " (%s): %s",
								 gs_status_text(st), errbuf);
		e = gs_engine_cpu();
	}

	if (st == GS_ERR_NOMEM)
		gs_keybuf_oom(n * (size_t) key_bytes, errbuf);
	elog(ERROR, "gpusort CPU engine failed: %s: %s", gs_status_text(st), errbuf);
	return NULL;				/* keep compiler quiet */
}

/*
 * Stop every outstanding asynchronous job of every engine.  Called before
 * key buffers are freed or moved, also from memory context cleanup after an
 * ERROR, so it must not fail.  A stopped job's wait sorts it again.
 */
static void
gs_engine_stop_all(void)
{
	gs_engine_stop_all_but(NULL, NULL);
}

/*
 * Stop every outstanding job; the keys of those in [lo, hi) (memory about
 * to be freed) need not be left as they were given.
 */
static void
gs_engine_stop_all_but(const char *lo, const char *hi)
{
	GsSortJob  *job;

	if (pending_jobs == NULL)
		return;
	if (cpu_ready && cpu_engine.ops->sort_abort)
		cpu_engine.ops->sort_abort(cpu_engine.eng);
	if (gpu_engine.ops && gpu_engine.eng &&
		gs_service_is_engine(gpu_engine.ops))
		gs_service_abort_but(gpu_engine.eng, lo, hi);
	else if (gpu_engine.ops && gpu_engine.eng && gpu_engine.ops->sort_abort)
		gpu_engine.ops->sort_abort(gpu_engine.eng);
	for (job = pending_jobs; job != NULL; job = job->next)
		job->pending = false;
	pending_jobs = NULL;
}

static void
gs_job_unlink(GsSortJob *job)
{
	GsSortJob **p;

	for (p = &pending_jobs; *p != NULL; p = &(*p)->next)
	{
		if (*p == job)
		{
			*p = job->next;
			break;
		}
	}
	job->next = NULL;
	job->pending = false;
}

/*
 * A transaction's abort stops every job before anything is freed or
 * detached: the memory contexts that own the jobs and their keys go later,
 * in an order of their own.
 */
static void
gs_engine_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		gs_engine_stop_all();
}

void
gs_engine_submit(GsSortJob *job, GsEngine *e, void *keys, size_t n,
				 int key_bytes, uint32 *perm, int flags)
{
	static bool xact_callback_registered = false;

	if (!xact_callback_registered)
	{
		RegisterXactCallback(gs_engine_xact_callback, NULL);
		xact_callback_registered = true;
	}
	memset(job, 0, sizeof(*job));
	job->engine = e;
	job->keys = keys;
	job->n = n;
	job->key_bytes = key_bytes;
	job->perm = perm;
	job->flags = flags;

	if (n > GS_MAX_ROWS || !GS_KEY_BYTES_VALID(key_bytes))
		elog(ERROR, "gpusort: invalid sort of %zu rows of %d-byte keys",
			 n, key_bytes);

	if (gs_service_is_engine(e->ops))
	{
		char	   *why = NULL;

		if (!gs_service_admit(keys, n, key_bytes, &why))
		{
			job->fallback = why;
			e = gs_engine_cpu();
			job->engine = e;
		}
	}

	if (e->ops->sort_submit != NULL)
	{
		char		errbuf[GS_ERRBUF_SIZE];
		gs_status	st;

		errbuf[0] = '\0';
		st = e->ops->sort_submit(e->eng, keys, n, key_bytes, perm, flags,
								 &job->ticket, errbuf, sizeof(errbuf));
		if (st == GS_OK)
		{
			GsSortJob **p = &pending_jobs;

			/* append: the list is in submit order */
			while (*p != NULL)
				p = &(*p)->next;
			*p = job;
			job->pending = true;
			return;
		}
		/* could not start it in the background: sort it now */
	}
	job->sorted_by = gs_engine_sort(e, keys, n, key_bytes, perm, flags,
									&job->stats,
									job->fallback ? NULL : &job->fallback);
	job->done = true;
}

GsEngine *
gs_engine_wait(GsSortJob *job, gs_sort_stats *stats, char **fallback)
{
	GsEngine   *e = job->engine;
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;

	if (job->done)
	{
		if (stats)
			*stats = job->stats;
		if (fallback && job->fallback)
			*fallback = job->fallback;
		return job->sorted_by;
	}
	if (!job->pending)
	{
		/* stopped by gs_engine_stop_all: its keys are as given */
		return gs_engine_sort(e, job->keys, job->n, job->key_bytes,
							  job->perm, job->flags, stats, fallback);
	}

	errbuf[0] = '\0';
	if (stats)
		memset(stats, 0, sizeof(*stats));
	/* the service's client reports its own wait; the CPU engine's thread */
	if (!e->is_gpu)
		pgstat_report_wait_start(gs_wait_event(GS_WAIT_THREADS));
	st = e->ops->sort_wait(e->eng, job->ticket, gs_cancel_requested, NULL,
						   stats, errbuf, sizeof(errbuf));
	if (!e->is_gpu)
		pgstat_report_wait_end();
	gs_job_unlink(job);
	if (st == GS_OK)
	{
		if (!e->is_gpu && stats)
			gs_service_note_cpu_rate(job->n, stats->total_ms);
		if (fallback && job->fallback)
			*fallback = job->fallback;
		return e;
	}
	if (st == GS_ERR_CANCELED)
		CHECK_FOR_INTERRUPTS();
	else if (e->is_gpu)
	{
		/* the service failed it: the keys are as given, the CPU sorts them */
		if (fallback)
			*fallback = psprintf(GS_FALLBACK_ERROR_TEXT " (%s): %s",
								 gs_status_text(st), errbuf);
		fallback = NULL;
		e = gs_engine_cpu();
	}

	/*
	 * A spurious cancel, or a failure: the keys are as given, so the
	 * synchronous path sorts them again with all its fallbacks.
	 */
	return gs_engine_sort(e, job->keys, job->n, job->key_bytes, job->perm,
						  job->flags, stats, fallback);
}
