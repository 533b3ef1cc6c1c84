/*-------------------------------------------------------------------------
 *
 * gpusort_stats.h
 *	  What gpusort did and why, for the DBA: cumulative counters in shared
 *	  memory (the gpusort_stats views), the reasons a Sort stays
 *	  PostgreSQL's (EXPLAIN), and gpusort's wait events.
 *
 * stats.c owns the counters and the wait events; declined.c prints and
 * counts the declined Sorts that planner.c classifies.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_STATS_H
#define GPUSORT_STATS_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "nodes/plannodes.h"

#include "gpusort_compat.h"

/*
 * Why a Sort stays PostgreSQL's.  The names in gs_decline_names (stats.c)
 * are what gpusort_stats_reasons shows; keep both in the same order.
 */
typedef enum GsDecline
{
	GS_DECLINE_MIN_ROWS,		/* fewer estimated rows than gpusort.min_rows */
	GS_DECLINE_TOP_N,			/* a small or run-time LIMIT bounds it */
	GS_DECLINE_KEY_TYPE,		/* leading key's type has no encoding */
	GS_DECLINE_KEY_COLLATION,	/* leading key's collation has none */
	GS_DECLINE_KEY_OPERATOR,	/* leading key not in its type's default order */
	GS_DECLINE_NO_KEY,			/* no sort key to encode */
	GS_DECLINE_COUNT
} GsDecline;

/* Why a sort that wanted the GPU ran on the CPU engine. */
typedef enum GsFallback
{
	GS_FALLBACK_UNAVAILABLE,	/* no usable GPU or service */
	GS_FALLBACK_QUEUE,			/* the GPU's queue was too long */
	GS_FALLBACK_ERROR,			/* the GPU sort failed */
	GS_FALLBACK_COUNT
} GsFallback;

/*
 * The openings of the fallback texts that are not "unavailable" (engine.c
 * and service_client.c write them; gs_fallback_kind reads them).
 */
#define GS_FALLBACK_ERROR_TEXT	"GPU sort failed"
#define GS_FALLBACK_QUEUE_TEXT	"GPU queue"

/* one Sort of a plan that stays PostgreSQL's (planner.c) */
typedef struct GsDeclinedSort
{
	Sort	   *sort;
	List	   *ancestors;		/* its parent plans, nearest first */
	GsDecline	reason;
	double		rows;			/* GS_DECLINE_MIN_ROWS: the estimate */
	int64		bound;			/* GS_DECLINE_TOP_N: the LIMIT, or -1 */
	Oid			keytype;		/* GS_DECLINE_KEY_*: the leading key's */
	Oid			collation;
	const char *why;			/* GS_DECLINE_KEY_*: keys.c's reason */
} GsDeclinedSort;

/* planner.c: the Sorts of stmt that gpusort leaves to PostgreSQL */
extern bool gs_sorts_replaced(void);
extern List *gs_declined_sorts(PlannedStmt *stmt, bool with_ancestors);

/* declined.c */
extern void gs_declined_init(void);

/* ---- counters (stats.c) ---- */
extern void gs_stats_init(void);
extern void gs_stats_sort(bool gpu, double rows, int key_bytes,
						  const char *fallback);
extern void gs_stats_declined(GsDecline reason);
extern void gs_stats_index_build(bool taken);
extern void gs_stats_cluster(bool taken);
extern const char *gs_decline_name(GsDecline reason);

/* ---- wait events (stats.c) ---- */
typedef enum GsWait
{
	GS_WAIT_THREADS,			/* the backend's own threads */
	GS_WAIT_SERVICE,			/* the gpusort service */
	GS_WAIT_COUNT
} GsWait;

extern uint32 gs_wait_event(GsWait w);

#endif							/* GPUSORT_STATS_H */
