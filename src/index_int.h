/*-------------------------------------------------------------------------
 *
 * index_int.h
 *	  btree index builds through gpusort: declarations shared by
 *	  src/index*.c.
 *
 * index.c        the hooks that hand a btree build to gpusort
 * index_settings.c  its settings and test-only fault points
 * index_build.c  the ambuild: the driver of a build
 * index_rows.c   the rows in memory: arena, sort, checks, in-memory write
 * index_collect.c  the scan's rows into memory, and out as runs when full
 * index_write.c  writes the sorted index tuples as btree pages
 * index_scan.c   the heap scan, page by page with the next one prefetched
 * index_parallel.c  the heap scan spread over parallel workers
 * index_spill.c  builds beyond maintenance_work_mem: sorted runs in a
 *                temporary file, merged into the page writer
 * index_cluster.c  CLUSTER's table sort, by the same sort
 * index_cluster_scan.c  CLUSTER's heap scan, serial or one participant's
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_INDEX_INT_H
#define GPUSORT_INDEX_INT_H

#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/itup.h"
#include "access/tableam.h"
#include "access/tupmacs.h"
#include "nodes/execnodes.h"
#include "port/atomics.h"
#include "storage/spin.h"
#include "portability/instr_time.h"
#include "storage/fd.h"
#include "utils/sortsupport.h"
#include "utils/relcache.h"

#include "gpusort_compat.h"

#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"

/* index tuples formed between resets of a scratch context */
#define GS_IDX_SCRATCH_TUPLES	1024

/* per-row flags */
#define GS_ROW_ALIVE	0x01	/* live tuple: takes part in unique checks */
#define GS_ROW_LOSSY	0x02	/* its key lost information */

/*
 * A sorted run: a stretch of the build's temporary file (GsIdxBuild.file),
 * the backend's own; a parallel build's workers write theirs into the
 * leader's.
 */
typedef struct GsIdxRun
{
	int64		offset;
	int64		bytes;
	size_t		nrows;
} GsIdxRun;

/*
 * The rows' memory of one half of maintenance_work_mem, when runs are
 * written in the background (GsIdxBuild.overlap): the scan fills one half
 * while the other's run is written.  The fields are GsIdxBuild's own of
 * the same names, swapped in and out.
 */
typedef struct GsIdxSet
{
	char	   *keys;
	IndexTuple *tuples;
	uint8	   *flags;
	size_t		cap;
	char	  **blocks;
	char	  **blocks_raw;
	int			nblocks;
	int			blocks_cap;
	MemoryContext arenacxt;
} GsIdxSet;

typedef struct GsRunBg GsRunBg;

typedef struct GsIdxBuild
{
	Relation	heap;
	Relation	index;
	TupleDesc	itupdesc;
	int			nkeyatts;
	bool		isunique;
	bool		nulls_not_distinct;

	/* keys */
	GsKeyPlan  *kp;
	int			colbytes;		/* width of the column part (plan width) */
	int			colwords;		/* 64-bit words it takes in our key */
	int			keybytes;		/* whole key: column words + TID word */
	bool		exact;			/* columns fully encoded by the plan */
	uint64		colbuf[GS_MAX_KEY_BYTES / 8];

	/*
	 * Every column of the index tuple fixed-width: tuples are formed in
	 * place (gs_idx_form_fixed) rather than by index_form_tuple and a
	 * copy.  Without NULLs they take fixed_size bytes, each column at its
	 * fixed_off.
	 */
	bool		fixed;
	Size		fixed_size;
	uint16		fixed_off[INDEX_MAX_KEYS];

	/* rows */
	GsEngine   *eng;
	MemoryContext cxt;			/* the build's memory: arena, arrays */
	MemoryContext arenacxt;		/* tuples larger than a block, reset after
								 * each run */
	MemoryContext scratch;		/* index_form_tuple's output, reset often */
	int			scratch_used;
	char	   *arena;			/* free space of the current arena block */
	size_t		arena_left;
	Size		arena_block;	/* size of arena blocks */
	Size		mem_arena;		/* bytes of arena blocks taken */
	Size		mem_limit;		/* maintenance_work_mem, in bytes */

	/*
	 * Arena blocks of arena_block bytes, kept from run to run so that their
	 * pages are faulted in once per build; raw: as allocated (for pfree).
	 * Fresh memory is given huge pages and populated by a thread ahead of
	 * the scan: the array slots up to prefault_rows, and each new block.
	 */
	char	  **blocks;
	char	  **blocks_raw;
	int			nblocks;
	int			blocks_cap;
	int			blk_next;		/* the next block a run may reuse */
	size_t		prefault_rows;
	GsTask	   *prefault_task;
	GsPrefault	prefault;
	char	   *keys;			/* engine key buffer */
	IndexTuple *tuples;
	uint8	   *flags;
	size_t		cap;
	size_t		n;
	bool		anylossy;		/* of the rows in memory */
	bool		runs_lossy;		/* of the rows in runs written */
	bool		keys_sorted;	/* keys[] in sorted order after the sort */
	bool		overflow;		/* too many rows, or too little memory */

	/*
	 * Each row's tuple size, MAXALIGN'd, when all rows in memory have the
	 * same (rec_varlen false): then a run's records need not be sized one
	 * by one to place them.
	 */
	Size		rec_tlen;
	bool		rec_varlen;
	Size		rec_bytes;		/* their sum (MAXALIGN'd) */
	double		indtuples;

	/* sorted runs written when memory is full (index_spill.c) */
	bool		may_spill;		/* else memory full means overflow */
	struct GsTempFile *file;	/* NULL until the first run */
	GsIdxRun   *runs;
	int			nruns;
	int			maxruns;
	int			nruns_written;	/* runs the scan wrote */

	/*
	 * overlap_ok: a serial build, whose scan may go on while a run is
	 * written.  overlap: it does; mem_limit is half of the memory, the
	 * other half is other, whose run bg writes (NULL when none is
	 * pending).
	 */
	bool		overlap_ok;
	bool		overlap;
	GsIdxSet	other;
	GsRunBg    *bg;
	int			npasses;		/* merge passes before the final one */
	int			nstreams;		/* threads of the final merge, or 0 */
	int			merge_threads;	/* threads the final merge may take beyond
								 * gpusort.cpu_threads: a parallel build's
								 * participants, whose cores are free by then */
	int			nruns_merged;	/* runs when the merges began */
	double		final_wait_ms;	/* the backend's wait for merge threads */
	char	   *final_report;	/* their own times (DEBUG2), or NULL */
	double		write_ms;		/* the page writer's WAL and smgr calls */

	/* time spent, in ms: sorting (engine and tie-breaks), writing runs */
	double		sort_ms;
	double		runs_ms;
	double		passes_ms;		/* merge passes before the final merge */

	/* comparators for tie-breaks and unique checks */
	SortSupport ssup;

	/*
	 * Rows may carry a payload after their index tuple (CLUSTER: the heap
	 * tuple): MAXALIGN'd index tuple, uint32 length padded to 8, payload.
	 */
	bool		payload;
	Size		payload_width;	/* its estimated size, for sizing */

	/* a parallel scan whose workers' rows are still in shared memory */
	struct GsIdxParallel *parallel;

	/* where the sorted tuples go instead of a btree (CLUSTER), or NULL */
	void		(*sink) (void *arg, IndexTuple itup);
	void	   *sink_arg;
} GsIdxBuild;

/* memory a row takes besides its tuple: key, pointer, flags, perm, gather */
#define GS_IDX_ROW_BYTES(b) \
	((Size) (b)->keybytes + 2 * sizeof(IndexTuple) + 1 + sizeof(uint32))

/* a row's bytes from its index tuple on: the tuple and any payload */
static inline Size
gs_idx_row_size(const GsIdxBuild *b, IndexTuple itup)
{
	Size		size = IndexTupleSize(itup);

	if (b->payload)
	{
		uint32		len;

		memcpy(&len, (char *) itup + MAXALIGN(size), sizeof(len));
		size = MAXALIGN(size) + 8 + len;
	}
	return size;
}

/* the payload of a row, and its length */
static inline char *
gs_idx_payload(IndexTuple itup, uint32 *len)
{
	char	   *p = (char *) itup + MAXALIGN(IndexTupleSize(itup));

	memcpy(len, p, sizeof(uint32));
	return p + 8;
}

/*
 * The size of the index tuple of values (b->fixed): what index_form_tuple
 * would make of them.  *hasnull: some column is NULL.
 */
static inline Size
gs_idx_fixed_size(const GsIdxBuild *b, Datum *values, bool *isnull,
				  bool *hasnull)
{
	int			i;

	for (i = 0; i < b->itupdesc->natts; i++)
	{
		if (unlikely(isnull[i]))
		{
			*hasnull = true;
			return MAXALIGN(IndexInfoFindDataOffset(INDEX_NULL_MASK) +
							heap_compute_data_size(b->itupdesc, values, isnull));
		}
	}
	*hasnull = false;
	return b->fixed_size;
}

/*
 * Form the index tuple of values (b->fixed) at dst, size bytes (from
 * gs_idx_fixed_size), byte for byte as index_form_tuple would, padding
 * zeroed; t_tid is left to the caller.
 */
static inline void
gs_idx_form_fixed(const GsIdxBuild *b, Datum *values, bool *isnull,
				  bool hasnull, Size size, IndexTuple dst)
{
	TupleDesc	desc = b->itupdesc;
	uint64	   *w = (uint64 *) dst;
	Size		i;

	for (i = 0; i < size / sizeof(uint64); i++)
		w[i] = 0;
	if (unlikely(hasnull))
	{
		Size		hoff = IndexInfoFindDataOffset(INDEX_NULL_MASK);
		uint16		tupmask = 0;

		heap_fill_tuple(desc, values, isnull, (char *) dst + hoff,
						heap_compute_data_size(desc, values, isnull),
						&tupmask, (bits8 *) dst + sizeof(IndexTupleData));
		dst->t_info = (unsigned short) (size | INDEX_NULL_MASK);
		return;
	}
	for (i = 0; i < (Size) desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		char	   *p = (char *) dst + b->fixed_off[i];

		if (att->attbyval)
			store_att_byval(p, values[i], att->attlen);
		else
			memcpy(p, DatumGetPointer(values[i]), att->attlen);
	}
	dst->t_info = (unsigned short) size;
}

/* the last word of a row's key: its heap TID, in TID order */
static inline uint64
gs_idx_tid_word(ItemPointer tid)
{
	return ((uint64) ItemPointerGetBlockNumberNoCheck(tid) << 16) |
		ItemPointerGetOffsetNumberNoCheck(tid);
}

/* milliseconds since start */
static inline double
gs_idx_ms_since(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_MILLISEC(now);
}

/* index_rows.c */
extern bool gs_idx_init(GsIdxBuild *b, Relation heap, Relation index,
						IndexInfo *indexInfo);
extern void gs_idx_arena_next(GsIdxBuild *b, Size size);
extern bool gs_idx_grow(GsIdxBuild *b);

/* index_collect.c */
extern bool gs_idx_encode(GsIdxBuild *b, Datum *values, bool *isnull,
						  ItemPointer tid, uint64 *key);
extern void gs_idx_collect(Relation index, ItemPointer tid, Datum *values,
						   bool *isnull, bool tupleIsAlive, void *state);
extern void gs_idx_collect_payload(GsIdxBuild *b, ItemPointer tid,
								   Datum *values, bool *isnull,
								   const void *payload, uint32 len);

extern void gs_idx_setup(GsIdxBuild *b, bool partial);
extern void gs_idx_setup_share(GsIdxBuild *b, bool partial, Size mem,
							   double fraction);
extern void gs_idx_sortsupport(GsIdxBuild *b);
extern bool gs_idx_reserve(GsIdxBuild *b, size_t nrows);
extern void gs_idx_prefault_wait(GsIdxBuild *b);
extern void gs_idx_arena_free(GsIdxBuild *b);
extern void gs_idx_write_sorted(GsIdxBuild *b);
extern uint32 *gs_idx_sort(GsIdxBuild *b, bool keys_out);
extern int	gs_idx_cmp_cols(GsIdxBuild *b, IndexTuple t1, IndexTuple t2);
extern void gs_idx_unique_violation(GsIdxBuild *b, IndexTuple itup) pg_attribute_noreturn();
extern bool gs_idx_key_has_null(GsIdxBuild *b, IndexTuple itup);

/* index_spill.c */

/* sort the rows in memory into a run in the temporary file; empty b */
extern void gs_idx_spill_run(GsIdxBuild *b);

/* the run written in the background, if any, is complete and listed */
extern void gs_idx_run_bg_finish(GsIdxBuild *b);
/* sort the rows in memory and write them as a run (b keeps them) */
extern void gs_idx_run_write(GsIdxBuild *b);

/* add a run to b's list */
extern void gs_idx_add_run(GsIdxBuild *b, const GsIdxRun *run);

/* the scan is over: the last run, then the rows' memory goes */
extern void gs_idx_spill_finish(GsIdxBuild *b);

/* index_merge.c */

/*
 * Merge b's runs down to at most maxruns (a parallel build's participant,
 * before the leader's final merge), in passes within b->mem_limit.
 */
extern void gs_idx_spill_reduce(GsIdxBuild *b, int maxruns);
extern int	gs_idx_final_fanin(GsIdxBuild *b, Size mem);
extern int	gs_idx_reduce_budget(GsIdxBuild *b, int nparticipants);

/* write the index from the runs: merge passes, then the final merge */
extern void gs_idx_spill_build(GsIdxBuild *b);

/* index_scan.c */
extern double gs_idx_heap_scan(Relation heap, Relation index,
							   IndexInfo *indexInfo, bool progress,
							   IndexBuildCallback callback, void *state,
							   ParallelTableScanDesc pscan);

/* index_cluster.c: CLUSTER's table sort */
extern void gs_cluster_patch(Relation rel);

/* a CLUSTER row's payload: the heap tuple's TID, padded, then the tuple */
#define GS_CLUSTER_TID_BYTES	MAXALIGN(sizeof(ItemPointerData))

/* what CLUSTER's scan counts, as the heap AM's copy counts it */
typedef struct GsClusterCounts
{
	double		num_tuples;
	double		tups_vacuumed;
	double		tups_recently_dead;
} GsClusterCounts;

/* where CLUSTER's scan puts a kept tuple: the row (its TID, the tuple) */
typedef void (*GsClusterCollect) (void *arg, ItemPointer sort_tid,
								  Datum *values, bool *isnull,
								  const void *row, uint32 len);

/* the reason of why a CLUSTER scan gave up, in shared memory */
#define GS_CLUSTER_WHY_LEN	128

/* a parallel CLUSTER scan's participants, in shared memory */
typedef struct GsClusterShared
{
	pg_atomic_uint64 scanned;	/* tuples kept so far, for progress */
	pg_atomic_uint32 gave_up;	/* why is set: the others stop */
	slock_t		mutex;
	GsClusterCounts counts;		/* every participant's, under mutex */
	char		why[GS_CLUSTER_WHY_LEN];	/* under mutex */
} GsClusterShared;

/* index_cluster_scan.c: CLUSTER's heap scan */
extern void gs_cluster_shared_init(GsClusterShared *sh);

/*
 * One participant's share of CLUSTER's scan: all of it when pscan is NULL,
 * else with the others' shared (sh, where its counts are added at its end).
 * progress: report to pg_stat_progress_cluster (the leader).  Returns NULL,
 * or why the rows cannot give the index scan's order (when another
 * participant found it: the reason in sh).
 */
extern const char *gs_cluster_scan(Relation OldHeap, IndexInfo *indexInfo,
								   GsClusterCollect collect, void *arg,
								   ParallelTableScanDesc pscan,
								   GsClusterShared *sh, bool follow_index,
								   TransactionId OldestXmin,
								   GsClusterCounts *counts, bool progress);

/* index_parallel.c: parallel workers scan, collect and write runs */
typedef struct GsIdxParallel GsIdxParallel;

/*
 * Launch workers for b (set up by gs_idx_init); NULL when none could be
 * launched.  *share: the memory each participant gets.
 */
extern GsIdxParallel *gs_idx_parallel_begin(GsIdxBuild *b, IndexInfo *indexInfo,
											int nworkers, Size *share);

/*
 * The same for CLUSTER's scan: the participants keep the tuples HOT chains
 * and OldestXmin let CLUSTER keep, with the heap tuple as the rows' payload.
 */
extern GsIdxParallel *gs_idx_parallel_begin_cluster(GsIdxBuild *b,
													IndexInfo *indexInfo,
													int nworkers, Size *share,
													bool follow_index,
													TransactionId OldestXmin);

/*
 * The leader's share of the scan (into b), then the workers' end; returns
 * the heap tuples scanned.
 */
extern double gs_idx_parallel_scan(GsIdxParallel *p, GsIdxBuild *b,
								   IndexInfo *indexInfo);

/*
 * CLUSTER: the leader's share of the scan (through collect), then the
 * workers' end; adds
 * every participant's counts to *counts; returns NULL or why a
 * participant's rows cannot give the index scan's order.
 */
extern const char *gs_idx_parallel_scan_cluster(GsIdxParallel *p,
												GsIdxBuild *b,
												IndexInfo *indexInfo,
												GsClusterCollect collect,
												void *arg,
												GsClusterCounts *counts);

/*
 * true when the build ends with a merge: some participant wrote runs, or
 * all rows are more than one sort takes
 */
extern bool gs_idx_parallel_spilled(GsIdxParallel *p, GsIdxBuild *b);

/* in memory: every worker's rows into b's arrays, after b's own */
extern void gs_idx_parallel_gather(GsIdxParallel *p, GsIdxBuild *b);

/* on disk: the workers' rows as runs of b (sorted by the leader if needed) */
extern void gs_idx_parallel_runs(GsIdxParallel *p, GsIdxBuild *b);

/* one line on the workers' part, for the build's DEBUG2 report */
extern char *gs_idx_parallel_report(GsIdxParallel *p);
extern int	gs_idx_parallel_nworkers(GsIdxParallel *p);

/*
 * Leave parallel mode, the workers having ended; the rows they left in
 * shared memory stay until gs_idx_parallel_end (CLUSTER writes its heap
 * outside parallel mode: its TOAST may take new OIDs).
 */
extern void gs_idx_parallel_leave(GsIdxParallel *p);
extern void gs_idx_parallel_end(GsIdxParallel *p);

/* index_settings.c */
extern bool gs_index_build_enabled;
extern bool gs_log_index_builds;
extern bool gs_index_wanted(void);
extern void gs_index_define_settings(void);

/* a query cancel at a point gpusort.index_fault names (gpusort_int.h) */
extern void gs_index_fault_point(int fault);

/* index_build.c: an ambuild with btbuild's signature */
extern IndexBuildResult *gs_btbuild(Relation heap, Relation index,
									IndexInfo *indexInfo);

/* index_write.c: the btree page writer */
typedef struct GsBtWriter GsBtWriter;

/*
 * Start writing the (empty) index.  deduplicate: merge equal keys into
 * posting lists when the index allows it (never for unique indexes).
 */
extern GsBtWriter *gs_btw_begin(Relation heap, Relation index, bool isunique);

/*
 * Add the next index tuple, in btree order (keys, then heap TID).
 * maybe_dup: false when the caller knows itup's key columns differ from
 * the previous tuple's (saves the deduplication check).
 */
extern void gs_btw_add(GsBtWriter *w, IndexTuple itup, bool maybe_dup);

/*
 * Tuples given to gs_btw_add are valid only during the call (they live in
 * read buffers): the writer copies what it keeps.
 */
extern void gs_btw_tuples_transient(GsBtWriter *w);
extern void gs_btw_add_distinct(GsBtWriter *w, IndexTuple itup);
extern void gs_btw_settle(GsBtWriter *w);

/* write the last pages of every level and the metapage; sync */
extern void gs_btw_finish(GsBtWriter *w);
extern double gs_btw_write_ms(GsBtWriter *w);

#endif							/* GPUSORT_INDEX_INT_H */
