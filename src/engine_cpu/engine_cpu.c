/*-------------------------------------------------------------------------
 *
 * engine_cpu.c
 *	  The CPU sort engine's interface: the engine operations table
 *	  (gpusort_cpu_engine) and the engine instance.
 *
 * This engine is always linked into the extension and is the one CI runs,
 * so it must be correct for every input and fast on the common ones.  It
 * includes no PostgreSQL header (it is built standalone by test/engine/),
 * never prints and never longjmps.  sort() runs on the caller's thread;
 * asynchronous sorts (sort_submit) run on one worker thread per engine
 * instance.
 *
 * The CPU engine is three files, each calling only the ones below it:
 *
 *	engine_cpu.c		this file: the operations table, creating and
 *						destroying an instance, key buffers, sort(),
 *						gs_status_text()
 *	engine_cpu_async.c	the worker thread and its job slots (sort_submit,
 *						sort_wait, sort_abort)
 *	engine_cpu_radix.c	the radix sort of one key array, argument checks,
 *						error text
 *
 * engine_cpu_int.h holds what they share (the engine instance, the job slot).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_cpu_int.h"

/* ---------------------------------------------------------------------
 * engine operations
 * --------------------------------------------------------------------- */

static gs_status
cpu_create(gs_engine **out, char *errbuf, size_t errlen)
{
	gs_engine  *eng = calloc(1, sizeof(gs_engine));
	pthread_condattr_t attr;
	int			rc;

	if (eng == NULL)
	{
		gs_cpu_set_error(errbuf, errlen,
						 "out of memory creating the CPU engine");
		return GS_ERR_NOMEM;
	}
	rc = pthread_mutex_init(&eng->lock, NULL);
	if (rc == 0)
	{
		rc = pthread_cond_init(&eng->work, NULL);
		if (rc != 0)
			pthread_mutex_destroy(&eng->lock);
	}
	if (rc == 0)
	{
		/* sort_wait's timed waits run on the monotonic clock */
		rc = pthread_condattr_init(&attr);
		if (rc == 0)
		{
			rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
			if (rc == 0)
				rc = pthread_cond_init(&eng->done, &attr);
			pthread_condattr_destroy(&attr);
		}
		if (rc != 0)
		{
			pthread_cond_destroy(&eng->work);
			pthread_mutex_destroy(&eng->lock);
		}
	}
	if (rc != 0)
	{
		free(eng);
		gs_cpu_set_error(errbuf, errlen,
						 "could not initialize the CPU engine's locks: %s",
						 strerror(rc));
		return GS_ERR_NOMEM;
	}
	*out = eng;
	return GS_OK;
}

static void
cpu_destroy(gs_engine *eng)
{
	if (eng == NULL)
		return;
	gs_cpu_worker_stop(eng);
	pthread_cond_destroy(&eng->done);
	pthread_cond_destroy(&eng->work);
	pthread_mutex_destroy(&eng->lock);
	free(eng);
}

static gs_status
cpu_device_info(gs_engine *eng, gs_device_info *info,
				char *errbuf, size_t errlen)
{
	(void) eng;
	if (info == NULL)
	{
		gs_cpu_set_error(errbuf, errlen,
						 "device_info called without an output");
		return GS_ERR_INVALID;
	}
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "CPU");
	return GS_OK;
}

static gs_status
cpu_keybuf_alloc(gs_engine *eng, size_t bytes, void **ptr,
				 char *errbuf, size_t errlen)
{
	void	   *p;

	(void) eng;
	p = malloc(bytes > 0 ? bytes : 1);
	if (p == NULL)
	{
		gs_cpu_set_error(errbuf, errlen,
						 "could not allocate %zu bytes for sort keys", bytes);
		return GS_ERR_NOMEM;
	}
	gs_cpu_advise_huge(p, bytes);
	*ptr = p;
	return GS_OK;
}

static gs_status
cpu_keybuf_realloc(gs_engine *eng, void **ptr, size_t old_bytes,
				   size_t new_bytes, char *errbuf, size_t errlen)
{
	void	   *p;

	(void) eng;
	(void) old_bytes;
	p = realloc(*ptr, new_bytes > 0 ? new_bytes : 1);
	if (p == NULL)
	{
		gs_cpu_set_error(errbuf, errlen,
						 "could not grow the sort key buffer to %zu bytes",
						 new_bytes);
		return GS_ERR_NOMEM;
	}
	*ptr = p;
	return GS_OK;
}

static void
cpu_keybuf_free(gs_engine *eng, void *ptr, size_t bytes)
{
	(void) eng;
	(void) bytes;
	free(ptr);
}

static gs_status
cpu_sort(gs_engine *eng, void *keys, size_t n, int key_bytes,
		 uint32_t *perm, int flags,
		 gs_cancel_fn cancel, void *cancel_arg,
		 gs_sort_stats *stats, char *errbuf, size_t errlen)
{
	gs_status	st;

	if (stats != NULL)
		memset(stats, 0, sizeof(*stats));
	st = gs_cpu_check_args(keys, n, key_bytes, perm, errbuf, errlen);
	if (st != GS_OK)
		return st;
	/* nout only changes on this thread, so no lock is needed to read it */
	if (eng != NULL && eng->nout > 0)
	{
		gs_cpu_set_error(errbuf, errlen,
						 "sort called while %d asynchronous sorts are outstanding",
						 eng->nout);
		return GS_ERR_INVALID;
	}
	return gs_cpu_sort_keys(keys, n, key_bytes, perm, flags,
							cancel, cancel_arg, stats, errbuf, errlen);
}

static gs_status
cpu_create_on_device(gs_engine **out, int device, char *errbuf, size_t errlen)
{
	if (device != 0)
	{
		*out = NULL;
		snprintf(errbuf, errlen, "the CPU engine has only device 0");
		return GS_ERR_NODEVICE;
	}
	return cpu_create(out, errbuf, errlen);
}

/* host memory needs no registering for the CPU */
static gs_status
cpu_host_register(gs_engine *eng, void *ptr, size_t bytes, char *errbuf,
				  size_t errlen)
{
	(void) eng;
	(void) ptr;
	(void) bytes;
	(void) errbuf;
	(void) errlen;
	return GS_OK;
}

static void
cpu_host_unregister(gs_engine *eng, void *ptr)
{
	(void) eng;
	(void) ptr;
}

static const gs_engine_ops gs_cpu_ops = {
	.abi_version = GS_ENGINE_ABI_VERSION,
	.name = "cpu",
	.create = cpu_create,
	.destroy = cpu_destroy,
	.device_info = cpu_device_info,
	.keybuf_alloc = cpu_keybuf_alloc,
	.keybuf_realloc = cpu_keybuf_realloc,
	.keybuf_free = cpu_keybuf_free,
	.sort = cpu_sort,
	.sort_submit = gs_cpu_sort_submit,
	.sort_wait = gs_cpu_sort_wait,
	.sort_abort = gs_cpu_sort_abort,
	.create_on_device = cpu_create_on_device,
	.host_register = cpu_host_register,
	.host_unregister = cpu_host_unregister,
};

const gs_engine_ops *
gpusort_cpu_engine(int abi_version)
{
	if (abi_version != GS_ENGINE_ABI_VERSION)
		return NULL;
	return &gs_cpu_ops;
}

const char *
gs_status_text(gs_status st)
{
	switch (st)
	{
		case GS_OK:
			return "success";
		case GS_ERR_INVALID:
			return "invalid argument";
		case GS_ERR_NOMEM:
			return "out of host memory";
		case GS_ERR_DEVICE_NOMEM:
			return "out of device memory";
		case GS_ERR_NODEVICE:
			return "no usable device";
		case GS_ERR_DEVICE:
			return "device error";
		case GS_ERR_CANCELED:
			return "canceled";
		case GS_ERR_INTERNAL:
			return "internal error";
	}
	return "unknown status";
}
