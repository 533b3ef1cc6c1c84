/*-------------------------------------------------------------------------
 *
 * declined.c
 *	  Why a Sort stayed PostgreSQL's: EXPLAIN says it, the statistics count
 *	  it.
 *
 * The planner (planner.c) replaces every eligible Sort by a GpuSort; the
 * others stay as they were, and gs_declined_sorts() finds them again in a
 * finished plan, each with its reason, by the same walk.  Two hooks use it:
 *
 *	- ExplainOneQuery_hook: after the plan, one "GpuSort Declined" entry per
 *	  such Sort, naming its sort keys as EXPLAIN's "Sort Key" does, with the
 *	  reason and, where there is one, what to do instead.  In the text
 *	  format it is one line; in the others a "GpuSort" object that follows
 *	  the query's own.
 *	- ExecutorStart_hook: when a plan starts to run (not for EXPLAIN without
 *	  ANALYZE, not in a parallel worker), each such Sort counts once in
 *	  gpusort_stats_reasons (stats.c).
 *
 * EXPLAIN EXECUTE and auto_explain do not pass through ExplainOneQuery_hook,
 * so they show no such entry; the statistics count those plans all the
 * same.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"

#include "gpusort_int.h"
#include "gpusort_stats.h"

static ExplainOneQuery_hook_type prev_ExplainOneQuery = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;

#ifdef GS_NEED_STANDARD_EXPLAIN
/*
 * What ExplainOneQuery() does for a planned query when no hook is set
 * (PostgreSQL 15 and 16 do not export it): plan, time the planning, then
 * explain (and maybe run) the plan.
 */
static void
gs_standard_ExplainOneQuery(Query *query, int cursorOptions,
							IntoClause *into, ExplainState *es,
							const char *queryString, ParamListInfo params,
							QueryEnvironment *queryEnv)
{
	PlannedStmt *plan;
	instr_time	planstart;
	instr_time	planduration;
	BufferUsage bufusage_start;
	BufferUsage bufusage;

	if (es->buffers)
		bufusage_start = pgBufferUsage;
	INSTR_TIME_SET_CURRENT(planstart);

	plan = pg_plan_query(query, queryString, cursorOptions, params);

	INSTR_TIME_SET_CURRENT(planduration);
	INSTR_TIME_SUBTRACT(planduration, planstart);
	if (es->buffers)
	{
		memset(&bufusage, 0, sizeof(BufferUsage));
		BufferUsageAccumDiff(&bufusage, &pgBufferUsage, &bufusage_start);
	}

	ExplainOnePlan(plan, into, es, queryString, params, queryEnv,
				   &planduration, es->buffers ? &bufusage : NULL);
}
#endif

/*
 * The reason, as a sentence fragment for EXPLAIN, into buf; *hint gets
 * what to do instead, or NULL.
 */
static void
gs_decline_text(GsDeclinedSort *d, StringInfo buf, const char **hint)
{
	*hint = NULL;
	switch (d->reason)
	{
		case GS_DECLINE_MIN_ROWS:
			appendStringInfo(buf, "estimated %.0f rows, fewer than gpusort.min_rows (%d)",
							 d->rows, gpusort_min_rows);
			break;
		case GS_DECLINE_TOP_N:
			if (d->bound >= 0)
				appendStringInfo(buf, "top-N sort keeping " INT64_FORMAT " rows, within gpusort.topn_limit (%d)",
								 d->bound, gpusort_topn_limit);
			else
				appendStringInfoString(buf, "top-N sort whose LIMIT is known only at run time");
			break;
		case GS_DECLINE_KEY_TYPE:
			appendStringInfo(buf, "leading sort key of type %s cannot be encoded",
							 format_type_be(d->keytype));
			break;
		case GS_DECLINE_KEY_COLLATION:
			appendStringInfo(buf, "leading sort key's collation \"%s\" cannot be encoded (%s)",
							 get_collation_name(d->collation),
							 d->why ? d->why : "unsupported collation");
			*hint = "use a C or deterministic ICU collation on the column or in the query";
			break;
		case GS_DECLINE_KEY_OPERATOR:
			appendStringInfo(buf, "leading sort key is not in the default order of type %s",
							 format_type_be(d->keytype));
			break;
		case GS_DECLINE_NO_KEY:
		case GS_DECLINE_COUNT:
			appendStringInfoString(buf, "no sort key can be encoded");
			break;
	}
}

/* the Sort's keys, deparsed as EXPLAIN's "Sort Key" shows them */
static List *
gs_decline_keys(GsDeclinedSort *d, ExplainState *es)
{
	Sort	   *sort = d->sort;
	List	   *context;
	List	   *keys = NIL;
	bool		useprefix;
	int			i;

	context = set_deparse_context_plan(es->deparse_cxt, (Plan *) sort,
									   d->ancestors);
	useprefix = (list_length(es->rtable) > 1 || es->verbose);
	for (i = 0; i < sort->numCols; i++)
	{
		TargetEntry *tle = get_tle_by_resno(sort->plan.targetlist,
											sort->sortColIdx[i]);
		char	   *key;

		if (tle == NULL)
			continue;
		key = deparse_expression((Node *) tle->expr, context, useprefix, true);
		/* a collation not the type's default, as EXPLAIN's "Sort Key" */
		if (OidIsValid(sort->collations[i]) &&
			sort->collations[i] != get_typcollation(exprType((Node *) tle->expr)))
			key = psprintf("%s COLLATE %s", key,
						   generate_collation_name(sort->collations[i]));
		keys = lappend(keys, key);
	}
	return keys;
}

/* print the declined Sorts of the plan just explained */
static void
gs_explain_declined(ExplainState *es)
{
	List	   *declined;
	ListCell   *lc;

	if (es->pstmt == NULL || es->deparse_cxt == NIL)
		return;
	declined = gs_declined_sorts(es->pstmt, true);
	if (declined == NIL)
		return;

	/* in the text format, groups print nothing */
	ExplainOpenGroup("GpuSort", NULL, true, es);
	ExplainOpenGroup("GpuSort Declined", "GpuSort Declined", false, es);
	foreach(lc, declined)
	{
		GsDeclinedSort *d = (GsDeclinedSort *) lfirst(lc);
		List	   *keys = gs_decline_keys(d, es);
		StringInfoData reason;
		const char *hint;

		initStringInfo(&reason);
		gs_decline_text(d, &reason, &hint);
		if (es->format == EXPLAIN_FORMAT_TEXT)
		{
			StringInfoData line;
			ListCell   *lk;

			initStringInfo(&line);
			appendStringInfoString(&line, "Sort (");
			foreach(lk, keys)
				appendStringInfo(&line, "%s%s", lk == list_head(keys) ? "" : ", ",
								 (char *) lfirst(lk));
			appendStringInfo(&line, "): %s", reason.data);
			if (hint)
				appendStringInfo(&line, "; %s", hint);
			ExplainPropertyText("GpuSort Declined", line.data, es);
		}
		else
		{
			ExplainOpenGroup("Declined Sort", NULL, true, es);
			ExplainPropertyText("Node Type", "Sort", es);
			ExplainPropertyList("Sort Key", keys, es);
			ExplainPropertyText("Reason", gs_decline_name(d->reason), es);
			ExplainPropertyText("Detail", reason.data, es);
			if (hint)
				ExplainPropertyText("Hint", hint, es);
			ExplainCloseGroup("Declined Sort", NULL, true, es);
		}
	}
	ExplainCloseGroup("GpuSort Declined", "GpuSort Declined", false, es);
	ExplainCloseGroup("GpuSort", NULL, true, es);
}

static void
gs_declined_ExplainOneQuery(Query *query, int cursorOptions,
							IntoClause *into, ExplainState *es,
							const char *queryString, ParamListInfo params,
							QueryEnvironment *queryEnv)
{
	if (prev_ExplainOneQuery)
		prev_ExplainOneQuery(query, cursorOptions, into, es, queryString,
							 params, queryEnv);
	else
		gs_standard_ExplainOneQuery(query, cursorOptions, into, es,
									queryString, params, queryEnv);
	gs_explain_declined(es);
}

static void
gs_declined_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);

	/*
	 * A parallel worker runs a part of its leader's plan, whose Sorts the
	 * leader counted.
	 */
	if ((eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0 && !IsParallelWorker() &&
		queryDesc->plannedstmt != NULL)
	{
		List	   *declined = gs_declined_sorts(queryDesc->plannedstmt, false);
		ListCell   *lc;

		foreach(lc, declined)
			gs_stats_declined(((GsDeclinedSort *) lfirst(lc))->reason);
		list_free_deep(declined);
	}
}

void
gs_declined_init(void)
{
	prev_ExplainOneQuery = ExplainOneQuery_hook;
	ExplainOneQuery_hook = gs_declined_ExplainOneQuery;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = gs_declined_ExecutorStart;
}
