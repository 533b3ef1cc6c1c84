/*-------------------------------------------------------------------------
 *
 * gpusort_cuda.cu
 *	  The CUDA engine: gpusort's engine API (src/include/gpusort_engine.h) on
 *	  top of the hybrid radix sort (hrs.h).  Built as libgpusort_cuda.so and
 *	  opened by the extension with dlopen; the one exported symbol is
 *	  gpusort_cuda_engine().
 *
 * Nothing here touches CUDA before create(), which is called lazily in a
 * backend.  An instance keeps its context, two slots (stream, side stream,
 * events, pinned staging and device buffers, reused by later sorts) and,
 * once an asynchronous sort was submitted, one worker thread.  Every
 * failure comes back as a gs_status with text; nothing throws, exits or
 * prints.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <signal.h>

#include <cuda_runtime.h>

#include "gpusort_engine.h"
#include "hrs.h"

#define GS_EXPORT extern "C" __attribute__((visibility("default")))

/*
 * Asynchronous sorts.  One worker thread per instance (started on the first
 * sort_submit, with every signal blocked, joined in destroy) runs the jobs
 * in submit order.  There are two slots, each with its own stream, poll
 * event, pinned staging and device buffers (kept for reuse like the
 * synchronous path's), so that job k+1 is uploaded on one stream while job
 * k is sorted or downloaded on the other: both PCIe directions are busy at
 * once.  The worker starts job k+1's upload while it waits for job k's last
 * kernels (from the callback that wait polls, which also carries the abort
 * flag), so the upload also overlaps the end of job k's sort.  When the
 * second slot cannot get its device memory, jobs run one at a time on slot
 * 0 from then on.
 *
 * A job's state moves QUEUED -> (worker) HOST_DONE: either failed, with
 * keys[] never written, or with its downloads enqueued behind its done
 * event.  sort_wait waits for HOST_DONE polling the caller's cancel (which
 * sets the job's abort flag), then, on success, for the done event without
 * polling cancel: once the downloads are under way keys[] is being
 * overwritten, so the sort can only end as a success.  The synchronous
 * sort() uses slot 0 and is refused while jobs are outstanding.
 */
#define NSLOTS 2
#define NMARKS 5				/* start, uploaded, sort start, sorted, done */

struct Slot
{
	cudaStream_t stream;
	cudaEvent_t poll;			/* no timing: for waits */
	cudaStream_t side;			/* hrs::SortArgs::side, with its events */
	cudaEvent_t side_mark[2];
	void	   *staging;		/* pinned, hrs::STAGING_BYTES */
	void	   *dmem;			/* device buffers, reused */
	size_t		dmem_bytes;
};

enum JobState
{
	JOB_FREE = 0,
	JOB_QUEUED,
	JOB_HOST_DONE
};

struct Job
{
	gs_ticket	ticket;			/* 0 when the entry is free */
	int			state;			/* JobState; under mu */
	int			abort;			/* set by any thread; atomic */
	void	   *keys;
	size_t		n;
	int			key_bytes;
	uint32_t   *perm;
	int			flags;
	bool		keys_pinned;
	/* worker-only until HOST_DONE */
	bool		uploaded;
	int			slot;
	size_t		need;
	int			passes;
	double		t_start;		/* ms, when the worker first touched it */
	gs_status	st;
	char		err[GS_ERRBUF_SIZE];
	cudaEvent_t mark[NMARKS];
};

struct gs_engine
{
	int			device;
	cudaDeviceProp prop;
	int			runtime_version;
	int			driver_version;
	Slot		slot[NSLOTS];	/* slot[0] is also the synchronous path's */
	cudaEvent_t mark[4];		/* sync: start, uploaded, sorted, downloaded */

	/* asynchronous sorts */
	bool		worker_started;
	bool		sync_init;		/* mu and cv initialised */
	pthread_t	worker;
	pthread_mutex_t mu;
	pthread_cond_t cv;			/* job state changes, new jobs, shutdown */
	bool		shutdown;		/* under mu */
	bool		single_slot;	/* worker-only: run jobs one at a time */
	gs_ticket	next_ticket;	/* under mu */
	Job			job[GS_MAX_INFLIGHT];
};

static size_t
align_up(size_t x)
{
	return (x + 255) & ~(size_t) 255;
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void async_shutdown(gs_engine *eng);

static void
engine_release(gs_engine *eng)
{
	async_shutdown(eng);
	for (int s = 0; s < NSLOTS; s++)
	{
		Slot	   *sl = &eng->slot[s];

		if (sl->stream)
			(void) cudaStreamSynchronize(sl->stream);
		if (sl->dmem)
			(void) cudaFree(sl->dmem);
		if (sl->staging)
			(void) cudaFreeHost(sl->staging);
		if (sl->poll)
			(void) cudaEventDestroy(sl->poll);
		for (int i = 0; i < 2; i++)
			if (sl->side_mark[i])
				(void) cudaEventDestroy(sl->side_mark[i]);
		if (sl->side)
		{
			(void) cudaStreamSynchronize(sl->side);
			(void) cudaStreamDestroy(sl->side);
		}
		if (sl->stream)
			(void) cudaStreamDestroy(sl->stream);
	}
	for (int i = 0; i < 4; i++)
		if (eng->mark[i])
			(void) cudaEventDestroy(eng->mark[i]);
	for (int j = 0; j < GS_MAX_INFLIGHT; j++)
		for (int i = 0; i < NMARKS; i++)
			if (eng->job[j].mark[i])
				(void) cudaEventDestroy(eng->job[j].mark[i]);
	if (eng->sync_init)
	{
		pthread_cond_destroy(&eng->cv);
		pthread_mutex_destroy(&eng->mu);
	}
	free(eng);
}

/*
 * Run a CUDA call; on failure set st (with the error's text in errbuf) and
 * jump to label.  The users below name their label.
 */
#define CUDA_TRY_OR(label, call, what) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
		{ \
			st = hrs::cuda_status(e_, (what), errbuf, errlen); \
			goto label; \
		} \
	} while (0)

#define ENG_TRY(call, what) CUDA_TRY_OR(fail, call, what)

static gs_status
cuda_create_on_device(gs_engine **out, int device, char *errbuf, size_t errlen)
{
	gs_engine  *eng;
	gs_status	st = GS_OK;
	int			count = 0;
	cudaError_t e;

	*out = NULL;
	e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess)
	{
		st = hrs::cuda_status(e, "cudaGetDeviceCount", errbuf, errlen);
		/* whatever stops us from counting devices means "no device" */
		return GS_ERR_NODEVICE;
	}
	if (count == 0)
	{
		snprintf(errbuf, errlen, "no CUDA device is visible");
		return GS_ERR_NODEVICE;
	}
	if (device < 0 || device >= count)
	{
		snprintf(errbuf, errlen, "there is no CUDA device %d (%d visible)",
				 device, count);
		return GS_ERR_NODEVICE;
	}
	eng = (gs_engine *) calloc(1, sizeof(gs_engine));
	if (eng == NULL)
	{
		snprintf(errbuf, errlen, "out of host memory");
		return GS_ERR_NOMEM;
	}
	if (pthread_mutex_init(&eng->mu, NULL) != 0)
	{
		free(eng);
		snprintf(errbuf, errlen, "could not create a mutex");
		return GS_ERR_NOMEM;
	}
	if (pthread_cond_init(&eng->cv, NULL) != 0)
	{
		pthread_mutex_destroy(&eng->mu);
		free(eng);
		snprintf(errbuf, errlen, "could not create a condition variable");
		return GS_ERR_NOMEM;
	}
	eng->sync_init = true;
	eng->next_ticket = 1;
	eng->device = device;
	ENG_TRY(cudaGetDeviceProperties(&eng->prop, eng->device), "cudaGetDeviceProperties");
	if (eng->prop.major < 9)
	{
		snprintf(errbuf, errlen,
				 "device \"%s\" has compute capability %d.%d; the engine is built for 9.0 and later",
				 eng->prop.name, eng->prop.major, eng->prop.minor);
		st = GS_ERR_NODEVICE;
		goto fail;
	}
	ENG_TRY(cudaSetDevice(eng->device), "cudaSetDevice");
	ENG_TRY(cudaRuntimeGetVersion(&eng->runtime_version), "cudaRuntimeGetVersion");
	ENG_TRY(cudaDriverGetVersion(&eng->driver_version), "cudaDriverGetVersion");
	for (int s = 0; s < NSLOTS; s++)
	{
		Slot	   *sl = &eng->slot[s];

		ENG_TRY(cudaStreamCreateWithFlags(&sl->stream, cudaStreamNonBlocking),
				"cudaStreamCreate");
		ENG_TRY(cudaEventCreateWithFlags(&sl->poll, cudaEventDisableTiming),
				"cudaEventCreate");
		ENG_TRY(cudaStreamCreateWithFlags(&sl->side, cudaStreamNonBlocking),
				"cudaStreamCreate");
		for (int i = 0; i < 2; i++)
			ENG_TRY(cudaEventCreateWithFlags(&sl->side_mark[i], cudaEventDisableTiming),
					"cudaEventCreate");
		ENG_TRY(cudaHostAlloc(&sl->staging, hrs::STAGING_BYTES, cudaHostAllocDefault),
				"cudaHostAlloc");
	}
	for (int i = 0; i < 4; i++)
		ENG_TRY(cudaEventCreate(&eng->mark[i]), "cudaEventCreate");
	for (int j = 0; j < GS_MAX_INFLIGHT; j++)
		for (int i = 0; i < NMARKS; i++)
			ENG_TRY(cudaEventCreate(&eng->job[j].mark[i]), "cudaEventCreate");
	*out = eng;
	return GS_OK;

fail:
	engine_release(eng);
	return st;
}

static gs_status
cuda_create(gs_engine **out, char *errbuf, size_t errlen)
{
	return cuda_create_on_device(out, 0, errbuf, errlen);
}

static void
cuda_destroy(gs_engine *eng)
{
	if (eng != NULL)
		engine_release(eng);
}

static gs_status
cuda_device_info(gs_engine *eng, gs_device_info *info, char *errbuf,
				 size_t errlen)
{
	size_t		free_b = 0,
				total_b = 0;
	int			count = 0;
	cudaError_t e;

	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%.127s", eng->prop.name);
	(void) cudaGetDeviceCount(&count);
	info->device_count = count;
	info->device_id = eng->device;
	info->cc_major = eng->prop.major;
	info->cc_minor = eng->prop.minor;
	info->sm_count = eng->prop.multiProcessorCount;
	info->runtime_version = eng->runtime_version;
	info->driver_version = eng->driver_version;
	e = cudaMemGetInfo(&free_b, &total_b);
	if (e != cudaSuccess)
		return hrs::cuda_status(e, "cudaMemGetInfo", errbuf, errlen);
	info->total_mem = total_b;
	info->free_mem = free_b;
	return GS_OK;
}

static gs_status
cuda_keybuf_alloc(gs_engine *eng, size_t bytes, void **ptr, char *errbuf,
				  size_t errlen)
{
	cudaError_t e;

	(void) eng;
	*ptr = NULL;
	e = cudaHostAlloc(ptr, bytes > 0 ? bytes : 1, cudaHostAllocDefault);
	if (e == cudaErrorMemoryAllocation)
	{
		(void) cudaGetLastError();
		snprintf(errbuf, errlen, "could not pin %zu bytes of host memory", bytes);
		*ptr = NULL;
		return GS_ERR_NOMEM;
	}
	if (e != cudaSuccess)
	{
		*ptr = NULL;
		return hrs::cuda_status(e, "cudaHostAlloc", errbuf, errlen);
	}
	return GS_OK;
}

static void
cuda_keybuf_free(gs_engine *eng, void *ptr, size_t bytes)
{
	(void) eng;
	(void) bytes;
	if (ptr != NULL)
		(void) cudaFreeHost(ptr);
}

static gs_status
cuda_keybuf_realloc(gs_engine *eng, void **ptr, size_t old_bytes,
					size_t new_bytes, char *errbuf, size_t errlen)
{
	void	   *np;
	gs_status	st;

	st = cuda_keybuf_alloc(eng, new_bytes, &np, errbuf, errlen);
	if (st != GS_OK)
		return st;
	if (*ptr != NULL)
	{
		memcpy(np, *ptr, old_bytes < new_bytes ? old_bytes : new_bytes);
		cuda_keybuf_free(eng, *ptr, old_bytes);
	}
	*ptr = np;
	return GS_OK;
}

/* page-lock memory the caller owns, for every device (portable) */
static gs_status
cuda_host_register(gs_engine *eng, void *ptr, size_t bytes, char *errbuf,
				   size_t errlen)
{
	cudaError_t e;

	(void) cudaSetDevice(eng->device);
	e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
	if (e != cudaSuccess)
	{
		(void) cudaGetLastError();
		return hrs::cuda_status(e, "cudaHostRegister", errbuf, errlen);
	}
	return GS_OK;
}

static void
cuda_host_unregister(gs_engine *eng, void *ptr)
{
	(void) eng;
	if (cudaHostUnregister(ptr) != cudaSuccess)
		(void) cudaGetLastError();
}

/* make sure slot sl's reusable device allocation holds at least bytes */
static gs_status
reserve_device(Slot *sl, size_t bytes, char *errbuf, size_t errlen)
{
	size_t		free_b = 0,
				total_b = 0;
	cudaError_t e;

	if (sl->dmem_bytes >= bytes)
		return GS_OK;
	if (sl->dmem)
	{
		(void) cudaFree(sl->dmem);
		sl->dmem = NULL;
		sl->dmem_bytes = 0;
	}
	e = cudaMemGetInfo(&free_b, &total_b);
	if (e != cudaSuccess)
		return hrs::cuda_status(e, "cudaMemGetInfo", errbuf, errlen);
	if (bytes > free_b)
	{
		snprintf(errbuf, errlen,
				 "the sort needs %zu MB of device memory, %zu MB are free",
				 bytes >> 20, free_b >> 20);
		return GS_ERR_DEVICE_NOMEM;
	}
	e = cudaMalloc(&sl->dmem, bytes);
	if (e != cudaSuccess)
	{
		sl->dmem = NULL;
		(void) cudaGetLastError();
		return hrs::cuda_status(e, "cudaMalloc", errbuf, errlen);
	}
	sl->dmem_bytes = bytes;
	return GS_OK;
}

/* device bytes a sort of n keys of key_bytes needs */
static size_t
sort_need(size_t n, int key_bytes)
{
	return 2 * align_up(n * (size_t) key_bytes) +
		2 * align_up(n * sizeof(uint32_t)) +
		align_up(hrs::temp_bytes(key_bytes, n));
}

/* lay a sort of n keys out in slot sl's device buffers */
static void
sort_args(gs_engine *eng, Slot *sl, size_t n, int key_bytes, int flags,
		  hrs::SortArgs *a)
{
	size_t		kbytes = align_up(n * (size_t) key_bytes);
	size_t		vbytes = align_up(n * sizeof(uint32_t));
	char	   *base = (char *) sl->dmem;

	memset(a, 0, sizeof(*a));
	a->n = n;
	a->key_bytes = key_bytes;
	a->keys[0] = base;
	a->keys[1] = base + kbytes;
	a->vals[0] = (uint32_t *) (base + 2 * kbytes);
	a->vals[1] = (uint32_t *) (base + 2 * kbytes + vbytes);
	a->temp = base + 2 * kbytes + 2 * vbytes;
	a->temp_bytes = align_up(hrs::temp_bytes(key_bytes, n));
	a->keys_out = (flags & GS_SORT_KEYS_OUT) != 0;
	a->sm_count = eng->prop.multiProcessorCount;
	a->stream = sl->stream;
	a->event = sl->poll;
	a->side = sl->side;
	a->side_mark[0] = sl->side_mark[0];
	a->side_mark[1] = sl->side_mark[1];
	a->staging = sl->staging;
}

static bool
sort_args_valid(void *keys, size_t n, int key_bytes, uint32_t *perm,
				char *errbuf, size_t errlen)
{
	if (!GS_KEY_BYTES_VALID(key_bytes) || n > GS_MAX_ROWS ||
		(n > 0 && (keys == NULL || perm == NULL)))
	{
		snprintf(errbuf, errlen, "invalid sort arguments (n=%zu, key_bytes=%d)",
				 n, key_bytes);
		return false;
	}
	return true;
}

/* true when the number of outstanding asynchronous sorts is not zero */
static bool
async_busy(gs_engine *eng)
{
	bool		busy = false;

	if (!eng->sync_init)
		return false;
	pthread_mutex_lock(&eng->mu);
	for (int j = 0; j < GS_MAX_INFLIGHT; j++)
		if (eng->job[j].ticket != 0)
			busy = true;
	pthread_mutex_unlock(&eng->mu);
	return busy;
}

static gs_status
cuda_sort(gs_engine *eng, void *keys, size_t n, int key_bytes,
		  uint32_t *perm, int flags, gs_cancel_fn cancel, void *cancel_arg,
		  gs_sort_stats *stats, char *errbuf, size_t errlen)
{
	double		t0 = now_ms();
	size_t		need;
	Slot	   *sl = &eng->slot[0];
	hrs::SortArgs a;
	hrs::SortResult res;
	gs_status	st;
	float		ms;

	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (!sort_args_valid(keys, n, key_bytes, perm, errbuf, errlen))
		return GS_ERR_INVALID;
	/* the calling thread may be new to the device (a service's worker) */
	st = hrs::cuda_status(cudaSetDevice(eng->device), "cudaSetDevice", errbuf, errlen);
	if (st != GS_OK)
		return st;
	if (async_busy(eng))
	{
		snprintf(errbuf, errlen,
				 "a synchronous sort was started while asynchronous sorts are outstanding");
		return GS_ERR_INVALID;
	}
	if (n == 0)
		return GS_OK;

	need = sort_need(n, key_bytes);
	st = reserve_device(sl, need, errbuf, errlen);
	if (st == GS_ERR_DEVICE_NOMEM && eng->slot[1].dmem != NULL)
	{
		/* slot 1's buffers are idle now: give them up and try again */
		(void) cudaStreamSynchronize(eng->slot[1].stream);
		(void) cudaFree(eng->slot[1].dmem);
		eng->slot[1].dmem = NULL;
		eng->slot[1].dmem_bytes = 0;
		st = reserve_device(sl, need, errbuf, errlen);
	}
	if (st != GS_OK)
		return st;
	sort_args(eng, sl, n, key_bytes, flags, &a);
	a.cancel = cancel;
	a.cancel_arg = cancel_arg;

#define SORT_TRY(call, what) CUDA_TRY_OR(done, call, what)

	SORT_TRY(cudaEventRecord(eng->mark[0], sl->stream), "cudaEventRecord");
	SORT_TRY(cudaMemcpyAsync(a.keys[0], keys, n * (size_t) key_bytes,
							 cudaMemcpyHostToDevice, sl->stream), "upload");
	SORT_TRY(cudaEventRecord(eng->mark[1], sl->stream), "cudaEventRecord");
	st = hrs::sort(a, &res, errbuf, errlen);
	if (st != GS_OK)
		goto done;
	SORT_TRY(cudaEventRecord(eng->mark[2], sl->stream), "cudaEventRecord");

	/*
	 * Cancel is last polled while the sort ends: once the downloads start,
	 * keys[] is being overwritten, and a failed sort must leave it as given.
	 */
	st = hrs::wait_event(eng->mark[2], cancel, cancel_arg, errbuf, errlen);
	if (st != GS_OK)
		goto done;
	SORT_TRY(cudaMemcpyAsync(perm, a.vals[0], n * sizeof(uint32_t),
							 cudaMemcpyDeviceToHost, sl->stream), "download");
	if (a.keys_out)
		SORT_TRY(cudaMemcpyAsync(keys, a.keys[0], n * (size_t) key_bytes,
								 cudaMemcpyDeviceToHost, sl->stream), "download");
	SORT_TRY(cudaEventRecord(eng->mark[3], sl->stream), "cudaEventRecord");
	st = hrs::wait_event(eng->mark[3], NULL, NULL, errbuf, errlen);
	if (st != GS_OK)
		goto done;

	if (stats)
	{
		if (cudaEventElapsedTime(&ms, eng->mark[0], eng->mark[1]) == cudaSuccess)
			stats->upload_ms = ms;
		if (cudaEventElapsedTime(&ms, eng->mark[1], eng->mark[2]) == cudaSuccess)
			stats->sort_ms = ms;
		if (cudaEventElapsedTime(&ms, eng->mark[2], eng->mark[3]) == cudaSuccess)
			stats->download_ms = ms;
		stats->device_bytes = need;
		stats->passes = res.passes;
		stats->total_ms = now_ms() - t0;
	}
	return GS_OK;

done:
	/* never leave work running on buffers or memory we hand back */
	(void) cudaStreamSynchronize(sl->stream);
	if (st != GS_ERR_CANCELED)
		(void) cudaGetLastError();
	return st;
}

/* ---------------------------------------------------------------------
 * asynchronous sorts
 * --------------------------------------------------------------------- */

/*
 * Copy for an asynchronous job, in pieces: the two slots' streams share the
 * copy engines, and a sort's small host round trips (a few bytes of counts
 * each pass) may otherwise queue behind the other slot's whole chunk.
 */
#define COPY_PIECE ((size_t) 32 << 20)

static cudaError_t
copy_pieces(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
			cudaStream_t stream)
{
	for (size_t at = 0; at < bytes; at += COPY_PIECE)
	{
		size_t		len = bytes - at < COPY_PIECE ? bytes - at : COPY_PIECE;
		cudaError_t e = cudaMemcpyAsync((char *) dst + at, (const char *) src + at,
										len, kind, stream);

		if (e != cudaSuccess)
			return e;
	}
	return cudaSuccess;
}

/* is [p, p + bytes) page-locked host memory (a keybuf, say)? */
static bool
is_pinned(const void *p, size_t bytes)
{
	cudaPointerAttributes attr;
	const char *ends[2] = {(const char *) p, (const char *) p + bytes - 1};

	for (int i = 0; i < 2; i++)
	{
		if (cudaPointerGetAttributes(&attr, ends[i]) != cudaSuccess)
		{
			(void) cudaGetLastError();
			return false;
		}
		if (attr.type != cudaMemoryTypeHost)
			return false;
	}
	return true;
}

static bool
job_aborted(Job *job)
{
	return __atomic_load_n(&job->abort, __ATOMIC_ACQUIRE) != 0;
}

/*
 * Worker: enqueue job's upload into a slot with room for it.  quiet: called
 * from inside another job's sort; then nothing may wait for the device (the
 * other slot is busy) and a failure only means "try again later".
 */
static gs_status
job_upload(gs_engine *eng, Job *job, int slot, bool quiet)
{
	Slot	   *sl = &eng->slot[slot];
	gs_status	st;
	cudaError_t e;

	st = reserve_device(sl, job->need, job->err, sizeof(job->err));
	if (st == GS_ERR_DEVICE_NOMEM && !quiet)
	{
		/* no room for two slots: free the other one and go one at a time */
		Slot	   *other = &eng->slot[1 - slot];

		if (other->dmem != NULL)
		{
			(void) cudaStreamSynchronize(other->stream);
			(void) cudaFree(other->dmem);
			other->dmem = NULL;
			other->dmem_bytes = 0;
			st = reserve_device(sl, job->need, job->err, sizeof(job->err));
		}
		eng->single_slot = true;
	}
	if (st != GS_OK)
		return st;
	job->slot = slot;
	e = cudaEventRecord(job->mark[0], sl->stream);
	if (e == cudaSuccess)
		e = copy_pieces(sl->dmem, job->keys, job->n * (size_t) job->key_bytes,
						cudaMemcpyHostToDevice, sl->stream);
	if (e == cudaSuccess)
		e = cudaEventRecord(job->mark[1], sl->stream);
	if (e != cudaSuccess)
		return hrs::cuda_status(e, "upload", job->err, sizeof(job->err));
	job->uploaded = true;
	return GS_OK;
}

struct PollArg
{
	gs_engine  *eng;
	Job		   *job;
};

/* the cancel callback of a running job's sort (worker thread) */
static int
worker_poll(void *arg)
{
	PollArg    *pa = (PollArg *) arg;

	return job_aborted(pa->job);
}

/*
 * The cancel callback while a job's last kernels end (worker thread): as
 * worker_poll, and it starts the upload of the job queued behind it into
 * the other slot.  Not earlier, from inside the sort: the sort's own small
 * host-to-device copies would then queue behind that upload.
 */
static int
worker_poll_tail(void *arg)
{
	PollArg    *pa = (PollArg *) arg;
	gs_engine  *eng = pa->eng;
	Job		   *cur = pa->job;
	Job		   *next = NULL;

	if (job_aborted(cur))
		return 1;
	if (eng->single_slot)
		return 0;
	pthread_mutex_lock(&eng->mu);
	for (int j = 0; j < GS_MAX_INFLIGHT; j++)
	{
		Job		   *o = &eng->job[j];

		if (o->ticket == cur->ticket + 1 && o->state == JOB_QUEUED)
			next = o;
	}
	pthread_mutex_unlock(&eng->mu);
	if (next != NULL && !next->uploaded && next->keys_pinned &&
		!job_aborted(next) && next->n > 0)
	{
		if (job_upload(eng, next, 1 - cur->slot, true) != GS_OK)
		{
			/* leave it to the worker's turn for that job */
			(void) cudaGetLastError();
			next->err[0] = '\0';
		}
	}
	return 0;
}

/* worker: run one job up to HOST_DONE (sets job->st and job->err) */
static void
job_run(gs_engine *eng, Job *job)
{
	hrs::SortArgs a;
	hrs::SortResult res;
	PollArg		pa = {eng, job};
	Slot	   *sl;
	gs_status	st = GS_OK;
	cudaError_t e;
	char	   *errbuf = job->err;
	size_t		errlen = sizeof(job->err);

	job->t_start = now_ms();
	if (job_aborted(job))
	{
		snprintf(errbuf, errlen, "canceled");
		job->st = GS_ERR_CANCELED;
		return;
	}
	if (job->n == 0)
	{
		job->st = GS_OK;
		return;
	}
	if (!job->uploaded)
	{
		int			slot = 0;

		/* the slot the previous job did not use, if it is still outstanding */
		if (!eng->single_slot)
		{
			pthread_mutex_lock(&eng->mu);
			for (int j = 0; j < GS_MAX_INFLIGHT; j++)
			{
				Job		   *o = &eng->job[j];

				if (o != job && o->ticket != 0 && o->ticket + 1 == job->ticket)
					slot = 1 - o->slot;
			}
			pthread_mutex_unlock(&eng->mu);
		}
		st = job_upload(eng, job, slot, false);
		if (st != GS_OK)
		{
			job->st = st;
			return;
		}
	}
	sl = &eng->slot[job->slot];
	sort_args(eng, sl, job->n, job->key_bytes, job->flags, &a);
	a.cancel = worker_poll;
	a.cancel_arg = &pa;

#define JOB_TRY(call, what) CUDA_TRY_OR(fail, call, what)

	JOB_TRY(cudaEventRecord(job->mark[2], sl->stream), "cudaEventRecord");
	st = hrs::sort(a, &res, errbuf, errlen);
	if (st != GS_OK)
		goto fail;
	job->passes = res.passes;
	JOB_TRY(cudaEventRecord(job->mark[3], sl->stream), "cudaEventRecord");
	/* last chance to stop: after this keys[] is being overwritten */
	st = hrs::wait_event(job->mark[3], worker_poll_tail, &pa, errbuf, errlen);
	if (st != GS_OK)
		goto fail;
	JOB_TRY(copy_pieces(job->perm, a.vals[0], job->n * sizeof(uint32_t),
						cudaMemcpyDeviceToHost, sl->stream), "download");
	if (a.keys_out)
		JOB_TRY(copy_pieces(job->keys, a.keys[0], job->n * (size_t) job->key_bytes,
							cudaMemcpyDeviceToHost, sl->stream), "download");
	e = cudaEventRecord(job->mark[4], sl->stream);
	if (e != cudaSuccess)
	{
		/* downloads may be under way: wait them out, report the fault */
		(void) cudaStreamSynchronize(sl->stream);
		job->st = hrs::cuda_status(e, "cudaEventRecord", errbuf, errlen);
		return;
	}
	job->st = GS_OK;
	return;

fail:
	(void) cudaStreamSynchronize(sl->stream);
	if (st != GS_ERR_CANCELED)
		(void) cudaGetLastError();
	job->st = st;
}

static void *
worker_main(void *arg)
{
	gs_engine  *eng = (gs_engine *) arg;

	(void) cudaSetDevice(eng->device);
	pthread_mutex_lock(&eng->mu);
	for (;;)
	{
		Job		   *job = NULL;

		for (int j = 0; j < GS_MAX_INFLIGHT; j++)
		{
			Job		   *o = &eng->job[j];

			if (o->ticket != 0 && o->state == JOB_QUEUED &&
				(job == NULL || o->ticket < job->ticket))
				job = o;
		}
		if (job == NULL)
		{
			if (eng->shutdown)
				break;
			pthread_cond_wait(&eng->cv, &eng->mu);
			continue;
		}
		pthread_mutex_unlock(&eng->mu);
		job_run(eng, job);
		pthread_mutex_lock(&eng->mu);
		job->state = JOB_HOST_DONE;
		pthread_cond_broadcast(&eng->cv);
	}
	pthread_mutex_unlock(&eng->mu);
	return NULL;
}

static gs_status
start_worker(gs_engine *eng, char *errbuf, size_t errlen)
{
	sigset_t	all,
				old;
	int			rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&eng->worker, NULL, worker_main, eng);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
	{
		snprintf(errbuf, errlen, "could not start the sort thread: %s",
				 strerror(rc));
		return GS_ERR_NOMEM;
	}
	eng->worker_started = true;
	return GS_OK;
}

static gs_status
cuda_sort_submit(gs_engine *eng, void *keys, size_t n, int key_bytes,
				 uint32_t *perm, int flags, gs_ticket *ticket,
				 char *errbuf, size_t errlen)
{
	Job		   *job = NULL;
	gs_status	st;
	bool		pinned;

	*ticket = 0;
	if (!sort_args_valid(keys, n, key_bytes, perm, errbuf, errlen))
		return GS_ERR_INVALID;
	/* only pinned keys are uploaded early (a pageable copy would block) */
	pinned = n > 0 && is_pinned(keys, n * (size_t) key_bytes);
	if (!eng->worker_started)
	{
		st = start_worker(eng, errbuf, errlen);
		if (st != GS_OK)
			return st;
	}
	pthread_mutex_lock(&eng->mu);
	for (int j = 0; j < GS_MAX_INFLIGHT; j++)
		if (eng->job[j].ticket == 0)
			job = &eng->job[j];
	if (job == NULL)
	{
		pthread_mutex_unlock(&eng->mu);
		snprintf(errbuf, errlen, "more than %d asynchronous sorts outstanding",
				 GS_MAX_INFLIGHT);
		return GS_ERR_INVALID;
	}
	job->keys = keys;
	job->n = n;
	job->key_bytes = key_bytes;
	job->perm = perm;
	job->flags = flags;
	job->keys_pinned = pinned;
	job->uploaded = false;
	job->slot = 0;
	job->need = n > 0 ? sort_need(n, key_bytes) : 0;
	job->passes = 0;
	job->st = GS_OK;
	job->err[0] = '\0';
	__atomic_store_n(&job->abort, 0, __ATOMIC_RELEASE);
	job->state = JOB_QUEUED;
	job->ticket = eng->next_ticket++;
	*ticket = job->ticket;
	pthread_cond_broadcast(&eng->cv);
	pthread_mutex_unlock(&eng->mu);
	return GS_OK;
}

/* release a job entry once its sort no longer touches caller memory */
static void
job_free(gs_engine *eng, Job *job)
{
	pthread_mutex_lock(&eng->mu);
	job->ticket = 0;
	job->state = JOB_FREE;
	pthread_mutex_unlock(&eng->mu);
}

static gs_status
cuda_sort_wait(gs_engine *eng, gs_ticket ticket, gs_cancel_fn cancel,
			   void *cancel_arg, gs_sort_stats *stats, char *errbuf,
			   size_t errlen)
{
	Job		   *job = NULL;
	gs_status	st;
	bool		oldest = true;
	float		ms;

	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (!eng->sync_init || ticket == 0)
	{
		snprintf(errbuf, errlen, "unknown sort ticket %llu",
				 (unsigned long long) ticket);
		return GS_ERR_INVALID;
	}
	pthread_mutex_lock(&eng->mu);
	for (int j = 0; j < GS_MAX_INFLIGHT; j++)
	{
		if (eng->job[j].ticket == ticket)
			job = &eng->job[j];
		else if (eng->job[j].ticket != 0 && eng->job[j].ticket < ticket)
			oldest = false;
	}
	if (job == NULL || !oldest)
	{
		pthread_mutex_unlock(&eng->mu);
		snprintf(errbuf, errlen, job == NULL ? "unknown sort ticket %llu" :
				 "sort ticket %llu waited for before an older one",
				 (unsigned long long) ticket);
		return GS_ERR_INVALID;
	}

	/* until the worker is done with it, poll cancel about every ms */
	while (job->state != JOB_HOST_DONE)
	{
		struct timespec ts;

		if (cancel != NULL && !job_aborted(job))
		{
			pthread_mutex_unlock(&eng->mu);
			if (cancel(cancel_arg))
				__atomic_store_n(&job->abort, 1, __ATOMIC_RELEASE);
			pthread_mutex_lock(&eng->mu);
			if (job->state == JOB_HOST_DONE)
				break;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 1000000;
		if (ts.tv_nsec >= 1000000000)
		{
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&eng->cv, &eng->mu, &ts);
	}
	pthread_mutex_unlock(&eng->mu);

	st = job->st;
	if (st == GS_OK && job->n > 0)
	{
		/* downloads under way: the sort can only end well now */
		st = hrs::wait_event(job->mark[4], NULL, NULL, errbuf, errlen);
		if (st == GS_OK && stats)
		{
			if (cudaEventElapsedTime(&ms, job->mark[0], job->mark[1]) == cudaSuccess)
				stats->upload_ms = ms;
			if (cudaEventElapsedTime(&ms, job->mark[2], job->mark[3]) == cudaSuccess)
				stats->sort_ms = ms;
			if (cudaEventElapsedTime(&ms, job->mark[3], job->mark[4]) == cudaSuccess)
				stats->download_ms = ms;
			stats->device_bytes = job->need;
			stats->passes = job->passes;
			stats->total_ms = now_ms() - job->t_start;
		}
	}
	else if (st != GS_OK)
		snprintf(errbuf, errlen, "%s", job->err);
	job_free(eng, job);
	return st;
}

static void
cuda_sort_abort(gs_engine *eng)
{
	bool		any = false;

	if (eng == NULL || !eng->sync_init)
		return;
	pthread_mutex_lock(&eng->mu);
	for (int j = 0; j < GS_MAX_INFLIGHT; j++)
	{
		if (eng->job[j].ticket != 0)
		{
			__atomic_store_n(&eng->job[j].abort, 1, __ATOMIC_RELEASE);
			any = true;
		}
	}
	if (!any)
	{
		pthread_mutex_unlock(&eng->mu);
		return;
	}
	for (;;)
	{
		bool		running = false;

		for (int j = 0; j < GS_MAX_INFLIGHT; j++)
			if (eng->job[j].ticket != 0 && eng->job[j].state != JOB_HOST_DONE)
				running = true;
		if (!running)
			break;
		pthread_cond_wait(&eng->cv, &eng->mu);
	}
	pthread_mutex_unlock(&eng->mu);

	/* uploads started early and downloads enqueued: let them end */
	for (int s = 0; s < NSLOTS; s++)
		(void) cudaStreamSynchronize(eng->slot[s].stream);
	for (int j = 0; j < GS_MAX_INFLIGHT; j++)
		if (eng->job[j].ticket != 0)
			job_free(eng, &eng->job[j]);
}

/* destroy: stop every sort, then the worker */
static void
async_shutdown(gs_engine *eng)
{
	if (!eng->worker_started)
		return;
	cuda_sort_abort(eng);
	pthread_mutex_lock(&eng->mu);
	eng->shutdown = true;
	pthread_cond_broadcast(&eng->cv);
	pthread_mutex_unlock(&eng->mu);
	pthread_join(eng->worker, NULL);
	eng->worker_started = false;
}

static const gs_engine_ops cuda_ops = {
	GS_ENGINE_ABI_VERSION,
	"cuda",
	cuda_create,
	cuda_destroy,
	cuda_device_info,
	cuda_keybuf_alloc,
	cuda_keybuf_realloc,
	cuda_keybuf_free,
	cuda_sort,
	cuda_sort_submit,
	cuda_sort_wait,
	cuda_sort_abort,
	cuda_create_on_device,
	cuda_host_register,
	cuda_host_unregister,
};

GS_EXPORT const gs_engine_ops *
gpusort_cuda_engine(int abi_version)
{
	if (abi_version != GS_ENGINE_ABI_VERSION)
		return NULL;
	return &cuda_ops;
}
