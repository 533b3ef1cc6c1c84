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
 *	   for the build: index tuples grow up from a block's header, and each
 *	   row's fixed-size entry (its key, then a word holding the tuple's
 *	   offset in the block and the row's flags) grows down from its end;
 *	 - when its share is full, the worker sorts its rows with the sort
 *	   engine (index_build.c's gs_idx_sort: tie-breaks and the unique check
 *	   included), writes them as a sorted run (index_spill.c's format)
 *	   into the leader's temporary file, shared for the build (spill.c's
 *	   gs_temp_share: each process places its bytes by adding to a shared
 *	   counter and writes them with pwrite, on threads), and reuses its
 *	   blocks;
 *	 - the leader collects its own share as a serial build does (spilling
 *	   its own runs to its temporary file).
 *
 * When no participant wrote a run, the leader gathers every worker's
 * entries into its key buffer and tuple array on threads (the tuples stay
 * where the workers wrote them), sorts once with the engine and writes the
 * pages.  Otherwise every participant's rows end as runs (the leader sorts
 * those of a worker that never filled its share), each participant merges
 * its own into one, and the leader merges all of them into the page writer
 * (index_spill.c), in passes if there are more than memory can merge at
 * once: with every run in its own file, on threads where the keys allow.
 * (Workers' runs in files of their own kept the leader's final merge on
 * one core: 6.4 s of a 10.4 s build of 50M rows with 8 workers.)
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
#include "pgstat.h"
#include "storage/shm_toc.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/dsa.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "gpusort_spill.h"
#include "index_int.h"

/* shm_toc keys */
#define GS_PIDX_KEY_SHARED		UINT64CONST(0x6773690000000001)
#define GS_PIDX_KEY_QUERY_TEXT	UINT64CONST(0x6773690000000003)

/* a worker's blocks: a sixteenth of its share, within these bounds */
#define GS_PIDX_MIN_BLOCK		((Size) 32 * 1024)
#define GS_PIDX_MAX_BLOCK		((Size) 4 * 1024 * 1024)

/* an entry's word: the tuple's offset in its block, the flags on top */
#define GS_PIDX_FLAG_SHIFT		30
#define GS_PIDX_OFFSET_MASK		(((uint32) 1 << GS_PIDX_FLAG_SHIFT) - 1)

/* the step of the threads touching the blocks' pages */
#define GS_PIDX_PAGE			((size_t) 4096)

/* rows gathered by one thread at least */
#define GS_PIDX_GATHER_PART		((size_t) 65536)

/* a block of a worker's rows, in the DSA area */
typedef struct GsIdxBlock
{
	dsa_pointer next;			/* the worker's next block */
	uint64		size;
	uint64		nrows;
} GsIdxBlock;

#define GS_PIDX_BLOCK_HDR	MAXALIGN(sizeof(GsIdxBlock))

/* what a worker reports, written once at its end */
typedef struct GsIdxSlot
{
	dsa_pointer first;			/* blocks of the rows left in memory */
	uint64		nrows;			/* rows in those blocks */
	bool		anylossy;
	dsa_pointer runs;			/* GsIdxRun[nruns] in its file */
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
	dsa_area   *area;
	dsa_pointer first;			/* the chain of blocks */
	dsa_pointer curdp;
	GsIdxBlock *cur;			/* block being filled, NULL before the first */
	Size		tup_end;		/* next free byte for a tuple */
	Size		ent_start;		/* lowest entry */
	Size		esz;			/* entry size */
	Size		block_size;
	Size		mem_blocks;		/* bytes of blocks taken */
	GsTask	   *prefault_task;	/* populating the block taken ahead */
	GsPrefault	prefault;
} GsIdxWorker;

PGDLLEXPORT void gs_idx_parallel_main(dsm_segment *seg, shm_toc *toc);

/* size of an entry: the key, the word padded to 8 bytes */
static inline Size
gs_pidx_entry_size(int keybytes)
{
	return (Size) keybytes + sizeof(uint64);
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
	int			querylen = 0;
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
	if (debug_query_string)
	{
		querylen = strlen(debug_query_string);
		shm_toc_estimate_chunk(&pcxt->estimator, querylen + 1);
		shm_toc_estimate_keys(&pcxt->estimator, 1);
	}

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
	if (b->file == NULL)
		b->file = gs_temp_create(b->cxt);
	gs_temp_share(b->file, &sh->runfile);
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

	if (debug_query_string)
	{
		char	   *q = shm_toc_allocate(pcxt->toc, querylen + 1);

		memcpy(q, debug_query_string, querylen + 1);
		shm_toc_insert(pcxt->toc, GS_PIDX_KEY_QUERY_TEXT, q);
	}

	LaunchParallelWorkers(pcxt);
	if (pcxt->nworkers_launched == 0)
	{
		gs_temp_unshare(b->file);
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

/* the leader's share is scanned: it merges its runs down, as workers do */
static void
gs_pidx_leader_scanned(GsIdxParallel *p, GsIdxBuild *b)
{
	if (b->nruns > 0)
	{
		if (b->n > 0)
			gs_idx_spill_run(b);
		/* the merge's buffers take the memory the arena held */
		gs_idx_arena_free(b);
		gs_idx_spill_reduce(b, gs_idx_reduce_budget(b, p->shared->nslots + 1));
	}
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
	gs_temp_unshare(b->file);

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
		gs_pidx_leader_scanned(p, b);
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
		if (why == NULL)
			gs_pidx_leader_scanned(p, b);
	}
	(void) gs_pidx_wait(p, b, indexInfo);

	/* every participant has added its part */
	*counts = sh->cl.counts;
	if (sh->cl.why[0] != '\0')
		why = pstrdup(sh->cl.why);
	return why;
}

bool
gs_idx_parallel_spilled(GsIdxParallel *p, GsIdxBuild *b)
{
	double		rows = (double) b->n;
	int			i;

	if (b->nruns > 0)
		return true;
	for (i = 0; i < p->nworkers; i++)
	{
		if (p->shared->slots[i].slot.nruns > 0)
			return true;
		rows += (double) p->shared->slots[i].slot.nrows;
	}
	/* more rows than one sort takes: each participant's become a run */
	return rows > (double) GS_MAX_ROWS;
}

/*
 * Copying workers' entries into the build's arrays: every stretch of a
 * block goes to a known place, so threads (which call nothing of
 * PostgreSQL's) take an even share of the rows each.
 */
typedef struct GsPidxPiece
{
	char	   *blk;
	size_t		nrows;
	size_t		dest;			/* row of b its first row becomes */
} GsPidxPiece;

typedef struct GsPidxGather
{
	GsPidxPiece *pieces;
	int			npieces;
	size_t		base;			/* first row of b filled */
	size_t		nrows;
	char	   *keys;
	IndexTuple *tuples;
	uint8	   *flags;
	int			keybytes;
} GsPidxGather;

static void
gs_pidx_gather_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsPidxGather *g = (GsPidxGather *) arg;
	size_t		kb = g->keybytes;
	size_t		esz = gs_pidx_entry_size(g->keybytes);
	size_t		from = g->base + g->nrows * part / nparts;
	size_t		to = g->base + g->nrows * (part + 1) / nparts;
	int			i;

	/*
	 * Map the blocks' pages into this process now, on the threads: the
	 * page writer reads the tuples in sorted order, and each first touch
	 * of a page of shared memory the leader has not used yet is a page
	 * fault (15% of the leader's time in a profile), serial there.
	 */
	for (i = part; i < g->npieces && !*stop; i += nparts)
	{
		const volatile char *blk = g->pieces[i].blk;
		size_t		size = ((GsIdxBlock *) g->pieces[i].blk)->size;
		size_t		off;

		for (off = 0; off < size; off += GS_PIDX_PAGE)
			(void) blk[off];
	}

	for (i = 0; i < g->npieces && !*stop; i++)
	{
		GsPidxPiece *pc = &g->pieces[i];
		char	   *end = pc->blk + ((GsIdxBlock *) pc->blk)->size;
		size_t		lo = Max(from, pc->dest);
		size_t		hi = Min(to, pc->dest + pc->nrows);
		size_t		d;

		for (d = lo; d < hi; d++)
		{
			const char *ent = end - (d - pc->dest + 1) * esz;
			uint32		word;

			memcpy(&word, ent + kb, sizeof(uint32));
			memcpy(g->keys + d * kb, ent, kb);
			g->tuples[d] = (IndexTuple) (pc->blk + (word & GS_PIDX_OFFSET_MASK));
			g->flags[d] = (uint8) (word >> GS_PIDX_FLAG_SHIFT);
		}
	}
}

/* the rows workers [from, to) left in memory into b, after b->n */
static void
gs_pidx_gather(GsIdxParallel *p, GsIdxBuild *b, int from, int to)
{
	GsPidxGather g;
	size_t		total = 0;
	int			cap = 16;
	int			nparts;
	int			i;

	memset(&g, 0, sizeof(g));
	g.pieces = palloc(cap * sizeof(GsPidxPiece));
	g.base = b->n;
	for (i = from; i < to; i++)
	{
		GsIdxSlot  *slot = &p->shared->slots[i].slot;
		dsa_pointer dp = slot->first;
		uint64		seen = 0;

		b->anylossy |= slot->anylossy;
		while (DsaPointerIsValid(dp) && seen < slot->nrows)
		{
			GsIdxBlock *blk = (GsIdxBlock *) dsa_get_address(p->area, dp);

			if (g.npieces == cap)
			{
				cap *= 2;
				g.pieces = repalloc(g.pieces, cap * sizeof(GsPidxPiece));
			}
			g.pieces[g.npieces].blk = (char *) blk;
			g.pieces[g.npieces].nrows = blk->nrows;
			g.pieces[g.npieces].dest = b->n + total;
			g.npieces++;
			total += blk->nrows;
			seen += blk->nrows;
			dp = blk->next;
		}
		if (seen != slot->nrows)
			elog(ERROR, "gpusort: a parallel index build worker's rows went missing");
	}
	if (total == 0)
	{
		pfree(g.pieces);
		return;
	}

	if (!gs_idx_reserve(b, b->n + total))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many rows for one gpusort index sort"),
				 errhint("Lower maintenance_work_mem, or set gpusort.index_build to off.")));
	g.nrows = total;
	g.keys = b->keys;
	g.tuples = b->tuples;
	g.flags = b->flags;
	g.keybytes = b->keybytes;
	nparts = (int) Min((size_t) gpusort_cpu_threads,
					   total / GS_PIDX_GATHER_PART + 1);
	while (!gs_parallel(gs_pidx_gather_part, &g, nparts))
		;
	b->n += total;
	pfree(g.pieces);
}

void
gs_idx_parallel_gather(GsIdxParallel *p, GsIdxBuild *b)
{
	gs_pidx_gather(p, b, 0, p->nworkers);
}

void
gs_idx_parallel_runs(GsIdxParallel *p, GsIdxBuild *b)
{
	int			i;

	Assert(b->n == 0);
	for (i = 0; i < p->nworkers; i++)
	{
		GsIdxSlot  *slot = &p->shared->slots[i].slot;

		if (slot->nruns > 0)
		{
			GsIdxRun   *runs;
			int			r;

			/* the worker's runs, in the leader's file like its own */
			runs = (GsIdxRun *) dsa_get_address(p->area, slot->runs);
			for (r = 0; r < slot->nruns; r++)
			{
				gs_idx_add_run(b, &runs[r]);
			}
		}
		else if (slot->nrows > 0)
		{
			/* a worker that never filled its share: its rows as a run */
			gs_pidx_gather(p, b, i, i + 1);
			gs_idx_run_write(b);
			b->n = 0;
			b->anylossy = false;
		}
		CHECK_FOR_INTERRUPTS();
	}
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
 * The worker's rows in memory become a sorted run in its file; its blocks
 * are then filled again from the first.
 */
static void
gs_pidx_worker_spill(GsIdxWorker *w)
{
	GsIdxBuild *b = &w->b;
	size_t		n = b->n;
	size_t		esz = w->esz;
	size_t		d = 0;
	dsa_pointer dp;

	/* the rows' keys, tuples and flags into arrays the engine sorts */
	b->cap = n;
	b->keys = gs_keybuf_alloc(b->eng, n * b->keybytes, b->cxt);
	b->tuples = (IndexTuple *) MemoryContextAllocExtended(b->cxt,
														  n * sizeof(IndexTuple),
														  MCXT_ALLOC_HUGE);
	b->flags = (uint8 *) MemoryContextAllocExtended(b->cxt, n,
													MCXT_ALLOC_HUGE);
	for (dp = w->first; d < n && DsaPointerIsValid(dp);)
	{
		GsIdxBlock *blk = (GsIdxBlock *) dsa_get_address(w->area, dp);
		char	   *end = (char *) blk + blk->size;
		size_t		r;

		for (r = 0; r < blk->nrows; r++, d++)
		{
			const char *ent = end - (r + 1) * esz;
			uint32		word;

			memcpy(&word, ent + b->keybytes, sizeof(uint32));
			memcpy(b->keys + d * b->keybytes, ent, b->keybytes);
			b->tuples[d] = (IndexTuple) ((char *) blk + (word & GS_PIDX_OFFSET_MASK));
			b->flags[d] = (uint8) (word >> GS_PIDX_FLAG_SHIFT);
		}
		blk->nrows = 0;
		if (dp == w->curdp)
			break;
		dp = blk->next;
	}
	Assert(d == n);

	gs_idx_run_write(b);

	gs_keybuf_free(b->eng, b->keys);
	pfree(b->tuples);
	pfree(b->flags);
	b->keys = NULL;
	b->tuples = NULL;
	b->flags = NULL;
	b->cap = 0;
	b->n = 0;
	b->anylossy = false;

	/* fill the blocks again from the first */
	w->cur = NULL;
	w->curdp = InvalidDsaPointer;
}

/*
 * Take the next block ahead, after the current one (the last of the chain),
 * and have a thread populate it while the current one fills: the first
 * touch of each page of shared memory is a page fault, and in a profile
 * those were a third of a worker's scan.  Only when the share would allow
 * taking it when the current block is full, whatever that block's rows.
 */
static void
gs_pidx_worker_ahead(GsIdxWorker *w)
{
	GsIdxBuild *b = &w->b;
	Size		bsize = w->block_size;
	size_t		rows_max = bsize / (MAXALIGN(sizeof(IndexTupleData) + 1) + w->esz);
	dsa_pointer dp;
	GsIdxBlock *blk;

	if (w->mem_blocks + bsize + (b->n + rows_max + 1) * GS_IDX_ROW_BYTES(b) >
		w->sh->share)
		return;
	dp = dsa_allocate_extended(w->area, bsize,
							   DSA_ALLOC_HUGE | DSA_ALLOC_NO_OOM);
	/* no room now: the block is asked for again when needed */
	if (!DsaPointerIsValid(dp))
		return;
	blk = (GsIdxBlock *) dsa_get_address(w->area, dp);
	blk->size = bsize;
	blk->nrows = 0;
	blk->next = InvalidDsaPointer;
	w->cur->next = dp;
	w->mem_blocks += bsize;

	gs_populate_wait(&w->prefault_task);
	memset(&w->prefault, 0, sizeof(GsPrefault));
	w->prefault.start[0] = (char *) blk;
	w->prefault.len[0] = bsize;
	gs_populate_start(b->cxt, &w->prefault_task, &w->prefault);
}

/* make the block being filled one with room for a tuple of size bytes */
static void
gs_pidx_worker_block(GsIdxWorker *w, Size size)
{
	GsIdxBuild *b = &w->b;
	dsa_pointer next;
	Size		need = GS_PIDX_BLOCK_HDR + size + w->esz;
	Size		bsize;
	GsIdxBlock *blk;

	for (;;)
	{
		/* the next block of the chain, kept from before the last run */
		next = w->cur ? w->cur->next : w->first;
		if (DsaPointerIsValid(next))
		{
			blk = (GsIdxBlock *) dsa_get_address(w->area, next);
			if (blk->size >= need)
				break;
		}

		/*
		 * A new block, if the share has room for it and for the arrays of
		 * the rows a run will sort; else the rows go to a run first.
		 */
		bsize = Max(w->block_size, need);
		if (b->n == 0 ||
			w->mem_blocks + bsize + (b->n + 1) * GS_IDX_ROW_BYTES(b) <= w->sh->share)
		{
			dsa_pointer dp;

			dp = dsa_allocate_extended(w->area, bsize,
									   DSA_ALLOC_HUGE | DSA_ALLOC_NO_OOM);
			if (!DsaPointerIsValid(dp))
				ereport(ERROR,
						(errcode(ERRCODE_OUT_OF_MEMORY),
						 errmsg("out of shared memory for a parallel index build"),
						 errdetail("A block of %zu bytes could not be allocated.",
								   bsize),
						 errhint("Free space in /dev/shm, lower maintenance_work_mem, or lower max_parallel_maintenance_workers.")));
			blk = (GsIdxBlock *) dsa_get_address(w->area, dp);
			blk->size = bsize;
			blk->nrows = 0;
			/* inserted after the current block: the chain stays in order */
			if (w->cur)
			{
				blk->next = w->cur->next;
				w->cur->next = dp;
			}
			else
			{
				blk->next = w->first;
				w->first = dp;
			}
			w->mem_blocks += bsize;
			next = dp;
			break;
		}
		gs_pidx_worker_spill(w);
	}

	w->cur = blk;
	w->curdp = next;
	w->cur->nrows = 0;
	w->tup_end = GS_PIDX_BLOCK_HDR;
	w->ent_start = blk->size;
	if (!DsaPointerIsValid(blk->next))
		gs_pidx_worker_ahead(w);
}

/*
 * The row whose tuple (size bytes) was just placed at the block's free
 * space: its entry, the key encoded, below the block's other entries
 */
static void
gs_pidx_worker_entry(GsIdxWorker *w, Size size, Datum *values, bool *isnull,
					 ItemPointer tid, bool alive)
{
	GsIdxBuild *b = &w->b;
	uint32		word = (uint32) w->tup_end;
	char	   *ent;
	bool		lossy;

	w->tup_end += size;
	w->ent_start -= w->esz;
	ent = (char *) w->cur + w->ent_start;

	lossy = gs_idx_encode(b, values, isnull, tid, (uint64 *) ent);
	word |= (uint32) ((alive ? GS_ROW_ALIVE : 0) |
					  (lossy ? GS_ROW_LOSSY : 0)) << GS_PIDX_FLAG_SHIFT;
	memcpy(ent + b->keybytes, &word, sizeof(uint32));
	b->anylossy |= lossy;
	w->cur->nrows++;
	b->n++;
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

	b->indtuples += 1;
	if (b->fixed)
	{
		bool		hasnull;

		/* formed in place (see gs_idx_form_fixed) */
		size = gs_idx_fixed_size(b, values, isnull, &hasnull);
		if (w->cur == NULL || w->tup_end + size + w->esz > w->ent_start)
			gs_pidx_worker_block(w, size);
		itup = (IndexTuple) ((char *) w->cur + w->tup_end);
		gs_idx_form_fixed(b, values, isnull, hasnull, size, itup);
		itup->t_tid = *tid;
	}
	else
	{
		itup = index_form_tuple_context(b->itupdesc, values, isnull,
										b->scratch);
		itup->t_tid = *tid;
		size = MAXALIGN(IndexTupleSize(itup));
		if (w->cur == NULL || w->tup_end + size + w->esz > w->ent_start)
			gs_pidx_worker_block(w, size);
		memcpy((char *) w->cur + w->tup_end, itup, IndexTupleSize(itup));
		if (++b->scratch_used >= GS_IDX_SCRATCH_TUPLES)
		{
			MemoryContextReset(b->scratch);
			b->scratch_used = 0;
		}
	}
	gs_pidx_worker_entry(w, size, values, isnull, tid, tupleIsAlive);
}

/*
 * CLUSTER's scan in a worker: a kept tuple's row (its index tuple, then
 * the payload, as gs_idx_collect_payload lays it out) into the blocks
 */
static void
gs_pidx_worker_collect_payload(void *arg, ItemPointer tid, Datum *values,
							   bool *isnull, const void *payload, uint32 len)
{
	GsIdxWorker *w = (GsIdxWorker *) arg;
	GsIdxBuild *b = &w->b;
	IndexTuple	itup;
	Size		isize;
	Size		size;
	char	   *dst;

	Assert(b->payload);
	b->indtuples += 1;
	itup = index_form_tuple_context(b->itupdesc, values, isnull, b->scratch);
	itup->t_tid = *tid;
	isize = MAXALIGN(IndexTupleSize(itup));
	size = MAXALIGN(isize + 8 + len);
	if (w->cur == NULL || w->tup_end + size + w->esz > w->ent_start)
		gs_pidx_worker_block(w, size);
	dst = (char *) w->cur + w->tup_end;
	memcpy(dst, itup, IndexTupleSize(itup));
	memcpy(dst + isize, &len, sizeof(len));
	memcpy(dst + isize + 8, payload, len);
	if (++b->scratch_used >= GS_IDX_SCRATCH_TUPLES)
	{
		MemoryContextReset(b->scratch);
		b->scratch_used = 0;
	}
	gs_pidx_worker_entry(w, size, values, isnull, tid, true);
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
	char	   *query;
	instr_time	t0;
	bool		gave_up = false;

	INSTR_TIME_SET_CURRENT(t0);
	query = shm_toc_lookup(toc, GS_PIDX_KEY_QUERY_TEXT, true);
	if (query)
		debug_query_string = query;
	pgstat_report_activity(STATE_RUNNING, debug_query_string);

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
	b->mem_limit = sh->share;
	/* its runs go to the leader's file, placed beside everyone's */
	b->file = gs_temp_attach(b->cxt, &sh->runfile);
	/* the process ends with the build: no one else sees this setting */
	gpusort_cpu_threads = Min(gpusort_cpu_threads,
							  Max(2, gpusort_cpu_threads / (sh->nslots + 1)));
	b->scratch = AllocSetContextCreate(CurrentMemoryContext,
									   "gpusort index tuple scratch",
									   ALLOCSET_DEFAULT_SIZES);
	/* the engine for a run of the share's rows, of about 16-byte tuples */
	b->eng = gs_engine_choose((double) sh->share /
							  (GS_IDX_ROW_BYTES(b) + 16 +
							   gs_pidx_entry_size(b->keybytes)), NULL);

	w->sh = sh;
	w->area = dsa_attach(sh->area);
	w->first = InvalidDsaPointer;
	w->curdp = InvalidDsaPointer;
	w->esz = gs_pidx_entry_size(b->keybytes);
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
	gs_populate_wait(&w->prefault_task);

	/*
	 * Once it wrote a run, its last rows are one too, and it merges its runs
	 * into one: the leader's final merge then takes a run per participant.
	 */
	if (gave_up)
	{
		/* CLUSTER: the leader copies the table another way; no rows */
		slot->first = InvalidDsaPointer;
		slot->nrows = 0;
		b->n = 0;
	}
	else if (b->nruns > 0 && b->n > 0)
		gs_pidx_worker_spill(w);
	if (b->nruns > 0 && !gave_up)
	{
		dsa_pointer dp;

		/* the blocks are not needed any more: their memory merges */
		while (DsaPointerIsValid(w->first))
		{
			dsa_pointer next = ((GsIdxBlock *) dsa_get_address(w->area, w->first))->next;

			dsa_free(w->area, w->first);
			w->first = next;
		}
		gs_idx_spill_reduce(b, gs_idx_reduce_budget(b, sh->nslots +
													(parallel_leader_participation ? 1 : 0)));

		dp = dsa_allocate(w->area, b->nruns * sizeof(GsIdxRun));
		memcpy(dsa_get_address(w->area, dp), b->runs,
			   b->nruns * sizeof(GsIdxRun));
		slot->runs = dp;
		slot->nruns = b->nruns;
		slot->nwritten = b->nruns_written;
		slot->first = InvalidDsaPointer;
		slot->nrows = 0;
	}
	else if (!gave_up)
	{
		slot->first = w->first;
		slot->nrows = b->n;
		slot->anylossy = b->anylossy;
	}
	slot->rows = b->indtuples;
	slot->runs_ms = b->runs_ms;
	slot->merge_ms = b->passes_ms;
	slot->scan_ms = gs_idx_ms_since(t0);
	pg_write_barrier();
	slot->done = true;

	SpinLockAcquire(&sh->mutex);
	sh->reltuples += reltuples;
	if (indexInfo->ii_BrokenHotChain)
		sh->brokenhotchain = true;
	SpinLockRelease(&sh->mutex);

	/* the area's segments stay while the leader is attached */
	dsa_detach(w->area);
	index_close(index, RowExclusiveLock);
	table_close(heap, ShareLock);
}
