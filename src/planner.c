/*-------------------------------------------------------------------------
 *
 * planner.c
 *	  Planner side: replace PostgreSQL's Sort nodes by GpuSort custom scans.
 *
 * After the standard planner has produced a finished PlannedStmt (set_plan_
 * references included), we walk every plan tree in it -- the main tree and
 * every subplan, through every kind of child list -- and replace each
 * eligible Sort by a CustomScan whose only child is the Sort's child.
 *
 * The replacement keeps what the executor and EXPLAIN rely on: the Sort's
 * costs, row and width estimates, plan_node_id, initPlans and parameter
 * sets.  Its scan tuple is described by custom_scan_tlist, a copy of the
 * Sort's target list (Vars pointing at the child's output, OUTER_VAR), and
 * its own target list is the identity over that scan tuple (INDEX_VAR), so
 * no projection happens at run time.  The child stays in lefttree, where it
 * was under the Sort, rather than in custom_plans: EXPLAIN's deparser
 * resolves OUTER_VAR through lefttree (so "Sort Key" and "Output" read
 * exactly as they do for a Sort), and the executor side puts the child's
 * state in the PlanState's lefttree too, so parameter-change propagation,
 * EXPLAIN and shutdown treat it as any node's outer child.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"

static planner_hook_type prev_planner_hook = NULL;

/*
 * What a Limit above a node tells the Sort below it.  ExecSetTupleBound()
 * hands a Limit's bound down through Result, SubqueryScan, Append,
 * MergeAppend, Gather and Gather Merge to a Sort, which then keeps only the
 * top N tuples with a bounded heap.  A GpuSort has no such mode, so a Sort
 * that will be bounded to a small N is better left alone.
 */
typedef enum SortBound
{
	BOUND_NONE,					/* no Limit reaches this node */
	BOUND_CONST,				/* a Limit with a known row count */
	BOUND_UNKNOWN				/* a Limit whose count is only known at run
								 * time (a parameter) */
} SortBound;

static Plan *replace_sorts(Plan *plan, SortBound bound, int64 nbound);

/*
 * The tuple bound a Limit gives its child, when it is a plan-time constant.
 */
static SortBound
limit_bound(Limit *limit, int64 *nbound)
{
	Const	   *count = (Const *) limit->limitCount;
	Const	   *offset = (Const *) limit->limitOffset;
	int64		n;

	if (count == NULL)
		return BOUND_NONE;		/* OFFSET alone bounds nothing */
	if (limit->limitOption == LIMIT_OPTION_WITH_TIES)
		return BOUND_NONE;		/* the Limit asks for every row */
	if (!IsA(count, Const) || (offset != NULL && !IsA(offset, Const)))
		return BOUND_UNKNOWN;
	if (count->constisnull)
		return BOUND_NONE;		/* LIMIT NULL means no limit */
	n = DatumGetInt64(count->constvalue);
	if (offset != NULL && !offset->constisnull)
	{
		int64		off = DatumGetInt64(offset->constvalue);

		if (off > 0)
			n = (n > PG_INT64_MAX - off) ? PG_INT64_MAX : n + off;
	}
	*nbound = n;
	return BOUND_CONST;
}

/*
 * Should this Sort become a GpuSort?
 */
static bool
sort_is_eligible(Sort *sort, SortBound bound, int64 nbound)
{
	TargetEntry *tle;
	Oid			keytype;

	if (sort->numCols < 1 || sort->plan.lefttree == NULL)
		return false;
	if (sort->plan.plan_rows < (double) gpusort_min_rows)
		return false;

	/* a small top-N is PostgreSQL's bounded heap sort's best case */
	if (bound == BOUND_UNKNOWN)
		return false;
	if (bound == BOUND_CONST && nbound <= (int64) gpusort_topn_limit)
		return false;

	/* the leading key must be encodable, or there is nothing to sort on */
	tle = get_tle_by_resno(sort->plan.targetlist, sort->sortColIdx[0]);
	if (tle == NULL)
		return false;
	keytype = exprType((Node *) tle->expr);
	return gs_column_encodable(keytype, sort->sortOperators[0],
							   sort->collations[0], NULL);
}

/*
 * Build the GpuSort CustomScan standing in for sort.
 */
static Plan *
make_gpusort(Sort *sort)
{
	CustomScan *cscan = makeNode(CustomScan);
	Plan	   *child = sort->plan.lefttree;
	List	   *tlist = NIL;
	List	   *colidx = NIL;
	List	   *sortops = NIL;
	List	   *colls = NIL;
	List	   *nullsfirst = NIL;
	ListCell   *lc;
	int			i;

	/* identity target list over the scan tuple */
	foreach(lc, sort->plan.targetlist)
	{
		TargetEntry *otle = lfirst_node(TargetEntry, lc);
		Var		   *var;
		TargetEntry *ntle;

		var = makeVar(INDEX_VAR, otle->resno,
					  exprType((Node *) otle->expr),
					  exprTypmod((Node *) otle->expr),
					  exprCollation((Node *) otle->expr),
					  0);
		ntle = makeTargetEntry((Expr *) var, otle->resno,
							   otle->resname, otle->resjunk);
		ntle->ressortgroupref = otle->ressortgroupref;
		tlist = lappend(tlist, ntle);
	}

	for (i = 0; i < sort->numCols; i++)
	{
		colidx = lappend_int(colidx, sort->sortColIdx[i]);
		sortops = lappend_oid(sortops, sort->sortOperators[i]);
		colls = lappend_oid(colls, sort->collations[i]);
		nullsfirst = lappend_int(nullsfirst, sort->nullsFirst[i] ? 1 : 0);
	}

	/* everything the executor and EXPLAIN read from the Plan header */
	cscan->scan.plan.startup_cost = sort->plan.startup_cost;
	cscan->scan.plan.total_cost = sort->plan.total_cost;
	cscan->scan.plan.plan_rows = sort->plan.plan_rows;
	cscan->scan.plan.plan_width = sort->plan.plan_width;
	cscan->scan.plan.parallel_aware = false;
	cscan->scan.plan.parallel_safe = sort->plan.parallel_safe;
	cscan->scan.plan.async_capable = false;
	cscan->scan.plan.plan_node_id = sort->plan.plan_node_id;
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = NIL;
	cscan->scan.plan.lefttree = child;	/* see the file header */
	cscan->scan.plan.righttree = NULL;
	cscan->scan.plan.initPlan = sort->plan.initPlan;
	cscan->scan.plan.extParam = bms_copy(sort->plan.extParam);
	cscan->scan.plan.allParam = bms_copy(sort->plan.allParam);
	cscan->scan.scanrelid = 0;

	cscan->flags = CUSTOMPATH_SUPPORT_BACKWARD_SCAN |
		CUSTOMPATH_SUPPORT_MARK_RESTORE;
	cscan->custom_plans = NIL;
	cscan->custom_exprs = NIL;
	cscan->custom_private = list_make4(colidx, sortops, colls, nullsfirst);
	cscan->custom_scan_tlist = sort->plan.targetlist;
	cscan->custom_relids = NULL;
	cscan->methods = &gpusort_scan_methods;

	return (Plan *) cscan;
}

static List *
replace_in_list(List *plans, SortBound bound, int64 nbound)
{
	ListCell   *lc;

	foreach(lc, plans)
		lfirst(lc) = replace_sorts((Plan *) lfirst(lc), bound, nbound);
	return plans;
}

/*
 * Walk a plan tree, replacing eligible Sorts; returns the (possibly new)
 * root.  bound/nbound say what a Limit above tells this node.
 */
static Plan *
replace_sorts(Plan *plan, SortBound bound, int64 nbound)
{
	SortBound	childbound = BOUND_NONE;
	int64		childn = 0;

	if (plan == NULL)
		return NULL;

	check_stack_depth();

	/* which nodes pass a Limit's bound on to their children */
	switch (nodeTag(plan))
	{
		case T_Limit:
			childbound = limit_bound((Limit *) plan, &childn);
			break;
		case T_Result:
		case T_SubqueryScan:
		case T_Append:
		case T_MergeAppend:
		case T_Gather:
		case T_GatherMerge:
			childbound = bound;
			childn = nbound;
			break;
		default:
			break;
	}

	plan->lefttree = replace_sorts(plan->lefttree, childbound, childn);
	plan->righttree = replace_sorts(plan->righttree, BOUND_NONE, 0);

	switch (nodeTag(plan))
	{
		case T_Append:
			replace_in_list(((Append *) plan)->appendplans, childbound, childn);
			break;
		case T_MergeAppend:
			replace_in_list(((MergeAppend *) plan)->mergeplans, childbound, childn);
			break;
		case T_SubqueryScan:
			((SubqueryScan *) plan)->subplan =
				replace_sorts(((SubqueryScan *) plan)->subplan, childbound, childn);
			break;
		case T_BitmapAnd:
			replace_in_list(((BitmapAnd *) plan)->bitmapplans, BOUND_NONE, 0);
			break;
		case T_BitmapOr:
			replace_in_list(((BitmapOr *) plan)->bitmapplans, BOUND_NONE, 0);
			break;
		case T_CustomScan:
			replace_in_list(((CustomScan *) plan)->custom_plans, BOUND_NONE, 0);
			break;
		default:
			break;
	}

	if (IsA(plan, Sort) && sort_is_eligible((Sort *) plan, bound, nbound))
		return make_gpusort((Sort *) plan);

	return plan;
}

static PlannedStmt *
gpusort_planner(Query *parse, const char *query_string, int cursorOptions,
				ParamListInfo boundParams)
{
	PlannedStmt *stmt;
	ListCell   *lc;

	if (prev_planner_hook)
		stmt = prev_planner_hook(parse, query_string, cursorOptions, boundParams);
	else
		stmt = standard_planner(parse, query_string, cursorOptions, boundParams);

	if (!gpusort_enabled)
		return stmt;

	stmt->planTree = replace_sorts(stmt->planTree, BOUND_NONE, 0);
	foreach(lc, stmt->subplans)
		lfirst(lc) = replace_sorts((Plan *) lfirst(lc), BOUND_NONE, 0);

	return stmt;
}

void
gs_planner_init(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = gpusort_planner;
}
