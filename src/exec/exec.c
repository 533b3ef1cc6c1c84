/*-------------------------------------------------------------------------
 *
 * exec.c
 *	  Executor side of the GpuSort custom scan: everything a Sort node does.
 *
 * The node reads its whole input from its outer child, sorts it through
 * the sort state (sortstate.c), and returns rows forward or backward; it
 * supports mark/restore (a Sort on the inner side of a merge join) and
 * rescans, re-sorting only when a parameter the input depends on changed.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/explain.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/typcache.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"

typedef struct GpuSortState
{
	CustomScanState css;
	GsSortDef	def;
	bool		random_access;
	bool		sorted;			/* input read and sorted */
	GsSortState *sort;
	GsSortReport report;		/* kept for EXPLAIN after the state ends */
	bool		have_report;
} GpuSortState;

static Node *gpusort_create_state(CustomScan *cscan);
static void gpusort_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *gpusort_exec(CustomScanState *node);
static TupleTableSlot *gpusort_exec_node(PlanState *pstate);
static void gpusort_end(CustomScanState *node);
static void gpusort_rescan(CustomScanState *node);
static void gpusort_markpos(CustomScanState *node);
static void gpusort_restrpos(CustomScanState *node);
static void gpusort_explain(CustomScanState *node, List *ancestors,
							ExplainState *es);

CustomScanMethods gpusort_scan_methods = {
	"GpuSort",
	gpusort_create_state
};

static CustomExecMethods gpusort_exec_methods = {
	.CustomName = "GpuSort",
	.BeginCustomScan = gpusort_begin,
	.ExecCustomScan = gpusort_exec,
	.EndCustomScan = gpusort_end,
	.ReScanCustomScan = gpusort_rescan,
	.MarkPosCustomScan = gpusort_markpos,
	.RestrPosCustomScan = gpusort_restrpos,
	.ExplainCustomScan = gpusort_explain,
};

static Node *
gpusort_create_state(CustomScan *cscan)
{
	GpuSortState *gss = palloc0(sizeof(GpuSortState));

	NodeSetTag(gss, T_CustomScanState);
	gss->css.methods = &gpusort_exec_methods;
	gs_sort_def_read(cscan->custom_private, &gss->def);
	return (Node *) gss;
}

static void
gpusort_begin(CustomScanState *node, EState *estate, int eflags)
{
	GpuSortState *gss = (GpuSortState *) node;
	Plan	   *child = outerPlan(node->ss.ps.plan);

	/* as Sort: random access only when someone may ask for it */
	gss->random_access = (eflags & (EXEC_FLAG_REWIND |
									EXEC_FLAG_BACKWARD |
									EXEC_FLAG_MARK)) != 0;

	/*
	 * Rows are fetched through gpusort_exec_node itself: ExecInitNode makes
	 * what this leaves in ExecProcNode the node's real one once we return.
	 */
	node->ss.ps.ExecProcNode = gpusort_exec_node;

	/* the child never needs to rewind, go backward or mark: we keep rows */
	eflags &= ~(EXEC_FLAG_REWIND | EXEC_FLAG_BACKWARD | EXEC_FLAG_MARK);
	outerPlanState(node) = ExecInitNode(child, estate, eflags);

	/*
	 * Rows come back as MinimalTuples in the arena, so the scan slot must be
	 * a MinimalTuple slot (ExecInitCustomScan made a virtual one).  Say so
	 * in the node's slot-type fields too, which our parents compile their
	 * expressions against; this runs before any parent is initialised.
	 */
	node->ss.ss_ScanTupleSlot =
		ExecAllocTableSlot(&estate->es_tupleTable,
						   node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
						   &TTSOpsMinimalTuple);
	node->ss.ps.scanops = &TTSOpsMinimalTuple;
	if (node->ss.ps.ps_ProjInfo == NULL)
	{
		node->ss.ps.resultops = &TTSOpsMinimalTuple;
		node->ss.ps.resultopsfixed = true;
		node->ss.ps.resultopsset = true;
	}
}

/*
 * Read the whole input and sort it.  Not inlined: gpusort_exec runs once a
 * row, and with this inside it paid for a large frame (and its stack
 * check) on every call, 2.6% of a 50M-row ORDER BY's backend in a profile.
 */
static pg_noinline void
gpusort_load(GpuSortState *gss)
{
	PlanState  *child = outerPlanState(gss);
	EState	   *estate = gss->css.ss.ps.state;
	ScanDirection dir = estate->es_direction;
	TupleDesc	tupdesc = ExecGetResultType(child);

	gss->sort = gs_sort_begin(tupdesc, &gss->def, work_mem,
							  gss->random_access,
							  gss->css.ss.ps.plan->plan_rows);

	/* the input is always read forward, whatever direction we are asked */
	estate->es_direction = ForwardScanDirection;
	if (gs_load_is(child))
		gs_load_into(child, gss->sort);	/* in parallel where it can */
	else
	{
		/* a plain table scan's pages are read here, else the node runs */
		GsHeapReader *hr = gs_heapread_begin(child);

		if (gs_sort_takes_pages(gss->sort, hr))
		{
			/* the rows straight from the pages (see gs_sort_put_page) */
			while (gs_sort_put_page(gss->sort, hr) > 0)
				;
		}
		else
		{
			for (;;)
			{
				TupleTableSlot *slot = gs_input_next(hr, child);

				if (TupIsNull(slot))
					break;
				gs_sort_put(gss->sort, slot);
			}
		}
		if (hr)
			gs_heapread_end(hr);
	}
	estate->es_direction = dir;

	gs_sort_perform(gss->sort);
	gs_sort_count(gss->sort);
	gss->sorted = true;
}

/* a row through the node's projection (kept out of the per-row path) */
static pg_noinline TupleTableSlot *
gpusort_project(CustomScanState *node, TupleTableSlot *slot)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;

	ResetExprContext(econtext);
	econtext->ecxt_scantuple = slot;
	return ExecProject(node->ss.ps.ps_ProjInfo);
}

/*
 * Everything gpusort_exec_node leaves: the first call (the load and the
 * sort) and rows through the node's projection.
 */
static pg_noinline TupleTableSlot *
gpusort_exec_rest(GpuSortState *gss)
{
	CustomScanState *node = &gss->css;
	TupleTableSlot *slot;

	if (!gss->sorted)
		gpusort_load(gss);

	slot = gs_sort_get(gss->sort,
					   ScanDirectionIsForward(node->ss.ps.state->es_direction),
					   node->ss.ss_ScanTupleSlot);
	if (slot == NULL || node->ss.ps.ps_ProjInfo == NULL)
		return slot;
	return gpusort_project(node, slot);
}

/*
 * The node's ExecProcNode (gpusort_begin sets it): the next row.  The
 * executor calls it directly, without ExecCustomScan's frame in between,
 * since it runs once a row; it checks for interrupts as that would.  A
 * sorted node without a projection hands the call on to the sort whole.
 */
static TupleTableSlot *
gpusort_exec_node(PlanState *pstate)
{
	GpuSortState *gss = (GpuSortState *) pstate;

	CHECK_FOR_INTERRUPTS();

	if (likely(gss->sorted && pstate->ps_ProjInfo == NULL))
		return gs_sort_get(gss->sort,
						   ScanDirectionIsForward(pstate->state->es_direction),
						   gss->css.ss.ss_ScanTupleSlot);
	return gpusort_exec_rest(gss);
}

/* the custom scan's own entry, for anyone calling through the methods */
static TupleTableSlot *
gpusort_exec(CustomScanState *node)
{
	return gpusort_exec_node(&node->ss.ps);
}

static void
gpusort_forget(GpuSortState *gss)
{
	if (gss->sort)
	{
		gs_sort_report(gss->sort, &gss->report);
		gss->have_report = true;
		gs_sort_end(gss->sort);
		gss->sort = NULL;
	}
	gss->sorted = false;
}

static void
gpusort_end(CustomScanState *node)
{
	GpuSortState *gss = (GpuSortState *) node;

	if (gss->sort)
	{
		gs_sort_end(gss->sort);
		gss->sort = NULL;
	}
	ExecEndNode(outerPlanState(node));
}

static void
gpusort_rescan(CustomScanState *node)
{
	GpuSortState *gss = (GpuSortState *) node;
	PlanState  *child = outerPlanState(node);

	/* not sorted yet: the first fetch will do everything */
	if (!gss->sorted)
		return;

	ExecClearTuple(node->ss.ss_ScanTupleSlot);

	/*
	 * ExecReScan has already passed our changed parameters on to the child
	 * (it is our lefttree).  If the input may have changed, sort again;
	 * otherwise read the same result from the start.
	 */
	if (child->chgParam != NULL || !gs_sort_can_rewind(gss->sort))
	{
		gpusort_forget(gss);
		/* a child with changed parameters rescans itself on next fetch */
		if (child->chgParam == NULL)
			ExecReScan(child);
	}
	else
		gs_sort_rewind(gss->sort);
}

static void
gpusort_markpos(CustomScanState *node)
{
	GpuSortState *gss = (GpuSortState *) node;

	if (!gss->sorted)
		return;
	gs_sort_markpos(gss->sort);
}

static void
gpusort_restrpos(CustomScanState *node)
{
	GpuSortState *gss = (GpuSortState *) node;

	if (!gss->sorted)
		return;
	gs_sort_restorepos(gss->sort);
}

/*
 * One sort key the way EXPLAIN prints a Sort's: expression, then COLLATE,
 * DESC / USING and NULLS FIRST/LAST where they differ from the defaults.
 */
static void
explain_sort_key(StringInfo buf, Node *expr, Oid sortop, Oid collation,
				 bool nulls_first, List *context, bool useprefix)
{
	Oid			keytype = exprType(expr);
	TypeCacheEntry *typentry;
	bool		reverse = false;

	appendStringInfoString(buf, deparse_expression(expr, context,
												   useprefix, true));

	if (OidIsValid(collation) && collation != get_typcollation(keytype))
	{
		char	   *collname = get_collation_name(collation);

		if (collname == NULL)
			elog(ERROR, "cache lookup failed for collation %u", collation);
		appendStringInfo(buf, " COLLATE %s", quote_identifier(collname));
	}

	typentry = lookup_type_cache(keytype, TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
	if (sortop == typentry->gt_opr)
	{
		appendStringInfoString(buf, " DESC");
		reverse = true;
	}
	else if (sortop != typentry->lt_opr)
	{
		char	   *opname = get_opname(sortop);

		if (opname == NULL)
			elog(ERROR, "cache lookup failed for operator %u", sortop);
		appendStringInfo(buf, " USING %s", opname);
		/* we can't easily tell whether it means DESC */
		(void) get_equality_op_for_ordering_op(sortop, &reverse);
	}
	if (nulls_first && !reverse)
		appendStringInfoString(buf, " NULLS FIRST");
	else if (!nulls_first && reverse)
		appendStringInfoString(buf, " NULLS LAST");
}

/* start a text-format EXPLAIN line at the current indentation */
static void
explain_indent(ExplainState *es)
{
	if (es->str->len == 0 || es->str->data[es->str->len - 1] == '\n')
		appendStringInfoSpaces(es->str, es->indent * 2);
}

static void
gpusort_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	GpuSortState *gss = (GpuSortState *) node;
	Plan	   *plan = node->ss.ps.plan;
	List	   *context;
	List	   *keys = NIL;
	bool		useprefix;
	int			i;
	GsSortReport r;

	/* Sort Key, exactly as for a Sort */
	context = set_deparse_context_plan(es->deparse_cxt, plan, ancestors);
	useprefix = (list_length(es->rtable) > 1 || es->verbose);
	for (i = 0; i < gss->def.nkeys; i++)
	{
		TargetEntry *tle = get_tle_by_resno(plan->targetlist, gss->def.attnums[i]);
		StringInfoData buf;

		if (tle == NULL)
			elog(ERROR, "no tlist entry for key %d", gss->def.attnums[i]);
		initStringInfo(&buf);
		explain_sort_key(&buf, (Node *) tle->expr, gss->def.sortops[i],
						 gss->def.collations[i], gss->def.nulls_first[i],
						 context, useprefix);
		keys = lappend(keys, buf.data);
	}
	ExplainPropertyList("Sort Key", keys, es);

	if (!es->analyze)
		return;

	if (gss->sort)
		gs_sort_report(gss->sort, &r);
	else if (gss->have_report)
		r = gss->report;
	else
		return;					/* never executed */

	if (es->format == EXPLAIN_FORMAT_TEXT)
	{
		explain_indent(es);
		appendStringInfo(es->str, "GpuSort Engine: %s (%s)  Rows: %.0f  Key: %d bytes%s\n",
						 r.engine ? r.engine : "none",
						 r.device ? r.device : "-",
						 r.rows, r.key_bytes,
						 r.exact ? " exact" : "");
		if (r.fallback)
		{
			explain_indent(es);
			appendStringInfo(es->str, "GpuSort Fallback: %s\n", r.fallback);
		}
		if (r.chunks > 1 || r.runs > 0)
		{
			explain_indent(es);
			appendStringInfo(es->str, "GpuSort Chunks: %d  Runs: %d  Merge Passes: %d",
							 r.chunks, r.runs, r.merge_passes);
			if (r.streams > 0)
				appendStringInfo(es->str, "  Merge Threads: %d", r.streams);
			appendStringInfoChar(es->str, '\n');
		}
		/*
		 * The sort times its phases itself, a few clock reads per batch,
		 * so they are shown with TIMING OFF too -- and are then free of
		 * the per-row cost of timing every node.
		 */
		explain_indent(es);
		appendStringInfo(es->str,
						 "GpuSort Time: load=%.3f ms  sort=%.3f ms (transfer=%.3f ms, waited=%.3f ms)  tie-break=%.3f ms (%.0f rows)",
						 r.load_ms, r.sort_ms, r.transfer_ms, r.wait_ms,
						 r.tiebreak_ms, r.tiebreak_rows);
		if (r.runs > 0 || r.chunks > 1)
			appendStringInfo(es->str, "  spill=%.3f ms (waited=%.3f ms)  merge=%.3f ms (waited=%.3f ms)",
							 r.spill_ms, r.spill_wait_ms,
							 r.merge_ms, r.merge_wait_ms);
		if (r.emit_ms > 0)
			appendStringInfo(es->str, "  emit=%.3f ms", r.emit_ms);
		appendStringInfoChar(es->str, '\n');
		explain_indent(es);
		if (r.runs > 0)
			appendStringInfo(es->str, "GpuSort Memory: " INT64_FORMAT "kB  Disk: " INT64_FORMAT "kB\n",
							 (r.mem_bytes + 1023) / 1024, r.disk_kb);
		else if (r.copy_bytes > 0)
			appendStringInfo(es->str, "GpuSort Memory: " INT64_FORMAT "kB  Rows Copied In Order: " INT64_FORMAT "kB in %.3f ms\n",
							 (r.mem_bytes + 1023) / 1024,
							 (r.copy_bytes + 1023) / 1024, r.copy_ms);
		else
			appendStringInfo(es->str, "GpuSort Memory: " INT64_FORMAT "kB\n",
							 (r.mem_bytes + 1023) / 1024);
		if (es->verbose && r.keydesc)
		{
			explain_indent(es);
			appendStringInfo(es->str, "GpuSort Key Layout: %s\n", r.keydesc);
		}
	}
	else
	{
		ExplainPropertyText("GpuSort Engine", r.engine ? r.engine : "none", es);
		if (r.device)
			ExplainPropertyText("GpuSort Device", r.device, es);
		ExplainPropertyFloat("GpuSort Rows", NULL, r.rows, 0, es);
		ExplainPropertyInteger("GpuSort Key Bytes", NULL, r.key_bytes, es);
		ExplainPropertyBool("GpuSort Key Exact", r.exact, es);
		if (r.fallback)
			ExplainPropertyText("GpuSort Fallback", r.fallback, es);
		ExplainPropertyInteger("GpuSort Chunks", NULL, r.chunks, es);
		ExplainPropertyInteger("GpuSort Runs", NULL, r.runs, es);
		ExplainPropertyInteger("GpuSort Merge Passes", NULL, r.merge_passes, es);
		ExplainPropertyInteger("GpuSort Merge Threads", NULL, r.streams, es);
		ExplainPropertyFloat("GpuSort Load Time", "ms", r.load_ms, 3, es);
		ExplainPropertyFloat("GpuSort Sort Time", "ms", r.sort_ms, 3, es);
		ExplainPropertyFloat("GpuSort Transfer Time", "ms", r.transfer_ms, 3, es);
		ExplainPropertyFloat("GpuSort Sort Wait Time", "ms", r.wait_ms, 3, es);
		ExplainPropertyFloat("GpuSort Tie-break Time", "ms", r.tiebreak_ms, 3, es);
		ExplainPropertyFloat("GpuSort Spill Time", "ms", r.spill_ms, 3, es);
		ExplainPropertyFloat("GpuSort Spill Wait Time", "ms", r.spill_wait_ms, 3, es);
		ExplainPropertyFloat("GpuSort Merge Time", "ms", r.merge_ms, 3, es);
		ExplainPropertyFloat("GpuSort Merge Wait Time", "ms", r.merge_wait_ms, 3, es);
		ExplainPropertyFloat("GpuSort Tie-break Rows", NULL, r.tiebreak_rows, 0, es);
		ExplainPropertyInteger("GpuSort Memory", "kB",
							   (r.mem_bytes + 1023) / 1024, es);
		ExplainPropertyInteger("GpuSort Disk", "kB", r.disk_kb, es);
		ExplainPropertyInteger("GpuSort Rows Copied In Order", "kB",
							   (r.copy_bytes + 1023) / 1024, es);
		ExplainPropertyFloat("GpuSort Copy Time", "ms", r.copy_ms, 3, es);
		ExplainPropertyFloat("GpuSort Emit Time", "ms", r.emit_ms, 3, es);
		if (es->verbose && r.keydesc)
			ExplainPropertyText("GpuSort Key Layout", r.keydesc, es);
	}
}

void
gs_exec_init(void)
{
	RegisterCustomScanMethods(&gpusort_scan_methods);
	RegisterCustomScanMethods(&gs_load_scan_methods);
}
