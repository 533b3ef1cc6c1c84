/*-------------------------------------------------------------------------
 *
 * hrs_width.cu
 *	  One key width of the hybrid radix sort.  Compiled once per width
 *	  (-DHRS_KB=4, 8, 16, 24, 32) so the widths build in parallel.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "hrs_dispatch.cuh"
#include "hrs_dispatch_decl.h"

static_assert(sizeof(hrs::Staging) <= hrs::STAGING_BYTES, "STAGING_BYTES is too small");

#ifndef HRS_KB
#error "HRS_KB must be defined"
#endif

#define HRS_CAT2(a, b) a##b
#define HRS_CAT(a, b) HRS_CAT2(a, b)

namespace hrs
{

gs_status
HRS_CAT(sort_, HRS_KB) (const SortArgs &a, SortResult *r, char *errbuf,
						size_t errlen)
{
	return sort_width<HRS_KB>(a, r, errbuf, errlen);
}

size_t
HRS_CAT(temp_bytes_, HRS_KB) (size_t n)
{
	return temp_bytes_width<HRS_KB>(n);
}

}								/* namespace hrs */
