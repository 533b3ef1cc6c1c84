/*-------------------------------------------------------------------------
 *
 * shards.c
 *	  Partitioned tables whose partitions are foreign tables (shards): sort
 *	  their rows in one GpuSort here instead of on each shard in turn.
 *
 * For an ORDER BY over a partitioned table, postgres_fdw offers each
 * foreign partition's scan already sorted by the remote server (the ORDER
 * BY is pushed down), and the planner merges those sorted streams with a
 * Merge Append.  Merge Append is not asynchronous: it reads the first row
 * of each child in turn, and a remote sort returns its first row only when
 * it has sorted everything, so the shards sort one after another.  When
 * the query reads every row anyway, the rows have to cross the network
 * whatever the plan, and one GpuSort over a plain Append of the shards'
 * scans costs one sort here (overlapped with the transfer) instead of the
 * sum of the shards' sorts.
 *
 * So while gpusort replaces Sorts and the query needs all its rows (no
 * LIMIT, not a cursor), this set_rel_pathlist_hook removes the remotely
 * sorted paths of every foreign table scanned as a partition (or
 * inheritance child), those whose order gpusort can sort by (the leading
 * key encodable: otherwise the Sort here would be PostgreSQL's).  The planner then sorts the partitions' rows here:
 * a Sort over the Append, or a Merge Append of per-partition Sorts, which
 * planner.c turns into one GpuSort over an Append.  With a LIMIT the
 * remote sorts stay: each shard then sorts with its own gpusort and sends
 * only the first rows.
 *
 * A foreign table queried on its own is left alone: its remote sort is one
 * sort either way.
 *
 * The transfer then bounds the query: one process reads every shard's rows
 * through libpq, one shard after another.  So gs_shards_parallel_append
 * lets PostgreSQL's parallel workers read the shards instead, each worker
 * a whole shard through a connection of its own, and load their rows into
 * the sort (sort_parallel.c): the GpuSort's Append of foreign scans becomes
 * a Parallel Append whose subplans are all non-partial, under a
 * GpuSortLoad.  postgres_fdw runs in parallel workers as in any backend
 * (each opens its own connection and remote transaction, and commits or
 * aborts it with the worker's transaction); the planner only never offers
 * it, because a worker's connection does not see what the leader's remote
 * transaction sees.  Hence the conditions: every scan is postgres_fdw's,
 * each foreign server is scanned once in the whole statement (one
 * connection per server, as without workers), the query allows parallel
 * mode and the scans' expressions are parallel safe, and at run time the statement is not inside a transaction block (where
 * the leader's own remote transactions may hold writes or a snapshot that
 * workers would not see); otherwise the leader reads the shards itself.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/stratnum.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "foreign/foreign.h"
#include "nodes/pathnodes.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "utils/lsyscache.h"

#include "gpusort_int.h"
#include "gpusort_keys.h"

static set_rel_pathlist_hook_type prev_set_rel_pathlist = NULL;

/*
 * Does the query read every row of its result?  limit_tuples is the LIMIT
 * plus OFFSET (-1: none); tuple_fraction is 0 when all rows are wanted (a
 * cursor asks for a fraction of them).
 */
static bool
all_rows_wanted(PlannerInfo *root)
{
	return root->limit_tuples < 0 && root->tuple_fraction <= 0.0;
}

/*
 * Would gpusort sort by these pathkeys?  It does when it can encode the
 * leading key (planner.c's rule for a Sort); else the Sort stays
 * PostgreSQL's, and the remote sorts are better kept.
 */
static bool
leading_key_encodable(List *pathkeys)
{
	PathKey    *pk = linitial_node(PathKey, pathkeys);
	EquivalenceClass *ec = pk->pk_eclass;
	EquivalenceMember *em;
	Oid			sortop;

	if (ec->ec_members == NIL)
		return false;
	em = linitial_node(EquivalenceMember, ec->ec_members);
	sortop = get_opfamily_member(pk->pk_opfamily, em->em_datatype,
								 em->em_datatype,
								 gs_pathkey_desc(pk) ? BTGreaterStrategyNumber :
								 BTLessStrategyNumber);
	return OidIsValid(sortop) &&
		gs_column_encodable(em->em_datatype, sortop, ec->ec_collation, NULL);
}

/* whether a foreign server's wrapper is postgres_fdw, by its handler */
static bool
server_is_postgres_fdw(Oid serverid)
{
	ForeignServer *server = GetForeignServer(serverid);
	ForeignDataWrapper *fdw = GetForeignDataWrapper(server->fdwid);
	char	   *handler;

	if (!OidIsValid(fdw->fdwhandler))
		return false;
	handler = get_func_name(fdw->fdwhandler);
	return handler != NULL && strcmp(handler, "postgres_fdw_handler") == 0;
}

static void
gs_shards_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti,
						   RangeTblEntry *rte)
{
	List	   *kept = NIL;
	bool		unsorted_left = false;
	ForeignPath *cheapest_sorted = NULL;
	ListCell   *lc;

	if (prev_set_rel_pathlist)
		prev_set_rel_pathlist(root, rel, rti, rte);

	if (rel->reloptkind != RELOPT_OTHER_MEMBER_REL ||
		rte->rtekind != RTE_RELATION ||
		rte->relkind != RELKIND_FOREIGN_TABLE ||
		!all_rows_wanted(root) ||
		!gs_active())
		return;

	foreach(lc, rel->pathlist)
	{
		Path	   *path = (Path *) lfirst(lc);

		if (path->pathkeys == NIL)
		{
			kept = lappend(kept, path);
			if (path->param_info == NULL)
				unsorted_left = true;
		}
		else if (!leading_key_encodable(path->pathkeys))
			kept = lappend(kept, path);
		else if (IsA(path, ForeignPath) && path->param_info == NULL &&
				 (cheapest_sorted == NULL ||
				  path->total_cost < cheapest_sorted->path.total_cost))
			cheapest_sorted = (ForeignPath *) path;
	}
	if (list_length(kept) == list_length(rel->pathlist))
	{
		list_free(kept);
		return;
	}

	/*
	 * The plain scan may be gone already: add_path drops it when a sorted
	 * scan costs no more (postgres_fdw estimates a remote view's sort as
	 * free, for one).  postgres_fdw deparses a base relation's ORDER BY from
	 * its path's pathkeys alone, so the cheapest sorted scan without its
	 * pathkeys is the plain scan.  Anything else keeps its remote sorts:
	 * never leave the relation without an unparameterized path.
	 */
	if (!unsorted_left && cheapest_sorted != NULL &&
		cheapest_sorted->fdw_private == NIL &&
		OidIsValid(rel->serverid) && server_is_postgres_fdw(rel->serverid))
	{
		ForeignPath *plain = makeNode(ForeignPath);

		memcpy(plain, cheapest_sorted, sizeof(ForeignPath));
		plain->path.pathkeys = NIL;
		kept = lcons(plain, kept);
		unsorted_left = true;
	}
	if (unsorted_left)
		rel->pathlist = kept;
	else
		list_free(kept);
}


/* the foreign servers a statement scans, each as often as it is scanned */
static void
servers_visit(Plan *plan, void *arg)
{
	List	  **servers = (List **) arg;

	if (IsA(plan, ForeignScan))
		*servers = lappend_oid(*servers, ((ForeignScan *) plan)->fs_server);
}

static int
times_scanned(List *servers, Oid serverid)
{
	ListCell   *lc;
	int			n = 0;

	foreach(lc, servers)
		if (lfirst_oid(lc) == serverid)
			n++;
	return n;
}

/*
 * Whether every expression the foreign scans of append evaluate here (and
 * the Append's output) is parallel safe.  is_parallel_safe() looks only
 * when its planner state says the query may hold something unsafe; a bare
 * one says so, with no initplan parameters to trust.
 */
static bool
scans_parallel_safe(Append *append)
{
	PlannerInfo *root = makeNode(PlannerInfo);
	List	   *exprs = list_copy(append->plan.targetlist);
	ListCell   *lc;

	root->glob = makeNode(PlannerGlobal);
	root->glob->maxParallelHazard = PROPARALLEL_UNSAFE;
	foreach(lc, append->appendplans)
	{
		ForeignScan *fs = (ForeignScan *) lfirst(lc);

		exprs = list_concat(exprs, fs->scan.plan.targetlist);
		exprs = list_concat(exprs, fs->scan.plan.qual);
		exprs = list_concat(exprs, fs->fdw_exprs);
		exprs = list_concat(exprs, fs->fdw_scan_tlist);
		exprs = list_concat(exprs, fs->fdw_recheck_quals);
	}
	return is_parallel_safe(root, (Node *) exprs);
}

/*
 * child is the input of a GpuSort.  If it is an Append of shards that
 * parallel workers may read (see the header comment), make it a Parallel
 * Append of non-partial subplans and return how many workers to start;
 * else change nothing and return 0.
 */
int
gs_shards_parallel_append(PlannedStmt *stmt, Plan *child, Query *parse)
{
	Append	   *append = (Append *) child;
	List	   *servers = NIL;
	ListCell   *lc;
	int			nplans;
	int			nworkers;

	if (child == NULL || !IsA(child, Append) || child->parallel_aware ||
		child->initPlan != NIL || !bms_is_empty(child->extParam))
		return 0;
	nplans = list_length(append->appendplans);
	if (nplans < 2)
		return 0;

	gs_stmt_walk(stmt, servers_visit, &servers);
	foreach(lc, append->appendplans)
	{
		Plan	   *sub = (Plan *) lfirst(lc);
		ForeignScan *fs = (ForeignScan *) sub;

		if (!IsA(sub, ForeignScan) || sub->parallel_aware ||
			sub->initPlan != NIL || !bms_is_empty(sub->extParam) ||
			!OidIsValid(fs->fs_server) ||
			times_scanned(servers, fs->fs_server) != 1 ||
			!server_is_postgres_fdw(fs->fs_server))
			return 0;
	}
	list_free(servers);

	/*
	 * Parallel mode must be allowed (nothing parallel unsafe in the query:
	 * PostgreSQL's own rule for a parallel plan; parallel restricted parts,
	 * a window function for one, stay with the leader), and what the
	 * workers evaluate, the scans' expressions, must be parallel safe.
	 */
	if (max_parallel_hazard(parse) == PROPARALLEL_UNSAFE ||
		!scans_parallel_safe(append))
		return 0;

	/* a participant reads a whole shard: no more workers than shards */
	nworkers = Min(nplans - (parallel_leader_participation ? 1 : 0),
				   max_parallel_workers_per_gather);
	if (nworkers <= 0)
		return 0;

	/*
	 * Worth it when the rows the workers take off the leader (each costing
	 * about cpu_tuple_cost to read and copy) pay for starting them and
	 * their connections.
	 */
	if (child->plan_rows * cpu_tuple_cost * nworkers / (nworkers + 1) <=
		parallel_setup_cost)
		return 0;

	append->plan.parallel_aware = true;
	append->plan.parallel_safe = true;
	append->first_partial_plan = nplans;
	append->nasyncplans = 0;
	foreach(lc, append->appendplans)
	{
		Plan	   *sub = (Plan *) lfirst(lc);

		/* each one runs whole in one participant, synchronously */
		sub->async_capable = false;
		sub->parallel_safe = true;
	}
	return nworkers;
}

void
gs_shards_init(void)
{
	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = gs_shards_set_rel_pathlist;
}
