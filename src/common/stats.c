/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Cumulative statistics of what gpusort did (the gpusort_stats and
 *	  gpusort_stats_reasons views, gpusort_stats_reset()), and gpusort's
 *	  wait events.
 *
 * The counters live in main shared memory, one array of 64-bit atomics
 * that every backend and parallel worker adds to without a lock; they
 * exist only when gpusort is preloaded, since shared memory is sized at
 * server start.  Like PostgreSQL's own cumulative statistics they count
 * since the server started or since the last reset, and are lost at a
 * restart.
 *
 * What is counted where:
 *	- a sort gpusort made (exec.c, after each sort of a GpuSort node, in
 *	  whichever process ran it: a GpuSort under Gather Merge counts once
 *	  for every worker and the leader that sorted), by the engine that
 *	  sorted its keys, with its rows and normalized key bytes; a sort that
 *	  wanted the GPU and ran on the CPU engine also counts as a fallback,
 *	  by reason;
 *	- a Sort left to PostgreSQL (declined.c, when a plan starts to run, in
 *	  the process that started it: once per Sort node of the plan), by
 *	  reason;
 *	- btree builds and CLUSTER table sorts, taken or left to PostgreSQL
 *	  (index_build.c, index_cluster.c).
 *
 * A bottom-layer file: every part counts here and reads its wait events,
 * so it calls PostgreSQL only (declined.c, which calls it, is set up by
 * _PG_init).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "gpusort_stats.h"

/* the counters that are not by reason */
typedef enum GsCounter
{
	GS_C_SORTS_GPU,
	GS_C_SORTS_CPU,
	GS_C_ROWS_GPU,
	GS_C_ROWS_CPU,
	GS_C_KEY_BYTES,
	GS_C_INDEX_BUILDS,
	GS_C_INDEX_BUILDS_DECLINED,
	GS_C_CLUSTERS,
	GS_C_CLUSTERS_DECLINED,
	GS_C_COUNT
} GsCounter;

typedef struct GsStatsShared
{
	pg_atomic_uint64 counters[GS_C_COUNT];
	pg_atomic_uint64 declined[GS_DECLINE_COUNT];
	pg_atomic_uint64 fallbacks[GS_FALLBACK_COUNT];
	pg_atomic_uint64 reset_time;	/* a TimestampTz */
} GsStatsShared;

/* what gpusort_stats_reasons shows, in the order of the enums */
static const char *const gs_decline_names[GS_DECLINE_COUNT] = {
	"min_rows",
	"top_n",
	"key_type",
	"key_collation",
	"key_operator",
	"no_sort_key"
};

static const char *const gs_fallback_names[GS_FALLBACK_COUNT] = {
	"gpu_unavailable",
	"gpu_queue",
	"gpu_error"
};

static const char *const gs_wait_names[GS_WAIT_COUNT] = {
	"GpuSortThreads",
	"GpuSortService"
};

static GsStatsShared *gs_stats = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
gs_stats_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(GsStatsShared)));
}

static void
gs_stats_zero(GsStatsShared *st)
{
	int			i;

	for (i = 0; i < GS_C_COUNT; i++)
		pg_atomic_write_u64(&st->counters[i], 0);
	for (i = 0; i < GS_DECLINE_COUNT; i++)
		pg_atomic_write_u64(&st->declined[i], 0);
	for (i = 0; i < GS_FALLBACK_COUNT; i++)
		pg_atomic_write_u64(&st->fallbacks[i], 0);
	pg_atomic_write_u64(&st->reset_time, (uint64) GetCurrentTimestamp());
}

static void
gs_stats_shmem_startup(void)
{
	bool		found;
	GsStatsShared *st;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	st = ShmemInitStruct("gpusort statistics", sizeof(GsStatsShared), &found);
	if (!found)
	{
		int			i;

		for (i = 0; i < GS_C_COUNT; i++)
			pg_atomic_init_u64(&st->counters[i], 0);
		for (i = 0; i < GS_DECLINE_COUNT; i++)
			pg_atomic_init_u64(&st->declined[i], 0);
		for (i = 0; i < GS_FALLBACK_COUNT; i++)
			pg_atomic_init_u64(&st->fallbacks[i], 0);
		pg_atomic_init_u64(&st->reset_time, 0);
		gs_stats_zero(st);
	}
	LWLockRelease(AddinShmemInitLock);
	gs_stats = st;
}

/*
 * Called from _PG_init.  The counters need shared memory, which only a
 * preloaded library can ask for; otherwise counting does nothing and the
 * views say why.
 */
void
gs_stats_init(void)
{
	if (process_shared_preload_libraries_in_progress)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = gs_stats_shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = gs_stats_shmem_startup;
	}
}

const char *
gs_decline_name(GsDecline reason)
{
	Assert(reason >= 0 && reason < GS_DECLINE_COUNT);
	return gs_decline_names[reason];
}

static inline void
gs_count(pg_atomic_uint64 *c, uint64 n)
{
	(void) pg_atomic_fetch_add_u64(c, (int64) n);
}

/* the kind of a fallback, from the text EXPLAIN shows for it */
static GsFallback
gs_fallback_kind(const char *fallback)
{
	if (strncmp(fallback, GS_FALLBACK_ERROR_TEXT,
				strlen(GS_FALLBACK_ERROR_TEXT)) == 0)
		return GS_FALLBACK_ERROR;
	if (strncmp(fallback, GS_FALLBACK_QUEUE_TEXT,
				strlen(GS_FALLBACK_QUEUE_TEXT)) == 0)
		return GS_FALLBACK_QUEUE;
	return GS_FALLBACK_UNAVAILABLE;
}

/*
 * A sort gpusort made: gpu says which engine sorted its keys, fallback (or
 * NULL) why it is not the GPU that was wanted.
 */
void
gs_stats_sort(bool gpu, double rows, int key_bytes, const char *fallback)
{
	uint64		n = rows > 0 ? (uint64) rows : 0;

	if (gs_stats == NULL)
		return;
	gs_count(&gs_stats->counters[gpu ? GS_C_SORTS_GPU : GS_C_SORTS_CPU], 1);
	gs_count(&gs_stats->counters[gpu ? GS_C_ROWS_GPU : GS_C_ROWS_CPU], n);
	gs_count(&gs_stats->counters[GS_C_KEY_BYTES], n * (uint64) key_bytes);
	if (fallback != NULL && !gpu)
		gs_count(&gs_stats->fallbacks[gs_fallback_kind(fallback)], 1);
}

void
gs_stats_declined(GsDecline reason)
{
	if (gs_stats != NULL)
		gs_count(&gs_stats->declined[reason], 1);
}

void
gs_stats_index_build(bool taken)
{
	if (gs_stats != NULL)
		gs_count(&gs_stats->counters[taken ? GS_C_INDEX_BUILDS :
									 GS_C_INDEX_BUILDS_DECLINED], 1);
}

void
gs_stats_cluster(bool taken)
{
	if (gs_stats != NULL)
		gs_count(&gs_stats->counters[taken ? GS_C_CLUSTERS :
									 GS_C_CLUSTERS_DECLINED], 1);
}

/* ---------------------------------------------------------------------
 * SQL functions
 * ---------------------------------------------------------------------
 */

static void
gs_stats_check(void)
{
	if (gs_stats == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gpusort statistics are not available"),
				 errhint("Add gpusort to shared_preload_libraries and restart the server.")));
}

static Datum
gs_counter_datum(pg_atomic_uint64 *c)
{
	return Int64GetDatum((int64) pg_atomic_read_u64(c));
}

/*
 * gpusort_stats() -> one row of counters; see gpusort--0.3.sql for the
 * columns.
 */
PG_FUNCTION_INFO_V1(gpusort_stats);

Datum
gpusort_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[12];
	bool		nulls[12];
	uint64		fallbacks = 0;
	uint64		declined = 0;
	int			i;
	int			k = 0;

	gs_stats_check();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts != lengthof(values))
		elog(ERROR, "gpusort_stats() returns %d columns, not %d: update the extension",
			 (int) lengthof(values), tupdesc->natts);
	memset(nulls, 0, sizeof(nulls));

	for (i = 0; i < GS_FALLBACK_COUNT; i++)
		fallbacks += pg_atomic_read_u64(&gs_stats->fallbacks[i]);
	for (i = 0; i < GS_DECLINE_COUNT; i++)
		declined += pg_atomic_read_u64(&gs_stats->declined[i]);

	values[k++] = gs_counter_datum(&gs_stats->counters[GS_C_SORTS_GPU]);
	values[k++] = gs_counter_datum(&gs_stats->counters[GS_C_SORTS_CPU]);
	values[k++] = gs_counter_datum(&gs_stats->counters[GS_C_ROWS_GPU]);
	values[k++] = gs_counter_datum(&gs_stats->counters[GS_C_ROWS_CPU]);
	values[k++] = gs_counter_datum(&gs_stats->counters[GS_C_KEY_BYTES]);
	values[k++] = Int64GetDatum((int64) fallbacks);
	values[k++] = Int64GetDatum((int64) declined);
	values[k++] = gs_counter_datum(&gs_stats->counters[GS_C_INDEX_BUILDS]);
	values[k++] = gs_counter_datum(&gs_stats->counters[GS_C_INDEX_BUILDS_DECLINED]);
	values[k++] = gs_counter_datum(&gs_stats->counters[GS_C_CLUSTERS]);
	values[k++] = gs_counter_datum(&gs_stats->counters[GS_C_CLUSTERS_DECLINED]);
	values[k++] = TimestampTzGetDatum((TimestampTz)
									  pg_atomic_read_u64(&gs_stats->reset_time));
	Assert(k == lengthof(values));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * gpusort_stats_reasons() -> setof (kind, reason, count): every reason a
 * sort was declined ("declined") or fell back to the CPU engine
 * ("fallback"), zeros included, so that a reason is a row to watch.
 */
PG_FUNCTION_INFO_V1(gpusort_stats_reasons);

Datum
gpusort_stats_reasons(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	int			i;

	gs_stats_check();
	InitMaterializedSRF(fcinfo, 0);

	for (i = 0; i < GS_DECLINE_COUNT; i++)
	{
		values[0] = CStringGetTextDatum("declined");
		values[1] = CStringGetTextDatum(gs_decline_names[i]);
		values[2] = gs_counter_datum(&gs_stats->declined[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	for (i = 0; i < GS_FALLBACK_COUNT; i++)
	{
		values[0] = CStringGetTextDatum("fallback");
		values[1] = CStringGetTextDatum(gs_fallback_names[i]);
		values[2] = gs_counter_datum(&gs_stats->fallbacks[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * gpusort_stats_reset(): every counter back to zero.  Execute is granted to
 * superusers only (see the extension script); others may be granted it.
 */
PG_FUNCTION_INFO_V1(gpusort_stats_reset);

Datum
gpusort_stats_reset(PG_FUNCTION_ARGS)
{
	gs_stats_check();
	gs_stats_zero(gs_stats);
	PG_RETURN_VOID();
}

/* ---------------------------------------------------------------------
 * Wait events
 * ---------------------------------------------------------------------
 */

/*
 * The wait event to report while waiting for w.  Type Extension; from
 * PostgreSQL 17 on with a name of its own (registered once per server,
 * looked up once per process).
 */
uint32
gs_wait_event(GsWait w)
{
	static uint32 events[GS_WAIT_COUNT];

	Assert(w >= 0 && w < GS_WAIT_COUNT);
	if (events[w] == 0)
		events[w] = gs_WaitEventExtensionNew(gs_wait_names[w]);
	return events[w];
}
