/*-------------------------------------------------------------------------
 *
 * index_parallel.c
 *	  Parallel btree builds: workers scan the heap, keep their rows in
 *	  shared memory and write their own sorted runs.
 *
 * When index_build() has planned parallel workers for a btree build
 * (max_parallel_maintenance_workers, table size), each participant -- the
 * workers and the leader -- scans its share of a parallel heap scan with
 * table_index_build_scan (as btree's parallel build does), forms the index
 * tuples and encodes their keys, within its share of maintenance_work_mem
 * (the whole divided among the participants planned, as PostgreSQL's
 * parallel build divides it).  Nothing passes row by row between
 * processes:
 *
 *	 - a worker writes its rows into blocks of a DSA area the leader made
 *	   for the build: each row in the envelope the sort core keeps rows in
 *	   (GsRowsDef), growing up from a block's header, and each row's
 *	   fixed-size entry (its key, then a word holding the row's offset in
 *	   the block and whether its key is lossy) growing down from its end;
 *	 - when its share is full, the worker hands its rows to a sort of its
 *	   own (index_sort.c on the sort core), which writes sorted runs into
 *	   the leader's temporary file, shared for the build (spill.c's
 *	   gs_temp_share: each process places its bytes by adding to a shared
 *	   counter), and gives its blocks back; at its end it merges its runs
 *	   down to its share of the final merge (gs_sort_finish_runs);
 *	 - the leader's own rows go straight into its sort.
 *
 * Then the leader's sort takes the workers' runs (gs_sort_add_runs) and
 * the rows they kept in memory (gs_sort_bulk_room: keys copied on
 * threads, the rows left where the workers wrote them), and sorts and
 * merges them all with the whole of maintenance_work_mem, as the parallel
 * load of an ORDER BY hands its workers' rows to the same sort.
 *
 * CLUSTER's table sort (index_cluster.c) uses the same machinery: its
 * participants scan with gs_cluster_scan instead (each tuple's fate against
 * CLUSTER's cutoff, the heap tuple carried after the index tuple as the
 * row's payload), and the leader leaves parallel mode before it rewrites
 * the heap, keeping the DSA area until the rows in it are written.
 *
 * Cleanup: the DSA area's segments and the parallel DSM belong to the
 * leader's resource owner, so an error or cancel frees them; workers are
 * stopped with the parallel context, and their errors come up in the
 * leader as PostgreSQL's parallel errors (a unique violation a worker
 * finds in its own run included).  The run file is the leader's: it is
 * removed with the build, on error or cancel (a worker only closes its
 * descriptor) and, after a crash, by the postmaster's restart like every
 * temporary file; every participant's bytes count against temp_file_limit
 * together, in the shared counter.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>

#include "access/parallel.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/shm_toc.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/dsa.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "gpusort_blocks.h"
#include "gpusort_exec.h"
#include "gpusort_spill.h"
#include "index_int.h"

/* shm_toc keys */
#define GS_PIDX_KEY_SHARED		UINT64CONST(0x6773690000000001)
#define GS_PIDX_KEY_QUERY_TEXT	UINT64CONST(0x6773690000000003)

/* a worker's blocks: a sixteenth of its share, within these bounds */
#define GS_PIDX_MIN_BLOCK		((Size) 32 * 1024)
#define GS_PIDX_MAX_BLOCK		((Size) 4 * 1024 * 1024)

/* what a worker reports, written once at its end */
typedef struct GsIdxSlot
{
	dsa_pointer first;			/* blocks of the rows left in memory */
	uint64		nrows;			/* rows in those blocks */
	bool		anylossy;
	uint32		max_len;		/* of its rows (envelopes, see GsRowsDef) */
	dsa_pointer runs;			/* GsRun[nruns] in the leader's file */
	int			nruns;
	int			nwritten;		/* runs it wrote before merging them */
	double		rows;			/* rows it collected in all */
	double		scan_ms;		/* its scan, its runs included */
	double		runs_ms;		/* sorting and writing its runs */
	double		merge_ms;		/* merging them into one */
	bool		done;
} GsIdxSlot;

/* one cache line each: workers write only their own */
typedef union GsIdxSlotPadded
{
	GsIdxSlot	slot;
	char		pad[TYPEALIGN(PG_CACHE_LINE_SIZE, sizeof(GsIdxSlot))];
} GsIdxSlotPadded;

typedef struct GsIdxShared
{
	Oid			heaprelid;
	Oid			indexrelid;
	int			keybytes;		/* the leader's key layout, to check */
	int			colbytes;
	Size		share;			/* each participant's memory */
	dsa_handle	area;
	GsTempShared runfile;		/* the leader's file, where every run goes */

	/* CLUSTER's scan (cluster true): its rules */
	bool		cluster;
	bool		follow_index;
	TransactionId oldest_xmin;
	GsClusterShared cl;

	/* results, under mutex */
	slock_t		mutex;
	double		reltuples;
	bool		brokenhotchain;

	int			nslots;
	Size		scan_offset;	/* of the ParallelTableScanDesc */
	GsIdxSlotPadded slots[FLEXIBLE_ARRAY_MEMBER];
} GsIdxShared;

#define GsIdxSharedScan(sh) \
	((ParallelTableScanDesc) ((char *) (sh) + (sh)->scan_offset))

struct GsIdxParallel
{
	ParallelContext *pcxt;
	GsIdxShared *shared;
	dsa_area   *area;
	int			nworkers;		/* launched */
	double		wait_ms;		/* the leader waiting for the workers */
};

/* a worker's state while it scans */
typedef struct GsIdxWorker
{
	GsIdxBuild	b;				/* rows in memory: b.n; runs: b.runs */
	GsIdxShared *sh;
	GsBlockWriter bw;			/* writes its rows into blocks */
	dsa_pointer first;			/* the chain of blocks */
	uint64	   *keybuf;			/* a row's key, before its entry */
	Size		block_size;
	Size		mem_blocks;		/* bytes of blocks taken */
	size_t		nrows;			/* rows in the blocks */
	bool		anylossy;		/* of those */
	uint32		max_len;		/* longest row envelope in the blocks */
} GsIdxWorker;

PGDLLEXPORT void gs_idx_parallel_main(dsm_segment *seg, shm_toc *toc);

/*
 * The statement's text, for a parallel context's workers to show in
 * pg_stat_activity: room for it, then the text under key; in a worker,
 * the text found under key.
 */
void
gs_idx_query_text_estimate(ParallelContext *pcxt)
{
	if (debug_query_string == NULL)
		return;
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(debug_query_string) + 1);
	shm_toc_estimate_keys(&pcxt->estimator, 1);
}

void
gs_idx_query_text_store(ParallelContext *pcxt, uint64 key)
{
	Size		len;
	char	   *q;

	if (debug_query_string == NULL)
		return;
	len = strlen(debug_query_string) + 1;
	q = shm_toc_allocate(pcxt->toc, len);
	memcpy(q, debug_query_string, len);
	shm_toc_insert(pcxt->toc, key, q);
}

void
gs_idx_query_text_restore(shm_toc *toc, uint64 key)
{
	char	   *query = shm_toc_lookup(toc, key, true);

	if (query)
		debug_query_string = query;
	pgstat_report_activity(STATE_RUNNING, debug_query_string);
}

/* ---------------------------------------------------------------------
 * The leader
 * ---------------------------------------------------------------------
 */

static GsIdxParallel *
gs_pidx_begin(GsIdxBuild *b, IndexInfo *indexInfo, int nworkers,
			  Size *share, bool cluster, bool follow_index,
			  TransactionId OldestXmin)
{
	ParallelContext *pcxt;
	GsIdxShared *sh;
	Size		estscan;
	Size		shsize;
	Size		scan_offset;
	int			participants;
	GsIdxParallel *p;
	dsa_area   *area;
	int			i;

	/* memory is shared as in PostgreSQL's build: by participants planned */
	participants = nworkers + (parallel_leader_participation ? 1 : 0);
	*share = (Size) maintenance_work_mem * 1024 / participants;

	EnterParallelMode();
	pcxt = CreateParallelContext("gpusort", "gs_idx_parallel_main", nworkers);

	estscan = table_parallelscan_estimate(b->heap, SnapshotAny);
	scan_offset = BUFFERALIGN(add_size(offsetof(GsIdxShared, slots),
									   mul_size(nworkers,
												sizeof(GsIdxSlotPadded))));
	shsize = add_size(scan_offset, estscan);
	shm_toc_estimate_chunk(&pcxt->estimator, shsize);
	shm_toc_estimate_keys(&pcxt->estimator, 1);
	gs_idx_query_text_estimate(pcxt);

	InitializeParallelDSM(pcxt);
	if (pcxt->seg == NULL)
	{
		/* no dynamic shared memory: scan serially, with all the memory */
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		*share = (Size) maintenance_work_mem * 1024;
		return NULL;
	}

	area = dsa_create(LWTRANCHE_PARALLEL_QUERY_DSA);

	sh = (GsIdxShared *) shm_toc_allocate(pcxt->toc, shsize);
	memset(sh, 0, offsetof(GsIdxShared, slots));
	sh->heaprelid = RelationGetRelid(b->heap);
	sh->indexrelid = RelationGetRelid(b->index);
	sh->keybytes = b->keybytes;
	sh->colbytes = b->colbytes;
	sh->share = *share;
	sh->area = dsa_get_handle(area);
	/* every participant's runs go to the leader's temporary file */
	gs_temp_share(gs_sort_file(b->sort), &sh->runfile);
	SpinLockInit(&sh->mutex);
	sh->reltuples = 0;
	sh->brokenhotchain = false;
	sh->cluster = cluster;
	sh->follow_index = follow_index;
	sh->oldest_xmin = OldestXmin;
	gs_cluster_shared_init(&sh->cl);
	sh->nslots = nworkers;
	sh->scan_offset = scan_offset;
	for (i = 0; i < nworkers; i++)
	{
		memset(&sh->slots[i], 0, sizeof(GsIdxSlotPadded));
		sh->slots[i].slot.first = InvalidDsaPointer;
		sh->slots[i].slot.runs = InvalidDsaPointer;
	}
	table_parallelscan_initialize(b->heap, GsIdxSharedScan(sh), SnapshotAny);
	shm_toc_insert(pcxt->toc, GS_PIDX_KEY_SHARED, sh);

	gs_idx_query_text_store(pcxt, GS_PIDX_KEY_QUERY_TEXT);

	LaunchParallelWorkers(pcxt);
	if (pcxt->nworkers_launched == 0)
	{
		gs_temp_unshare(gs_sort_file(b->sort));
		dsa_detach(area);
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		ereport(DEBUG1,
				(errmsg_internal("gpusort %s \"%s\": no parallel worker could be launched, %s serially",
								 cluster ? "cluster" : "index",
								 RelationGetRelationName(cluster ? b->heap : b->index),
								 cluster ? "scanning" : "building")));
		*share = (Size) maintenance_work_mem * 1024;
		return NULL;
	}

	p = (GsIdxParallel *) palloc0(sizeof(GsIdxParallel));
	p->pcxt = pcxt;
	p->shared = sh;
	p->area = area;
	p->nworkers = pcxt->nworkers_launched;
	return p;
}

/*
 * How many workers scan for a build PostgreSQL planned `planned` for
 * (plan_create_index_workers: from the table's size, at most
 * max_parallel_maintenance_workers, then fewer until each participant has
 * 32MB of maintenance_work_mem, which each of its sorts needs).  A
 * participant here only cuts its rows into runs of its share: the sort
 * and the merge happen once, in the leader, with the whole of
 * maintenance_work_mem.  So the memory cut is made at half that, 16MB a
 * participant: at the defaults (64MB, 2 maintenance workers) a large
 * table is scanned by three processes, not two.
 *
 * Nothing changes where PostgreSQL planned no worker (a concurrent build,
 * a parallel-unsafe expression, a small table, too little memory), or
 * where the table's parallel_workers option set the number.
 */
int
gs_idx_plan_workers(Relation heap, int planned)
{
	BlockNumber pages;
	int			threshold;
	int			workers = 1;

	if (planned <= 0 || RelationGetParallelWorkers(heap, -1) != -1)
		return planned;

	/* compute_parallel_worker's rule for a heap of this size */
	pages = RelationGetNumberOfBlocks(heap);
	threshold = Max(min_parallel_table_scan_size, 1);
	while (pages >= (BlockNumber) threshold * 3 && threshold <= INT_MAX / 9)
	{
		workers++;
		threshold *= 3;
	}
	workers = Min(workers, max_parallel_maintenance_workers);
	while (workers > 0 &&
		   maintenance_work_mem / (workers + 1) < GS_IDX_PARTICIPANT_MIN_KB)
		workers--;
	return Max(planned, workers);
}

GsIdxParallel *
gs_idx_parallel_begin(GsIdxBuild *b, IndexInfo *indexInfo, int nworkers,
					  Size *share)
{
	return gs_pidx_begin(b, indexInfo, nworkers, share, false, false,
						 InvalidTransactionId);
}

GsIdxParallel *
gs_idx_parallel_begin_cluster(GsIdxBuild *b, IndexInfo *indexInfo,
							  int nworkers, Size *share, bool follow_index,
							  TransactionId OldestXmin)
{
	return gs_pidx_begin(b, indexInfo, nworkers, share, true, follow_index,
						 OldestXmin);
}

/* the workers' end: their rows counted into b; the heap tuples they saw */
static double
gs_pidx_wait(GsIdxParallel *p, GsIdxBuild *b, IndexInfo *indexInfo)
{
	double		reltuples = 0;
	instr_time	t0;
	int			i;

	/* a worker that failed raises its error here */
	INSTR_TIME_SET_CURRENT(t0);
	WaitForParallelWorkersToFinish(p->pcxt);
	p->wait_ms = gs_idx_ms_since(t0);
	/* the file's end and size, as the workers left them, are the leader's */
	gs_temp_unshare(gs_sort_file(b->sort));

	for (i = 0; i < p->nworkers; i++)
	{
		GsIdxSlot  *slot = &p->shared->slots[i].slot;

		if (!slot->done)
			elog(ERROR, "gpusort: a parallel index build worker ended without its rows");
		b->indtuples += slot->rows;
	}

	SpinLockAcquire(&p->shared->mutex);
	reltuples += p->shared->reltuples;
	if (p->shared->brokenhotchain)
		indexInfo->ii_BrokenHotChain = true;
	SpinLockRelease(&p->shared->mutex);
	return reltuples;
}

double
gs_idx_parallel_scan(GsIdxParallel *p, GsIdxBuild *b, IndexInfo *indexInfo)
{
	double		reltuples = 0;

	/* the leader scans its share too, as a serial build would */
	if (parallel_leader_participation)
	{
		reltuples = gs_idx_heap_scan(b->heap, b->index, indexInfo, true,
									 gs_idx_collect, b,
									 GsIdxSharedScan(p->shared));
	}
	return reltuples + gs_pidx_wait(p, b, indexInfo);
}

const char *
gs_idx_parallel_scan_cluster(GsIdxParallel *p, GsIdxBuild *b,
							 IndexInfo *indexInfo, GsClusterCollect collect,
							 void *arg, GsClusterCounts *counts)
{
	GsIdxShared *sh = p->shared;
	const char *why = NULL;

	Assert(sh->cluster);
	if (parallel_leader_participation)
	{
		why = gs_cluster_scan(b->heap, indexInfo, collect, arg,
							  GsIdxSharedScan(sh), &sh->cl, sh->follow_index,
							  sh->oldest_xmin, counts, true);
	}
	(void) gs_pidx_wait(p, b, indexInfo);

	/* every participant has added its part */
	*counts = sh->cl.counts;
	if (sh->cl.why[0] != '\0')
		why = pstrdup(sh->cl.why);
	return why;
}

/*
 * The rows workers left in memory into the leader's sort (which writes a
 * run when its memory is full, as it does for its own rows), as the
 * leader of a parallel ORDER BY takes its workers' (gs_sort_take_blocks).
 */
static void
gs_pidx_gather(GsIdxParallel *p, GsIdxBuild *b)
{
	GsBlockList l;
	uint32		maxlen = 0;
	bool		any_lossy = false;
	int			i;

	gs_block_list_init(&l);
	for (i = 0; i < p->nworkers; i++)
	{
		GsIdxSlot  *slot = &p->shared->slots[i].slot;

		if (slot->nruns > 0 || slot->nrows == 0)
			continue;
		gs_block_list_add(&l, p->area, slot->first, slot->nrows,
						  "a parallel index build worker");
		maxlen = Max(maxlen, slot->max_len);
		any_lossy |= slot->anylossy;
	}
	/* the leader has not touched the blocks' pages yet: threads map them */
	gs_sort_take_blocks(b->sort, l.blocks, l.n, l.rows, b->keybytes,
						any_lossy, maxlen, p->nworkers + 1, true);
	pfree(l.blocks);
}

/*
 * The workers' rows into the leader's sort: the runs they wrote (in the
 * leader's file), and the rows they kept in memory.
 */
void
gs_idx_parallel_collect(GsIdxParallel *p, GsIdxBuild *b)
{
	int			i;

	for (i = 0; i < p->nworkers; i++)
	{
		GsIdxSlot  *slot = &p->shared->slots[i].slot;

		if (slot->nruns > 0)
			gs_sort_add_runs(b->sort,
							 (const GsRun *) dsa_get_address(p->area, slot->runs),
							 slot->nruns, slot->nwritten, slot->anylossy,
							 slot->max_len);
	}
	gs_pidx_gather(p, b);
}

char *
gs_idx_parallel_report(GsIdxParallel *p)
{
	StringInfoData s;
	int			i;

	initStringInfo(&s);
	appendStringInfo(&s, "waited %.1f ms for the workers", p->wait_ms);
	for (i = 0; i < p->nworkers; i++)
	{
		GsIdxSlot  *slot = &p->shared->slots[i].slot;

		if (slot->nruns == 0)
			appendStringInfo(&s, "; worker %d: %.0f rows in %.1f ms, kept in memory",
							 i, slot->rows, slot->scan_ms);
		else
			appendStringInfo(&s, "; worker %d: %.0f rows in %.1f ms, %d runs written in %.1f ms, merged into %d in %.1f ms",
							 i, slot->rows, slot->scan_ms, slot->nwritten,
							 slot->runs_ms, slot->nruns, slot->merge_ms);
	}
	return s.data;
}

int
gs_idx_parallel_nworkers(GsIdxParallel *p)
{
	return p->nworkers;
}

void
gs_idx_parallel_leave(GsIdxParallel *p)
{
	if (p->pcxt == NULL)
		return;
	DestroyParallelContext(p->pcxt);
	p->pcxt = NULL;
	p->shared = NULL;			/* it was in the context's segment */
	ExitParallelMode();
}

void
gs_idx_parallel_end(GsIdxParallel *p)
{
	dsa_detach(p->area);
	gs_idx_parallel_leave(p);
}

/* ---------------------------------------------------------------------
 * A worker
 * ---------------------------------------------------------------------
 */

/*
 * The worker's share of memory is full: from now on its rows go to a sort
 * of its own (index_sort.c), which writes its runs into the leader's file;
 * the rows in its blocks go there first, and the blocks are given back.
 */
static void
gs_pidx_worker_to_sort(GsIdxWorker *w)
{
	GsIdxBuild *b = &w->b;
	size_t		esz = w->bw.esz;
	dsa_pointer dp;

	gs_blocks_wait(&w->bw);
	gs_idx_sort_begin(b, w->sh->share,
					  (double) w->sh->share / (GS_IDX_ROW_BYTES(b) + 16));
	gs_sort_attach_file(b->sort, &w->sh->runfile);
	for (dp = w->first; DsaPointerIsValid(dp);)
	{
		GsRowBlock *blk = (GsRowBlock *) dsa_get_address(w->bw.area, dp);
		char	   *end = (char *) blk + blk->size;
		dsa_pointer next = blk->next;
		size_t		r;

		for (r = 0; r < blk->nrows; r++)
		{
			const char *ent = end - (r + 1) * esz;
			MinimalTuple mt;
			uint32		word;
			GsRowRoom	room;

			memcpy(&word, ent + b->keybytes, sizeof(uint32));
			mt = (MinimalTuple) ((char *) blk + (word & ~GS_BLOCK_LOSSY_BIT));
			room = gs_sort_row_add(b->sort, mt->t_len - GS_ROW_DATA_OFF);
			memcpy(room.row - GS_ROW_DATA_OFF + GS_ROW_FLAGS_OFF,
				   (char *) mt + GS_ROW_FLAGS_OFF,
				   mt->t_len - GS_ROW_FLAGS_OFF);
			memcpy(room.key, ent, b->keybytes);
			if (word & GS_BLOCK_LOSSY_BIT)
				gs_sort_row_lossy(b->sort);
		}
		dsa_free(w->bw.area, dp);
		dp = next;
	}
	w->first = InvalidDsaPointer;
	w->bw.cur = NULL;
	w->mem_blocks = 0;
	w->nrows = 0;
}

/*
 * Take the next block ahead, after the current one (the last of the chain),
 * and have a thread populate it while the current one fills.  Only when
 * the share would allow taking it when the current block is full,
 * whatever that block's rows.
 */
static void
gs_pidx_worker_ahead(GsIdxWorker *w)
{
	GsIdxBuild *b = &w->b;
	Size		bsize = w->block_size;
	size_t		rows_max = bsize / (MAXALIGN(sizeof(IndexTupleData) + 1) +
									w->bw.esz);
	dsa_pointer dp;
	GsRowBlock *blk;

	Assert(w->bw.cur != NULL && !DsaPointerIsValid(w->bw.cur->next));
	if (w->mem_blocks + bsize + (w->nrows + rows_max + 1) * GS_IDX_ROW_BYTES(b) >
		w->sh->share)
		return;
	dp = gs_blocks_alloc(&w->bw, bsize);
	/* no room now: the block is asked for again when needed */
	if (!DsaPointerIsValid(dp))
		return;
	blk = gs_blocks_link(&w->bw, dp);
	w->mem_blocks += bsize;
	gs_blocks_populate(&w->bw, b->cxt, blk, NULL);
}

/*
 * Make the block being filled one with room for a row of size bytes; false
 * when the share is full and the rows go to a sort from now on.
 */
static bool
gs_pidx_worker_block(GsIdxWorker *w, Size size)
{
	GsIdxBuild *b = &w->b;
	GsBlockWriter *bw = &w->bw;
	Size		need = GS_BLOCK_HDR + size + bw->esz;
	dsa_pointer next = gs_blocks_next(bw);
	GsRowBlock *blk = NULL;

	/* the block taken ahead, if the row fits it */
	if (DsaPointerIsValid(next))
		blk = (GsRowBlock *) dsa_get_address(bw->area, next);
	if (blk == NULL || blk->size < need)
	{
		/*
		 * A new block, if the share has room for it and for the arrays of
		 * the rows a run will sort; else the rows go to a run first.
		 */
		Size		bsize = Max(w->block_size, need);

		if (w->nrows > 0 &&
			w->mem_blocks + bsize + (w->nrows + 1) * GS_IDX_ROW_BYTES(b) > w->sh->share)
		{
			gs_pidx_worker_to_sort(w);
			return false;
		}
		next = gs_blocks_alloc(bw, bsize);
		if (!DsaPointerIsValid(next))
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of shared memory for a parallel index build"),
					 errdetail("A block of %zu bytes could not be allocated.",
							   bsize),
					 errhint("Free space in /dev/shm, lower maintenance_work_mem, or lower max_parallel_maintenance_workers.")));
		/* after the current block, before the one taken ahead */
		blk = gs_blocks_link(bw, next);
		w->mem_blocks += bsize;
	}

	gs_blocks_fill(bw, blk);
	if (!DsaPointerIsValid(blk->next))
		gs_pidx_worker_ahead(w);
	return true;
}

/*
 * Room in the block being filled for a row of size bytes (its envelope
 * included), at gs_blocks_free; false when the rows go to the worker's
 * sort from now on.
 */
static inline bool
gs_pidx_worker_room(GsIdxWorker *w, Size size)
{
	if (!gs_blocks_fits(&w->bw, size))
		return gs_pidx_worker_block(w, size);
	return true;
}

/*
 * The row whose envelope (size bytes, its data len bytes) was just filled
 * in at the block's free space: its header, and its entry below the
 * block's other entries, with the key encoded from values, or derived from
 * the index tuple where values is NULL (b->derive_key).
 */
static void
gs_pidx_worker_entry(GsIdxWorker *w, Size size, Size len, Datum *values,
					 bool *isnull, ItemPointer tid, bool alive)
{
	GsIdxBuild *b = &w->b;
	char	   *ent;
	MinimalTuple mt = (MinimalTuple) gs_blocks_take(&w->bw, size, &ent);
	bool		lossy;

	memset(mt, 0, GS_ROW_DATA_OFF);
	mt->t_len = GS_ROW_DATA_OFF + len;
	*gs_row_flags((char *) mt + GS_ROW_DATA_OFF) = alive ? GS_ROW_ALIVE : 0;
	w->max_len = Max(w->max_len, mt->t_len);

	/* entries are 4-byte aligned: the key is made aside, then copied */
	if (values == NULL)
		lossy = gs_idx_key_derive(b, (char *) mt + GS_ROW_DATA_OFF, 0,
								  (char *) w->keybuf);
	else
		lossy = gs_idx_encode(b, values, isnull, tid, w->keybuf);
	memcpy(ent, w->keybuf, b->keybytes);
	gs_blocks_entry_done(&w->bw, ent, (char *) mt, lossy);
	w->anylossy |= lossy;
	w->nrows++;
}

/* table_index_build_scan callback in a worker */
static void
gs_pidx_worker_collect(Relation index, ItemPointer tid, Datum *values,
					   bool *isnull, bool tupleIsAlive, void *state)
{
	GsIdxWorker *w = (GsIdxWorker *) state;
	GsIdxBuild *b = &w->b;
	IndexTuple	itup;
	Size		size;

	if (b->sort == NULL && b->fixed)
	{
		bool		hasnull;

		/* formed in place (see gs_idx_form_fixed) */
		size = gs_idx_fixed_size(b, values, isnull, &hasnull);
		if (gs_pidx_worker_room(w, GS_ROW_DATA_OFF + size))
		{
			itup = (IndexTuple) (gs_blocks_free(&w->bw) + GS_ROW_DATA_OFF);
			gs_idx_form_fixed(b, values, isnull, hasnull, size, itup);
			itup->t_tid = *tid;
			b->indtuples += 1;
			gs_pidx_worker_entry(w, GS_ROW_DATA_OFF + size, size,
								 b->derive_key && !hasnull ? NULL : values,
								 isnull, tid, tupleIsAlive);
			return;
		}
	}
	else if (b->sort == NULL &&
			 (size = gs_idx_var1_size(b, values, isnull)) > 0)
	{
		/* one variable-width column, formed in place (gs_idx_form_var1) */
		if (gs_pidx_worker_room(w, GS_ROW_DATA_OFF + size))
		{
			itup = (IndexTuple) (gs_blocks_free(&w->bw) + GS_ROW_DATA_OFF);
			gs_idx_form_var1(b, values, size, itup);
			itup->t_tid = *tid;
			b->indtuples += 1;
			gs_pidx_worker_entry(w, GS_ROW_DATA_OFF + size, size, values,
								 isnull, tid, tupleIsAlive);
			return;
		}
	}
	else if (b->sort == NULL)
	{
		Size		isize;

		itup = index_form_tuple_context(b->itupdesc, values, isnull,
										b->scratch);
		isize = IndexTupleSize(itup);
		size = MAXALIGN(isize);
		if (++b->scratch_used >= GS_IDX_SCRATCH_TUPLES)
		{
			MemoryContextReset(b->scratch);
			b->scratch_used = 0;
		}
		if (gs_pidx_worker_room(w, GS_ROW_DATA_OFF + size))
		{
			char	   *dst = gs_blocks_free(&w->bw) + GS_ROW_DATA_OFF;

			memcpy(dst, itup, isize);
			memset(dst + isize, 0, size - isize);
			((IndexTuple) dst)->t_tid = *tid;
			b->indtuples += 1;
			gs_pidx_worker_entry(w, GS_ROW_DATA_OFF + size, size, values,
								 isnull, tid, tupleIsAlive);
			return;
		}
	}
	/* the share is full: the worker's own sort takes the rows */
	gs_idx_sort_put(b, tid, values, isnull, tupleIsAlive, NULL, 0);
}

/*
 * CLUSTER's scan in a worker: a kept tuple's row (its index tuple, then
 * the payload, as index_sort.c lays it out) into the blocks
 */
static void
gs_pidx_worker_collect_payload(void *arg, ItemPointer tid, Datum *values,
							   bool *isnull, const void *payload, uint32 len)
{
	GsIdxWorker *w = (GsIdxWorker *) arg;
	GsIdxBuild *b = &w->b;

	Assert(b->payload);
	if (b->sort == NULL)
	{
		IndexTuple	itup;
		Size		isize;
		Size		rowlen;

		itup = index_form_tuple_context(b->itupdesc, values, isnull,
										b->scratch);
		itup->t_tid = *tid;
		isize = MAXALIGN(IndexTupleSize(itup));
		rowlen = isize + 8 + len;
		if (++b->scratch_used >= GS_IDX_SCRATCH_TUPLES)
		{
			MemoryContextReset(b->scratch);
			b->scratch_used = 0;
		}
		if (gs_pidx_worker_room(w, MAXALIGN(GS_ROW_DATA_OFF + rowlen)))
		{
			char	   *dst = gs_blocks_free(&w->bw) + GS_ROW_DATA_OFF;

			memset(dst, 0, isize);
			memcpy(dst, itup, IndexTupleSize(itup));
			memcpy(dst + isize, &len, sizeof(len));
			memset(dst + isize + sizeof(len), 0, 8 - sizeof(len));
			memcpy(dst + isize + 8, payload, len);
			b->indtuples += 1;
			gs_pidx_worker_entry(w, MAXALIGN(GS_ROW_DATA_OFF + rowlen), rowlen,
								 values, isnull, tid, true);
			return;
		}
	}
	gs_idx_sort_put(b, tid, values, isnull, true, payload, len);
}

void
gs_idx_parallel_main(dsm_segment *seg, shm_toc *toc)
{
	GsIdxShared *sh;
	GsIdxSlot  *slot;
	Relation	heap;
	Relation	index;
	IndexInfo  *indexInfo;
	GsIdxWorker *w;
	GsIdxBuild *b;
	double		reltuples;
	instr_time	t0;
	bool		gave_up = false;

	INSTR_TIME_SET_CURRENT(t0);
	gs_idx_query_text_restore(toc, GS_PIDX_KEY_QUERY_TEXT);

	sh = (GsIdxShared *) shm_toc_lookup(toc, GS_PIDX_KEY_SHARED, false);
	Assert(ParallelWorkerNumber >= 0 && ParallelWorkerNumber < sh->nslots);
	slot = &sh->slots[ParallelWorkerNumber].slot;

	/* the leader holds stronger locks; ours are granted by group locking */
	heap = table_open(sh->heaprelid, ShareLock);
	index = index_open(sh->indexrelid, RowExclusiveLock);
	indexInfo = BuildIndexInfo(index);
	indexInfo->ii_Concurrent = false;

	/*
	 * Not on the stack: the threads of its tasks read it, and an error
	 * unwinds the stack before the abort stops them
	 */
	w = palloc0(sizeof(GsIdxWorker));
	b = &w->b;
	if (!gs_idx_init(b, heap, index, indexInfo) ||
		b->keybytes != sh->keybytes || b->colbytes != sh->colbytes)
		elog(ERROR, "index key layout differs in parallel worker");
	if (sh->cluster)
	{
		/* as the leader's (index_cluster.c) */
		b->isunique = false;
		b->payload = true;
	}
	gs_idx_sortsupport(b);
	/* the process ends with the build: no one else sees this setting */
	gpusort_cpu_threads = Min(gpusort_cpu_threads,
							  Max(2, gpusort_cpu_threads / (sh->nslots + 1)));
	b->scratch = AllocSetContextCreate(CurrentMemoryContext,
									   "gpusort index tuple scratch",
									   ALLOCSET_DEFAULT_SIZES);
	w->sh = sh;
	w->first = InvalidDsaPointer;
	gs_blocks_init(&w->bw, dsa_attach(sh->area), &w->first, b->keybytes);
	w->keybuf = palloc(b->keybytes);
	w->block_size = MAXALIGN(Min(GS_PIDX_MAX_BLOCK,
								Max(sh->share / 16, GS_PIDX_MIN_BLOCK)));

	if (sh->cluster)
	{
		GsClusterCounts counts;

		memset(&counts, 0, sizeof(counts));
		gave_up = gs_cluster_scan(heap, indexInfo,
								  gs_pidx_worker_collect_payload, w,
								  GsIdxSharedScan(sh), &sh->cl,
								  sh->follow_index, sh->oldest_xmin, &counts,
								  false) != NULL;
		reltuples = counts.num_tuples;
	}
	else
		reltuples = gs_idx_heap_scan(heap, index, indexInfo, false,
									 gs_pidx_worker_collect, w,
									 GsIdxSharedScan(sh));
	gs_blocks_wait(&w->bw);

	/*
	 * Once it sorted in runs, its last rows are one too, and it merges its
	 * runs down to its share of the final merge's: the leader's final
	 * merge then takes them all at once.
	 */
	if (gave_up)
	{
		/* CLUSTER: the leader copies the table another way; no rows */
		slot->first = InvalidDsaPointer;
		slot->nrows = 0;
	}
	else if (b->sort != NULL)
	{
		const GsRun *runs;
		dsa_pointer dp;
		int			n;
		bool		lossy;
		uint32		maxlen;

		runs = gs_sort_finish_runs(b->sort, sh->nslots +
								   (parallel_leader_participation ? 1 : 0),
								   &n, &lossy, &maxlen);
		dp = dsa_allocate(w->bw.area, Max(n, 1) * sizeof(GsRun));
		memcpy(dsa_get_address(w->bw.area, dp), runs, n * sizeof(GsRun));
		slot->runs = dp;
		slot->nruns = n;
		slot->nwritten = gs_sort_runs_spilled(b->sort);
		slot->anylossy = lossy;
		slot->max_len = maxlen;
		slot->first = InvalidDsaPointer;
		slot->nrows = 0;
		gs_sort_report(b->sort, &b->rep);
		gs_sort_end(b->sort);
		b->sort = NULL;
	}
	else
	{
		slot->first = w->first;
		slot->nrows = w->nrows;
		slot->anylossy = w->anylossy;
		slot->max_len = w->max_len;
	}
	slot->rows = b->indtuples;
	slot->runs_ms = b->rep.spill_ms;
	slot->merge_ms = b->rep.merge_ms;
	slot->scan_ms = gs_idx_ms_since(t0);
	pg_write_barrier();
	slot->done = true;

	SpinLockAcquire(&sh->mutex);
	sh->reltuples += reltuples;
	if (indexInfo->ii_BrokenHotChain)
		sh->brokenhotchain = true;
	SpinLockRelease(&sh->mutex);

	/* the area's segments stay while the leader is attached */
	dsa_detach(w->bw.area);
	index_close(index, RowExclusiveLock);
	table_close(heap, ShareLock);
}
