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
 * inheritance child).  The planner then sorts the partitions' rows here:
 * a Sort over the Append, or a Merge Append of per-partition Sorts, which
 * planner.c turns into one GpuSort over an Append.  With a LIMIT the
 * remote sorts stay: each shard then sorts with its own gpusort and sends
 * only the first rows.
 *
 * A foreign table queried on its own is left alone: its remote sort is one
 * sort either way.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "nodes/pathnodes.h"
#include "optimizer/paths.h"

#include "gpusort_int.h"

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

static void
gs_shards_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti,
						   RangeTblEntry *rte)
{
	List	   *kept = NIL;
	bool		unsorted_left = false;
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
	}
	/* never leave the relation without an unparameterized path */
	if (unsorted_left && list_length(kept) < list_length(rel->pathlist))
		rel->pathlist = kept;
	else
		list_free(kept);
}

void
gs_shards_init(void)
{
	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = gs_shards_set_rel_pathlist;
}
