/*-------------------------------------------------------------------------
 *
 * gpusort_exec.h
 *	  The GpuSort custom scan (executor side) and its sort state.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_EXEC_H
#define GPUSORT_EXEC_H

#include "postgres.h"

#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/extensible.h"
#include "portability/instr_time.h"
#include "storage/bufpage.h"
#include "utils/dsa.h"

#include "gpusort_compat.h"

extern CustomScanMethods gpusort_scan_methods;

/* ---- parallel load (sort_parallel.c) ---- */
typedef struct GsSortState GsSortState;

extern CustomScanMethods gs_load_scan_methods;
/* gs_load_make_plan flags: the input is an Append of shards (shards.c) */
#define GS_LOAD_SHARDS	0x01
extern CustomScan *gs_load_make_plan(Plan *child, List *sortinfo,
									 int nworkers, int flags,
									 int plan_node_id);
extern bool gs_load_is(PlanState *ps);
extern void gs_load_into(PlanState *ps, GsSortState *sort);

/* ---- a plain table scan's rows, read page by page (sort_heapread.c) ---- */
typedef struct GsHeapReader GsHeapReader;

extern GsHeapReader *gs_heapread_begin(PlanState *child);
extern TupleTableSlot *gs_heapread_next(GsHeapReader *r);

/* how a reader's rows are copied from their pages (gs_page_row) */
typedef struct GsPageRows
{
	const int32 *fixed_off;		/* where a projection's values lie in a
								 * tuple's data; NULL: the tuples are the
								 * rows */
	int			natts;			/* the attributes a tuple must have */
	bool		var_tail;		/* the last picked one is a varlena: its
								 * fixed_off is where its room starts */
	/* if not NULL, sets fixed_off for the tuple whose data it is given */
	void		(*walk) (void *arg, const char *data);
	void	   *walk_arg;
} GsPageRows;

extern bool gs_heapread_page_rows(GsHeapReader *r, GsPageRows *pr);
extern int	gs_heapread_next_page(GsHeapReader *r, Page *page,
								  const OffsetNumber **offs);
extern TupleTableSlot *gs_heapread_page_slot(GsHeapReader *r,
											 OffsetNumber off);
extern bool gs_heapread_stop(GsHeapReader *r);

/* load_budget.c: the room in /dev/shm of an in-memory parallel load */
typedef struct GsLoadClaim
{
	uint64		budget;			/* what the load's workers may hold; 0: none */
	uint64		pending;		/* claimed, not yet allocated */
	uint32		generation;		/* the transactions the claim belongs to */
} GsLoadClaim;

extern void gs_load_budget_init(void);
extern bool gs_load_budget_claim(GsLoadClaim *claim, double est_bytes,
								 int nworkers, Size max_block,
								 char *why, size_t whylen);
extern void gs_load_budget_used(GsLoadClaim *claim, uint64 bytes);
extern void gs_load_budget_release(GsLoadClaim *claim);
extern void gs_heapread_end(GsHeapReader *r);

/* the next input row: from the reader if there is one, else the node */
static inline TupleTableSlot *
gs_input_next(GsHeapReader *r, PlanState *child)
{
	return r ? gs_heapread_next(r) : ExecProcNode(child);
}

/* ---- sort state (sortstate.c): a tuplesort-shaped life cycle ---- */

/*
 * What a sort orders by: the plan's sort columns (attribute numbers of its
 * input), with their operators, collations and NULLS FIRST.
 */
typedef struct GsSortDef
{
	int			nkeys;
	AttrNumber *attnums;
	Oid		   *sortops;
	Oid		   *collations;
	bool	   *nulls_first;
	int			maxattno;		/* the largest attnum */
} GsSortDef;

/* the definition the planner put first in a GpuSort's custom_private */
extern void gs_sort_def_read(List *custom_private, GsSortDef *def);

/* what EXPLAIN ANALYZE reports */
typedef struct GsSortReport
{
	const char *engine;			/* "cpu", "cuda" */
	const char *device;			/* device name, or NULL */
	const char *fallback;		/* why the GPU was not used, or NULL */
	const char *keydesc;		/* key plan text */
	double		rows;
	int			key_bytes;
	bool		exact;			/* no tie-break was needed */
	int			chunks;			/* engine sorts */
	int			runs;			/* runs spilled to temporary files */
	int			merge_passes;	/* passes over spilled runs */
	int			streams;		/* threads of the final merge, 0 if none */
	int64		disk_kb;		/* temporary file space */
	double		tiebreak_rows;	/* rows in runs that needed a tie-break */
	double		load_ms;		/* reading the child: copy + encode */
	double		sort_ms;		/* the engine's time, in the background or not */
	double		wait_ms;		/* the part of it the sort waited for */
	double		transfer_ms;	/* host<->device part of sort_ms */
	double		tiebreak_ms;
	double		spill_ms;		/* merging chunks and writing runs */
	double		spill_wait_ms;	/* the part of it spent waiting for
								 * writes in the background */
	double		merge_ms;		/* merging runs, the final merge included */
	double		merge_wait_ms;	/* waiting for the merge's threads */
	int64		mem_bytes;		/* peak memory */
	int64		copy_bytes;		/* rows copied into sorted order */
	double		copy_ms;
	double		emit_ms;		/* returning the rows, the consumer's time
								 * between them included; 0 if not all */
} GsSortReport;

extern GsSortState *gs_sort_begin(TupleDesc tupdesc, const GsSortDef *def,
								  int work_mem_kb, bool random_access,
								  double est_rows);
extern void gs_sort_put(GsSortState *s, TupleTableSlot *slot);
extern bool gs_sort_takes_pages(GsSortState *s, GsHeapReader *r);
extern int	gs_sort_put_page(GsSortState *s, GsHeapReader *r);
extern int	gs_sort_key_bytes(GsSortState *s);
extern size_t gs_sort_bulk_room(GsSortState *s, size_t n,
								MinimalTuple **tuples, char **keys);
extern void gs_sort_bulk_spill(GsSortState *s);
extern void gs_sort_bulk_lossy(GsSortState *s, size_t i);
extern void gs_sort_bulk_done(GsSortState *s, size_t n, uint32 max_tuple_len);
extern void gs_sort_bulk_threads(GsSortState *s, int nthreads);
extern void gs_sort_stop_copies(void);

extern void gs_sort_shared_span(GsSortState *s, void *addr, size_t len);

/*
 * A block of rows that a participant of a parallel load (sort_parallel.c)
 * or of a parallel index build (index_parallel.c) wrote in shared memory.
 * Tuples grow up from after the header; each row's entry -- its key, then
 * a uint32 holding its tuple's offset in the block and the lossy bit --
 * grows down from the end, so row i's entry is at size - (i + 1) * entry
 * size.  gs_sort_take_blocks hands such rows to the leader's sort.
 */
typedef struct GsRowBlock
{
	dsa_pointer next;			/* the participant's next block */
	uint64		size;
	uint64		nrows;
} GsRowBlock;

#define GS_BLOCK_HDR		MAXALIGN(sizeof(GsRowBlock))
#define GS_BLOCK_LOSSY_BIT	((uint32) 1 << 31)

static inline Size
gs_block_entry_size(int key_bytes)
{
	return (Size) key_bytes + sizeof(uint32);
}

/* the blocks of a parallel load's participants, in order */
typedef struct GsBlockList
{
	char	  **blocks;
	int			n;
	int			cap;
	size_t		rows;			/* in all the blocks */
} GsBlockList;

extern void gs_block_list_init(GsBlockList *l);
extern void gs_block_list_add(GsBlockList *l, dsa_area *area,
							  dsa_pointer first, uint64 nrows,
							  const char *who);
extern void gs_sort_take_blocks(GsSortState *sort, char *const *blocks,
								int nblocks, size_t total, int key_bytes,
								bool any_lossy, uint32 max_tuple_len,
								int participants, bool touch);
extern void gs_sort_perform(GsSortState *s);
/* count a performed sort in gpusort_stats */
extern void gs_sort_count(GsSortState *s);

/* runs written by a parallel load's participants (sort_runs.c) */
struct GsTempFile;
struct GsTempShared;
struct GsRun;
extern struct GsTempFile *gs_sort_file(GsSortState *s);
extern void gs_sort_attach_file(GsSortState *s, struct GsTempShared *sh);
extern const struct GsRun *gs_sort_finish_runs(GsSortState *s, int nparts,
											   int *nruns, bool *any_lossy,
											   uint32 *max_tuple_len);
extern int	gs_sort_nruns(GsSortState *s);
extern int	gs_sort_runs_written(GsSortState *s);
extern int	gs_sort_runs_spilled(GsSortState *s);
extern int	gs_sort_merge_order(GsSortState *s);
extern int	gs_sort_share_of_runs(GsSortState *s, int nparts);
extern void gs_sort_add_runs(GsSortState *s, const struct GsRun *runs, int n,
							 int written, bool any_lossy,
							 uint32 max_tuple_len);
extern TupleTableSlot *gs_sort_get(GsSortState *s, bool forward,
								   TupleTableSlot *slot);
extern void gs_sort_markpos(GsSortState *s);
extern void gs_sort_restorepos(GsSortState *s);
extern bool gs_sort_can_rewind(GsSortState *s);
extern void gs_sort_rewind(GsSortState *s);
extern void gs_sort_report(GsSortState *s, GsSortReport *r);
extern void gs_sort_end(GsSortState *s);

/*
 * Sorts of other rows than the executor's: a btree build's index tuples,
 * CLUSTER's heap tuples.  The variant encodes the keys itself and says how
 * two rows compare where the keys cannot tell; the sort state does all
 * the rest (memory, engine, runs, merges) as for ORDER BY.
 *
 * A row is kept in a MinimalTuple-shaped envelope (its t_len covers the
 * whole, so runs and merges move it as any row): one byte of flags the
 * variant owns at GS_ROW_FLAGS_OFF, then the variant's bytes at
 * GS_ROW_DATA_OFF, MAXALIGN'd.  Both survive runs on disk.
 *
 * A key is key_bytes long.  Its first tie_bytes order the rows; the bytes
 * after them (an index's heap TID) order rows whose first part is equal,
 * and are compared only where that part is exact: where it is not (the
 * plan is not exact, or either row's encoding was lossy), compare(arg, a,
 * b) decides between rows whose first parts are equal, with a and b the
 * rows' data.
 */
#define GS_ROW_FLAGS_OFF	MINIMAL_TUPLE_DATA_OFFSET
#define GS_ROW_DATA_OFF		MAXALIGN(MINIMAL_TUPLE_DATA_OFFSET + 1)

typedef int (*GsRowCompareFn) (void *arg, const char *a, const char *b);

/*
 * Runs on disk hold as little of a row as the variant allows (see
 * gpusort_spill.h): key_derivable(arg, data) says whether a row's key can
 * be left out, and key_derive(arg, data, data_off, key) writes it again
 * from the row's data (at any alignment; data_off is where the data lies
 * in the envelope) and returns whether it is lossy; keep(arg, data) says how many bytes at
 * the start of the data a run must hold, the rest being zeros (a
 * MAXALIGN'd tuple's padding).  Each may be NULL (keys kept, every byte
 * written).  All three run on threads: they must not call PostgreSQL.
 *
 * thread_compare(arg, a, a_off, b, b_off), where not NULL, is compare's
 * order of rows whose first tie_bytes are equal as far as the columns
 * decide it (the bytes after tie_bytes decide the rest), from the rows'
 * data at any alignment (a and b; the offsets are data_off, as for
 * key_derive), on threads: it lets the final merge of rows with lossy keys
 * go on threads.  It is asked only of rows whose key_derivable said yes
 * (a run that kept some row's key is merged on the backend).
 */
typedef struct GsRowsDef
{
	int			key_bytes;
	int			tie_bytes;
	bool		exact;
	GsRowCompareFn compare;
	int			(*thread_compare) (void *arg, const char *a, size_t a_off,
								   const char *b, size_t b_off);
	void	   *arg;
	bool		(*key_derivable) (void *arg, const char *data);
	bool		(*key_derive) (void *arg, const char *data, size_t data_off,
							   char *key);
	size_t		(*keep) (void *arg, const char *data);

	/*
	 * The same said once for every row, so that the writer of runs calls
	 * nothing per row: key_always_derivable, key_derivable would say yes
	 * for every row; keep_len_mask != 0, keep is the uint16 at keep_len_off
	 * in the data, masked.
	 */
	bool		key_always_derivable;
	uint16		keep_len_off;
	uint16		keep_len_mask;
} GsRowsDef;

extern GsSortState *gs_sort_begin_rows(const GsRowsDef *def, int mem_kb,
									   double est_rows);
/*
 * Where gs_sort_row_add's row and its key go: returned by value (in two
 * registers), so that the caller's locals need no address (which cost a
 * serial index build a stack protector's check a row).
 */
typedef struct GsRowRoom
{
	char	   *row;
	char	   *key;
} GsRowRoom;

extern GsRowRoom gs_sort_row_add(GsSortState *s, Size len);
extern void gs_sort_row_lossy(GsSortState *s);
extern const char *gs_sort_next_row(GsSortState *s);
extern const char *const *gs_sort_next_rows(GsSortState *s, size_t *n,
											size_t *off);
extern double gs_sort_rows(GsSortState *s);
extern void gs_sort_set_memory(GsSortState *s, int mem_kb);

static inline uint8 *
gs_row_flags(const char *data)
{
	return (uint8 *) (data - GS_ROW_DATA_OFF + GS_ROW_FLAGS_OFF);
}

#endif							/* GPUSORT_EXEC_H */
