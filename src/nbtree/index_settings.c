/*-------------------------------------------------------------------------
 *
 * index_settings.c
 *	  The settings of gpusort's btree builds and CLUSTER sorts, and their
 *	  test-only fault points: read by every index_*.c file, so they live
 *	  below all of them (index.c, the hooks, defines them at load).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"

#include "gpusort_int.h"
#include "index_int.h"

bool		gs_index_build_enabled = true;
bool		gs_log_index_builds = false;

/*
 * A fault point of gpusort's sorts for maintenance: when gpusort.index_fault
 * names it, a query cancel becomes pending, as if the user had sent one;
 * the next CHECK_FOR_INTERRUPTS raises it.  For tests.
 */
void
gs_index_fault_point(int fault)
{
	if (gs_index_fault == fault)
	{
		QueryCancelPending = true;
		InterruptPending = true;
	}
}

/* does gpusort build this session's btree indexes? */
bool
gs_index_wanted(void)
{
	return gs_index_build_enabled && gs_active();
}

/* the settings above, defined when gpusort is loaded (index.c) */
void
gs_index_define_settings(void)
{
	DefineCustomBoolVariable("gpusort.index_build",
							 "Builds btree indexes (CREATE INDEX, REINDEX, and the rebuilds of CLUSTER, VACUUM FULL and TRUNCATE) through gpusort.",
							 "Takes effect only while gpusort.enabled is on; "
							 "indexes gpusort cannot build are built by PostgreSQL.",
							 &gs_index_build_enabled,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("gpusort.log_index_builds",
							 "Logs each btree build and CLUSTER table sort gpusort makes, and why it leaves one to PostgreSQL.",
							 "Without it these lines are DEBUG1.",
							 &gs_log_index_builds,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
}
