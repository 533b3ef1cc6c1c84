/*-------------------------------------------------------------------------
 *
 * plan_walk.c
 *	  Visit every node of a finished plan tree.
 *
 * PostgreSQL walks PlanStates (planstate_tree_walker) but has no walker
 * for Plan trees; the planner side needs one to look over a whole
 * statement (planner.c: node ids; shards.c: the foreign servers scanned).
 * Children are the outer and inner plans and every kind of child list.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/plannodes.h"

#include "gpusort_int.h"

void
gs_plan_walk(Plan *plan, void (*visit) (Plan *plan, void *arg), void *arg)
{
	List	   *children = NIL;
	ListCell   *lc;

	if (plan == NULL)
		return;
	visit(plan, arg);
	gs_plan_walk(plan->lefttree, visit, arg);
	gs_plan_walk(plan->righttree, visit, arg);
	switch (nodeTag(plan))
	{
		case T_Append:
			children = ((Append *) plan)->appendplans;
			break;
		case T_MergeAppend:
			children = ((MergeAppend *) plan)->mergeplans;
			break;
		case T_SubqueryScan:
			gs_plan_walk(((SubqueryScan *) plan)->subplan, visit, arg);
			break;
		case T_BitmapAnd:
			children = ((BitmapAnd *) plan)->bitmapplans;
			break;
		case T_BitmapOr:
			children = ((BitmapOr *) plan)->bitmapplans;
			break;
		case T_CustomScan:
			children = ((CustomScan *) plan)->custom_plans;
			break;
		default:
			break;
	}
	foreach(lc, children)
		gs_plan_walk((Plan *) lfirst(lc), visit, arg);
}

/* every plan tree of a statement: the main one and each subplan's */
void
gs_stmt_walk(PlannedStmt *stmt, void (*visit) (Plan *plan, void *arg),
			 void *arg)
{
	ListCell   *lc;

	gs_plan_walk(stmt->planTree, visit, arg);
	foreach(lc, stmt->subplans)
		gs_plan_walk((Plan *) lfirst(lc), visit, arg);
}
