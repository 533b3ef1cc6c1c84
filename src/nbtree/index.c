/*-------------------------------------------------------------------------
 *
 * index.c
 *	  Hand btree builds of CREATE INDEX and REINDEX to gpusort.
 *
 * PostgreSQL has no hook in btbuild.  It calls the access method through
 * the index relcache entry, index->rd_indam->ambuild, and rd_indam is a
 * private copy of the AM's routine kept in the entry's rd_indexcxt.  So
 * gpusort replaces ambuild in that copy, for the index about to be built,
 * with gs_btbuild (index_build.c), which builds the index itself or calls
 * btbuild for anything it does not support.
 *
 *	- CREATE INDEX (and the indexes ALTER TABLE creates): index_create()
 *	  invokes the object access hook (OAT_POST_CREATE) for the new index
 *	  right before the command counter increment that turns the bare
 *	  relcache entry made by heap_create into a full index entry (rd_indam
 *	  appears only then), and then calls index_build().  Our hook makes
 *	  that increment itself (index_create's own one then has nothing left
 *	  to do) and patches the fresh entry.
 *	- REINDEX INDEX / TABLE: a ProcessUtility hook takes, in REINDEX's own
 *	  order, the locks REINDEX is about to take, opens the btree indexes
 *	  concerned and patches their entries.  While an index is open its
 *	  entry is only reloaded, never rebuilt, by invalidations (its
 *	  rd_indam survives), and reindex_index() keeps it open up to
 *	  index_build().
 *	- Every other build of an existing or concurrent index: index_build()
 *	  asks plan_create_index_workers() how many parallel workers a btree
 *	  build should have (for every caller that allows parallelism:
 *	  reindex_index(), which REINDEX of every kind, CLUSTER, VACUUM FULL,
 *	  TRUNCATE, table rewrites and REFRESH MATERIALIZED VIEW use, and
 *	  index_concurrently_build(), used by CREATE INDEX and REINDEX
 *	  CONCURRENTLY).  That function builds a planner entry for the heap,
 *	  whose get_relation_info() ends with get_relation_info_hook, while the
 *	  index is open.  Inside those statements our hook patches the heap's
 *	  btree indexes that are being built at that moment: the one
 *	  ReindexIsProcessingIndex() names, and those not yet ready for
 *	  inserts (indisready false: a concurrent build).  It does not fire
 *	  when max_parallel_maintenance_workers is 0 (plan_create_index_workers
 *	  returns before planning anything), in a standalone backend, or while
 *	  bootstrapping: those builds stay PostgreSQL's (the ProcessUtility
 *	  hook logs so for the first case).
 *
 * Safety: the patch only decides who builds the index.  If an invalidation
 * rebuilds the entry first, the patch is simply gone and btbuild runs; if a
 * patched entry outlives the build, gs_btbuild checks everything again at
 * its next use.  Parallel builds: parallel btree workers never call
 * ambuild; gs_btbuild either builds the index (its own workers scanning
 * the heap, see index_parallel.c) or leaves the whole build, parallel
 * workers included, to btbuild.
 *
 * CLUSTER: plan_cluster_use_sort() plans the heap too (as a plain
 * relation, not as an inheritance parent) right before the table is
 * copied; inside CLUSTER the same hook lets index_cluster.c take the copy.
 *
 * Not taken over: indexes of system catalogs and TOAST tables.  Their
 * rebuilds run while the catalogs they index may be unusable, and
 * gs_btbuild reads catalogs (operator families, sort support, collations)
 * that btbuild does not; they are small, so nothing is lost.  A concurrent
 * build is taken over but scanned by the leader alone (its MVCC snapshot
 * is not handed to gpusort's workers); its validation pass (a sort of
 * TIDs in validate_index) stays PostgreSQL's.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/amapi.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "optimizer/plancat.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "gpusort_int.h"
#include "index_int.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static object_access_hook_type prev_object_access = NULL;
static get_relation_info_hook_type prev_get_relation_info = NULL;

/* > 0 inside a statement that may rebuild indexes */
static int	gs_rebuild_depth = 0;

/* > 0 inside CLUSTER, whose table sort index_cluster.c may take */
static int	gs_cluster_depth = 0;

/*
 * > 0 while a statement runs whose new indexes we build: CREATE INDEX (not
 * CONCURRENTLY) and ALTER TABLE (ADD PRIMARY KEY / UNIQUE, and indexes it
 * rebuilds after ALTER COLUMN TYPE)
 */
static int	gs_create_index_depth = 0;

/* replace ambuild in an open btree index's relcache entry */
static void
gs_index_patch(Relation index)
{
	if (index->rd_rel->relkind != RELKIND_INDEX ||
		index->rd_rel->relam != BTREE_AM_OID ||
		index->rd_indam == NULL)
		return;
	if (index->rd_indam->ambuild == btbuild)
		index->rd_indam->ambuild = gs_btbuild;
}

static void
gs_index_object_access(ObjectAccessType access, Oid classId, Oid objectId,
					   int subId, void *arg)
{
	Relation	rel;

	if (prev_object_access)
		prev_object_access(access, classId, objectId, subId, arg);

	if (access != OAT_POST_CREATE || classId != RelationRelationId ||
		subId != 0 || gs_create_index_depth == 0 || !gs_index_wanted())
		return;

	/* the entry heap_create made: valid, though not an index entry yet */
	rel = RelationIdGetRelation(objectId);
	if (!RelationIsValid(rel))
		return;
	if (rel->rd_rel->relkind == RELKIND_INDEX &&
		rel->rd_rel->relam == BTREE_AM_OID &&
		!IsCatalogNamespace(rel->rd_rel->relnamespace) &&
		!IsToastNamespace(rel->rd_rel->relnamespace))
	{
		/* what index_create does next; the entry gets its rd_indam */
		CommandCounterIncrement();
		gs_index_patch(rel);
	}
	RelationClose(rel);
}

/* open (and keep locked) one index REINDEX will build, and patch it */
static void
gs_index_prepare_one(Oid indexId, bool lock_heap)
{
	Relation	index;

	if (lock_heap)
	{
		Oid			heapId = IndexGetRelation(indexId, true);

		if (!OidIsValid(heapId) || IsCatalogRelationOid(heapId))
			return;
		LockRelationOid(heapId, ShareLock);
	}
	index = try_relation_open(indexId, AccessExclusiveLock);
	if (index == NULL)
		return;
	gs_index_patch(index);
	relation_close(index, NoLock);
}

/*
 * REINDEX INDEX or TABLE, not CONCURRENTLY: patch the btree indexes it is
 * about to build.  Permission problems and the like are left to REINDEX,
 * which reports them; we then do nothing.
 */
static void
gs_index_prepare_reindex(ReindexStmt *stmt)
{
	ListCell   *lc;
	Oid			relid;

	foreach(lc, stmt->params)
	{
		DefElem    *opt = (DefElem *) lfirst(lc);

		if (strcmp(opt->defname, "concurrently") == 0 && defGetBoolean(opt))
			return;
	}
	if (stmt->relation == NULL)
		return;
	if (stmt->kind != REINDEX_OBJECT_INDEX && stmt->kind != REINDEX_OBJECT_TABLE)
		return;

	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid) || IsCatalogRelationOid(relid) ||
		!gs_class_ownercheck(relid, GetUserId()))
		return;

	if (stmt->kind == REINDEX_OBJECT_INDEX)
	{
		if (get_rel_relkind(relid) == RELKIND_INDEX)
			gs_index_prepare_one(relid, true);
	}
	else
	{
		char		relkind = get_rel_relkind(relid);
		Relation	heap;
		List	   *indexes;
		ListCell   *lc2;

		if (relkind != RELKIND_RELATION && relkind != RELKIND_MATVIEW)
			return;
		heap = try_relation_open(relid, ShareLock);
		if (heap == NULL)
			return;
		indexes = RelationGetIndexList(heap);
		relation_close(heap, NoLock);
		foreach(lc2, indexes)
			gs_index_prepare_one(lfirst_oid(lc2), false);
		list_free(indexes);
	}
}

/*
 * Is indexId a btree being built right now: rebuilt by reindex_index(), or
 * built concurrently (not ready for inserts yet)?
 */
static bool
gs_index_being_built(Oid indexId)
{
	HeapTuple	tup;
	bool		ready;

	if (ReindexIsProcessingIndex(indexId))
		return true;
	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexId));
	if (!HeapTupleIsValid(tup))
		return false;
	ready = ((Form_pg_index) GETSTRUCT(tup))->indisready;
	ReleaseSysCache(tup);
	return !ready;
}

/*
 * get_relation_info_hook: inside a statement that rebuilds indexes, patch
 * the entries of the heap's btree indexes being built (see the file's
 * header).  Only entries already open elsewhere are patched: the build
 * holds its index open, and an entry nobody holds may be rebuilt anyway.
 */
static void
gs_index_get_relation_info(PlannerInfo *root, Oid relationObjectId,
						   bool inhparent, RelOptInfo *rel)
{
	if (prev_get_relation_info)
		prev_get_relation_info(root, relationObjectId, inhparent, rel);

	/*
	 * plan_cluster_use_sort() plans the heap as a plain relation (not as an
	 * inheritance parent, as plan_create_index_workers() does) right before
	 * the table is copied: the copy may be ours (index_cluster.c).
	 */
	if (gs_cluster_depth > 0 && !inhparent && gs_index_wanted() &&
		!IsCatalogRelationOid(relationObjectId))
	{
		Relation	heap = RelationIdGetRelation(relationObjectId);

		if (RelationIsValid(heap))
		{
			if (heap->rd_refcnt > 1 && !IsSystemRelation(heap))
				gs_cluster_patch(heap);
			RelationClose(heap);
		}
	}

	if (gs_rebuild_depth > 0 && gs_index_wanted() &&
		!IsCatalogRelationOid(relationObjectId))
	{
		Relation	heap = RelationIdGetRelation(relationObjectId);
		List	   *indexes;
		ListCell   *lc;

		if (!RelationIsValid(heap))
			return;
		if (IsSystemRelation(heap) ||
			IsCatalogNamespace(heap->rd_rel->relnamespace))
		{
			RelationClose(heap);
			return;
		}
		indexes = RelationGetIndexList(heap);
		RelationClose(heap);
		foreach(lc, indexes)
		{
			Oid			indexId = lfirst_oid(lc);
			Relation	index;

			if (!gs_index_being_built(indexId))
				continue;
			index = RelationIdGetRelation(indexId);
			if (!RelationIsValid(index))
				continue;
			if (index->rd_refcnt > 1)
				gs_index_patch(index);
			RelationClose(index);
		}
		list_free(indexes);
	}
}

/*
 * Does this statement rebuild indexes only through index builds that the
 * planner hook reaches (see the header comment)?  REINDEX INDEX / TABLE and
 * plain CREATE INDEX are taken without it; ALTER TABLE rewrites only
 * sometimes, so it is left out here.
 */
static bool
gs_rebuild_needs_hook(Node *parsetree)
{
	ListCell   *lc;

	switch (nodeTag(parsetree))
	{
		case T_IndexStmt:
			return ((IndexStmt *) parsetree)->concurrent;
		case T_ReindexStmt:
			{
				ReindexStmt *stmt = (ReindexStmt *) parsetree;

				if (stmt->kind == REINDEX_OBJECT_SCHEMA ||
					stmt->kind == REINDEX_OBJECT_SYSTEM ||
					stmt->kind == REINDEX_OBJECT_DATABASE)
					return true;

				/*
				 * A partitioned index or table: REINDEX rebuilds each
				 * partition's index in a transaction of its own, out of
				 * the reach of gs_index_prepare_reindex.
				 */
				if (stmt->relation != NULL)
				{
					Oid			relid = RangeVarGetRelid(stmt->relation,
														 NoLock, true);
					char		relkind = get_rel_relkind(relid);

					if (relkind == RELKIND_PARTITIONED_TABLE ||
						relkind == RELKIND_PARTITIONED_INDEX)
						return true;
				}
				foreach(lc, stmt->params)
				{
					DefElem    *opt = (DefElem *) lfirst(lc);

					if (strcmp(opt->defname, "concurrently") == 0 &&
						defGetBoolean(opt))
						return true;
				}
				return false;
			}
		case T_VacuumStmt:
			foreach(lc, ((VacuumStmt *) parsetree)->options)
			{
				DefElem    *opt = (DefElem *) lfirst(lc);

				if (strcmp(opt->defname, "full") == 0 && defGetBoolean(opt))
					return true;
			}
			return false;
		case T_ClusterStmt:
		case T_TruncateStmt:
		case T_RefreshMatViewStmt:
			return true;
		default:
			return false;
	}
}

static void
gs_index_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
						bool readOnlyTree, ProcessUtilityContext context,
						ParamListInfo params, QueryEnvironment *queryEnv,
						DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	volatile bool track = false;	/* read after a longjmp */
	volatile bool rebuild = false;
	volatile bool cluster = false;

	/* statements whose index builds the planner hook may take */
	rebuild = IsA(parsetree, IndexStmt) ||
		IsA(parsetree, AlterTableStmt) ||
		IsA(parsetree, ReindexStmt) ||
		IsA(parsetree, ClusterStmt) ||
		IsA(parsetree, VacuumStmt) ||
		IsA(parsetree, TruncateStmt) ||
		IsA(parsetree, RefreshMatViewStmt);

	/* (the others need not look the extension up) */
	if (rebuild && !gs_index_wanted())
		rebuild = false;
	if (rebuild)
	{
		if (IsA(parsetree, IndexStmt))
			track = !((IndexStmt *) parsetree)->concurrent;
		else if (IsA(parsetree, AlterTableStmt))
			track = true;
		else if (IsA(parsetree, ReindexStmt))
			gs_index_prepare_reindex((ReindexStmt *) parsetree);

		cluster = IsA(parsetree, ClusterStmt);

		/*
		 * Without parallel maintenance workers plan_create_index_workers()
		 * returns before the planner hook can fire, so the builds of such
		 * a statement are PostgreSQL's: say so, as for any build left to
		 * PostgreSQL.
		 */
		if (max_parallel_maintenance_workers == 0 &&
			gs_rebuild_needs_hook(parsetree))
			ereport(gs_log_index_builds ? LOG : DEBUG1,
					(errmsg("indexes of %s built by PostgreSQL: max_parallel_maintenance_workers is 0",
							CreateCommandName(parsetree)),
					 errhint("Set max_parallel_maintenance_workers above 0 to let gpusort build them.")));
	}

	if (track)
		gs_create_index_depth++;
	if (rebuild)
		gs_rebuild_depth++;
	if (cluster)
		gs_cluster_depth++;
	PG_TRY();
	{
		if (prev_ProcessUtility)
			prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree,
									context, params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		if (track)
			gs_create_index_depth--;
		if (rebuild)
			gs_rebuild_depth--;
		if (cluster)
			gs_cluster_depth--;
	}
	PG_END_TRY();
}

void
gs_index_init(bool install_hooks)
{
	gs_index_define_settings();

	/* only a server that preloads gpusort builds indexes with it */
	if (!install_hooks)
		return;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = gs_index_ProcessUtility;
	prev_object_access = object_access_hook;
	object_access_hook = gs_index_object_access;
	prev_get_relation_info = get_relation_info_hook;
	get_relation_info_hook = gs_index_get_relation_info;
}
