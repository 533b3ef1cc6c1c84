/*-------------------------------------------------------------------------
 *
 * load_int.h
 *	  The parallel load's shared state and node state, for sort_parallel.c
 *	  (the node, the workers) and load_finish.c (the leader's side).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_LOAD_INT_H
#define GPUSORT_LOAD_INT_H

#include "access/parallel.h"
#include "executor/execParallel.h"
#include "utils/dsa.h"

#include "gpusort_exec.h"
#include "gpusort_spill.h"

/* shared-memory blocks a loader writes: first size, doubling to the last */
#define LOAD_FIRST_BLOCK	(1024 * 1024)
#define LOAD_MAX_BLOCK		(32 * 1024 * 1024)
/* a new DSA segment: at least a 16th of what the worker loaded before */
#define LOAD_SEGMENT_GROWTH	16
/* a new DSA segment's bookkeeping beyond its block, with room to spare */
#define LOAD_SEGMENT_SLACK	(1024 * 1024)
/* the segment dsa_create makes (DSA_INITIAL_SEGMENT_SIZE, private to dsa.c) */
#define DSA_INITIAL_SEGMENT_BYTES	(1024 * 1024)


/* what one worker loaded, in the parallel DSM */
typedef struct GsLoaderSlot
{
	dsa_handle	area;			/* the area its blocks are made in */
	dsa_pointer first;			/* its first block */
	dsa_pointer runs;			/* writing runs: its GsRun[nruns] */
	int			nruns;
	int			written;		/* batches it wrote as runs */
	uint64		nrows;
	uint64		bytes;			/* of blocks */
	uint64		nlossy;			/* rows whose key was encoded lossily */
	uint32		max_tuple_len;
	double		load_ms;
	bool		stopped;		/* left the rest to the others (budget) */
	bool		done;
} GsLoaderSlot;

/*
 * Slots sit side by side in the DSM, one per loader.  Each is padded to a
 * cache line of its own, and a loader counts in local variables and
 * writes its slot once at the end: a slot written per row shared its line
 * with its neighbours', and every row then paid for the line moving
 * between cores (workers loaded about four times slower per row than a
 * backend alone).
 */
typedef union GsLoaderSlotPadded
{
	GsLoaderSlot slot;
	char		pad[TYPEALIGN(PG_CACHE_LINE_SIZE, sizeof(GsLoaderSlot))];
} GsLoaderSlotPadded;

/* the node's part of the parallel DSM */
typedef struct GsLoadShared
{
	dsa_handle	area;
	int			key_bytes;
	int			nslots;
	/* an input larger than work_mem: each loader writes sorted runs */
	bool		runs;
	int			worker_threads; /* and of gpusort.cpu_threads */
	int			nparts;			/* loaders: each leaves a share of the
								 * final merge's order (gs_sort_share_of_runs) */
	double		worker_rows;	/* estimated rows a loader takes */
	GsTempShared file;			/* the leader's file they go to */
	/* in memory: the bytes of blocks the loaders may make (0: no limit) */
	uint64		budget;
	pg_atomic_uint64 used;
	GsLoaderSlotPadded slots[FLEXIBLE_ARRAY_MEMBER];
} GsLoadShared;

/* what EXPLAIN ANALYZE shows of one loader */
typedef struct GsLoaderReport
{
	double		rows;
	double		ms;
	int			runs;			/* sorted runs it wrote */
} GsLoaderReport;

typedef struct GsLoadState
{
	CustomScanState css;
	/* the sort's definition, for the workers' key plans */
	GsSortDef	def;
	int			nworkers;		/* planned */
	bool		shards;			/* the input is an Append of shards */

	/* leader */
	ParallelExecutorInfo *pei;
	dsa_area   *area;			/* the last load's shared state (runs) */
	dsa_area  **areas;			/* and one for each worker's rows */
	int			nareas;
	int			key_bytes;		/* of the sort being loaded */
	bool		runs;			/* loaders write sorted runs (see above) */
	GsSortState *sort;			/* the sort being loaded */
	double		est_bytes;		/* estimated input, as the sort holds it */
	bool		scan_shared;	/* the child's scan lives in a parallel DSM */
	GsLoadClaim claim;			/* in memory: its room in /dev/shm */

	/* worker */
	GsLoadShared *shared;

	/* report of the last load */
	bool		loaded;
	int			launched;
	const char *serial_reason;	/* why the leader loaded alone */
	char		runs_reason[80];	/* why the loaders wrote runs */
	int			stopped;		/* workers that stopped at the budget */
	GsLoaderReport leader;
	GsLoaderReport *workers;	/* [nworkers] */
	double		collect_ms;		/* handing the workers' rows to the sort */
	uint64		shared_bytes;	/* of the workers' blocks */
	dsa_pointer *mapped;		/* [nworkers]: each one's last block the
								 * leader has mapped (gs_load_map_blocks) */
} GsLoadState;

/* the leader maps the workers' new blocks every this many of its rows */
#define MAP_BLOCKS_ROWS		4096
/* and, done with its share, every this many ms while it waits for theirs */
#define MAP_BLOCKS_WAIT_MS	5

/* load_finish.c */
extern void gs_load_map_blocks(GsLoadState *ls);
extern double gs_load_leader_read(GsLoadState *ls, GsSortState *sort);
extern void gs_load_finish_runs(GsLoadState *ls, GsSortState *sort,
								instr_time t0);
extern void gs_load_finish_memory(GsLoadState *ls, GsSortState *sort);
extern void gs_load_explain(CustomScanState *node, List *ancestors,
							ExplainState *es);

#endif							/* GPUSORT_LOAD_INT_H */
