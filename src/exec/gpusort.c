/*-------------------------------------------------------------------------
 *
 * gpusort.c
 *	  Module entry point: _PG_init, which defines the settings (settings.c)
 *	  and calls every module's init, and the gpusort_info() function.
 *
 * The top of the call graph: it may call any file, and no file calls it.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_service.h"
#include "gpusort_stats.h"
#include "settings.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	gs_lifecycle_init();

	gs_settings_define();

	if (process_shared_preload_libraries_in_progress)
		gs_service_register();

	if (gs_index_init)
		gs_index_init(gs_preloaded);

	MarkGUCPrefixReserved("gpusort");

	/*
	 * Sorts are taken only by a server that preloads gpusort: a load in
	 * the middle of a session (LOAD, a gpusort function) defines the
	 * settings and the functions, and leaves planning as it was.
	 */
	if (gs_preloaded)
	{
		gs_planner_init();
		gs_shards_init();
	}
	gs_exec_init();
	gs_load_budget_init();
	gs_stats_init();
	gs_declined_init();
}

/*
 * gpusort_info() -> setof (name, value): what gpusort sees in this backend.
 * The GPU side is what the gpusort service published in shared memory: a
 * backend never initialises CUDA, not even here.
 */
PG_FUNCTION_INFO_V1(gpusort_info);

Datum
gpusort_info(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *fallback = NULL;
	GsEngine   *e;
	Datum		values[2];
	bool		nulls[2] = {false, false};

#define EMIT(n, v) \
	do { \
		values[0] = CStringGetTextDatum(n); \
		values[1] = CStringGetTextDatum(v); \
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls); \
	} while (0)

	InitMaterializedSRF(fcinfo, 0);

	e = (gpusort_engine_choice == GS_ENGINE_CPU) ? gs_engine_cpu() :
		gs_engine_choose((double) INT_MAX, &fallback);

	EMIT("version", GPUSORT_VERSION);
	EMIT("enabled", gpusort_enabled ? "on" : "off");
	EMIT("engine_setting", gs_engine_options[gpusort_engine_choice].name);
	EMIT("cuda_built", gs_cuda_built() ? "yes" : "no");
	EMIT("cuda_loaded", gs_cuda_loaded() ? "yes" : "no");
	if (gs_cuda_load_error())
		EMIT("cuda_error", gs_cuda_load_error());
	EMIT("engine", e->ops->name);
	EMIT("device", e->info.name);
	if (e->is_gpu)
	{
		/* what the gpusort service published */
		EMIT("device_count", psprintf("%d", e->info.device_count));
		EMIT("device_memory_total_mb", psprintf("%llu", (unsigned long long) (e->info.total_mem >> 20)));
		EMIT("device_memory_free_mb", psprintf("%llu", (unsigned long long) (e->info.free_mem >> 20)));
	}
#undef EMIT

	return (Datum) 0;
}
