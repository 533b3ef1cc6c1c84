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

#include "access/parallel.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_stats.h"

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
static SortBound child_bound(Plan *plan, SortBound bound, int64 nbound,
							 int64 *childn);

/*
 * While replace_sorts walks the main plan tree: how many Gathers are above
 * the node (whose part of the plan runs in workers), and the GpuSorts made
 * outside any, which may get a parallel load.
 */
static int	gather_depth = 0;
static bool collect_loads = false;
static List *load_candidates = NIL;
static List *load_gm_workers = NIL;	/* per candidate: the workers of the
										 * Gather Merge it replaces, or 0 */

static Plan *gather_merge_to_load(GatherMerge *gm);

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
 * What plan, itself bounded by bound/nbound, tells its outer child (and
 * the children of its lists): which nodes pass a Limit's bound on.
 */
static SortBound
child_bound(Plan *plan, SortBound bound, int64 nbound, int64 *childn)
{
	*childn = 0;
	switch (nodeTag(plan))
	{
		case T_Limit:
			return limit_bound((Limit *) plan, childn);
		case T_Result:
		case T_SubqueryScan:
		case T_Append:
		case T_MergeAppend:
		case T_Gather:
		case T_GatherMerge:
			*childn = nbound;
			return bound;
		default:
			return BOUND_NONE;
	}
}

/*
 * Should this Sort become a GpuSort?  When not, *d (if given) says why.
 */
static bool
sort_is_eligible(Sort *sort, SortBound bound, int64 nbound,
				 GsDeclinedSort *d)
{
	GsDeclinedSort local;
	TargetEntry *tle;
	Oid			keytype;
	Oid			sortop;
	Oid			coll;

	if (d == NULL)
		d = &local;
	memset(d, 0, sizeof(*d));
	d->sort = sort;
	d->bound = -1;

	if (sort->numCols < 1 || sort->plan.lefttree == NULL)
	{
		d->reason = GS_DECLINE_NO_KEY;
		return false;
	}
	if (sort->plan.plan_rows < (double) gpusort_min_rows)
	{
		d->reason = GS_DECLINE_MIN_ROWS;
		d->rows = sort->plan.plan_rows;
		return false;
	}

	/* a small top-N is PostgreSQL's bounded heap sort's best case */
	if (bound == BOUND_UNKNOWN ||
		(bound == BOUND_CONST && nbound <= (int64) gpusort_topn_limit))
	{
		d->reason = GS_DECLINE_TOP_N;
		d->bound = bound == BOUND_CONST ? nbound : -1;
		return false;
	}

	/* the leading key must be encodable, or there is nothing to sort on */
	tle = get_tle_by_resno(sort->plan.targetlist, sort->sortColIdx[0]);
	if (tle == NULL)
	{
		d->reason = GS_DECLINE_NO_KEY;
		return false;
	}
	keytype = exprType((Node *) tle->expr);
	sortop = sort->sortOperators[0];
	coll = sort->collations[0];
	if (gs_column_encodable(keytype, sortop, coll, &d->why))
		return true;

	/*
	 * Which of the three is in the way: the same key under the C collation
	 * tells a collation from a type, the type's own "<" and ">" an
	 * ordering.
	 */
	d->keytype = keytype;
	d->collation = coll;
	if (OidIsValid(coll) && coll != C_COLLATION_OID &&
		gs_column_encodable(keytype, sortop, C_COLLATION_OID, NULL))
		d->reason = GS_DECLINE_KEY_COLLATION;
	else
	{
		TypeCacheEntry *tc;

		tc = lookup_type_cache(getBaseType(keytype),
							   TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
		if (sortop != tc->lt_opr && sortop != tc->gt_opr)
			d->reason = GS_DECLINE_KEY_OPERATOR;
		else
			d->reason = GS_DECLINE_KEY_TYPE;
	}
	return false;
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
	SortBound	childbound;
	int64		childn = 0;

	if (plan == NULL)
		return NULL;

	check_stack_depth();

	childbound = child_bound(plan, bound, nbound, &childn);

	if (IsA(plan, Gather) || IsA(plan, GatherMerge))
		gather_depth++;
	plan->lefttree = replace_sorts(plan->lefttree, childbound, childn);
	plan->righttree = replace_sorts(plan->righttree, BOUND_NONE, 0);
	if (IsA(plan, Gather) || IsA(plan, GatherMerge))
		gather_depth--;

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

	if (IsA(plan, Sort) && sort_is_eligible((Sort *) plan, bound, nbound, NULL))
	{
		Plan	   *gs = make_gpusort((Sort *) plan);

		if (collect_loads && gather_depth == 0)
		{
			load_candidates = lappend(load_candidates, gs);
			load_gm_workers = lappend_int(load_gm_workers, 0);
		}
		return gs;
	}
	if (IsA(plan, GatherMerge) && collect_loads && gather_depth == 0)
		return gather_merge_to_load((GatherMerge *) plan);

	return plan;
}

/* ---------------------------------------------------------------------
 * Parallel load (sort_parallel.c): a GpuSort over a plain Seq Scan gets a
 * GpuSortLoad node between the two and a parallel-aware scan, whose rows
 * workers copy and encode into shared memory.
 * ---------------------------------------------------------------------
 */

/*
 * Whether the statement may use parallel workers at all: what PostgreSQL's
 * planner asks before it considers a parallel plan.  The scans' own
 * parallel_safe flags (checked per GpuSort) already say no when the query
 * holds anything parallel unsafe.
 */
static bool
parallel_load_allowed(Query *parse, PlannedStmt *stmt, int cursorOptions)
{
	return gpusort_parallel_load &&
		(cursorOptions & CURSOR_OPT_PARALLEL_OK) != 0 &&
		IsUnderPostmaster && !IsParallelWorker() &&
		parse->commandType == CMD_SELECT && !parse->hasModifyingCTE &&
		stmt->commandType == CMD_SELECT && !stmt->hasModifyingCTE &&
		max_parallel_workers_per_gather > 0;
}

static void
max_id_visit(Plan *plan, void *arg)
{
	int		   *maxid = (int *) arg;

	*maxid = Max(*maxid, plan->plan_node_id);
}

/* the highest plan_node_id in the statement, so that new nodes get others */
static int
max_plan_node_id(PlannedStmt *stmt)
{
	int			maxid = 0;

	gs_stmt_walk(stmt, max_id_visit, &maxid);
	return maxid;
}

/*
 * Workers for a scan of a table of pages blocks, by PostgreSQL's rule for a
 * parallel heap scan: none below min_parallel_table_scan_size, then one
 * more each time the table is three times larger, up to
 * max_parallel_workers_per_gather (or the table's parallel_workers option).
 */
static int
load_workers(Relation rel, BlockNumber pages)
{
	int			n = RelationGetParallelWorkers(rel, -1);
	double		threshold = Max(min_parallel_table_scan_size, 1);

	if (n < 0)
	{
		if (pages < (BlockNumber) min_parallel_table_scan_size)
			return 0;
		n = 1;
		while ((double) pages >= threshold * 3 &&
			   n < max_parallel_workers_per_gather)
		{
			n++;
			threshold *= 3;
		}
	}
	return Min(n, max_parallel_workers_per_gather);
}

/*
 * Whether tlist (a Gather's or Gather Merge's) passes its child's output
 * through unchanged: OUTER_VAR Vars in the same positions.
 */
static bool
identity_tlist(List *tlist, List *child_tlist)
{
	ListCell   *lc;

	if (list_length(tlist) != list_length(child_tlist))
		return false;
	foreach(lc, tlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Var		   *var = (Var *) tle->expr;

		if (!IsA(var, Var) || var->varno != OUTER_VAR ||
			var->varattno != tle->resno)
			return false;
	}
	return true;
}

/*
 * Whether plan is a partial scan that parallel workers can share with no
 * help from a Gather: a Parallel Seq Scan, or the Parallel Append of a
 * partitioned table's (Parallel) Seq Scans.
 */
static bool
partial_scan(Plan *plan)
{
	ListCell   *lc;

	if (plan == NULL || !plan->parallel_aware)
		return false;
	if (IsA(plan, SeqScan))
		return true;
	if (!IsA(plan, Append) || plan->initPlan != NIL)
		return false;
	foreach(lc, ((Append *) plan)->appendplans)
	{
		Plan	   *sub = (Plan *) lfirst(lc);

		if (!IsA(sub, SeqScan) || sub->initPlan != NIL)
			return false;
	}
	return true;
}

/*
 * A Gather Merge over a GpuSort of a partial scan (partial_scan): each worker sorts
 * its share and the leader merges them row by row through tuple queues,
 * which keeps it the bottleneck.  Replace it by the GpuSort alone, loaded
 * in parallel by as many workers (add_parallel_load adds the GpuSortLoad).
 */
static Plan *
gather_merge_to_load(GatherMerge *gm)
{
	Plan	   *gs = gm->plan.lefttree;
	Plan	   *scan;
	Bitmapset  *ext;
	ListCell   *lc;
	ListCell   *lg;
	double		rows = gm->plan.plan_rows;

	if (gs == NULL || !IsA(gs, CustomScan) ||
		((CustomScan *) gs)->methods != &gpusort_scan_methods)
		return (Plan *) gm;
	scan = gs->lefttree;
	if (!partial_scan(scan) ||
		gm->plan.initPlan != NIL || gm->initParam != NULL ||
		gm->plan.qual != NIL || gs->initPlan != NIL ||
		!identity_tlist(gm->plan.targetlist, gs->targetlist))
		return (Plan *) gm;
	/* the scan may only depend on the Gather Merge's own rescan signal */
	ext = bms_copy(scan->extParam);
	if (gm->rescan_param >= 0)
		ext = bms_del_member(ext, gm->rescan_param);
	if (!bms_is_empty(ext))
		return (Plan *) gm;

	/* the GpuSort stands where the Gather Merge was: its column labels too */
	forboth(lc, gm->plan.targetlist, lg, gs->targetlist)
	{
		TargetEntry *gmtle = lfirst_node(TargetEntry, lc);
		TargetEntry *gstle = lfirst_node(TargetEntry, lg);

		gstle->resname = gmtle->resname;
		gstle->resjunk = gmtle->resjunk;
		gstle->ressortgroupref = gmtle->ressortgroupref;
	}
	if (gm->rescan_param >= 0)
	{
		scan->extParam = bms_del_member(bms_copy(scan->extParam),
										gm->rescan_param);
		scan->allParam = bms_del_member(bms_copy(scan->allParam),
										gm->rescan_param);
	}
	gs->startup_cost = gm->plan.startup_cost;
	gs->total_cost = gm->plan.total_cost;
	gs->plan_rows = rows;
	gs->plan_node_id = gm->plan.plan_node_id;
	gs->parallel_safe = false;
	gs->extParam = bms_copy(gm->plan.extParam);
	gs->allParam = bms_copy(gm->plan.allParam);
	scan->plan_rows = rows;
	load_candidates = lappend(load_candidates, gs);
	load_gm_workers = lappend_int(load_gm_workers, Max(gm->num_workers, 1));
	return gs;
}

/*
 * Whether plan is a plain table's scan that workers could share (a Seq
 * Scan of a table or materialized view, parallel safe, not parallel aware
 * yet, with no parameters), and how many workers PostgreSQL's rule gives
 * it (load_workers).
 */
static bool
shareable_scan(PlannedStmt *stmt, Plan *plan, int *nworkers)
{
	RangeTblEntry *rte;
	Relation	rel;

	if (plan == NULL || !IsA(plan, SeqScan) || plan->parallel_aware ||
		!plan->parallel_safe || plan->initPlan != NIL ||
		!bms_is_empty(plan->extParam))
		return false;
	rte = rt_fetch(((Scan *) plan)->scanrelid, stmt->rtable);
	if (rte->rtekind != RTE_RELATION ||
		(rte->relkind != RELKIND_RELATION && rte->relkind != RELKIND_MATVIEW))
		return false;
	rel = table_open(rte->relid, NoLock);
	*nworkers = load_workers(rel, RelationGetNumberOfBlocks(rel));
	table_close(rel, NoLock);
	return true;
}

static void
add_parallel_load(PlannedStmt *stmt, Query *parse, CustomScan *cs,
				  int *next_id, int gm_workers)
{
	Plan	   *child = cs->scan.plan.lefttree;
	int			nworkers;

	/*
	 * A Gather straight under the sort, over a Parallel Seq Scan: its rows
	 * come to the leader one by one through tuple queues.  The workers can
	 * load them into shared memory instead.
	 */
	if (gm_workers == 0 && child != NULL && IsA(child, Gather))
	{
		Gather	   *g = (Gather *) child;
		Plan	   *scan = g->plan.lefttree;

		if (!g->single_copy && g->num_workers > 0 && g->initParam == NULL &&
			g->plan.initPlan == NIL && g->plan.qual == NIL &&
			partial_scan(scan) &&
			identity_tlist(g->plan.targetlist, scan->targetlist))
		{
			Bitmapset  *ext = bms_copy(scan->extParam);

			if (g->rescan_param >= 0)
				ext = bms_del_member(ext, g->rescan_param);
			if (bms_is_empty(ext))
			{
				scan->extParam = NULL;
				scan->allParam = NULL;
				scan->plan_rows = g->plan.plan_rows;
				cs->scan.plan.lefttree = scan;
				child = scan;
				gm_workers = g->num_workers;
			}
		}
	}

	if (gm_workers > 0)
	{
		/* a Gather Merge replaced: its scan is parallel aware already */
		cs->scan.plan.lefttree = (Plan *) gs_load_make_plan(child, cs->custom_private,
															gm_workers, 0,
															(*next_id)++);
		stmt->parallelModeNeeded = true;
		return;
	}

	if (child == NULL)
		return;

	/* an Append of postgres_fdw shards: a worker reads each (shards.c) */
	if (IsA(child, Append))
	{
		nworkers = gs_shards_parallel_append(stmt, child, parse);
		if (nworkers > 0)
		{
			cs->scan.plan.lefttree = (Plan *) gs_load_make_plan(child, cs->custom_private,
																nworkers, GS_LOAD_SHARDS,
																(*next_id)++);
			stmt->parallelModeNeeded = true;
			return;
		}
	}

	/* (checked after the shards: foreign scans are never parallel safe) */
	if (child->parallel_aware || !child->parallel_safe ||
		child->initPlan != NIL || !bms_is_empty(child->extParam))
		return;
	if (IsA(child, Append))
	{
		/*
		 * A partitioned table's Append of Seq Scans: as many workers as
		 * PostgreSQL gives a Parallel Append, the most any partition's
		 * scan would get, and at least one more each time the number of
		 * partitions doubles.
		 */
		List	   *subs = ((Append *) child)->appendplans;
		ListCell   *lc;

		nworkers = pg_leftmost_one_pos32(Max(list_length(subs), 1)) + 1;
		foreach(lc, subs)
		{
			int			w;

			if (!shareable_scan(stmt, (Plan *) lfirst(lc), &w))
				return;
			nworkers = Max(nworkers, w);
		}
		nworkers = Min(nworkers, max_parallel_workers_per_gather);
	}
	else if (!shareable_scan(stmt, child, &nworkers))
		return;
	if (nworkers <= 0)
		return;

	/*
	 * Worth it when the rows the workers take off the leader (each costing
	 * about cpu_tuple_cost to copy and encode) pay for starting them.
	 */
	if (child->plan_rows * cpu_tuple_cost * nworkers / (nworkers + 1) <=
		parallel_setup_cost)
		return;

	child->parallel_aware = true;
	if (IsA(child, Append))
	{
		Append	   *append = (Append *) child;
		ListCell   *lc;

		/* every partition's scan is shared out by blocks: all partial */
		append->first_partial_plan = 0;
		foreach(lc, append->appendplans)
			((Plan *) lfirst(lc))->parallel_aware = true;
	}
	cs->scan.plan.lefttree = (Plan *) gs_load_make_plan(child, cs->custom_private,
														nworkers, 0, (*next_id)++);
	stmt->parallelModeNeeded = true;
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

	if (!gs_sorts_replaced())
		return stmt;

	gather_depth = 0;
	load_candidates = NIL;
	load_gm_workers = NIL;
	collect_loads = parallel_load_allowed(parse, stmt, cursorOptions);
	PG_TRY();
	{
		stmt->planTree = replace_sorts(stmt->planTree, BOUND_NONE, 0);
	}
	PG_FINALLY();
	{
		collect_loads = false;
		gather_depth = 0;
	}
	PG_END_TRY();
	foreach(lc, stmt->subplans)
		lfirst(lc) = replace_sorts((Plan *) lfirst(lc), BOUND_NONE, 0);

	if (load_candidates != NIL)
	{
		int			next_id = max_plan_node_id(stmt) + 1;
		ListCell   *lw;

		forboth(lc, load_candidates, lw, load_gm_workers)
			add_parallel_load(stmt, parse, (CustomScan *) lfirst(lc),
							  &next_id, lfirst_int(lw));
	}
	load_candidates = NIL;
	load_gm_workers = NIL;

	return stmt;
}

/*
 * Whether the planner replaces Sorts now (gpusort.enabled, preloaded, and
 * the extension created in this database: gs_active); where it does not,
 * no Sort is said to be declined either.
 */
bool
gs_sorts_replaced(void)
{
	return gs_active();
}

/* ---------------------------------------------------------------------
 * Declined Sorts: the Sorts of a finished plan that stay PostgreSQL's,
 * each with its reason, found by the walk replace_sorts makes (same
 * children, same Limit bounds) for EXPLAIN and the statistics (declined.c).
 * ---------------------------------------------------------------------
 */

static void declined_walk(Plan *plan, SortBound bound, int64 nbound,
						  List *ancestors, List **out);
static bool want_ancestors = false;

static void
declined_walk_list(List *plans, SortBound bound, int64 nbound,
				   List *ancestors, List **out)
{
	ListCell   *lc;

	foreach(lc, plans)
		declined_walk((Plan *) lfirst(lc), bound, nbound, ancestors, out);
}

static void
declined_walk(Plan *plan, SortBound bound, int64 nbound, List *ancestors,
			  List **out)
{
	SortBound	childbound;
	int64		childn;
	List	   *up;

	if (plan == NULL)
		return;
	check_stack_depth();

	if (IsA(plan, Sort))
	{
		GsDeclinedSort d;

		if (!sort_is_eligible((Sort *) plan, bound, nbound, &d))
		{
			GsDeclinedSort *copy = palloc(sizeof(GsDeclinedSort));

			*copy = d;
			copy->ancestors = ancestors;
			*out = lappend(*out, copy);
		}
	}

	childbound = child_bound(plan, bound, nbound, &childn);
	/* EXPLAIN's deparser wants the parents; the statistics need none */
	up = want_ancestors ? lcons(plan, list_copy(ancestors)) : NIL;
	declined_walk(plan->lefttree, childbound, childn, up, out);
	declined_walk(plan->righttree, BOUND_NONE, 0, up, out);
	switch (nodeTag(plan))
	{
		case T_Append:
			declined_walk_list(((Append *) plan)->appendplans, childbound,
							   childn, up, out);
			break;
		case T_MergeAppend:
			declined_walk_list(((MergeAppend *) plan)->mergeplans, childbound,
							   childn, up, out);
			break;
		case T_SubqueryScan:
			declined_walk(((SubqueryScan *) plan)->subplan, childbound,
						  childn, up, out);
			break;
		case T_BitmapAnd:
			declined_walk_list(((BitmapAnd *) plan)->bitmapplans, BOUND_NONE,
							   0, up, out);
			break;
		case T_BitmapOr:
			declined_walk_list(((BitmapOr *) plan)->bitmapplans, BOUND_NONE,
							   0, up, out);
			break;
		case T_CustomScan:
			declined_walk_list(((CustomScan *) plan)->custom_plans, BOUND_NONE,
							   0, up, out);
			break;
		default:
			break;
	}
}

/*
 * The Sorts of stmt that gpusort leaves to PostgreSQL (GsDeclinedSort,
 * palloc'd), in the order of the plan tree then of its subplans; NIL when
 * gpusort replaces no Sort at all now.  with_ancestors: fill in their
 * ancestors too.
 */
List *
gs_declined_sorts(PlannedStmt *stmt, bool with_ancestors)
{
	List	   *out = NIL;
	ListCell   *lc;

	if (!gs_sorts_replaced() || stmt->commandType == CMD_UTILITY)
		return NIL;
	want_ancestors = with_ancestors;
	declined_walk(stmt->planTree, BOUND_NONE, 0, NIL, &out);
	foreach(lc, stmt->subplans)
		declined_walk((Plan *) lfirst(lc), BOUND_NONE, 0, NIL, &out);
	return out;
}

void
gs_planner_init(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = gpusort_planner;
}
