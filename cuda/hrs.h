/*-------------------------------------------------------------------------
 *
 * hrs.h
 *	  Host interface of the hybrid radix sort on device-resident data: what
 *	  the engine (gpusort_cuda.cu), the test and the benchmark call.
 *
 * Two-phase use, as in CUB: temp_bytes() says how much device scratch a
 * sort of n keys needs; sort() then runs on the caller's stream.  The keys
 * start in keys[0]; on return (once the stream is done) vals[0] holds the
 * permutation and, with keys_out, keys[0] the sorted keys.  keys[1] and
 * vals[1] are scratch of the same sizes.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_H
#define HRS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

#include "gpusort_engine.h"

namespace hrs
{

struct SortArgs
{
	size_t		n;
	int			key_bytes;		/* 4, 8, 16, 24 or 32 */
	void	   *keys[2];
	uint32_t   *vals[2];
	void	   *temp;
	size_t		temp_bytes;
	bool		keys_out;
	int			sm_count;
	cudaStream_t stream;
	cudaEvent_t event;			/* scratch event for polling waits */
	cudaStream_t side;			/* may be NULL: a second stream on which the
								 * small buckets of a pass are sorted while
								 * later passes run */
	cudaEvent_t side_mark[2];	/* scratch events to fork and join it */
	void	   *staging;		/* pinned host scratch of STAGING_BYTES */
	gs_cancel_fn cancel;		/* may be NULL */
	void	   *cancel_arg;
};

struct SortResult
{
	int			passes;			/* partitioning passes run */
};

/* device scratch for a sort of n keys of key_bytes */
size_t		temp_bytes(int key_bytes, size_t n);

/* pinned host scratch every sort needs (bytes; checked at compile time) */
constexpr size_t STAGING_BYTES = 4096;

/*
 * Sort.  Enqueues all work on args.stream, waiting (and polling cancel) at
 * the few points where the host needs device results; the last kernels
 * may still run when it returns GS_OK.
 */
gs_status	sort(const SortArgs &args, SortResult *result, char *errbuf,
				 size_t errlen);

/* map a CUDA error to a status and text ("what: name: description") */
gs_status	cuda_status(cudaError_t e, const char *what, char *errbuf,
						size_t errlen);

/*
 * Wait for an event already recorded, polling cancel; on cancel, still
 * waits for the event (so no kernel outlives the call) and returns
 * GS_ERR_CANCELED.
 */
gs_status	wait_event(cudaEvent_t event, gs_cancel_fn cancel, void *cancel_arg,
					   char *errbuf, size_t errlen);

/*
 * Wait until the device has written want into *seq (pinned host memory),
 * polling cancel; the stream, whose last work writes it, reports a device
 * fault, or that it ended without writing it.
 */
gs_status	wait_counts(const uint32_t *seq, uint32_t want, cudaStream_t stream,
						gs_cancel_fn cancel, void *cancel_arg, char *errbuf,
						size_t errlen);

/* wait for everything enqueued on stream so far, polling cancel */
gs_status	wait_stream(cudaStream_t stream, cudaEvent_t event,
						gs_cancel_fn cancel, void *cancel_arg,
						char *errbuf, size_t errlen);

}								/* namespace hrs */

#endif							/* HRS_H */
