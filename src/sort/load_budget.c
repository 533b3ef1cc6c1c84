/*-------------------------------------------------------------------------
 *
 * load_budget.c
 *	  How much of /dev/shm an in-memory parallel load may take.
 *
 * A parallel load of an input that fits work_mem keeps the whole input in
 * shared memory until the sort ends (sort_parallel.c): the workers write
 * their rows into DSA segments, which PostgreSQL makes as files in
 * /dev/shm (dynamic_shared_memory_type = posix, the default; with mmap, in
 * the data directory, whose file system then counts instead).  Whether a
 * load may do so
 * is decided here, from what the machine has rather than from a setting:
 *
 *	- the space /dev/shm has free now,
 *	- less what in-memory loads of every session have claimed and not yet
 *	  allocated (a counter in shared memory: loads that start together
 *	  would each see the same free space),
 *	- less a reserve for everything else that uses /dev/shm (PostgreSQL's
 *	  own parallel queries, other servers): an eighth of its size, at
 *	  least 64 MB.
 *
 * A load that gets its claim holds it until its workers' blocks exist
 * (the leader counts them off as it maps them) or the load ends.  One that
 * does not is loaded in runs instead, which take next to no shared memory.
 *
 * The claim is also the load's budget: a worker whose rows outgrow it (the
 * estimate was low) stops taking new pages of the scan, and the other
 * participants read the rest into their own memory, so that a load never
 * fails for want of /dev/shm where a serial load would have worked.
 *
 * Claims go with the transaction (commit, abort) and with the process.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/statvfs.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/dsm.h"
#include "storage/dsm_impl.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"

/* the reserve left to others: this fraction of /dev/shm, at least ... */
#define BUDGET_RESERVE_FRACTION	8
#define BUDGET_RESERVE_MIN		((uint64) 64 * 1024 * 1024)
/* a claim covers the estimate and this much more of it (1/4) */
#define BUDGET_MARGIN_DIVISOR	4

typedef struct GsLoadBudgetShared
{
	pg_atomic_uint64 pending;	/* claimed by loads, not yet allocated */
} GsLoadBudgetShared;

static GsLoadBudgetShared *budget_shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* this backend's share of pending, and the transactions it belongs to */
static uint64 my_pending = 0;
static uint32 my_generation = 1;
static bool callbacks_registered = false;

static void
gs_budget_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(GsLoadBudgetShared)));
}

static void
gs_budget_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	budget_shared = ShmemInitStruct("gpusort load budget",
									sizeof(GsLoadBudgetShared), &found);
	if (!found)
		pg_atomic_init_u64(&budget_shared->pending, 0);
	LWLockRelease(AddinShmemInitLock);
}

void
gs_load_budget_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = gs_budget_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = gs_budget_shmem_startup;
}

/* give back n bytes of this backend's claims */
static void
gs_budget_give_back(uint64 n)
{
	n = Min(n, my_pending);
	if (n == 0)
		return;
	my_pending -= n;
	if (budget_shared)
		(void) pg_atomic_fetch_sub_u64(&budget_shared->pending, (int64) n);
}

/* every claim of a transaction ends with it, whatever became of its loads */
static void
gs_budget_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT ||
		event == XACT_EVENT_PREPARE ||
		event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT)
	{
		gs_budget_give_back(my_pending);
		my_generation++;
	}
}

static void
gs_budget_exit(int code, Datum arg)
{
	gs_budget_give_back(my_pending);
}

/* bytes as a DBA reads them: "512 MB", "3.2 GB" */
static void
gs_budget_bytes(char *buf, size_t len, double bytes)
{
	if (bytes >= 1024.0 * 1024 * 1024)
		snprintf(buf, len, "%.1f GB", bytes / (1024.0 * 1024 * 1024));
	else
		snprintf(buf, len, "%.0f MB", bytes / (1024.0 * 1024));
}

/*
 * Claim room in /dev/shm for an in-memory load of est_bytes (the input as
 * the sort holds it) by nworkers workers, each of whose last block may
 * pass the budget by at most max_block bytes.  On success, claim->budget
 * is what the workers may hold together; otherwise why says, in a few
 * words, what the load was refused for.
 */
bool
gs_load_budget_claim(GsLoadClaim *claim, double est_bytes, int nworkers,
					 Size max_block, char *why, size_t whylen)
{
	struct statvfs sv;
	const char *dir = NULL;
	uint64		want;
	uint64		over;
	uint64		reserve;
	uint64		avail;
	uint64		pending;
	char		a[32];
	char		b[32];

	memset(claim, 0, sizeof(GsLoadClaim));
	want = (uint64) (est_bytes + est_bytes / BUDGET_MARGIN_DIVISOR);
	over = (uint64) Max(nworkers, 1) * max_block;

	if (gpusort_sort_fault == GS_SORT_FAULT_LOAD_NO_SHM)
	{
		snprintf(why, whylen, "no room in /dev/shm, fault injected");
		return false;
	}
	if (gpusort_sort_fault == GS_SORT_FAULT_LOAD_SMALL_BUDGET)
		want = 1;

	/*
	 * POSIX segments are files in /dev/shm, mmap ones in the data
	 * directory's pg_dynshmem (the backend's working directory); System V
	 * segments are bounded by kernel limits, which the allocation itself
	 * reports.
	 */
	if (dynamic_shared_memory_type == DSM_IMPL_POSIX)
		dir = "/dev/shm";
	else if (dynamic_shared_memory_type == DSM_IMPL_MMAP)
		dir = PG_DYNSHMEM_DIR;
	if (dir == NULL || statvfs(dir, &sv) != 0)
	{
		claim->budget = want;
		return true;
	}
	avail = (uint64) sv.f_bavail * sv.f_frsize;
	reserve = Max(BUDGET_RESERVE_MIN,
				  (uint64) sv.f_blocks * sv.f_frsize / BUDGET_RESERVE_FRACTION);

	if (budget_shared == NULL)
	{
		if (avail < want + over + reserve)
			goto refused;
		claim->budget = want;
		return true;
	}

	pending = pg_atomic_read_u64(&budget_shared->pending);
	for (;;)
	{
		if (avail < pending + want + over + reserve)
			goto refused;
		if (pg_atomic_compare_exchange_u64(&budget_shared->pending,
										   &pending, pending + want))
			break;
	}
	if (!callbacks_registered)
	{
		RegisterXactCallback(gs_budget_xact_callback, NULL);
		before_shmem_exit(gs_budget_exit, 0);
		callbacks_registered = true;
	}
	my_pending += want;
	claim->budget = want;
	claim->pending = want;
	claim->generation = my_generation;
	return true;

refused:
	gs_budget_bytes(a, sizeof(a), est_bytes);
	gs_budget_bytes(b, sizeof(b), (double) avail);
	snprintf(why, whylen, "%s input, %s free in %s", a, b,
			 dir[0] == '/' ? dir : "the data directory");
	return false;
}

/* the load's workers have allocated bytes more of their blocks */
void
gs_load_budget_used(GsLoadClaim *claim, uint64 bytes)
{
	uint64		n;

	if (claim->generation != my_generation)
		claim->pending = 0;
	n = Min(bytes, claim->pending);
	claim->pending -= n;
	gs_budget_give_back(n);
}

/* the load is over (its rows may live on, but are allocated) */
void
gs_load_budget_release(GsLoadClaim *claim)
{
	gs_load_budget_used(claim, claim->pending);
	claim->budget = 0;
}
