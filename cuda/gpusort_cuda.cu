/*-------------------------------------------------------------------------
 *
 * gpusort_cuda.cu
 *	  The CUDA engine: gpusort's engine API (src/gpusort_engine.h) on top of
 *	  the hybrid radix sort (hrs.h).  Built as libgpusort_cuda.so and opened
 *	  by the extension with dlopen; the one exported symbol is
 *	  gpusort_cuda_engine().
 *
 * Nothing here touches CUDA before create(), which is called lazily in a
 * backend.  An instance keeps its context, stream, events, pinned staging
 * and device buffers for reuse by later sorts.  Every failure comes back
 * as a gs_status with text; nothing throws, exits or prints.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "gpusort_engine.h"
#include "hrs.h"

#define GS_EXPORT extern "C" __attribute__((visibility("default")))

struct gs_engine
{
	int			device;
	cudaDeviceProp prop;
	int			runtime_version;
	int			driver_version;
	cudaStream_t stream;
	cudaEvent_t poll;			/* no timing: for waits */
	cudaEvent_t mark[4];		/* start, uploaded, sorted, downloaded */
	void	   *staging;		/* pinned, hrs::STAGING_BYTES */
	void	   *dmem;			/* device buffers of the last sort, reused */
	size_t		dmem_bytes;
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

static void
engine_release(gs_engine *eng)
{
	if (eng->stream)
		(void) cudaStreamSynchronize(eng->stream);
	if (eng->dmem)
		(void) cudaFree(eng->dmem);
	if (eng->staging)
		(void) cudaFreeHost(eng->staging);
	for (int i = 0; i < 4; i++)
		if (eng->mark[i])
			(void) cudaEventDestroy(eng->mark[i]);
	if (eng->poll)
		(void) cudaEventDestroy(eng->poll);
	if (eng->stream)
		(void) cudaStreamDestroy(eng->stream);
	free(eng);
}

#define ENG_TRY(call, what) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
		{ \
			st = hrs::cuda_status(e_, (what), errbuf, errlen); \
			goto fail; \
		} \
	} while (0)

static gs_status
cuda_create(gs_engine **out, char *errbuf, size_t errlen)
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
	eng = (gs_engine *) calloc(1, sizeof(gs_engine));
	if (eng == NULL)
	{
		snprintf(errbuf, errlen, "out of host memory");
		return GS_ERR_NOMEM;
	}
	eng->device = 0;
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
	ENG_TRY(cudaStreamCreateWithFlags(&eng->stream, cudaStreamNonBlocking),
			"cudaStreamCreate");
	ENG_TRY(cudaEventCreateWithFlags(&eng->poll, cudaEventDisableTiming),
			"cudaEventCreate");
	for (int i = 0; i < 4; i++)
		ENG_TRY(cudaEventCreate(&eng->mark[i]), "cudaEventCreate");
	ENG_TRY(cudaHostAlloc(&eng->staging, hrs::STAGING_BYTES, cudaHostAllocDefault),
			"cudaHostAlloc");
	*out = eng;
	return GS_OK;

fail:
	engine_release(eng);
	return st;
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

/* make sure the reusable device allocation holds at least bytes */
static gs_status
reserve_device(gs_engine *eng, size_t bytes, char *errbuf, size_t errlen)
{
	size_t		free_b = 0,
				total_b = 0;
	cudaError_t e;

	if (eng->dmem_bytes >= bytes)
		return GS_OK;
	if (eng->dmem)
	{
		(void) cudaFree(eng->dmem);
		eng->dmem = NULL;
		eng->dmem_bytes = 0;
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
	e = cudaMalloc(&eng->dmem, bytes);
	if (e != cudaSuccess)
	{
		eng->dmem = NULL;
		(void) cudaGetLastError();
		return hrs::cuda_status(e, "cudaMalloc", errbuf, errlen);
	}
	eng->dmem_bytes = bytes;
	return GS_OK;
}

static gs_status
cuda_sort(gs_engine *eng, void *keys, size_t n, int key_bytes,
		  uint32_t *perm, int flags, gs_cancel_fn cancel, void *cancel_arg,
		  gs_sort_stats *stats, char *errbuf, size_t errlen)
{
	double		t0 = now_ms();
	size_t		kbytes,
				vbytes,
				temp,
				need;
	char	   *base;
	hrs::SortArgs a;
	hrs::SortResult res;
	gs_status	st;
	float		ms;

	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (!GS_KEY_BYTES_VALID(key_bytes) || n > GS_MAX_ROWS ||
		(n > 0 && (keys == NULL || perm == NULL)))
	{
		snprintf(errbuf, errlen, "invalid sort arguments (n=%zu, key_bytes=%d)",
				 n, key_bytes);
		return GS_ERR_INVALID;
	}
	if (n == 0)
		return GS_OK;

	kbytes = align_up(n * (size_t) key_bytes);
	vbytes = align_up(n * sizeof(uint32_t));
	temp = align_up(hrs::temp_bytes(key_bytes, n));
	need = 2 * kbytes + 2 * vbytes + temp;
	st = reserve_device(eng, need, errbuf, errlen);
	if (st != GS_OK)
		return st;
	base = (char *) eng->dmem;

	memset(&a, 0, sizeof(a));
	a.n = n;
	a.key_bytes = key_bytes;
	a.keys[0] = base;
	a.keys[1] = base + kbytes;
	a.vals[0] = (uint32_t *) (base + 2 * kbytes);
	a.vals[1] = (uint32_t *) (base + 2 * kbytes + vbytes);
	a.temp = base + 2 * kbytes + 2 * vbytes;
	a.temp_bytes = temp;
	a.keys_out = (flags & GS_SORT_KEYS_OUT) != 0;
	a.sm_count = eng->prop.multiProcessorCount;
	a.stream = eng->stream;
	a.event = eng->poll;
	a.staging = eng->staging;
	a.cancel = cancel;
	a.cancel_arg = cancel_arg;

#define SORT_TRY(call, what) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
		{ \
			st = hrs::cuda_status(e_, (what), errbuf, errlen); \
			goto done; \
		} \
	} while (0)

	SORT_TRY(cudaEventRecord(eng->mark[0], eng->stream), "cudaEventRecord");
	SORT_TRY(cudaMemcpyAsync(a.keys[0], keys, n * (size_t) key_bytes,
							 cudaMemcpyHostToDevice, eng->stream), "upload");
	SORT_TRY(cudaEventRecord(eng->mark[1], eng->stream), "cudaEventRecord");
	st = hrs::sort(a, &res, errbuf, errlen);
	if (st != GS_OK)
		goto done;
	SORT_TRY(cudaEventRecord(eng->mark[2], eng->stream), "cudaEventRecord");
	SORT_TRY(cudaMemcpyAsync(perm, a.vals[0], n * sizeof(uint32_t),
							 cudaMemcpyDeviceToHost, eng->stream), "download");
	if (a.keys_out)
		SORT_TRY(cudaMemcpyAsync(keys, a.keys[0], n * (size_t) key_bytes,
								 cudaMemcpyDeviceToHost, eng->stream), "download");
	SORT_TRY(cudaEventRecord(eng->mark[3], eng->stream), "cudaEventRecord");
	st = hrs::wait_event(eng->mark[3], cancel, cancel_arg, errbuf, errlen);
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
	(void) cudaStreamSynchronize(eng->stream);
	if (st != GS_ERR_CANCELED)
		(void) cudaGetLastError();
	return st;
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
};

GS_EXPORT const gs_engine_ops *
gpusort_cuda_engine(int abi_version)
{
	if (abi_version != GS_ENGINE_ABI_VERSION)
		return NULL;
	return &cuda_ops;
}
