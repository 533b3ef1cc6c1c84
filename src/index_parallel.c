/*-------------------------------------------------------------------------
 *
 * index_parallel.c
 *	  The heap scan of an index build, spread over parallel workers.
 *
 * When index_build() has planned parallel workers for a btree build
 * (max_parallel_maintenance_workers, table size), gpusort uses them for
 * what it cannot hand to the sort engine: scanning the heap, evaluating
 * index expressions and predicates, forming index tuples and encoding
 * their keys.  Each worker scans its share of a parallel heap scan (with
 * table_index_build_scan, as btree's parallel build does) and streams its
 * rows to the leader through its own shared memory queue, in batches; the
 * leader copies them into its arena and key buffer, and scans a share
 * itself, looking at the queues every few hundred rows.  The order rows
 * arrive in does not matter: the sort key includes the heap TID.
 *
 * A record in a batch: uint32 total length (MAXALIGN'd), uint8 flags,
 * padding to 8, the key (keybytes), the index tuple.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "index_int.h"

/* shm_toc keys */
#define GS_PIDX_KEY_SHARED		UINT64CONST(0x6773690000000001)
#define GS_PIDX_KEY_QUEUES		UINT64CONST(0x6773690000000002)
#define GS_PIDX_KEY_QUERY_TEXT	UINT64CONST(0x6773690000000003)

/*
 * Each worker's queue, and the batches it sends through it.  Kept small:
 * dynamic shared memory may be scarce (a small /dev/shm).
 */
#define GS_PIDX_QUEUE_SIZE		((Size) 1024 * 1024)
#define GS_PIDX_BATCH_SIZE		((Size) 64 * 1024)

/* leader: rows of its own scan between looks at the workers' queues */
#define GS_PIDX_LEADER_DRAIN_EVERY	256

/* record header: length, flags, padding; the key follows at 8 */
#define GS_PIDX_HDR				8

typedef struct GsIdxShared
{
	Oid			heaprelid;
	Oid			indexrelid;
	int			keybytes;		/* the leader's key layout, to check */
	int			colbytes;

	/* results, under mutex */
	slock_t		mutex;
	double		reltuples;
	bool		brokenhotchain;

	/* ParallelTableScanDescData follows, at BUFFERALIGN */
} GsIdxShared;

#define GsIdxSharedScan(sh) \
	((ParallelTableScanDesc) ((char *) (sh) + BUFFERALIGN(sizeof(GsIdxShared))))

struct GsIdxParallel
{
	ParallelContext *pcxt;
	GsIdxShared *shared;
	shm_mq_handle **queues;		/* one per launched worker */
	bool	   *done;			/* worker i has detached */
	int			nworkers;
	int			remaining;		/* workers not yet detached */
};

/* a worker's state while it scans */
typedef struct GsIdxWorker
{
	GsIdxBuild	b;				/* key layout only */
	shm_mq_handle *mqh;
	char	   *batch;
	Size		used;
} GsIdxWorker;

PGDLLEXPORT void gs_idx_parallel_main(dsm_segment *seg, shm_toc *toc);

GsIdxParallel *
gs_idx_parallel_begin(GsIdxBuild *b, IndexInfo *indexInfo, int nworkers)
{
	ParallelContext *pcxt;
	GsIdxShared *sh;
	char	   *queues;
	Size		estscan;
	int			querylen = 0;
	GsIdxParallel *p;
	int			i;

	EnterParallelMode();
	pcxt = CreateParallelContext("gpusort", "gs_idx_parallel_main", nworkers);

	estscan = table_parallelscan_estimate(b->heap, SnapshotAny);
	shm_toc_estimate_chunk(&pcxt->estimator,
						   add_size(BUFFERALIGN(sizeof(GsIdxShared)), estscan));
	shm_toc_estimate_chunk(&pcxt->estimator,
						   mul_size(GS_PIDX_QUEUE_SIZE, nworkers));
	shm_toc_estimate_keys(&pcxt->estimator, 2);
	if (debug_query_string)
	{
		querylen = strlen(debug_query_string);
		shm_toc_estimate_chunk(&pcxt->estimator, querylen + 1);
		shm_toc_estimate_keys(&pcxt->estimator, 1);
	}

	InitializeParallelDSM(pcxt);
	if (pcxt->seg == NULL)
	{
		/* no dynamic shared memory: scan serially */
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		return NULL;
	}

	sh = (GsIdxShared *) shm_toc_allocate(pcxt->toc,
										  add_size(BUFFERALIGN(sizeof(GsIdxShared)),
												   estscan));
	sh->heaprelid = RelationGetRelid(b->heap);
	sh->indexrelid = RelationGetRelid(b->index);
	sh->keybytes = b->keybytes;
	sh->colbytes = b->colbytes;
	SpinLockInit(&sh->mutex);
	sh->reltuples = 0;
	sh->brokenhotchain = false;
	table_parallelscan_initialize(b->heap, GsIdxSharedScan(sh), SnapshotAny);
	shm_toc_insert(pcxt->toc, GS_PIDX_KEY_SHARED, sh);

	queues = shm_toc_allocate(pcxt->toc, mul_size(GS_PIDX_QUEUE_SIZE, nworkers));
	for (i = 0; i < nworkers; i++)
	{
		shm_mq	   *mq = shm_mq_create(queues + i * GS_PIDX_QUEUE_SIZE,
									   GS_PIDX_QUEUE_SIZE);

		shm_mq_set_receiver(mq, MyProc);
	}
	shm_toc_insert(pcxt->toc, GS_PIDX_KEY_QUEUES, queues);

	if (debug_query_string)
	{
		char	   *q = shm_toc_allocate(pcxt->toc, querylen + 1);

		memcpy(q, debug_query_string, querylen + 1);
		shm_toc_insert(pcxt->toc, GS_PIDX_KEY_QUERY_TEXT, q);
	}

	LaunchParallelWorkers(pcxt);
	if (pcxt->nworkers_launched == 0)
	{
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		return NULL;
	}

	p = (GsIdxParallel *) palloc0(sizeof(GsIdxParallel));
	p->pcxt = pcxt;
	p->shared = sh;
	p->nworkers = pcxt->nworkers_launched;
	p->remaining = p->nworkers;
	p->done = (bool *) palloc0(p->nworkers * sizeof(bool));
	p->queues = (shm_mq_handle **) palloc(p->nworkers * sizeof(shm_mq_handle *));
	for (i = 0; i < p->nworkers; i++)
		p->queues[i] = shm_mq_attach((shm_mq *) (queues + i * GS_PIDX_QUEUE_SIZE),
									 pcxt->seg, pcxt->worker[i].bgwhandle);
	return p;
}

/* add the rows of one batch to b */
static void
gs_idx_parallel_unpack(GsIdxBuild *b, const char *data, Size len)
{
	const char *end = data + len;

	while (data < end)
	{
		uint32		reclen;
		uint8		flags;

		memcpy(&reclen, data, sizeof(reclen));
		flags = (uint8) data[sizeof(uint32)];
		Assert(reclen > GS_PIDX_HDR + b->keybytes && data + reclen <= end);
		gs_idx_add_row(b,
					   (IndexTuple) (data + GS_PIDX_HDR + b->keybytes),
					   (const uint64 *) (data + GS_PIDX_HDR),
					   flags);
		data += reclen;
	}
}

/*
 * One pass over the workers' queues, without waiting; true when a batch
 * came in.
 */
static bool
gs_idx_parallel_drain(GsIdxParallel *p, GsIdxBuild *b)
{
	bool		got = false;
	int			i;

	for (i = 0; i < p->nworkers; i++)
	{
		shm_mq_result res;
		Size		nbytes;
		void	   *data;

		if (p->done[i])
			continue;
		res = shm_mq_receive(p->queues[i], &nbytes, &data, true);
		if (res == SHM_MQ_SUCCESS)
		{
			gs_idx_parallel_unpack(b, (const char *) data, nbytes);
			got = true;
		}
		else if (res == SHM_MQ_DETACHED)
		{
			p->done[i] = true;
			p->remaining--;
		}
	}
	return got;
}

/* the leader's own scan: collect a row, and now and then the workers' */
typedef struct GsIdxLeaderScan
{
	GsIdxParallel *p;
	GsIdxBuild *b;
	int			since_drain;
} GsIdxLeaderScan;

static void
gs_idx_leader_collect(Relation index, ItemPointer tid, Datum *values,
					  bool *isnull, bool tupleIsAlive, void *state)
{
	GsIdxLeaderScan *ls = (GsIdxLeaderScan *) state;

	gs_idx_collect(index, tid, values, isnull, tupleIsAlive, ls->b);
	if (++ls->since_drain >= GS_PIDX_LEADER_DRAIN_EVERY)
	{
		ls->since_drain = 0;
		(void) gs_idx_parallel_drain(ls->p, ls->b);
	}
}

double
gs_idx_parallel_collect(GsIdxParallel *p, GsIdxBuild *b, IndexInfo *indexInfo)
{
	GsIdxLeaderScan ls;
	TableScanDesc scan;
	double		reltuples;

	/* the leader scans its share too, keeping the queues moving */
	ls.p = p;
	ls.b = b;
	ls.since_drain = 0;
	scan = table_beginscan_parallel(b->heap, GsIdxSharedScan(p->shared));
	reltuples = table_index_build_scan(b->heap, b->index, indexInfo, true,
									   true, gs_idx_leader_collect, &ls, scan);

	/* then what the workers still send */
	while (p->remaining > 0)
	{
		if (!gs_idx_parallel_drain(p, b) && p->remaining > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L,
							 GS_WAIT_EVENT_MQ_RECEIVE);
			ResetLatch(MyLatch);
		}
		CHECK_FOR_INTERRUPTS();
	}

/* a worker that failed raises its error here */
	WaitForParallelWorkersToFinish(p->pcxt);

	SpinLockAcquire(&p->shared->mutex);
	reltuples += p->shared->reltuples;
	if (p->shared->brokenhotchain)
		indexInfo->ii_BrokenHotChain = true;
	SpinLockRelease(&p->shared->mutex);
	return reltuples;
}

int
gs_idx_parallel_nworkers(GsIdxParallel *p)
{
	return p->nworkers;
}

void
gs_idx_parallel_end(GsIdxParallel *p)
{
	DestroyParallelContext(p->pcxt);
	ExitParallelMode();
}

/* send the worker's pending batch */
static void
gs_idx_worker_flush(GsIdxWorker *w)
{
	if (w->used == 0)
		return;
	if (shm_mq_send(w->mqh, w->used, w->batch, false, true) != SHM_MQ_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not send index rows to the parallel leader")));
	w->used = 0;
}

/* table_index_build_scan callback in a worker */
static void
gs_idx_worker_collect(Relation index, ItemPointer tid, Datum *values,
					  bool *isnull, bool tupleIsAlive, void *state)
{
	GsIdxWorker *w = (GsIdxWorker *) state;
	GsIdxBuild *b = &w->b;
	IndexTuple	itup;
	Size		itupsz;
	Size		reclen;
	char	   *rec;
	uint32		len32;
	bool		lossy;

	itup = index_form_tuple_context(b->itupdesc, values, isnull, b->scratch);
	itup->t_tid = *tid;
	itupsz = IndexTupleSize(itup);
	reclen = MAXALIGN(GS_PIDX_HDR + b->keybytes + itupsz);

	if (w->used + reclen > GS_PIDX_BATCH_SIZE)
		gs_idx_worker_flush(w);
	if (reclen > GS_PIDX_BATCH_SIZE)
		elog(ERROR, "index tuple of %zu bytes too large for a batch", itupsz);

	rec = w->batch + w->used;
	lossy = gs_idx_encode(b, values, isnull, tid,
						  (uint64 *) (rec + GS_PIDX_HDR));
	len32 = (uint32) reclen;
	memcpy(rec, &len32, sizeof(len32));
	rec[sizeof(uint32)] = (char) ((tupleIsAlive ? GS_ROW_ALIVE : 0) |
								  (lossy ? GS_ROW_LOSSY : 0));
	memcpy(rec + GS_PIDX_HDR + b->keybytes, itup, itupsz);
	w->used += reclen;

	if (++b->scratch_used >= GS_IDX_SCRATCH_TUPLES)
	{
		MemoryContextReset(b->scratch);
		b->scratch_used = 0;
	}
}

void
gs_idx_parallel_main(dsm_segment *seg, shm_toc *toc)
{
	GsIdxShared *sh;
	char	   *queues;
	shm_mq	   *mq;
	Relation	heap;
	Relation	index;
	IndexInfo  *indexInfo;
	TableScanDesc scan;
	GsIdxWorker w;
	double		reltuples;
	char	   *query;

	query = shm_toc_lookup(toc, GS_PIDX_KEY_QUERY_TEXT, true);
	if (query)
		debug_query_string = query;
	pgstat_report_activity(STATE_RUNNING, debug_query_string);

	sh = (GsIdxShared *) shm_toc_lookup(toc, GS_PIDX_KEY_SHARED, false);
	queues = shm_toc_lookup(toc, GS_PIDX_KEY_QUEUES, false);
	mq = (shm_mq *) (queues + ParallelWorkerNumber * GS_PIDX_QUEUE_SIZE);
	shm_mq_set_sender(mq, MyProc);

	/* the leader holds stronger locks; ours are granted by group locking */
	heap = table_open(sh->heaprelid, ShareLock);
	index = index_open(sh->indexrelid, RowExclusiveLock);
	indexInfo = BuildIndexInfo(index);
	indexInfo->ii_Concurrent = false;

	if (!gs_idx_init(&w.b, heap, index, indexInfo) ||
		w.b.keybytes != sh->keybytes || w.b.colbytes != sh->colbytes)
		elog(ERROR, "index key layout differs in parallel worker");
	w.b.scratch = AllocSetContextCreate(CurrentMemoryContext,
										"gpusort index tuple scratch",
										ALLOCSET_DEFAULT_SIZES);
	w.mqh = shm_mq_attach(mq, seg, NULL);
	w.batch = palloc(GS_PIDX_BATCH_SIZE);
	w.used = 0;

	scan = table_beginscan_parallel(heap, GsIdxSharedScan(sh));
	reltuples = table_index_build_scan(heap, index, indexInfo, true, false,
									   gs_idx_worker_collect, &w, scan);
	gs_idx_worker_flush(&w);

	SpinLockAcquire(&sh->mutex);
	sh->reltuples += reltuples;
	if (indexInfo->ii_BrokenHotChain)
		sh->brokenhotchain = true;
	SpinLockRelease(&sh->mutex);

	shm_mq_detach(w.mqh);
	index_close(index, RowExclusiveLock);
	table_close(heap, ShareLock);
}
