/*-------------------------------------------------------------------------
 *
 * hrs_dispatch_decl.h
 *	  The per-width entry points that hrs_width.cu defines.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef HRS_DISPATCH_DECL_H
#define HRS_DISPATCH_DECL_H

#include "hrs.h"

namespace hrs
{

#define HRS_DECLARE_WIDTH(kb) \
	gs_status	sort_##kb(const SortArgs &a, SortResult *r, char *errbuf, \
						  size_t errlen); \
	size_t		temp_bytes_##kb(size_t n);

HRS_DECLARE_WIDTH(4)
HRS_DECLARE_WIDTH(8)
HRS_DECLARE_WIDTH(16)
HRS_DECLARE_WIDTH(24)
HRS_DECLARE_WIDTH(32)

}								/* namespace hrs */

#endif							/* HRS_DISPATCH_DECL_H */
