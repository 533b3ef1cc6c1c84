/*-------------------------------------------------------------------------
 *
 * loser_tree.c
 *	  Building a loser tree: every match played once, the winner returned
 *	  (gs_loser_tree_build).  Replaying a winner's path is inline, in
 *	  gpusort_spill.h, beside the declaration.
 *
 * A bottom-layer file: the sort state's merges (sort_merge.c) and the
 * streams' threads (spill_stream.c) call it; it calls nothing.  It runs on
 * those threads too, so it must never call PostgreSQL.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "gpusort_spill.h"

static int
gs_loser_match(int *tree, int n, int node, GsBeforeFn before, void *arg)
{
	int			a;
	int			b;

	if (node >= n)
		return node - n;		/* a leaf: the input's number */
	a = gs_loser_match(tree, n, 2 * node, before, arg);
	b = gs_loser_match(tree, n, 2 * node + 1, before, arg);
	if (before(arg, a, b))
	{
		tree[node] = b;
		return a;
	}
	tree[node] = a;
	return b;
}

int
gs_loser_tree_build(int *tree, int n, GsBeforeFn before, void *arg)
{
	return n <= 1 ? 0 : gs_loser_match(tree, n, 1, before, arg);
}
