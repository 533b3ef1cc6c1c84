/*-------------------------------------------------------------------------
 *
 * engine.c
 *	  Choosing, loading and calling sort engines.
 *
 * The CPU engine is linked in and always works.  The CUDA engine lives in
 * a separate shared library that is opened with dlopen the first time a
 * sort wants it, in a backend (never in the postmaster: CUDA does not
 * survive fork).  If the library is missing, has another ABI version, or
 * finds no usable device, the reason is remembered and every sort of this
 * backend runs on the CPU engine.
 *
 * Engines report failures as status codes plus text; here they become
 * PostgreSQL errors, or a transparent switch to the CPU engine.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>
#include <unistd.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "gpusort_int.h"

/* the two engines of this backend */
static GsEngine cpu_engine;
static bool cpu_ready = false;

static GsEngine gpu_engine;
static bool gpu_tried = false;	/* tried to load and create it */
static bool gpu_ready = false;
static void *gpu_dl = NULL;
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

/* the library's path: "$libdir/x" means pkglibdir/x.so */
static char *
gs_cuda_library_path(void)
{
	const char *name = gpusort_cuda_library ? gpusort_cuda_library :
		"$libdir/" GS_CUDA_LIBRARY_NAME;
	char		path[MAXPGPATH];

	if (strncmp(name, "$libdir/", 8) == 0)
		snprintf(path, sizeof(path), "%s/%s%s", pkglib_path, name + 8,
				 strchr(name + 8, '.') ? "" : DLSUFFIX);
	else if (first_dir_separator(name) == NULL)
		snprintf(path, sizeof(path), "%s/%s%s", pkglib_path, name,
				 strchr(name, '.') ? "" : DLSUFFIX);
	else
		strlcpy(path, name, sizeof(path));
	return pstrdup(path);
}

bool
gs_cuda_built(void)
{
	char	   *path = gs_cuda_library_path();
	bool		found = access(path, R_OK) == 0;

	pfree(path);
	return found;
}

bool
gs_cuda_loaded(void)
{
	return gpu_ready;
}

const char *
gs_cuda_load_error(void)
{
	return gpu_tried && !gpu_ready ? gpu_error : NULL;
}

/* load the CUDA engine once; on failure remember why */
static void
gs_gpu_try_load(void)
{
	char	   *path;
	gs_engine_entry_fn entry;
	gs_status	st;

	if (gpu_tried)
		return;
	gpu_tried = true;
	gpu_error[0] = '\0';

	/* CUDA must never be initialised in the postmaster */
	if (!IsUnderPostmaster && IsPostmasterEnvironment)
	{
		strlcpy(gpu_error, "not available in the postmaster", sizeof(gpu_error));
		return;
	}

	path = gs_cuda_library_path();
	gpu_dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (gpu_dl == NULL)
	{
		const char *e = dlerror();

		snprintf(gpu_error, sizeof(gpu_error), "could not load \"%s\": %s",
				 path, e ? e : "unknown error");
		pfree(path);
		return;
	}
	entry = (gs_engine_entry_fn) dlsym(gpu_dl, GS_CUDA_ENTRY_SYMBOL);
	if (entry == NULL)
	{
		snprintf(gpu_error, sizeof(gpu_error),
				 "\"%s\" does not export %s", path, GS_CUDA_ENTRY_SYMBOL);
		pfree(path);
		return;
	}
	pfree(path);
	gpu_engine.ops = entry(GS_ENGINE_ABI_VERSION);
	if (gpu_engine.ops == NULL)
	{
		snprintf(gpu_error, sizeof(gpu_error),
				 "the CUDA engine library was built for another engine ABI version (want %d)",
				 GS_ENGINE_ABI_VERSION);
		return;
	}

	st = gpu_engine.ops->create(&gpu_engine.eng, gpu_error, sizeof(gpu_error));
	if (st != GS_OK)
	{
		if (gpu_error[0] == '\0')
			strlcpy(gpu_error, gs_status_text(st), sizeof(gpu_error));
		return;
	}
	memset(&gpu_engine.info, 0, sizeof(gpu_engine.info));
	st = gpu_engine.ops->device_info(gpu_engine.eng, &gpu_engine.info,
									 gpu_error, sizeof(gpu_error));
	if (st != GS_OK)
	{
		gpu_engine.ops->destroy(gpu_engine.eng);
		gpu_engine.eng = NULL;
		if (gpu_error[0] == '\0')
			strlcpy(gpu_error, gs_status_text(st), sizeof(gpu_error));
		return;
	}
	gpu_engine.is_gpu = true;
	gpu_ready = true;
}

/* the GPU went bad mid-backend: stop using it */
static void
gs_gpu_disable(const char *why)
{
	strlcpy(gpu_error, why, sizeof(gpu_error));
	gpu_ready = false;
}

GsEngine *
gs_engine_choose(double nrows, const char **fallback)
{
	if (fallback)
		*fallback = NULL;
	if (gpusort_engine_choice == GS_ENGINE_CPU)
		return gs_engine_cpu();
	if (gpusort_engine_choice == GS_ENGINE_AUTO &&
		nrows < (double) gpusort_gpu_min_rows)
		return gs_engine_cpu();

	gs_gpu_try_load();
	if (gpu_ready)
		return &gpu_engine;

	/* wanted the GPU and can't have it */
	if (gpusort_engine_choice == GS_ENGINE_GPU && !gpu_warned)
	{
		gpu_warned = true;
		ereport(WARNING,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gpusort GPU engine is not available, sorting on the CPU"),
				 errdetail("%s", gpu_error),
				 errhint("Check that the NVIDIA driver is loaded and a device is visible, or set gpusort.engine to \"auto\" or \"cpu\".")));
	}
	/*
	 * Under "auto", a build without the CUDA library simply has no GPU: not
	 * worth a word in EXPLAIN.  A library that is there but can't be used
	 * is.
	 */
	if (fallback &&
		(gpusort_engine_choice == GS_ENGINE_GPU || gs_cuda_built()))
		*fallback = gpu_error;
	return gs_engine_cpu();
}

static void
gs_keybuf_release(void *arg)
{
	GsKeyBuf   *kb = (GsKeyBuf *) arg;

	/* nothing may still be sorting what is about to be freed */
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

	for (;;)
	{
		memset(stats, 0, sizeof(*stats));
		errbuf[0] = '\0';
		st = e->ops->sort(e->eng, keys, n, key_bytes, perm, flags,
						  gs_cancel_requested, NULL, stats,
						  errbuf, sizeof(errbuf));
		if (st == GS_OK)
			return e;
		if (st == GS_ERR_CANCELED)
		{
			/* throws if it really was a cancel; else just try again */
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		if (!e->is_gpu)
			break;

		/* the GPU failed: say so once, and sort on the CPU */
		if (fallback)
			*fallback = psprintf("GPU sort failed (%s): %s",
								 gs_status_text(st), errbuf);
		if (st != GS_ERR_DEVICE_NOMEM)
		{
			/* a device fault, not just a sort too big for it: stop using it */
			ereport(WARNING,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 errmsg("gpusort GPU sort failed, sorting on the CPU"),
					 errdetail("%s: %s", gs_status_text(st), errbuf)));
			gs_gpu_disable(errbuf);
		}
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
	GsSortJob  *job;

	if (pending_jobs == NULL)
		return;
	if (cpu_ready && cpu_engine.ops->sort_abort)
		cpu_engine.ops->sort_abort(cpu_engine.eng);
	if (gpu_engine.ops && gpu_engine.eng && gpu_engine.ops->sort_abort)
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

void
gs_engine_submit(GsSortJob *job, GsEngine *e, void *keys, size_t n,
				 int key_bytes, uint32 *perm, int flags)
{
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
									&job->stats, &job->fallback);
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
	st = e->ops->sort_wait(e->eng, job->ticket, gs_cancel_requested, NULL,
						   stats, errbuf, sizeof(errbuf));
	gs_job_unlink(job);
	if (st == GS_OK)
		return e;
	if (st == GS_ERR_CANCELED)
		CHECK_FOR_INTERRUPTS();

	/*
	 * A spurious cancel, or a failure: the keys are as given, so the
	 * synchronous path sorts them again with all its fallbacks.  A GPU
	 * fault shows up there too, with its warning.
	 */
	return gs_engine_sort(e, job->keys, job->n, job->key_bytes, job->perm,
						  job->flags, stats, fallback);
}
