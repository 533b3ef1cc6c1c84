/*-------------------------------------------------------------------------
 *
 * hrs_dispatch.cu
 *	  Host side of the hybrid radix sort that does not depend on the key
 *	  width: choosing the width's instantiation, waiting, error mapping.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <time.h>

#include "hrs.h"
#include "hrs_policy.cuh"
#include "hrs_dispatch_decl.h"

namespace hrs
{

size_t
temp_bytes(int key_bytes, size_t n)
{
	switch (key_bytes)
	{
		case 4:
			return temp_bytes_4(n);
		case 8:
			return temp_bytes_8(n);
		case 16:
			return temp_bytes_16(n);
		case 24:
			return temp_bytes_24(n);
		case 32:
			return temp_bytes_32(n);
	}
	return 0;
}

gs_status
sort(const SortArgs &a, SortResult *r, char *errbuf, size_t errlen)
{
	switch (a.key_bytes)
	{
		case 4:
			return sort_4(a, r, errbuf, errlen);
		case 8:
			return sort_8(a, r, errbuf, errlen);
		case 16:
			return sort_16(a, r, errbuf, errlen);
		case 24:
			return sort_24(a, r, errbuf, errlen);
		case 32:
			return sort_32(a, r, errbuf, errlen);
	}
	snprintf(errbuf, errlen, "unsupported key width %d", a.key_bytes);
	return GS_ERR_INVALID;
}

gs_status
cuda_status(cudaError_t e, const char *what, char *errbuf, size_t errlen)
{
	gs_status	st;

	switch (e)
	{
		case cudaSuccess:
			return GS_OK;
		case cudaErrorMemoryAllocation:
			st = GS_ERR_DEVICE_NOMEM;
			break;
		case cudaErrorNoDevice:
		case cudaErrorInsufficientDriver:
		case cudaErrorInitializationError:
		case cudaErrorDevicesUnavailable:
		case cudaErrorInvalidDevice:
		case cudaErrorSystemDriverMismatch:
		case cudaErrorCompatNotSupportedOnDevice:
		case cudaErrorStubLibrary:
		case cudaErrorNoKernelImageForDevice:
		case cudaErrorSystemNotReady:
			st = GS_ERR_NODEVICE;
			break;
		default:
			st = GS_ERR_DEVICE;
			break;
	}
	snprintf(errbuf, errlen, "%s: %s: %s", what, cudaGetErrorName(e),
			 cudaGetErrorString(e));
	return st;
}

static void
sleep_us(long us)
{
	struct timespec ts;

	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (us % 1000000) * 1000;
	nanosleep(&ts, NULL);
}

/*
 * The pause between two polls of the device: none for the first
 * POLL_SPIN_US (most waits are short passes, and a sleep overshoots by the
 * timer slack), then sleeps from POLL_MIN_US, doubling up to POLL_MAX_US.
 */
struct Backoff
{
	struct timespec start;
	long		pause = CommonPolicy::POLL_MIN_US;

	Backoff()
	{
		clock_gettime(CLOCK_MONOTONIC, &start);
	}

	void		wait()
	{
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000000L +
			(now.tv_nsec - start.tv_nsec) / 1000 < CommonPolicy::POLL_SPIN_US)
			return;
		sleep_us(pause);
		if (pause < CommonPolicy::POLL_MAX_US)
			pause *= 2;
	}
};

gs_status
wait_event(cudaEvent_t event, gs_cancel_fn cancel, void *cancel_arg,
		   char *errbuf, size_t errlen)
{
	bool		canceled = false;
	Backoff		backoff;
	cudaError_t e;

	while ((e = cudaEventQuery(event)) == cudaErrorNotReady)
	{
		if (!canceled && cancel != NULL && cancel(cancel_arg))
			canceled = true;
		backoff.wait();
	}
	if (e != cudaSuccess)
		return cuda_status(e, "waiting for the device", errbuf, errlen);
	if (canceled)
	{
		snprintf(errbuf, errlen, "canceled");
		return GS_ERR_CANCELED;
	}
	return GS_OK;
}

gs_status
wait_counts(const uint32_t *seq, uint32_t want, cudaStream_t stream,
			gs_cancel_fn cancel, void *cancel_arg, char *errbuf, size_t errlen)
{
	Backoff		backoff;

	for (;;)
	{
		cudaError_t e;

		if (__atomic_load_n(seq, __ATOMIC_ACQUIRE) == want)
			return GS_OK;
		e = cudaStreamQuery(stream);
		if (e == cudaSuccess)
		{
			/* the stream is done: the counts are there, or never will be */
			if (__atomic_load_n(seq, __ATOMIC_ACQUIRE) == want)
				return GS_OK;
			snprintf(errbuf, errlen, "hybrid radix sort: a pass's counts did not reach the host");
			return GS_ERR_INTERNAL;
		}
		if (e != cudaErrorNotReady)
			return cuda_status(e, "waiting for the device", errbuf, errlen);
		if (cancel != NULL && cancel(cancel_arg))
		{
			snprintf(errbuf, errlen, "canceled");
			return GS_ERR_CANCELED;
		}
		backoff.wait();
	}
}

gs_status
wait_stream(cudaStream_t stream, cudaEvent_t event, gs_cancel_fn cancel,
			void *cancel_arg, char *errbuf, size_t errlen)
{
	cudaError_t e = cudaEventRecord(event, stream);

	if (e != cudaSuccess)
		return cuda_status(e, "cudaEventRecord", errbuf, errlen);
	return wait_event(event, cancel, cancel_arg, errbuf, errlen);
}

}								/* namespace hrs */
