/*-------------------------------------------------------------------------
 *
 * index_int.h
 *	  btree index builds through gpusort: declarations shared by
 *	  src/nbtree/index*.c.
 *
 * index.c        the hooks that hand a btree build to gpusort
 * index_settings.c  its settings and test-only fault points
 * index_build.c  the ambuild: the driver of a build
 * index_rows.c   what the build knows of rows: keys, comparators, checks
 * index_sort.c   the rows sorted by the sort core (sortstate.c), then
 *                checked and handed to the page writer or CLUSTER
 * index_write.c  writes the sorted index tuples as btree pages
 * index_scan.c   the heap scan, page by page with the next one prefetched
 * index_parallel.c  the heap scan spread over parallel workers, whose
 *                rows reach the leader's sort in shared memory or as runs
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
#include "access/parallel.h"
#include "access/htup_details.h"
#include "access/itup.h"
#include "access/heaptoast.h"
#include "access/tableam.h"
#include "access/tupmacs.h"
#include "nodes/execnodes.h"
#include "port/atomics.h"
#include "storage/spin.h"
#include "portability/instr_time.h"
#include "storage/bufpage.h"
#include "storage/shm_toc.h"
#include "storage/smgr.h"
#include "storage/fd.h"
#include "utils/sortsupport.h"
#include "utils/relcache.h"

#include "gpusort_compat.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"

/* index tuples formed between resets of a scratch context */
#define GS_IDX_SCRATCH_TUPLES	1024

/* per-row flags */
#define GS_ROW_ALIVE	0x01	/* live tuple: takes part in unique checks */

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
	int			fixed_natts;	/* the index tuple's attributes */
	Size		fixed_size;

	/*
	 * The index tuple one variable-width column (a text index): a value
	 * inline, uncompressed and small is stored in place too
	 * (gs_idx_form_var1), its header shortened where index_form_tuple
	 * would shorten it (var1_packable).
	 */
	bool		var1;
	bool		var1_packable;
	uint16		fixed_off[INDEX_MAX_KEYS];
	int16		fixed_len[INDEX_MAX_KEYS];	/* attlen; negated by reference */

	/*
	 * A row's key is derived from its index tuple formed in place without
	 * NULLs (gs_idx_key_derive, as a run's reader does), which costs less
	 * than encoding its values: for a key plan of one fixed-width column.
	 */
	bool		derive_key;

	MemoryContext cxt;			/* the build's memory */
	MemoryContext scratch;		/* index_form_tuple's output, reset often */
	int			scratch_used;
	double		indtuples;

	/* the sort core that takes the rows (index_sort.c) */
	struct GsSortState *sort;

	/* what the sort reported at its end (the DEBUG2 lines) */
	GsSortReport rep;
	/* the page writer's time in WAL and storage calls, and in its sync */
	double		write_ms;
	double		sync_ms;

	/*
	 * Workers that log and write the pages (index_pipe.c), or NULL; the
	 * pages written in all, and those the workers logged.
	 */
	struct GsBtPipe *pipe;
	int			writers;
	uint64		pages;
	uint64		pages_by_workers;

	/* comparators for tie-breaks and unique checks */
	SortSupport ssup;

	/*
	 * Rows may carry a payload after their index tuple (CLUSTER: the heap
	 * tuple): MAXALIGN'd index tuple, uint32 length padded to 8, payload.
	 */
	bool		payload;

	/* a parallel scan whose workers' rows are still in shared memory */
	struct GsIdxParallel *parallel;

	/* where the sorted tuples go instead of a btree (CLUSTER), or NULL */
	void		(*sink) (void *arg, IndexTuple itup);
	void	   *sink_arg;
} GsIdxBuild;

/*
 * The memory a row takes besides its tuple, as a parallel worker counts
 * its share: its key, its entry word, its pointer and key in the sort's
 * arrays
 */
#define GS_IDX_ROW_BYTES(b) \
	((Size) 2 * (b)->keybytes + 2 * sizeof(void *))

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
	int			natts = b->fixed_natts;
	int			i;

	/* one column, the usual index, without a loop */
	if (likely(natts == 1))
		*hasnull = isnull[0];
	else
	{
		*hasnull = false;
		for (i = 0; i < natts; i++)
			*hasnull |= isnull[i];
	}
	if (likely(!*hasnull))
		return b->fixed_size;
	return MAXALIGN(IndexInfoFindDataOffset(INDEX_NULL_MASK) +
					heap_compute_data_size(b->itupdesc, values, isnull));
}

/* index_rows.c: the same as gs_idx_form_fixed for a row with a NULL */
extern void gs_idx_form_fixed_nulls(const GsIdxBuild *b, Datum *values,
									bool *isnull, Size size, IndexTuple dst);

/*
 * Form the index tuple of values (b->fixed) at dst, size bytes (from
 * gs_idx_fixed_size), byte for byte as index_form_tuple would, padding
 * zeroed; t_tid is left to the caller.  Inline into the scan's callbacks,
 * which call it for every row of the table; a row with a NULL takes
 * gs_idx_form_fixed_nulls.
 */
static pg_attribute_always_inline void
gs_idx_form_fixed(const GsIdxBuild *b, Datum *values, bool *isnull,
				  bool hasnull, Size size, IndexTuple dst)
{
	int			natts = b->fixed_natts;
	int			i;

	if (unlikely(hasnull))
	{
		gs_idx_form_fixed_nulls(b, values, isnull, size, dst);
		return;
	}

	gs_zero_tuple(dst, size);
	/* by the lengths kept at the start, not the descriptor's */
	if (likely(natts == 1))
		gs_store_fixed_value((char *) dst + b->fixed_off[0], values[0],
							 b->fixed_len[0]);
	else
		for (i = 0; i < natts; i++)
			gs_store_fixed_value((char *) dst + b->fixed_off[i], values[i],
								 b->fixed_len[i]);
	dst->t_info = (unsigned short) size;
}

/*
 * The size of the index tuple of values when b->var1 and gs_idx_form_var1
 * forms it, else 0 (index_form_tuple must: a NULL, a value out of line or
 * compressed, or one it would try to compress)
 */
static inline Size
gs_idx_var1_size(const GsIdxBuild *b, Datum *values, bool *isnull)
{
	Pointer		val;
	Size		len;

	if (!b->var1 || isnull[0])
		return 0;
	val = DatumGetPointer(values[0]);
	if (VARATT_IS_EXTERNAL(val) || VARATT_IS_COMPRESSED(val))
		return 0;
	if (VARATT_IS_SHORT(val))
		len = VARSIZE_SHORT(val);
	else if (VARSIZE(val) > TOAST_INDEX_TARGET)
		return 0;
	else if (b->var1_packable && VARATT_CAN_MAKE_SHORT(val))
		len = VARATT_CONVERTED_SHORT_SIZE(val);
	else
		len = VARSIZE(val);
	return MAXALIGN(IndexInfoFindDataOffset(0) + len);
}

/*
 * Form that tuple at dst, size bytes, byte for byte as index_form_tuple
 * would (heap_fill_tuple's copy of a varlena: a short header kept, a
 * 4-byte one shortened where it can be, else copied at the data's start,
 * which is aligned for it), padding zeroed; t_tid is left to the caller
 */
static inline void
gs_idx_form_var1(const GsIdxBuild *b, Datum *values, Size size,
				 IndexTuple dst)
{
	Pointer		val = DatumGetPointer(values[0]);
	char	   *data = (char *) dst + IndexInfoFindDataOffset(0);

	gs_zero_tuple(dst, size);
	if (VARATT_IS_SHORT(val))
		memcpy(data, val, VARSIZE_SHORT(val));
	else if (b->var1_packable && VARATT_CAN_MAKE_SHORT(val))
	{
		Size		len = VARATT_CONVERTED_SHORT_SIZE(val);

		SET_VARSIZE_SHORT(data, len);
		memcpy(data + 1, VARDATA(val), len - 1);
	}
	else
		memcpy(data, val, VARSIZE(val));
	dst->t_info = (unsigned short) (size | INDEX_VAR_MASK);
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
extern bool gs_idx_encode(GsIdxBuild *b, Datum *values, bool *isnull,
						  ItemPointer tid, uint64 *key);
extern bool gs_idx_key_derivable(void *arg, const char *data);
extern bool gs_idx_key_derive(void *arg, const char *data, size_t data_off,
							  char *key);
extern size_t gs_idx_row_keep(void *arg, const char *data);
extern void gs_idx_sortsupport(GsIdxBuild *b);
extern int	gs_idx_cmp_cols(GsIdxBuild *b, IndexTuple t1, IndexTuple t2);
extern void gs_idx_unique_violation(GsIdxBuild *b, IndexTuple itup) pg_attribute_noreturn();
extern bool gs_idx_key_has_null(GsIdxBuild *b, IndexTuple itup);
extern int	gs_idx_fixed_key_bytes(GsIdxBuild *b);
extern double gs_idx_estimate_rows(GsIdxBuild *b, bool partial,
								   double fraction);

/* index_sort.c: the rows sorted by the sort core */
extern void gs_idx_sort_begin(GsIdxBuild *b, Size mem, double est_rows);
extern void gs_idx_sort_put(GsIdxBuild *b, ItemPointer tid, Datum *values,
							bool *isnull, bool alive, const void *payload,
							uint32 len);
extern void gs_idx_collect(Relation index, ItemPointer tid, Datum *values,
						   bool *isnull, bool tupleIsAlive, void *state);
extern bool gs_idx_sort_write(GsIdxBuild *b);
extern char *gs_idx_sort_summary(GsIdxBuild *b);

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
/*
 * The least maintenance_work_mem, in kB, a participant of a parallel build
 * is given (gs_idx_plan_workers): half of PostgreSQL's rule, whose
 * participants each sort.
 */
#define GS_IDX_PARTICIPANT_MIN_KB	16384

extern int	gs_idx_plan_workers(Relation heap, int planned);

/* the statement's text for a parallel context's workers */
extern void gs_idx_query_text_estimate(ParallelContext *pcxt);
extern void gs_idx_query_text_store(ParallelContext *pcxt, uint64 key);
extern void gs_idx_query_text_restore(shm_toc *toc, uint64 key);
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

/* the workers' rows (their runs, the rows they kept) into b's sort */
extern void gs_idx_parallel_collect(GsIdxParallel *p, GsIdxBuild *b);

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
extern double gs_btw_sync_ms(GsBtWriter *w);

/*
 * The finished pages go to pipe's workers instead of being logged and
 * written here; gs_btw_finish waits for them.  The pages in all, and
 * those the workers logged, once finished.
 */
extern void gs_btw_set_pipe(GsBtWriter *w, struct GsBtPipe *pipe);
extern void gs_btw_pages(GsBtWriter *w, uint64 *pages, uint64 *by_workers);

/*
 * index_pipe.c: a parallel build's pages, logged and written by workers
 * launched for it once the scan is over.  The leader puts each finished
 * page, and waits at the end for every page to be in the file; a page
 * goes into the file by gs_bt_store_page, whichever process writes it.
 */
typedef struct GsBtPipe GsBtPipe;

/*
 * A file synced at the end has the kernel start writing it back every this
 * many blocks (1MB), so that the final sync finds little left to write.
 */
#define GS_BTW_WRITEBACK_BLOCKS	128

extern void gs_bt_store_page(SMgrRelation smgr, bool use_wal,
							 BlockNumber *nwritten, BlockNumber *nflushing,
							 char *page, BlockNumber blkno);
extern GsBtPipe *gs_btpipe_launch(Relation index, int nworkers,
								  int *launched);
extern void gs_btpipe_put(GsBtPipe *p, Page page, BlockNumber blkno);
extern uint64 gs_btpipe_finish(GsBtPipe *p);

#endif							/* GPUSORT_INDEX_INT_H */
