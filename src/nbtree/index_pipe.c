/*-------------------------------------------------------------------------
 *
 * index_pipe.c
 *	  A parallel btree build's pages, WAL-logged and written by several
 *	  processes.
 *
 * A btree build's last phase is one process's: the page writer
 * (index_write.c) fills each page in order, and each page is then logged
 * as a full-page WAL image, checksummed and written to the index's file.
 * Logging and writing cost about as much as filling; on a GPU machine
 * they were half of a large build's time.
 *
 * In a parallel build, once the scan is over, the leader launches as many
 * workers as scanned, in a parallel context of their own (the scan's
 * workers may still be exiting, which the leader does not wait for), to
 * take that work over.  Pages pass through a ring of slots in the
 * context's shared memory:
 *
 *	 - the leader copies each finished page into the next slot (the
 *	   page's sequence number modulo the ring's size) and counts it put;
 *	 - any process (the leader too, when the ring is full) claims the
 *	   oldest page put but not yet claimed, WAL-logs it, which sets its
 *	   LSN, checksums it and marks the slot logged, so several pages are
 *	   logged at once;
 *	 - one process at a time, whoever takes the `storing` flag, writes
 *	   logged pages to the file strictly in the order the leader put
 *	   them, as the serial writer does (gs_bt_store_page), and frees
 *	   their slots.
 *
 * So the file is extended densely and in order, exactly as the serial
 * writer extends it, whichever process writes; the pages are the same
 * bytes, only their LSNs differ.  Storage writes skip fsync requests, as
 * the serial writer's do: the leader syncs the file once the ring is
 * drained, before its transaction can commit.
 *
 * Errors: a worker's error reaches the leader as PostgreSQL's parallel
 * errors do, at its next CHECK_FOR_INTERRUPTS (it checks whenever it
 * waits); the leader's error or cancel ends the workers with the
 * parallel context, and they wait only on condition variables, which
 * wake for the termination.  A page a worker claimed stays unlogged if
 * the worker vanishes without an error: the leader, which can do every
 * other step itself, checks on its timed waits that some worker is still
 * running and raises an error otherwise, never hangs.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "storage/bufpage.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/shm_toc.h"
#include "storage/smgr.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "index_int.h"

/* shm_toc keys */
#define GS_BTPIPE_KEY_RING		UINT64CONST(0x6773700000000001)
#define GS_BTPIPE_KEY_QUERY_TEXT	UINT64CONST(0x6773700000000002)

/* pages in flight: 512kB */
#define GS_BTPIPE_SLOTS			64

/* how long the leader sleeps before it checks that workers still run */
#define GS_BTPIPE_WAIT_MS		100

/* the slots' pages start on a memory page */
#define GS_BTPIPE_ALIGN			4096

typedef struct GsBtPipeSlot
{
	pg_atomic_uint64 logged;	/* seq + 1 once logged and checksummed */
	BlockNumber blkno;			/* where the page goes */
} GsBtPipeSlot;

typedef struct GsBtPipeShared
{
	GsRelFile	rfile;			/* the index's main fork */
	bool		use_wal;
	int			fault;			/* gpusort.index_fault, for the workers */
	Size		pages_off;		/* from this struct to the slots' pages */

	pg_atomic_uint64 put;		/* pages the leader has put */
	pg_atomic_uint64 claimed;	/* of those, claimed for logging */
	pg_atomic_uint64 stored;	/* of those, written to the file */
	pg_atomic_uint32 done;		/* the leader has put its last page */
	pg_atomic_flag storing;		/* held by the process writing the file */

	/* the file's state: only the holder of `storing` touches these */
	BlockNumber nwritten;		/* blocks the file has */
	BlockNumber nflushing;		/* blocks whose writeback has started */

	ConditionVariable work_cv;	/* a page was put, or the last one */
	ConditionVariable room_cv;	/* a page was stored */

	GsBtPipeSlot slots[GS_BTPIPE_SLOTS];
} GsBtPipeShared;

/* the leader's handle */
struct GsBtPipe
{
	ParallelContext *pcxt;		/* the workers */
	GsBtPipeShared *sh;
	Relation	index;
	uint64		next;			/* sequence number of the next page */
	uint64		by_leader;		/* pages the leader logged itself */
};

PGDLLEXPORT void gs_btpipe_main(dsm_segment *seg, shm_toc *toc);

static inline char *
gs_btpipe_page(GsBtPipeShared *sh, uint64 seq)
{
	return (char *) sh + sh->pages_off + (seq % GS_BTPIPE_SLOTS) * BLCKSZ;
}

/* claim the oldest page put but not claimed; false if there is none */
static bool
gs_btpipe_claim(GsBtPipeShared *sh, uint64 *seq)
{
	uint64		c = pg_atomic_read_u64(&sh->claimed);

	for (;;)
	{
		if (c >= pg_atomic_read_u64(&sh->put))
			return false;
		if (pg_atomic_compare_exchange_u64(&sh->claimed, &c, c + 1))
		{
			*seq = c;
			return true;
		}
	}
}

/* WAL-log and checksum a claimed page */
static void
gs_btpipe_log(GsBtPipeShared *sh, uint64 seq)
{
	GsBtPipeSlot *slot = &sh->slots[seq % GS_BTPIPE_SLOTS];
	Page		page = (Page) gs_btpipe_page(sh, seq);

	/* the page's bytes were written before `put` counted it */
	pg_read_barrier();
	if (sh->use_wal)
		log_newpage(&sh->rfile, MAIN_FORKNUM, slot->blkno, page, true);
	PageSetChecksumInplace(page, slot->blkno);
	pg_write_barrier();
	pg_atomic_write_u64(&slot->logged, seq + 1);
}

/*
 * A finished page (logged, checksummed) into the index's file at blkno,
 * as a build writes its pages: the blocks before it not written yet (the
 * metapage, pages of upper levels still being filled) are extended with
 * zeroes, and a block the file has is overwritten.  With WAL, the kernel
 * starts writing the file back every GS_BTW_WRITEBACK_BLOCKS, so that the
 * final sync finds little left.  *nwritten and *nflushing are the file's
 * blocks and those whose writeback has started.
 */
void
gs_bt_store_page(SMgrRelation smgr, bool use_wal, BlockNumber *nwritten,
				 BlockNumber *nflushing, char *page, BlockNumber blkno)
{
	if (*nwritten < blkno)
	{
		PGAlignedBlock zero;

		memset(zero.data, 0, BLCKSZ);
		while (*nwritten < blkno)
		{
			smgrextend(smgr, MAIN_FORKNUM, *nwritten, zero.data, true);
			(*nwritten)++;
		}
	}
	if (blkno == *nwritten)
	{
		smgrextend(smgr, MAIN_FORKNUM, blkno, page, true);
		(*nwritten)++;
	}
	else
		smgrwrite(smgr, MAIN_FORKNUM, blkno, page, true);
	if (use_wal && *nwritten - *nflushing >= GS_BTW_WRITEBACK_BLOCKS)
	{
		smgrwriteback(smgr, MAIN_FORKNUM, *nflushing, *nwritten - *nflushing);
		*nflushing = *nwritten;
	}
}

/*
 * Write the logged pages that are next in order, if no other process is
 * doing so.  One that is will see any page logged before it lets go: a
 * page logged after its last look is found by the check that follows.
 */
static void
gs_btpipe_store(GsBtPipeShared *sh, SMgrRelation smgr)
{
	for (;;)
	{
		uint64		s;
		bool		any = false;

		if (!pg_atomic_test_set_flag(&sh->storing))
			return;
		s = pg_atomic_read_u64(&sh->stored);
		while (pg_atomic_read_u64(&sh->slots[s % GS_BTPIPE_SLOTS].logged) ==
			   s + 1)
		{
			pg_read_barrier();
			gs_bt_store_page(smgr, sh->use_wal, &sh->nwritten, &sh->nflushing,
							 gs_btpipe_page(sh, s),
							 sh->slots[s % GS_BTPIPE_SLOTS].blkno);
			s++;
			/* the page is in the file before its slot is free */
			pg_memory_barrier();
			pg_atomic_write_u64(&sh->stored, s);
			any = true;
		}
		pg_atomic_clear_flag(&sh->storing);
		/* the flag's clearing before the look, as the logger's order is */
		pg_memory_barrier();
		if (any)
			ConditionVariableBroadcast(&sh->room_cv);
		if (pg_atomic_read_u64(&sh->slots[s % GS_BTPIPE_SLOTS].logged) !=
			s + 1)
			return;
	}
}

/* one step of the work, if there is any: log a page, then store */
static bool
gs_btpipe_step(GsBtPipeShared *sh, SMgrRelation smgr)
{
	uint64		seq;

	if (!gs_btpipe_claim(sh, &seq))
		return false;
	gs_btpipe_log(sh, seq);
	gs_btpipe_store(sh, smgr);
	return true;
}

/* ---------------------------------------------------------------------
 * The leader
 * ---------------------------------------------------------------------
 */

/* the ring's bytes, with room to align the pages */
static Size
gs_btpipe_size(void)
{
	return TYPEALIGN(GS_BTPIPE_ALIGN, sizeof(GsBtPipeShared)) +
		GS_BTPIPE_SLOTS * BLCKSZ + GS_BTPIPE_ALIGN;
}

static void
gs_btpipe_init(GsBtPipeShared *sh, Relation index)
{
	int			i;

	memset(sh, 0, sizeof(GsBtPipeShared));
	sh->rfile = *GS_REL_PHYSICAL(index);
	sh->use_wal = RelationNeedsWAL(index);
	sh->fault = gs_index_fault;
	/* an offset, the same in every process's mapping of the segment */
	sh->pages_off = TYPEALIGN(GS_BTPIPE_ALIGN, (uintptr_t) sh +
							  sizeof(GsBtPipeShared)) - (uintptr_t) sh;
	pg_atomic_init_u64(&sh->put, 0);
	pg_atomic_init_u64(&sh->claimed, 0);
	pg_atomic_init_u64(&sh->stored, 0);
	pg_atomic_init_u32(&sh->done, 0);
	pg_atomic_init_flag(&sh->storing);
	sh->nwritten = 0;
	sh->nflushing = 0;
	ConditionVariableInit(&sh->work_cv);
	ConditionVariableInit(&sh->room_cv);
	for (i = 0; i < GS_BTPIPE_SLOTS; i++)
		pg_atomic_init_u64(&sh->slots[i].logged, 0);
}

/*
 * Launch nworkers to log and write index's pages (in parallel mode, the
 * index's pages not yet begun); NULL, with *launched 0, if none could
 * be launched: the writer then logs and writes them itself.
 */
GsBtPipe *
gs_btpipe_launch(Relation index, int nworkers, int *launched)
{
	ParallelContext *pcxt;
	GsBtPipeShared *sh;
	GsBtPipe   *p;

	*launched = 0;
	Assert(IsInParallelMode());
	pcxt = CreateParallelContext("gpusort", "gs_btpipe_main", nworkers);
	shm_toc_estimate_chunk(&pcxt->estimator, gs_btpipe_size());
	shm_toc_estimate_keys(&pcxt->estimator, 1);
	gs_idx_query_text_estimate(pcxt);
	InitializeParallelDSM(pcxt);
	if (pcxt->seg == NULL)
	{
		DestroyParallelContext(pcxt);
		return NULL;
	}
	sh = (GsBtPipeShared *) shm_toc_allocate(pcxt->toc, gs_btpipe_size());
	gs_btpipe_init(sh, index);
	shm_toc_insert(pcxt->toc, GS_BTPIPE_KEY_RING, sh);
	gs_idx_query_text_store(pcxt, GS_BTPIPE_KEY_QUERY_TEXT);

	LaunchParallelWorkers(pcxt);
	if (pcxt->nworkers_launched == 0)
	{
		DestroyParallelContext(pcxt);
		return NULL;
	}
	*launched = pcxt->nworkers_launched;

	p = (GsBtPipe *) palloc0(sizeof(GsBtPipe));
	p->pcxt = pcxt;
	p->sh = sh;
	p->index = index;
	return p;
}

/* is any writer still running? */
static bool
gs_btpipe_writers_alive(GsBtPipe *p)
{
	int			i;

	for (i = 0; i < p->pcxt->nworkers_launched; i++)
	{
		pid_t		pid;

		if (GetBackgroundWorkerPid(p->pcxt->worker[i].bgwhandle, &pid) !=
			BGWH_STOPPED)
			return true;
	}
	return false;
}

/*
 * Wait until at most `upto` pages are not yet stored, doing the work
 * itself while there is any to claim.
 */
static void
gs_btpipe_wait_stored(GsBtPipe *p, uint64 upto)
{
	GsBtPipeShared *sh = p->sh;

	for (;;)
	{
		SMgrRelation smgr = RelationGetSmgr(p->index);

		if (pg_atomic_read_u64(&sh->stored) + upto >= p->next)
			break;
		/* (under the fault, the workers must log the pages: one fails) */
		if (sh->fault != GS_INDEX_FAULT_ERROR_IN_WRITER &&
			gs_btpipe_step(sh, smgr))
		{
			p->by_leader++;
			continue;
		}
		gs_btpipe_store(sh, smgr);
		if (pg_atomic_read_u64(&sh->stored) + upto >= p->next)
			break;
		/* a worker is logging the next page: wait for it */
		if (ConditionVariableTimedSleep(&sh->room_cv, GS_BTPIPE_WAIT_MS,
										PG_WAIT_EXTENSION) &&
			!gs_btpipe_writers_alive(p))
		{
			uint64		s = pg_atomic_read_u64(&sh->stored);

			if (pg_atomic_read_u64(&sh->slots[s % GS_BTPIPE_SLOTS].logged) !=
				s + 1)
				elog(ERROR, "gpusort: the index page writers ended with page %llu unwritten",
					 (unsigned long long) s);
		}
	}
	ConditionVariableCancelSleep();
}

/* a finished page for blkno; the caller keeps page */
void
gs_btpipe_put(GsBtPipe *p, Page page, BlockNumber blkno)
{
	GsBtPipeShared *sh = p->sh;
	uint64		seq = p->next;

	/* the slot's last page must be in the file */
	if (pg_atomic_read_u64(&sh->stored) + GS_BTPIPE_SLOTS <= seq)
		gs_btpipe_wait_stored(p, GS_BTPIPE_SLOTS - 1);
	pg_memory_barrier();
	memcpy(gs_btpipe_page(sh, seq), page, BLCKSZ);
	sh->slots[seq % GS_BTPIPE_SLOTS].blkno = blkno;
	pg_write_barrier();
	pg_atomic_write_u64(&sh->put, seq + 1);
	p->next = seq + 1;
	ConditionVariableBroadcast(&sh->work_cv);
}

/*
 * The last page is put: wait until every page is in the file and the
 * workers have ended (their WAL's end becomes the leader's).  Returns the
 * pages the workers logged.
 */
uint64
gs_btpipe_finish(GsBtPipe *p)
{
	pg_atomic_write_u32(&p->sh->done, 1);
	ConditionVariableBroadcast(&p->sh->work_cv);
	gs_btpipe_wait_stored(p, 0);
	WaitForParallelWorkersToFinish(p->pcxt);
	DestroyParallelContext(p->pcxt);
	p->pcxt = NULL;
	p->sh = NULL;			/* it was in the context's segment */
	return p->next - p->by_leader;
}

/* ---------------------------------------------------------------------
 * A worker
 * ---------------------------------------------------------------------
 */

/*
 * gpusort.index_fault = hold_in_writer: sleep, as pg_sleep() does (its
 * wait event too), until the process is stopped or 30 s have passed.
 */
static void
gs_btpipe_hold(void)
{
	TimestampTz end = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												  30 * 1000);

	while (GetCurrentTimestamp() < end)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, WAIT_EVENT_PG_SLEEP);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

void
gs_btpipe_main(dsm_segment *seg, shm_toc *toc)
{
	GsBtPipeShared *sh;
	SMgrRelation smgr;
	uint64		nlogged = 0;

	gs_idx_query_text_restore(toc, GS_BTPIPE_KEY_QUERY_TEXT);

	sh = (GsBtPipeShared *) shm_toc_lookup(toc, GS_BTPIPE_KEY_RING, false);
	smgr = GS_SMGR_OPEN_SHARED(sh->rfile);

	for (;;)
	{
		uint64		seq;

		if (gs_btpipe_claim(sh, &seq))
		{
			/* the first worker holds its first page, for tests */
			if (sh->fault == GS_INDEX_FAULT_HOLD_IN_WRITER &&
				ParallelWorkerNumber == 0 && nlogged == 0)
				gs_btpipe_hold();
			gs_btpipe_log(sh, seq);
			gs_btpipe_store(sh, smgr);
			if (++nlogged == 2 && sh->fault == GS_INDEX_FAULT_ERROR_IN_WRITER)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("gpusort: index page writer failed"),
						 errdetail("gpusort.index_fault is set to \"error_in_writer\".")));
			continue;
		}
		gs_btpipe_store(sh, smgr);
		if (pg_atomic_read_u32(&sh->done) != 0)
		{
			/* `done` was set after the last page was put */
			pg_read_barrier();
			if (pg_atomic_read_u64(&sh->claimed) >=
				pg_atomic_read_u64(&sh->put))
				break;
		}
		ConditionVariableSleep(&sh->work_cv, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
}
