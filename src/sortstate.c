/*-------------------------------------------------------------------------
 *
 * sortstate.c
 *	  The sort state behind a GpuSort node: begin / put / perform / get /
 *	  mark / restore / rewind / end, shaped like PostgreSQL's tuplesort.
 *
 * Rows arrive one at a time.  Each is copied once into a block arena (no
 * palloc per row) and its normalized key is encoded once into a key buffer
 * that belongs to the engine (pinned host memory for the GPU engine).
 *
 * Rows in memory form a batch, cut into chunks of at most chunk_rows rows
 * (the GPU memory budget, gpusort.gpu_memory_limit).  A chunk is sorted by
 * the engine as soon as it is full, while the input goes on; rows whose
 * keys are equal are put in their final order with PostgreSQL's own
 * comparators when the key plan or a row's encoding was not exact.
 *
 * When the batch outgrows work_mem, its chunks are merged (a loser tree over
 * the normalized keys) into one sorted run on a logical tape -- PostgreSQL's
 * temporary files, counted against temp_file_limit and removed on error --
 * and the batch starts again.  At the end:
 *	 - no run was spilled: the chunks are merged in memory into an array of
 *	   row pointers in sorted order, and rows are emitted from it;
 *	 - otherwise the last batch is spilled too, runs are merged in passes of
 *	   at most merge_order runs until one merge can finish the sort, and that
 *	   final merge streams its rows to the caller -- or, when random access is
 *	   needed (backward scan, mark/restore, rewind), into a tuplestore that
 *	   is read instead.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include "access/htup_details.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/sortsupport.h"
#include "utils/tuplestore.h"

#include "gpusort_exec.h"
#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"

/*
 * Arena blocks start small (sorts of a few rows stay cheap) and double up
 * to a size where malloc overhead is negligible; tuples larger than a
 * quarter of the biggest block get a chunk of their own.
 */
#define ARENA_FIRST_BLOCK	(32 * 1024)
#define ARENA_MAX_BLOCK		(8 * 1024 * 1024)
#define ARENA_BIG_TUPLE		(ARENA_MAX_BLOCK / 4)

/* transparent huge page size on x86-64 and arm64 with 4 kB base pages */
#define HUGE_PAGE_BYTES		(2 * 1024 * 1024)

/*
 * Rows a batch takes before it may be spilled, whatever work_mem says:
 * spilling runs of a row or two costs far more than the memory it saves.
 */
#define MIN_BATCH_ROWS		64

/*
 * Host memory an engine takes per row while it sorts, over the keys and the
 * permutation: the CPU engine's two 12-byte record buffers.  Reported in
 * EXPLAIN's peak memory; it is not counted against work_mem (like the
 * stack of PostgreSQL's own quicksort).
 */
#define ENGINE_SCRATCH_PER_ROW	24

/* smallest chunk, however small the GPU memory budget */
#define MIN_CHUNK_ROWS		256

/* rows emitted ahead of the current one whose memory is prefetched */
#define PREFETCH_DISTANCE	8

/* rows ahead whose pointer is prefetched while gathering sorted order */
#define GATHER_PREFETCH		16

/*
 * Gathering row pointers into sorted order (one random read a row) is
 * spread over gpusort.cpu_threads threads from this many rows on; below,
 * starting threads costs more than it saves.
 */
#define PAR_GATHER_MIN_ROWS	(1024 * 1024)

/*
 * The in-memory chunk merge on threads (gs_par_merge_chunks) cuts the keys
 * into this many ranges a thread, so that uneven ranges even out (18
 * chunks of 50M int8 rows on the H100: 0.9 s on 4 threads, against
 * 1.8-2.5 s on the backend); and
 * takes at most this many chunks (a tree of that size on each thread's
 * stack), from PAR_MERGE_MIN_ROWS rows on: below, starting threads costs
 * about what merging on the backend does.
 */
#define PAR_MERGE_RANGES_PER_THREAD	8
#define GS_PAR_MERGE_MAX_CHUNKS	256
#define PAR_MERGE_MIN_ROWS	65536

/* how often long loops of ours check for interrupts (rows) */
#define INTERRUPT_INTERVAL	65536

/* and the tie-break, in comparisons (each may be a strcoll) */
#define COMPARE_INTERRUPT_INTERVAL 1024

/*
 * Reading a run from disk: each run being merged gets a read buffer of
 * work_mem / merge order, at least MERGE_MIN_BUFFER.  So work_mem bounds
 * the merge order: 4MB gives 128 runs per pass; each run of a 4MB sort
 * holds ~4MB, so one pass merges ~512MB and two passes ~64GB.  Below
 * MERGE_MIN_ORDER runs per pass the passes themselves cost more than the
 * few buffers over a tiny work_mem.  Larger buffers than MERGE_MAX_BUFFER
 * buy nothing on sequential temp-file reads.  With 128 runs (50M rows,
 * work_mem 64MB, H100 machine) reading rows straight from PostgreSQL's tape
 * buffers took a cache miss a row and the final merge ~13 s under EXPLAIN
 * ANALYZE; through a read buffer per run with a prefetch of each run's next
 * row, 6.7 s.  What remained was one core doing all of the merge, and one
 * core writing every run (4.5-6.3 s for the 3.1 GB of those runs): hence
 * the threads below.
 *
 * Writing a run: the batch's rows are split into up to gpusort.cpu_threads
 * slices of at least SPILL_PART_MIN_ROWS rows (below that a thread's start
 * costs about what its slice does), each written by a thread through a
 * SPILL_WRITE_BUFFER buffer (one system call per buffer; 32 times BufFile's
 * 8 kB), smaller (down to SPILL_WRITE_BUFFER_MIN) where that would be more
 * than a sixteenth of the batch's memory.  From the second batch on the write runs in the background while
 * the next batch loads (gs_spill_batch).  On the H100 (50M rows, work_mem
 * 64MB, 4 threads) the backend then waited 3-12 ms in all for the 3.1 GB
 * of runs, where writing them on its own core had taken 4.5-6.3 s.
 *
 * The final merge, when the keys alone decide the order (exact keys) and
 * gpusort.cpu_threads allows: the runs are split into that many groups,
 * each merged by a thread into a stream of rows (spill.c), and the backend
 * merges the streams.  Half of work_mem goes to the streams' blocks, half
 * to the runs' read buffers.  Same machine and sort: the final merge took
 * 3.1-3.6 s as rows were returned, of which the backend waited 0.15-0.25 s
 * for the streams (0.04 s with 8 threads), against 6.7 s merged on the
 * backend alone.
 *
 * Chunks in flight: two (GS_MAX_INFLIGHT, the engine API's limit).  With
 * 18 chunks of 50M int8 keys on the H100 the backend waited 56 ms in all
 * for 190 ms of engine work (transfers and sorts), so a second chunk in
 * flight already hides nearly all of it; a third would cost another chunk's
 * device buffers for at most those 56 ms.
 */
#define MERGE_MIN_BUFFER	(4 * BLCKSZ)
#define MERGE_MIN_ORDER		6
#define MERGE_MAX_BUFFER	(1024 * 1024)
#define SPILL_WRITE_BUFFER	(256 * 1024)
#define SPILL_WRITE_BUFFER_MIN	(16 * 1024)
#define SPILL_PART_MIN_ROWS	16384

typedef enum GsStatus
{
	GS_LOADING,					/* taking rows */
	GS_SORTED,					/* in-memory result in sorted[] */
	GS_MERGING,					/* streaming the final merge of runs */
	GS_STORED					/* final merge materialised in a tuplestore */
} GsStatus;

/* a sorted chunk of the in-memory batch */
typedef struct GsChunk
{
	size_t		base;			/* first row (batch row index) */
	size_t		nrows;
	uint32	   *perm;			/* batch row indexes in sorted order; keys
								 * base.. base+nrows-1 are sorted in place */
	int			job;			/* slot in jobs[] while the engine sorts it,
								 * else -1 */
	bool		keys_out;		/* the engine returns the keys sorted */
} GsChunk;

/*
 * An arena block.  Blocks outlive a batch: the next batch after a spill
 * fills them again, so their pages are faulted in once per sort rather than
 * once per batch (which costs as much as copying the rows).
 */
typedef struct GsBlock
{
	char	   *ptr;
	size_t		size;
} GsBlock;

/* one input of a merge: an in-memory chunk, a run on disk, or a stream */
typedef struct GsSource
{
	bool		eof;
	uint64		k0;				/* the key's first word (a 4-byte key
								 * widened); PG_UINT64_MAX at eof */
	const char *key;			/* current row */
	bool		lossy;
	MinimalTuple tup;			/* NULL for a chunk row not fetched (!want_tup) */
	/* chunk */
	GsChunk    *chunk;
	size_t		pos;
	uint32		row;			/* batch row of the current row */
	bool		want_tup;		/* fetch tuples as rows come (else lazily) */
	/* run on disk */
	GsRun	   *run;
	size_t		left;			/* rows not yet read */
	int64		fpos;			/* file offset of the next bytes to read */
	int64		fend;			/* end of the run */
	int64		given_back;		/* disk space before this was given back */
	char	   *keybuf;			/* header and key of the current row */
	char	   *tupbuf;			/* MAXALIGNed */
	size_t		tupbuf_size;
	char	   *rbuf;			/* read-ahead: rbuf[rpos .. rlen) is the
								 * run's next bytes */
	size_t		rbuf_size;
	size_t		rpos;
	size_t		rlen;
	/* stream: runs merged by a thread (spill.c) */
	GsStream   *stream;
} GsSource;

typedef struct GsMerge
{
	GsSortState *s;
	int			nsrc;
	GsSource   *src;
	int		   *tree;			/* tree[0] winner, tree[1..nsrc-1] losers */
	uint64	   *tree_k0;		/* each loser's first key word, so that a
								 * replay reads only the tree */
	int			pending;		/* source to advance before the next row,
								 * -1 if none */
} GsMerge;

/*
 * What a batch of rows in memory owns beyond the sort state's cursors.
 * Once writing runs overlaps loading, two batches take turns: one is
 * written out by threads while the next is loaded (see gs_spill_batch).
 */
typedef struct GsBatch
{
	MinimalTuple *tuples;
	char	   *keys;
	uint64	   *lossy;
	size_t		cap;
	GsChunk    *chunks;
	int			nchunks;
	int			chunks_cap;
	GsBlock    *blocks;
	int			nblocks;
	int			blocks_cap;
	MemoryContext tupcxt;
} GsBatch;

typedef struct GsSpillJob GsSpillJob;

struct GsSortState
{
	MemoryContext cxt;			/* owns everything below */
	MemoryContext tupcxt;		/* tuples too big for an arena block */
	MemoryContext mergecxt;		/* merge buffers */
	GsStatus	status;

	/* sort definition */
	TupleDesc	tupdesc;
	int			nkeys;
	AttrNumber *attnums;
	Oid		   *sortops;
	Oid		   *collations;
	bool	   *nulls_first;
	int			maxattno;
	int			work_mem_kb;
	bool		random_access;

	/* keys */
	GsKeyPlan  *kp;
	int			key_bytes;
	bool		exact;			/* static part: every column fully encoded */
	bool		any_lossy;		/* some row's encoding lost information */
	uint64	   *lossy;			/* bit per batch row */
	SortSupport ssup;			/* PostgreSQL's comparators, for ties */

	/* engine */
	GsEngine   *keys_engine;	/* owner of the key buffer */
	GsEngine   *sort_engine;	/* the one that sorted (the last chunk) */
	char	   *fallback;

	/* the in-memory batch */
	size_t		nrows;			/* rows in the batch */
	size_t		cap;			/* rows the arrays below have room for */
	MinimalTuple *tuples;		/* in arrival order */
	char	   *keys;			/* cap * key_bytes, engine-owned */
	size_t		chunk_rows;		/* GPU budget in rows; 0 = no limit */
	size_t		chunk_start;	/* first row of the open chunk */
	GsChunk    *chunks;
	int			nchunks;
	int			chunks_cap;
	int			first_pending;	/* chunks from here on are being sorted */
	GsSortJob	jobs[GS_MAX_INFLIGHT];	/* never move: engine.c links them */
	MinimalTuple *sorted;		/* GS_SORTED: rows in sorted order */
	size_t		nsorted;

	/* arena */
	char	   *blk_free;
	size_t		blk_left;
	size_t		next_blk_size;
	int64		arena_bytes;	/* arena memory this batch has taken */
	GsBlock    *blocks;			/* every arena block, kept across batches */
	int			nblocks;
	int			blocks_cap;
	int			blk_next;		/* first block this batch has not used */
	int64		chunk_bytes;	/* chunk permutations */
	int64		mem_limit;
	int64		batch_limit;	/* for the batch being loaded */
	int64		mem_peak;

	/* writing runs in the background (see gs_spill_batch) */
	bool		overlap;
	GsBatch		spare;			/* the batch not being loaded */
	GsSpillJob *writing;		/* the spare's write in progress, or NULL */
	int64		spare_bytes;	/* memory the spare holds meanwhile */
	GsTask	   *write_task;

	/* runs on disk */
	GsTempFile *file;
	uint32		max_tuple_len;	/* of any row so far */
	GsRun	   *runs;
	int			nruns;
	int			runs_cap;
	int			merge_order;
	GsMerge    *merge;			/* GS_MERGING */
	Tuplestorestate *store;		/* GS_STORED */
	TupleTableSlot *store_slot;

	/* reading GS_SORTED */
	size_t		current;		/* as in tuplesort: next row to return */
	bool		eof_reached;
	size_t		markpos;
	bool		markeof;

	/* report */
	double		total_rows;
	int			total_chunks;
	int			total_runs;
	int			merge_passes;
	int			nstreams;		/* threads of the final merge */
	double		load_ms;
	double		sort_ms;		/* submitting and waiting for the engine */
	double		engine_ms;		/* the engine's own work (transfers and
								 * sort), maybe in the background */
	double		transfer_ms;
	double		tiebreak_ms;
	double		tiebreak_rows;
	uint64		ncompares;
	double		spill_ms;
	double		spill_wait_ms;	/* waiting for background writes */
	double		merge_ms;
	double		merge_wait_ms;	/* waiting for the merge's threads */
	instr_time	stream_start;	/* the final merge began returning rows */
	bool		merge_timed;	/* and its time was taken */
	instr_time	load_start;
	bool		load_started;
};

static void gs_merge_chunks_to_array(GsSortState *s);
static void gs_merge_chunk_rows(GsSortState *s, uint32 *rows, uint32 *keyidx);
static void gs_spill_batch(GsSortState *s);

/*
 * Ask for transparent huge pages on a large fresh allocation: a sort touches
 * all of its memory once, and with 4 kB pages the page faults alone cost as
 * much as copying the rows.  Only the 2 MB-aligned interior can be advised.
 */
static void
gs_advise_huge(void *p, size_t len)
{
#ifdef MADV_HUGEPAGE
	uintptr_t	start = TYPEALIGN(HUGE_PAGE_BYTES, (uintptr_t) p);
	uintptr_t	end = TYPEALIGN_DOWN(HUGE_PAGE_BYTES, (uintptr_t) p + len);

	if (end > start)
		(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
#endif
}

static inline double
gs_elapsed_ms(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_MILLISEC(now);
}

static int64
gs_mem_used(GsSortState *s)
{
	return s->arena_bytes + s->chunk_bytes +
		(int64) s->cap * (sizeof(MinimalTuple) + s->key_bytes) +
		(int64) (s->cap / 64 + 1) * sizeof(uint64);
}

static void
gs_note_mem(GsSortState *s, int64 extra)
{
	int64		m = gs_mem_used(s) + extra + (s->writing ? s->spare_bytes : 0);

	if (m > s->mem_peak)
		s->mem_peak = m;
}

/*
 * Compare the words of two keys after the first (the merge compares the
 * first words itself, see gs_key_word0); only keys wider than 8 bytes have
 * such words.  Words are native uint64, most significant first.
 */
static inline int
gs_key_cmp_rest(const char *a, const char *b, int key_bytes)
{
	int			w;

	for (w = 8; w < key_bytes; w += 8)
	{
		uint64		x;
		uint64		y;

		memcpy(&x, a + w, 8);
		memcpy(&y, b + w, 8);
		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

/* PostgreSQL's order of two rows, over every sort column */
static int
gs_cmp_tuples(GsSortState *s, MinimalTuple ta, MinimalTuple tb)
{
	HeapTupleData ha;
	HeapTupleData hb;
	int			i;

	ha.t_len = ta->t_len + MINIMAL_TUPLE_OFFSET;
	ha.t_data = (HeapTupleHeader) ((char *) ta - MINIMAL_TUPLE_OFFSET);
	hb.t_len = tb->t_len + MINIMAL_TUPLE_OFFSET;
	hb.t_data = (HeapTupleHeader) ((char *) tb - MINIMAL_TUPLE_OFFSET);

	for (i = 0; i < s->nkeys; i++)
	{
		SortSupport ssup = &s->ssup[i];
		bool		na;
		bool		nb;
		Datum		da = heap_getattr(&ha, ssup->ssup_attno, s->tupdesc, &na);
		Datum		db = heap_getattr(&hb, ssup->ssup_attno, s->tupdesc, &nb);
		int			c = ApplySortComparator(da, na, db, nb, ssup);

		if (c != 0)
			return c;
	}
	return 0;
}

/*
 * qsort_arg comparator over batch row indexes.  A long run of equal keys
 * under a slow collation can take a while, so it checks for interrupts now
 * and then (leaving qsort_arg by longjmp is safe: it holds no resources).
 */
static int
gs_cmp_rows(const void *a, const void *b, void *arg)
{
	GsSortState *s = (GsSortState *) arg;

	if (++s->ncompares % COMPARE_INTERRUPT_INTERVAL == 0)
		CHECK_FOR_INTERRUPTS();

	return gs_cmp_tuples(s, s->tuples[*(const uint32 *) a],
						 s->tuples[*(const uint32 *) b]);
}

static inline bool
gs_lossy_bit(const uint64 *bits, size_t row)
{
	return (bits[row / 64] >> (row % 64)) & 1;
}

static inline bool
gs_row_lossy(GsSortState *s, size_t row)
{
	return gs_lossy_bit(s->lossy, row);
}

GsSortState *
gs_sort_begin(TupleDesc tupdesc, int nkeys, const AttrNumber *attnums,
			  const Oid *sortops, const Oid *collations,
			  const bool *nulls_first, int work_mem_kb, bool random_access,
			  double est_rows)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	GsSortState *s;
	int			i;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "GpuSort",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);

	s = palloc0(sizeof(GsSortState));
	s->cxt = cxt;
	s->tupcxt = AllocSetContextCreate(cxt, "GpuSort tuples",
									  ALLOCSET_DEFAULT_SIZES);
	s->mergecxt = AllocSetContextCreate(cxt, "GpuSort merge",
										ALLOCSET_DEFAULT_SIZES);
	s->status = GS_LOADING;
	s->tupdesc = tupdesc;
	s->nkeys = nkeys;
	s->attnums = palloc(nkeys * sizeof(AttrNumber));
	s->sortops = palloc(nkeys * sizeof(Oid));
	s->collations = palloc(nkeys * sizeof(Oid));
	s->nulls_first = palloc(nkeys * sizeof(bool));
	memcpy(s->attnums, attnums, nkeys * sizeof(AttrNumber));
	memcpy(s->sortops, sortops, nkeys * sizeof(Oid));
	memcpy(s->collations, collations, nkeys * sizeof(Oid));
	memcpy(s->nulls_first, nulls_first, nkeys * sizeof(bool));
	for (i = 0; i < nkeys; i++)
		s->maxattno = Max(s->maxattno, attnums[i]);
	s->work_mem_kb = work_mem_kb;
	s->mem_limit = (int64) work_mem_kb * 1024;
	s->batch_limit = s->mem_limit;
	s->random_access = random_access;

	s->kp = gs_keyplan_create(nkeys, attnums, sortops, collations,
							  nulls_first, tupdesc, gpusort_max_key_bytes);
	if (s->kp == NULL)
		elog(ERROR, "gpusort: leading sort key is not encodable");
	s->key_bytes = gs_keyplan_key_bytes(s->kp);
	s->exact = gs_keyplan_exact(s->kp);

	/* PostgreSQL's comparators, for runs of equal keys */
	s->ssup = palloc0(nkeys * sizeof(SortSupportData));
	for (i = 0; i < nkeys; i++)
	{
		SortSupport ssup = &s->ssup[i];

		ssup->ssup_cxt = cxt;
		ssup->ssup_collation = collations[i];
		ssup->ssup_nulls_first = nulls_first[i];
		ssup->ssup_attno = attnums[i];
		ssup->abbreviate = false;
		PrepareSortSupportFromOrderingOp(sortops[i], ssup);
	}

	/* the engine that owns the key buffer; a chunk may still go elsewhere */
	s->keys_engine = gs_engine_choose(est_rows, NULL);

	/*
	 * The GPU memory budget, in rows of a chunk: the device holds keys and
	 * row indexes twice (input and output of a partitioning pass).
	 */
	{
		int64		budget = (int64) gpusort_gpu_memory_limit_kb * 1024;

		if (budget == 0 && s->keys_engine->is_gpu)
			budget = (int64) (s->keys_engine->info.free_mem / 2);
		if (budget > 0)
		{
			int64		rows = budget / (2 * (s->key_bytes + sizeof(uint32)));

			s->chunk_rows = (size_t) Max(rows, MIN_CHUNK_ROWS);
		}
	}

	/*
	 * Size the arrays from the estimate, within work_mem: a row costs its
	 * pointer and key here plus its tuple in the arena, so the arrays get
	 * at most half of work_mem up front.
	 */
	{
		double		per_row = sizeof(MinimalTuple) + s->key_bytes;
		double		fit = (double) s->mem_limit / 2 / per_row;
		double		want = Min(est_rows * 1.1 + 16, fit);

		want = Min(want, (double) GS_MAX_ROWS);
		s->cap = (size_t) Max(want, (double) MIN_BATCH_ROWS);
	}
	s->tuples = MemoryContextAllocHuge(cxt, s->cap * sizeof(MinimalTuple));
	gs_advise_huge(s->tuples, s->cap * sizeof(MinimalTuple));
	s->keys = gs_keybuf_alloc(s->keys_engine, s->cap * s->key_bytes, cxt);
	s->lossy = MemoryContextAllocHuge(cxt, (s->cap / 64 + 1) * sizeof(uint64));
	memset(s->lossy, 0, (s->cap / 64 + 1) * sizeof(uint64));
	s->next_blk_size = Min(ARENA_FIRST_BLOCK,
						   TYPEALIGN(1024, s->mem_limit / 8));

	/* merge order: as many runs as work_mem has read buffers for */
	s->merge_order = (int) Max(MERGE_MIN_ORDER,
							   Min(s->mem_limit / MERGE_MIN_BUFFER, 1024));

	MemoryContextSwitchTo(oldcxt);
	return s;
}

/* make room for one more row; false if that would break work_mem */
static bool
gs_grow(GsSortState *s)
{
	size_t		newcap;
	size_t		oldwords = s->cap / 64 + 1;
	size_t		newwords;

	if (s->cap >= GS_MAX_ROWS)
		return false;
	newcap = Min(s->cap * 2, GS_MAX_ROWS);
	if (s->arena_bytes + s->chunk_bytes +
		(int64) newcap * (sizeof(MinimalTuple) + s->key_bytes) > s->batch_limit)
	{
		/* not doubling: grow by what work_mem still allows, if useful */
		int64		room = s->batch_limit - gs_mem_used(s);
		size_t		more = room > 0 ?
			(size_t) (room / (sizeof(MinimalTuple) + s->key_bytes + 1)) : 0;

		if (more < s->cap / 8 + 16)
			return false;
		newcap = Min(s->cap + more, GS_MAX_ROWS);
	}

	s->tuples = repalloc_huge(s->tuples, newcap * sizeof(MinimalTuple));
	s->keys = gs_keybuf_grow(s->keys_engine, s->keys,
							 s->nrows * s->key_bytes,
							 newcap * s->key_bytes);
	newwords = newcap / 64 + 1;
	s->lossy = repalloc_huge(s->lossy, newwords * sizeof(uint64));
	memset(s->lossy + oldwords, 0, (newwords - oldwords) * sizeof(uint64));
	s->cap = newcap;
	gs_note_mem(s, 0);
	return true;
}

static char *
gs_arena_alloc(GsSortState *s, Size len)
{
	char	   *p;

	len = MAXALIGN(len);
	if (len > ARENA_BIG_TUPLE)
	{
		s->arena_bytes += len;
		return MemoryContextAllocHuge(s->tupcxt, len);
	}
	if (len > s->blk_left)
	{
		GsBlock    *b = NULL;

		/* a block an earlier batch used, if one is big enough */
		while (s->blk_next < s->nblocks)
		{
			b = &s->blocks[s->blk_next++];
			if (b->size >= len)
				break;
			b = NULL;
		}
		if (b == NULL)
		{
			size_t		blk = Max(s->next_blk_size, len);

			if (s->nblocks == s->blocks_cap)
			{
				s->blocks_cap = Max(16, s->blocks_cap * 2);
				s->blocks = s->blocks ?
					repalloc(s->blocks, s->blocks_cap * sizeof(GsBlock)) :
					MemoryContextAlloc(s->cxt, s->blocks_cap * sizeof(GsBlock));
			}
			b = &s->blocks[s->nblocks++];
			b->ptr = MemoryContextAlloc(s->cxt, blk);
			b->size = blk;
			gs_advise_huge(b->ptr, blk);
			s->blk_next = s->nblocks;
			/*
			 * Double, up to the largest block, and to a sixteenth of the
			 * batch's memory: the block that crosses the limit is taken
			 * whole, so that bounds how far a batch overshoots work_mem.
			 */
			if (s->next_blk_size < ARENA_MAX_BLOCK &&
				(int64) s->next_blk_size * 2 <= Max(s->batch_limit / 16,
													ARENA_FIRST_BLOCK))
				s->next_blk_size *= 2;
		}
		s->blk_free = b->ptr;
		s->blk_left = b->size;
		s->arena_bytes += b->size;
		gs_note_mem(s, 0);
	}
	p = s->blk_free;
	s->blk_free += len;
	s->blk_left -= len;
	return p;
}

/* copy the slot's row into the arena as a MinimalTuple */
static MinimalTuple
gs_copy_row(GsSortState *s, TupleTableSlot *slot)
{
	MinimalTuple mt;
	bool		should_free;

	if (TTS_IS_MINIMALTUPLE(slot))
	{
		MinimalTuple src = ExecFetchSlotMinimalTuple(slot, &should_free);

		mt = (MinimalTuple) gs_arena_alloc(s, src->t_len);
		memcpy(mt, src, src->t_len);
		if (should_free)
			pfree(src);
		return mt;
	}

	if (TTS_IS_HEAPTUPLE(slot) || TTS_IS_BUFFERTUPLE(slot))
	{
		HeapTuple	ht = ExecFetchSlotHeapTuple(slot, false, &should_free);

		/*
		 * A stored heap tuple can have fewer attributes than the descriptor
		 * (columns added later with a default); form those from the
		 * deformed values below instead.
		 */
		if (HeapTupleHeaderGetNatts(ht->t_data) >= s->tupdesc->natts)
		{
			Size		len = ht->t_len - MINIMAL_TUPLE_OFFSET;

			mt = (MinimalTuple) gs_arena_alloc(s, len);
			memcpy(mt, (char *) ht->t_data + MINIMAL_TUPLE_OFFSET, len);
			mt->t_len = len;
			if (should_free)
				heap_freetuple(ht);
			return mt;
		}
		if (should_free)
			heap_freetuple(ht);
	}

	/* virtual slot (or short heap tuple): form from the values */
	{
		TupleDesc	desc = slot->tts_tupleDescriptor;
		int			natts = desc->natts;
		bool		hasnull = false;
		Size		hoff;
		Size		data_len;
		int			i;

		slot_getallattrs(slot);
		for (i = 0; i < natts; i++)
		{
			if (slot->tts_isnull[i])
			{
				hasnull = true;
				break;
			}
		}
		hoff = SizeofMinimalTupleHeader;
		if (hasnull)
			hoff += BITMAPLEN(natts);
		hoff = MAXALIGN(hoff);
		data_len = heap_compute_data_size(desc, slot->tts_values,
										  slot->tts_isnull);
		mt = (MinimalTuple) gs_arena_alloc(s, hoff + data_len);
		memset(mt, 0, hoff + data_len);
		mt->t_len = hoff + data_len;
		HeapTupleHeaderSetNatts(mt, natts);
		mt->t_hoff = hoff + MINIMAL_TUPLE_OFFSET;
		heap_fill_tuple(desc, slot->tts_values, slot->tts_isnull,
						(char *) mt + hoff, data_len, &mt->t_infomask,
						hasnull ? mt->t_bits : NULL);
		return mt;
	}
}

/*
 * Put runs of equal keys of a sorted chunk in PostgreSQL's order.  The
 * chunk's keys are sorted in place, so a run is a stretch of equal
 * neighbours.  A run needs the comparators only when the key plan is not
 * exact or one of its rows was encoded lossily.
 */
static void
gs_tiebreak(GsSortState *s, GsChunk *c)
{
	size_t		kb = s->key_bytes;
	const char *keys = s->keys + c->base * kb;
	size_t		n = c->nrows;
	size_t		i = 0;
	size_t		checked = 0;

	while (i < n)
	{
		size_t		j = i + 1;
		const char *ki = keys + i * kb;

		while (j < n && memcmp(ki, keys + j * kb, kb) == 0)
			j++;
		if (j - i > 1)
		{
			bool		need = !s->exact;
			size_t		k;

			for (k = i; !need && k < j; k++)
				need = gs_row_lossy(s, c->perm[k]);
			if (need)
			{
				qsort_arg(c->perm + i, j - i, sizeof(uint32), gs_cmp_rows, s);
				s->tiebreak_rows += j - i;
			}
		}
		checked += j - i;
		if (checked >= INTERRUPT_INTERVAL)
		{
			CHECK_FOR_INTERRUPTS();
			checked = 0;
		}
		i = j;
	}
}

/*
 * The engine is done with chunk c: take its permutation and put runs of
 * equal keys in PostgreSQL's order.
 */
static void
gs_finish_chunk(GsSortState *s, GsChunk *c)
{
	GsSortJob  *job = &s->jobs[c->job];
	bool		need_ties = !s->exact || s->any_lossy;
	gs_sort_stats st;
	instr_time	t0;
	size_t		i;

	INSTR_TIME_SET_CURRENT(t0);
	s->sort_engine = gs_engine_wait(job, &st, &s->fallback);
	c->job = -1;
	s->transfer_ms += st.upload_ms + st.download_ms;
	s->engine_ms += st.upload_ms + st.sort_ms + st.download_ms;
	for (i = 0; i < c->nrows; i++)
		c->perm[i] += (uint32) c->base;
	s->sort_ms += gs_elapsed_ms(t0);

	/* the keys are in sorted order only if the engine was asked for them */
	if (need_ties && c->keys_out)
	{
		INSTR_TIME_SET_CURRENT(t0);
		gs_tiebreak(s, c);
		s->tiebreak_ms += gs_elapsed_ms(t0);
	}
}

/* wait for every chunk the engine is still sorting */
static void
gs_finish_chunks(GsSortState *s)
{
	while (s->first_pending < s->nchunks)
	{
		GsChunk    *c = &s->chunks[s->first_pending];

		if (c->job >= 0)
			gs_finish_chunk(s, c);
		s->first_pending++;
	}
}

/*
 * Hand the open chunk (rows chunk_start .. nrows-1) to the engine.  The
 * engine sorts it in the background where it can, while rows for the next
 * chunk come in; at most GS_MAX_INFLIGHT chunks are being sorted at once.
 * With more than one chunk to merge later, or ties to break, the keys must
 * come back sorted.
 */
static void
gs_close_chunk(GsSortState *s, bool keys_needed)
{
	GsChunk    *c;
	size_t		n = s->nrows - s->chunk_start;
	int			slot;

	if (n == 0)
		return;
	/* the oldest chunk in flight must be done before its slot is reused */
	if (s->nchunks - s->first_pending >= GS_MAX_INFLIGHT)
	{
		GsChunk    *old = &s->chunks[s->first_pending];

		if (old->job >= 0)
			gs_finish_chunk(s, old);
		s->first_pending++;
	}
	if (s->nchunks == s->chunks_cap)
	{
		s->chunks_cap = Max(8, s->chunks_cap * 2);
		s->chunks = s->chunks ?
			repalloc(s->chunks, s->chunks_cap * sizeof(GsChunk)) :
			MemoryContextAlloc(s->cxt, s->chunks_cap * sizeof(GsChunk));
	}
	slot = s->nchunks % GS_MAX_INFLIGHT;
	c = &s->chunks[s->nchunks++];
	c->base = s->chunk_start;
	c->nrows = n;
	c->job = -1;
	c->keys_out = false;
	c->perm = MemoryContextAllocHuge(s->cxt, n * sizeof(uint32));
	s->chunk_bytes += n * sizeof(uint32);
	/* the CPU engine's scratch records while it sorts (see engine_cpu.c) */
	gs_note_mem(s, (int64) n * ENGINE_SCRATCH_PER_ROW);
	s->total_chunks++;

	if (n > 1)
	{
		bool		need_ties = !s->exact || s->any_lossy;
		const char *why = NULL;
		GsEngine   *e;
		instr_time	t0;

		/*
		 * Whether the GPU is worth it is a question about the whole sort:
		 * a chunk of a large one goes there however small it is.
		 */
		e = gs_engine_choose(Max((double) n, s->total_rows), &why);
		if (why && s->fallback == NULL)
			s->fallback = pstrdup(why);
		c->keys_out = need_ties || keys_needed;
		c->job = slot;
		INSTR_TIME_SET_CURRENT(t0);
		gs_engine_submit(&s->jobs[slot], e,
						 s->keys + c->base * s->key_bytes, n, s->key_bytes,
						 c->perm, c->keys_out ? GS_SORT_KEYS_OUT : 0);
		s->sort_ms += gs_elapsed_ms(t0);
	}
	else
	{
		c->perm[0] = (uint32) c->base;
		if (s->sort_engine == NULL)
			s->sort_engine = s->keys_engine;
	}
	s->chunk_start = s->nrows;
}

void
gs_sort_put(GsSortState *s, TupleTableSlot *slot)
{
	size_t		n;

	Assert(s->status == GS_LOADING);
	if (!s->load_started)
	{
		INSTR_TIME_SET_CURRENT(s->load_start);
		s->load_started = true;
	}

	if (s->nrows == s->cap)
	{
		/* the engine must be done with the key buffer before it moves */
		gs_finish_chunks(s);
		if (!gs_grow(s))
			gs_spill_batch(s);
	}

	n = s->nrows;
	slot_getsomeattrs(slot, s->maxattno);
	if (gs_encode_key(s->kp, slot->tts_values, slot->tts_isnull,
					  s->keys + n * s->key_bytes))
	{
		s->lossy[n / 64] |= UINT64CONST(1) << (n % 64);
		s->any_lossy = true;
	}
	s->tuples[n] = gs_copy_row(s, slot);
	s->max_tuple_len = Max(s->max_tuple_len, s->tuples[n]->t_len);
	s->nrows = n + 1;
	s->total_rows += 1;

	if (s->chunk_rows > 0 && s->nrows - s->chunk_start >= s->chunk_rows)
		gs_close_chunk(s, true);

	if (gs_mem_used(s) > s->batch_limit && s->nrows >= MIN_BATCH_ROWS)
		gs_spill_batch(s);
}

/* ---------------------------------------------------------------------
 * Merging: a loser tree over sources (sorted chunks in memory, or runs on
 * tape), ordered by normalized key and, between equal keys that need it,
 * PostgreSQL's comparators.
 * ---------------------------------------------------------------------
 */

/*
 * Rows taken in sorted order have their tuples scattered over the arena:
 * prefetch the pointer of a row some way ahead of row i of order[], then
 * the tuple of a nearer one (whose pointer came in by now).
 */
static inline void
gs_prefetch_row(GsSortState *s, const uint32 *order, size_t i, size_t n)
{
	if (i + GATHER_PREFETCH < n)
		__builtin_prefetch(&s->tuples[order[i + GATHER_PREFETCH]]);
	if (i + PREFETCH_DISTANCE < n)
		__builtin_prefetch(s->tuples[order[i + PREFETCH_DISTANCE]]);
}


static inline void
gs_source_eof(GsSource *src)
{
	src->eof = true;
	src->k0 = PG_UINT64_MAX;
}

/* read up to len more bytes of a source's run into dst; how many were read */
static size_t
gs_source_read(GsSortState *s, GsSource *src, char *dst, size_t len)
{
	size_t		n = (size_t) Min((int64) len, src->fend - src->fpos);
	int			err;

	if (n == 0)
		return 0;
	err = gs_temp_pread(s->file, dst, n, src->fpos);
	if (err)
		gs_temp_error(s->file, err, false);
	src->fpos += n;
	return n;
}

/*
 * Make the read-ahead hold at least need (<= rbuf_size) bytes; false if the
 * run ends before.  Reading a run through a buffer of its own lets the
 * merge prefetch each run's next row.  What was read before the buffer's
 * bytes is not needed again: its disk space is given back.
 */
static bool
gs_source_fill(GsSortState *s, GsSource *src, size_t need)
{
	size_t		have = src->rlen - src->rpos;

	if (likely(have >= need))
		return true;
	if (have > 0)
		memmove(src->rbuf, src->rbuf + src->rpos, have);
	src->rpos = 0;
	src->rlen = have;
	src->rlen += gs_source_read(s, src, src->rbuf + have,
								src->rbuf_size - have);
	src->given_back = gs_temp_discard(s->file, src->given_back,
									  src->fpos - src->rlen, false);
	return src->rlen >= need;
}

static void
gs_source_read_run(GsSortState *s, GsSource *src)
{
	size_t		headlen = TAPE_ROW_HDR + s->key_bytes;
	uint32		word;
	uint32		len;
	size_t		body;

	if (src->left == 0)
	{
		/* the run is read: all of its space can go */
		src->given_back = gs_temp_discard(s->file, src->given_back,
										  src->fend, true);
		gs_source_eof(src);
		return;
	}
	src->left--;
	/* keybuf holds the row's header and key (see gs_run_write) */
	if (!gs_source_fill(s, src, headlen))
		elog(ERROR, "gpusort: unexpected end of a sorted run");
	memcpy(src->keybuf, src->rbuf + src->rpos, headlen);
	src->rpos += headlen;
	memcpy(&word, src->keybuf, sizeof(uint32));
	len = word & ~TAPE_LOSSY_BIT;
	body = len - MINIMAL_TUPLE_DATA_OFFSET;
	if (len > src->tupbuf_size)
	{
		size_t		sz = Max(len, src->tupbuf_size * 2);

		src->tupbuf = MemoryContextAllocHuge(s->mergecxt, sz);
		src->tupbuf_size = sz;
	}
	if (body <= src->rbuf_size)
	{
		if (!gs_source_fill(s, src, body))
			elog(ERROR, "gpusort: unexpected end of a sorted run");
		memcpy(src->tupbuf + MINIMAL_TUPLE_DATA_OFFSET,
			   src->rbuf + src->rpos, body);
		src->rpos += body;
	}
	else
	{
		/* larger than the read-ahead: what it holds, then the rest */
		size_t		have = src->rlen - src->rpos;

		memcpy(src->tupbuf + MINIMAL_TUPLE_DATA_OFFSET,
			   src->rbuf + src->rpos, have);
		src->rpos = src->rlen = 0;
		if (gs_source_read(s, src,
						   src->tupbuf + MINIMAL_TUPLE_DATA_OFFSET + have,
						   body - have) != body - have)
			elog(ERROR, "gpusort: unexpected end of a sorted run");
		src->given_back = gs_temp_discard(s->file, src->given_back,
										  src->fpos, false);
	}

	/*
	 * This source's next row is read when it next wins, after rows of other
	 * runs: with many runs, too many streams for the hardware prefetcher.
	 */
	__builtin_prefetch(src->rbuf + src->rpos);
	__builtin_prefetch(src->rbuf + src->rpos + 64);

	src->key = src->keybuf + TAPE_ROW_HDR;
	src->k0 = gs_key_word0(src->key, s->key_bytes);
	src->lossy = (word & TAPE_LOSSY_BIT) != 0;
	src->tup = (MinimalTuple) src->tupbuf;
	src->tup->t_len = len;
}

/* move a source to its next row */
static void
gs_source_next(GsSortState *s, GsSource *src)
{
	if (src->run)
	{
		gs_source_read_run(s, src);
		return;
	}
	if (src->stream)
	{
		const char *rec = gs_stream_next(src->stream);

		if (rec == NULL)
		{
			gs_source_eof(src);
			return;
		}
		src->key = rec + STREAM_KEY_OFFSET;
		src->k0 = gs_key_word0(src->key, s->key_bytes);
		src->lossy = false;
		src->tup = (MinimalTuple) (rec + gs_stream_tuple_offset(s->key_bytes));
		return;
	}
	if (src->pos >= src->chunk->nrows)
	{
		gs_source_eof(src);
		return;
	}
	{
		const uint32 *perm = src->chunk->perm;
		size_t		n = src->chunk->nrows;
		uint32		row = perm[src->pos];

		if (src->want_tup)
		{
			gs_prefetch_row(s, perm, src->pos, n);
			src->tup = s->tuples[row];
		}
		src->key = s->keys + (src->chunk->base + src->pos) * s->key_bytes;
		src->k0 = gs_key_word0(src->key, s->key_bytes);
		src->lossy = s->any_lossy && gs_row_lossy(s, row);
		src->row = row;
		src->pos++;
	}
}

/* does source a's row come before source b's? */
static inline bool
gs_source_before(GsSortState *s, GsMerge *m, int a, int b)
{
	GsSource   *sa = &m->src[a];
	GsSource   *sb = &m->src[b];
	int			c;

	/* most comparisons end at the first word (an eof source's is the max) */
	if (likely(sa->k0 != sb->k0))
		return sa->k0 < sb->k0;
	if (sa->eof)
		return false;
	if (sb->eof)
		return true;
	c = gs_key_cmp_rest(sa->key, sb->key, s->key_bytes);
	if (c == 0 && (!s->exact || sa->lossy || sb->lossy))
		c = gs_cmp_tuples(s, sa->tup ? sa->tup : s->tuples[sa->row],
						  sb->tup ? sb->tup : s->tuples[sb->row]);
	if (c == 0)
		c = (a > b) - (a < b);	/* any fixed order between equals */
	return c < 0;
}

static bool
gs_source_before_cb(void *arg, int a, int b)
{
	GsMerge    *m = (GsMerge *) arg;

	return gs_source_before(m->s, m, a, b);
}

static GsMerge *
gs_merge_start(GsSortState *s, int nsrc)
{
	GsMerge    *m = MemoryContextAllocZero(s->mergecxt, sizeof(GsMerge));

	m->s = s;
	m->nsrc = nsrc;
	m->src = MemoryContextAllocZero(s->mergecxt, nsrc * sizeof(GsSource));
	m->tree = MemoryContextAllocZero(s->mergecxt, Max(nsrc, 1) * sizeof(int));
	m->tree_k0 = MemoryContextAllocZero(s->mergecxt,
										Max(nsrc, 1) * sizeof(uint64));
	m->pending = -1;
	return m;
}

/* after the sources got their first rows */
static void
gs_merge_ready(GsSortState *s, GsMerge *m)
{
	int			i;

	m->tree[0] = gs_loser_tree_build(m->tree, m->nsrc, gs_source_before_cb, m);
	for (i = 1; i < m->nsrc; i++)
		m->tree_k0[i] = m->src[m->tree[i]].k0;
}

/*
 * The winner moved on: replay its path to the root.  Random keys make the
 * comparison at each level a coin toss, so the common case (first words
 * differ) is a branch-free select on the words kept in the tree; equal
 * words take the full comparison.
 */
static void
gs_merge_replay(GsSortState *s, GsMerge *m)
{
	int			w = m->tree[0];
	uint64		wk;
	int			node;

	gs_source_next(s, &m->src[w]);
	wk = m->src[w].k0;
	for (node = (w + m->nsrc) / 2; node >= 1; node /= 2)
	{
		int			l = m->tree[node];
		uint64		lk = m->tree_k0[node];
		bool		swap = lk < wk;
		uint64		mask;
		int			imask;

		if (unlikely(lk == wk))
			swap = gs_source_before(s, m, l, w);
		/* masks rather than ?:, which the compiler turns into branches */
		mask = (uint64) 0 - (uint64) swap;
		imask = (int) (uint32) mask;
		m->tree[node] = l ^ ((l ^ w) & imask);
		m->tree_k0[node] = lk ^ ((lk ^ wk) & mask);
		w ^= (l ^ w) & imask;
		wk ^= (lk ^ wk) & mask;
	}
	m->tree[0] = w;
}

/* the next row of a merge, or NULL at the end; valid until the next call */
static GsSource *
gs_merge_next(GsSortState *s, GsMerge *m)
{
	GsSource   *w;

	if (m->pending >= 0)
	{
		gs_merge_replay(s, m);
		m->pending = -1;
	}
	w = &m->src[m->tree[0]];
	if (w->eof)
		return NULL;
	m->pending = m->tree[0];
	return w;
}

static void
gs_source_open_run(GsSortState *s, GsSource *src, GsRun *run, size_t bufsize)
{
	src->run = run;
	src->left = run->nrows;
	src->keybuf = MemoryContextAlloc(s->mergecxt, TAPE_ROW_HDR + s->key_bytes);
	src->tupbuf_size = 1024;
	src->tupbuf = MemoryContextAlloc(s->mergecxt, src->tupbuf_size);
	src->rbuf_size = Max(bufsize, BLCKSZ);
	src->rbuf = MemoryContextAlloc(s->mergecxt, src->rbuf_size);
	src->rpos = src->rlen = 0;
	src->fpos = run->offset;
	src->fend = run->offset + run->bytes;
	src->given_back = run->offset;
	gs_source_read_run(s, src);
}

/* a merge over runs[0 .. n-1] */
static GsMerge *
gs_merge_runs(GsSortState *s, GsRun *runs, int n)
{
	GsMerge    *m = gs_merge_start(s, n);
	size_t		bufsize;
	int			i;

	bufsize = (size_t) (s->mem_limit / Max(n, 1));
	bufsize = Max(bufsize, MERGE_MIN_BUFFER);
	bufsize = Min(bufsize, MERGE_MAX_BUFFER);
	bufsize = TYPEALIGN_DOWN(BLCKSZ, bufsize);
	for (i = 0; i < n; i++)
		gs_source_open_run(s, &m->src[i], &runs[i], bufsize);
	gs_merge_ready(s, m);
	return m;
}

/* a new, empty run at the end of the sort's temporary file */
static GsRun *
gs_new_run(GsSortState *s)
{
	GsRun	   *run;

	if (s->file == NULL)
		s->file = gs_temp_create(s->cxt);
	if (s->nruns == s->runs_cap)
	{
		s->runs_cap = Max(16, s->runs_cap * 2);
		s->runs = s->runs ?
			repalloc(s->runs, s->runs_cap * sizeof(GsRun)) :
			MemoryContextAlloc(s->cxt, s->runs_cap * sizeof(GsRun));
	}
	run = &s->runs[s->nruns++];
	run->offset = gs_temp_extend(s->file, 0);
	run->bytes = 0;
	run->nrows = 0;
	return run;
}

/* the bytes of a row on disk (see gpusort_spill.h) */
static inline size_t
gs_row_disk_bytes(int key_bytes, MinimalTuple tup)
{
	return TAPE_ROW_HDR + key_bytes + tup->t_len - MINIMAL_TUPLE_DATA_OFFSET;
}

/* format a row's header and key at dst; the tuple's bytes follow */
static inline size_t
gs_row_head(int key_bytes, char *dst, const char *key, bool lossy,
			MinimalTuple tup)
{
	uint32		word = tup->t_len | (lossy ? TAPE_LOSSY_BIT : 0);

	/* a tuple of 2GB can't be (MaxAllocHugeSize is larger, t_len not) */
	Assert(tup->t_len < TAPE_LOSSY_BIT);
	memcpy(dst, &word, sizeof(uint32));
	memcpy(dst + TAPE_ROW_HDR, key, key_bytes);
	return TAPE_ROW_HDR + key_bytes;
}

/*
 * Writing a run on the backend (merge passes): rows are formatted into a
 * buffer, which goes to the end of the file when full.  Nothing else
 * extends the file meanwhile, so the run stays one stretch.
 */
typedef struct GsWriter
{
	GsRun	   *run;
	char	   *buf;
	size_t		size;
	size_t		used;
} GsWriter;

static void
gs_writer_emit(GsSortState *s, GsWriter *w, const char *data, size_t len)
{
	int64		off;
	int			err;

	if (len == 0)
		return;
	off = gs_temp_extend(s->file, len);
	Assert(off == w->run->offset + w->run->bytes);
	err = gs_temp_pwrite(s->file, data, len, off);
	if (err)
		gs_temp_error(s->file, err, true);
	w->run->bytes += len;
}

static void
gs_writer_put(GsSortState *s, GsWriter *w, const char *key, bool lossy,
			  MinimalTuple tup)
{
	size_t		len = gs_row_disk_bytes(s->key_bytes, tup);
	size_t		body = tup->t_len - MINIMAL_TUPLE_DATA_OFFSET;
	size_t		head;

	if (w->used + len > w->size)
	{
		gs_writer_emit(s, w, w->buf, w->used);
		w->used = 0;
	}
	head = gs_row_head(s->key_bytes, w->buf + w->used, key, lossy, tup);
	if (len <= w->size)
	{
		memcpy(w->buf + w->used + head,
			   (char *) tup + MINIMAL_TUPLE_DATA_OFFSET, body);
		w->used += len;
	}
	else
	{
		/* larger than the buffer: its header, then the tuple from place */
		gs_writer_emit(s, w, w->buf, head);
		gs_writer_emit(s, w, (char *) tup + MINIMAL_TUPLE_DATA_OFFSET, body);
	}
	w->run->nrows++;
	if ((w->run->nrows % INTERRUPT_INTERVAL) == 0)
		CHECK_FOR_INTERRUPTS();
}

/*
 * Writing a run of a batch on several threads.  The rows' order is known
 * (rows[]), so each part takes a slice of it: the parts first add up their
 * rows' bytes, which places every slice in the file, then format their
 * rows into a buffer of their own and write it at their place.  Most of
 * the time goes to fetching rows scattered over the arena, which is why
 * it pays to spread.  The job refers to the batch's memory only, not to
 * the sort state's current batch, so the second pass can run in the
 * background while the next batch is loaded.
 */
struct GsSpillJob
{
	GsTempFile *file;
	int			key_bytes;
	MinimalTuple *tuples;		/* the batch's rows */
	const uint64 *lossy;		/* and their lossy bits */
	const uint32 *rows;			/* batch rows in sorted order */
	const char *keys;			/* key of rows[i] at keys + i * key_bytes, */
	const uint32 *keyidx;		/* else at keys + keyidx[i] * key_bytes */
	uint32	   *merged;			/* rows and keyidx to free, if allocated */
	size_t		n;
	int			nparts;
	size_t		bufsize;		/* of each part's write buffer */
	int			pass;			/* 1: add up bytes, 2: write */
	int64		base;			/* file offset of the run */
	int64		bytes[GS_CPU_THREADS_MAX];
	char	   *bufs[GS_CPU_THREADS_MAX];
	int			err[GS_CPU_THREADS_MAX];
};

static void
gs_spill_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsSpillJob *j = (GsSpillJob *) arg;
	size_t		from = j->n * part / nparts;
	size_t		to = j->n * (part + 1) / nparts;
	size_t		kb = j->key_bytes;
	char	   *buf = j->bufs[part];
	size_t		used = 0;
	int64		off;
	size_t		i;

	if (j->pass == 1)
	{
		int64		sum = 0;

		for (i = from; i < to; i++)
		{
			if (i + GATHER_PREFETCH < to)
				__builtin_prefetch(j->tuples[j->rows[i + GATHER_PREFETCH]]);
			sum += gs_row_disk_bytes(kb, j->tuples[j->rows[i]]);
			if ((i % INTERRUPT_INTERVAL) == 0 && *stop)
				return;
		}
		j->bytes[part] = sum;
		return;
	}

	off = j->base;
	for (i = 0; i < (size_t) part; i++)
		off += j->bytes[i];
	for (i = from; i < to; i++)
	{
		uint32		row = j->rows[i];
		MinimalTuple tup = j->tuples[row];
		const char *key = j->keyidx ? j->keys + j->keyidx[i] * kb :
			j->keys + i * kb;
		size_t		body = tup->t_len - MINIMAL_TUPLE_DATA_OFFSET;
		size_t		head = TAPE_ROW_HDR + kb;

		if (i + GATHER_PREFETCH < to)
			__builtin_prefetch(j->tuples[j->rows[i + GATHER_PREFETCH]]);
		if (used + head + body > j->bufsize)
		{
			if ((j->err[part] = gs_temp_pwrite(j->file, buf, used, off)) != 0)
				return;
			off += used;
			used = 0;
			if (*stop)
				return;
		}
		gs_row_head(kb, buf + used, key, gs_lossy_bit(j->lossy, row), tup);
		if (head + body <= j->bufsize)
		{
			memcpy(buf + used + head,
				   (char *) tup + MINIMAL_TUPLE_DATA_OFFSET, body);
			used += head + body;
		}
		else
		{
			/* larger than the buffer: its header, then the tuple in place */
			if ((j->err[part] = gs_temp_pwrite(j->file, buf, head, off)) != 0 ||
				(j->err[part] = gs_temp_pwrite(j->file,
												(char *) tup + MINIMAL_TUPLE_DATA_OFFSET,
												body, off + head)) != 0)
				return;
			off += head + body;
		}
	}
	j->err[part] = gs_temp_pwrite(j->file, buf, used, off);
}

/* raise the first write failure any part of a finished job met */
static void
gs_spill_check(GsSpillJob *j)
{
	int			p;

	for (p = 0; p < j->nparts; p++)
	{
		if (j->err[p])
			gs_temp_error(j->file, j->err[p], true);
	}
}

/*
 * A job writing the batch's rows in the order of rows[] as a new run: the
 * first pass is done, the run placed in the file (temp_file_limit checked)
 * and the second pass is left to the caller.
 */
static GsSpillJob *
gs_spill_prepare(GsSortState *s, const uint32 *rows, const char *keys,
				 const uint32 *keyidx, uint32 *merged, size_t n)
{
	GsSpillJob *j = MemoryContextAllocZero(s->cxt, sizeof(GsSpillJob));
	int64		total = 0;
	GsRun	   *run;
	int			p;

	j->file = s->file;
	j->key_bytes = s->key_bytes;
	j->tuples = s->tuples;
	j->lossy = s->lossy;
	j->rows = rows;
	j->keys = keys;
	j->keyidx = keyidx;
	j->merged = merged;
	j->n = n;
	j->nparts = (int) Min((size_t) gpusort_cpu_threads,
						  n / SPILL_PART_MIN_ROWS + 1);
	/* the buffers take at most a sixteenth of the batch's memory */
	j->bufsize = (size_t) (s->batch_limit / 16 / j->nparts);
	j->bufsize = Max(j->bufsize, SPILL_WRITE_BUFFER_MIN);
	j->bufsize = Min(j->bufsize, SPILL_WRITE_BUFFER);
	for (p = 0; p < j->nparts; p++)
		j->bufs[p] = MemoryContextAlloc(s->cxt, j->bufsize);
	gs_note_mem(s, (int64) j->nparts * j->bufsize);

	/* a pass stopped by an interrupt that did not throw starts over */
	j->pass = 1;
	while (!gs_parallel(gs_spill_part, j, j->nparts))
		;
	for (p = 0; p < j->nparts; p++)
		total += j->bytes[p];
	run = gs_new_run(s);
	j->base = gs_temp_extend(s->file, total);
	Assert(j->base == run->offset);
	run->bytes = total;
	run->nrows = n;
	j->pass = 2;
	return j;
}

static void
gs_spill_free(GsSpillJob *j)
{
	int			p;

	for (p = 0; p < j->nparts; p++)
		pfree(j->bufs[p]);
	if (j->merged)
		pfree(j->merged);
	pfree(j);
}

/* free what the batch's rows use, keeping its arrays and blocks */
static void
gs_release_rows(GsSortState *s)
{
	int			i;

	for (i = 0; i < s->nchunks; i++)
		pfree(s->chunks[i].perm);
	s->nchunks = 0;
	memset(s->lossy, 0, (s->cap / 64 + 1) * sizeof(uint64));
	MemoryContextReset(s->tupcxt);
}

/* forget the in-memory batch, keeping its arrays for the next one */
static void
gs_reset_batch(GsSortState *s)
{
	gs_release_rows(s);
	s->first_pending = 0;
	s->chunk_bytes = 0;
	s->nrows = 0;
	s->chunk_start = 0;
	s->arena_bytes = 0;
	s->blk_left = 0;
	s->blk_next = 0;
}

/* free the batch's arrays and arena blocks, when no more rows will come */
static void
gs_free_batch(GsSortState *s)
{
	int			i;

	pfree(s->tuples);
	s->tuples = NULL;
	gs_keybuf_free(s->keys_engine, s->keys);
	s->keys = NULL;
	s->cap = 0;
	for (i = 0; i < s->nblocks; i++)
		pfree(s->blocks[i].ptr);
	s->nblocks = 0;
}

#define GS_SWAP(type, a, b) \
	do { type swap_ = (a); (a) = (b); (b) = swap_; } while (0)

/* the batch being loaded and the spare one trade places */
static void
gs_swap_batches(GsSortState *s)
{
	GsBatch    *o = &s->spare;

	GS_SWAP(MinimalTuple *, s->tuples, o->tuples);
	GS_SWAP(char *, s->keys, o->keys);
	GS_SWAP(uint64 *, s->lossy, o->lossy);
	GS_SWAP(size_t, s->cap, o->cap);
	GS_SWAP(GsChunk *, s->chunks, o->chunks);
	GS_SWAP(int, s->nchunks, o->nchunks);
	GS_SWAP(int, s->chunks_cap, o->chunks_cap);
	GS_SWAP(GsBlock *, s->blocks, o->blocks);
	GS_SWAP(int, s->nblocks, o->nblocks);
	GS_SWAP(int, s->blocks_cap, o->blocks_cap);
	GS_SWAP(MemoryContext, s->tupcxt, o->tupcxt);
}

/* wait for the spare batch's write, then free its rows */
static void
gs_spill_wait(GsSortState *s)
{
	GsSpillJob *j = s->writing;
	instr_time	t0;
	bool		done;

	if (j == NULL)
		return;
	INSTR_TIME_SET_CURRENT(t0);
	done = gs_task_wait(s->write_task);
	s->spill_wait_ms += gs_elapsed_ms(t0);
	if (!done)
	{
		/* stopped by an interrupt that did not throw: write it again */
		while (!gs_parallel(gs_spill_part, j, j->nparts))
			;
	}
	s->write_task = NULL;
	s->writing = NULL;
	gs_spill_check(j);
	gs_spill_free(j);
	gs_swap_batches(s);
	gs_release_rows(s);
	gs_swap_batches(s);
}

/*
 * From the second batch on, writing overlaps loading: each batch gets half
 * of work_mem, and a second set of arrays and arena blocks.  The first
 * batch's are cut down to the new size (its arena blocks beyond it freed).
 * The arrays get room for as many rows as the first batch's rows, at their
 * size in the arena, say will fit (the first batch's arrays were sized up
 * front from the planner's estimate, and may be far too large).
 */
static void
gs_start_overlap(GsSortState *s, size_t rows, int64 arena)
{
	size_t		cap = Max(s->cap / 2, MIN_BATCH_ROWS);
	int64		kept = 0;
	int			i;
	int			n = 0;

	if (rows > 0)
	{
		double		per_row = (double) arena / rows +
			sizeof(MinimalTuple) + s->key_bytes;
		double		fit = (double) s->mem_limit / 2 / per_row * 1.05;

		cap = Min(cap, (size_t) fit + MIN_BATCH_ROWS);
	}

	s->overlap = true;
	s->batch_limit = s->mem_limit / 2;
	/* new blocks small enough that the last one overshoots by little */
	s->next_blk_size = Min(s->next_blk_size,
						   Max(ARENA_FIRST_BLOCK,
							   TYPEALIGN(1024, s->batch_limit / 16)));

	/* the arrays to half their rows, the blocks to what still fits */
	s->tuples = repalloc_huge(s->tuples, cap * sizeof(MinimalTuple));
	s->keys = gs_keybuf_grow(s->keys_engine, s->keys, 0, cap * s->key_bytes);
	s->lossy = repalloc_huge(s->lossy, (cap / 64 + 1) * sizeof(uint64));
	memset(s->lossy, 0, (cap / 64 + 1) * sizeof(uint64));
	s->cap = cap;
	kept = (int64) cap * (sizeof(MinimalTuple) + s->key_bytes);
	for (i = 0; i < s->nblocks; i++)
	{
		if (kept + (int64) s->blocks[i].size <= s->batch_limit)
		{
			kept += s->blocks[i].size;
			s->blocks[n++] = s->blocks[i];
		}
		else
			pfree(s->blocks[i].ptr);
	}
	s->nblocks = n;

	/* the spare batch: the same arrays, blocks as it goes */
	s->spare.cap = cap;
	s->spare.tuples = MemoryContextAllocHuge(s->cxt, cap * sizeof(MinimalTuple));
	s->spare.keys = gs_keybuf_alloc(s->keys_engine, cap * s->key_bytes, s->cxt);
	s->spare.lossy = MemoryContextAllocHuge(s->cxt, (cap / 64 + 1) * sizeof(uint64));
	memset(s->spare.lossy, 0, (cap / 64 + 1) * sizeof(uint64));
	s->spare.tupcxt = AllocSetContextCreate(s->cxt, "GpuSort tuples",
											ALLOCSET_DEFAULT_SIZES);
}

/*
 * Sort the batch's last chunk and write the batch out as a new run.  The
 * first spill writes while the backend waits; from then on (when threads
 * may be used) the write goes on in the background while the next batch
 * is loaded into the spare batch's memory, and is waited for at the next
 * spill or at the end of the input.
 */
static void
gs_spill_batch(GsSortState *s)
{
	GsSpillJob *j;
	instr_time	t0;
	size_t		rows;
	int64		arena;

	if (s->nrows == 0)
		return;
	gs_close_chunk(s, true);
	gs_finish_chunks(s);

	INSTR_TIME_SET_CURRENT(t0);
	if (s->file == NULL)
		s->file = gs_temp_create(s->cxt);
	rows = s->nrows;
	arena = s->arena_bytes;
	/* the spare batch must be written before it can be loaded again */
	gs_spill_wait(s);
	if (s->nchunks == 1)
	{
		/* one chunk: its order and its keys, sorted in place */
		GsChunk    *c = &s->chunks[0];

		j = gs_spill_prepare(s, c->perm, s->keys + c->base * s->key_bytes,
							 NULL, NULL, c->nrows);
	}
	else
	{
		/*
		 * Merge the chunks into the rows' order and where their keys are,
		 * here on the backend (ties may need PostgreSQL's comparators),
		 * then write as for one chunk.
		 */
		size_t		n = s->nrows;
		uint32	   *merged = MemoryContextAllocHuge(s->cxt,
													2 * n * sizeof(uint32));
		uint32	   *rows = merged;
		uint32	   *keyidx = merged + n;

		gs_note_mem(s, (int64) n * 2 * sizeof(uint32));
		gs_merge_chunk_rows(s, rows, keyidx);
		j = gs_spill_prepare(s, rows, s->keys, keyidx, merged, n);
	}

	if (s->overlap)
	{
		s->spare_bytes = gs_mem_used(s);
		gs_swap_batches(s);
		s->writing = j;
		s->write_task = gs_task_start(s->cxt, gs_spill_part, j, j->nparts);
	}
	else
	{
		while (!gs_parallel(gs_spill_part, j, j->nparts))
			;
		gs_spill_check(j);
		gs_spill_free(j);
	}
	s->total_runs++;
	gs_reset_batch(s);
	if (!s->overlap && gpusort_cpu_threads > 1)
		gs_start_overlap(s, rows, arena);
	s->spill_ms += gs_elapsed_ms(t0);
}

/*
 * Parallel gather: sorted[i] = tuples[perm[i]] for a slice of i.  The
 * threads touch nothing but these arrays (no PostgreSQL call, no palloc),
 * block every signal, and are joined before the caller goes on.
 */
typedef struct GsGatherSlice
{
	MinimalTuple *sorted;
	MinimalTuple *tuples;
	const uint32 *perm;
	size_t		from;
	size_t		to;
	pthread_t	thread;
	bool		started;
} GsGatherSlice;

static void
gs_gather_range(MinimalTuple *sorted, MinimalTuple *tuples,
				const uint32 *perm, size_t from, size_t to)
{
	size_t		i;

	for (i = from; i < to; i++)
	{
		/*
		 * The loads are independent, so their cache misses overlap;
		 * emitting through the permutation would take one dependent miss
		 * per row.
		 */
		if (i + GATHER_PREFETCH < to)
			__builtin_prefetch(&tuples[perm[i + GATHER_PREFETCH]]);
		sorted[i] = tuples[perm[i]];
	}
}

static void *
gs_gather_thread(void *arg)
{
	GsGatherSlice *g = (GsGatherSlice *) arg;

	gs_gather_range(g->sorted, g->tuples, g->perm, g->from, g->to);
	return NULL;
}

static void
gs_gather(MinimalTuple *sorted, MinimalTuple *tuples, const uint32 *perm,
		  size_t n)
{
	int			nthreads = Min(gpusort_cpu_threads, 64);
	GsGatherSlice slices[64];
	sigset_t	all;
	sigset_t	old;
	int			t;

	if (n < PAR_GATHER_MIN_ROWS || nthreads <= 1)
	{
		gs_gather_range(sorted, tuples, perm, 0, n);
		return;
	}

	/* the threads take no signal: the backend's handlers stay its own */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (t = 0; t < nthreads; t++)
	{
		GsGatherSlice *g = &slices[t];

		g->sorted = sorted;
		g->tuples = tuples;
		g->perm = perm;
		g->from = n * t / nthreads;
		g->to = n * (t + 1) / nthreads;
		/* slice 0 is the backend's own; a thread that won't start, too */
		g->started = t > 0 &&
			pthread_create(&g->thread, NULL, gs_gather_thread, g) == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	for (t = 0; t < nthreads; t++)
	{
		if (!slices[t].started)
			gs_gather_thread(&slices[t]);
	}
	for (t = 0; t < nthreads; t++)
	{
		if (slices[t].started)
			pthread_join(slices[t].thread, NULL);
	}
}

/*
 * Merging the chunks of an in-memory sort on threads, when the keys alone
 * decide the order.  The key space is cut at splitter keys taken from
 * samples of every chunk; a binary search finds where each splitter falls
 * in each chunk (the chunks' keys are sorted in place), so every range of
 * keys knows its rows in every chunk and its place in the output, and the
 * ranges are merged independently.  Keys equal to a splitter all go to the
 * range that starts there, in every chunk.  The threads read the keys and
 * the chunks' orders and write disjoint stretches of rows[].
 */
typedef struct GsParMerge
{
	const char *keys;
	int			key_bytes;
	int			nchunks;
	const GsChunk *chunks;
	int			nranges;
	size_t	   *bounds;			/* [nranges + 1][nchunks]: start of each
								 * range in each chunk */
	uint32	   *rows;			/* out: batch rows in sorted order */
	uint32	   *keyidx;			/* out, if wanted: where their keys are */
} GsParMerge;

/* full comparison of two exact keys (word order, as the engines sort) */
static inline int
gs_key_cmp(const char *a, const char *b, int key_bytes)
{
	uint64		x = gs_key_word0(a, key_bytes);
	uint64		y = gs_key_word0(b, key_bytes);

	if (x != y)
		return x < y ? -1 : 1;
	return gs_key_cmp_rest(a, b, key_bytes);
}

static int
gs_key_qsort_cmp(const void *a, const void *b, void *arg)
{
	return gs_key_cmp(*(const char *const *) a, *(const char *const *) b,
					  *(int *) arg);
}

/* the first row of chunk c whose key is not below key */
static size_t
gs_chunk_lower_bound(const GsParMerge *pm, int c, const char *key)
{
	const GsChunk *ch = &pm->chunks[c];
	const char *base = pm->keys + ch->base * pm->key_bytes;
	size_t		lo = 0;
	size_t		hi = ch->nrows;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (gs_key_cmp(base + mid * pm->key_bytes, key, pm->key_bytes) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* one range's merge: the chunks' stretches of it, in a loser tree */
typedef struct GsRangeMerge
{
	const GsParMerge *pm;
	size_t		pos[GS_PAR_MERGE_MAX_CHUNKS];
	size_t		end[GS_PAR_MERGE_MAX_CHUNKS];
	int			tree[GS_PAR_MERGE_MAX_CHUNKS];
} GsRangeMerge;

static inline bool
gs_range_before(const GsRangeMerge *rm, int a, int b)
{
	const GsParMerge *pm = rm->pm;
	int			kb = pm->key_bytes;
	int			cmp;

	if (rm->pos[a] >= rm->end[a])
		return false;
	if (rm->pos[b] >= rm->end[b])
		return true;
	cmp = gs_key_cmp(pm->keys + (pm->chunks[a].base + rm->pos[a]) * kb,
					 pm->keys + (pm->chunks[b].base + rm->pos[b]) * kb, kb);
	return cmp < 0 || (cmp == 0 && a < b);
}

static bool
gs_range_before_cb(void *arg, int a, int b)
{
	return gs_range_before((const GsRangeMerge *) arg, a, b);
}

static void
gs_par_merge_part(void *arg, int part, int nparts, volatile bool *stop)
{
	GsParMerge *pm = (GsParMerge *) arg;
	int			k = pm->nchunks;
	GsRangeMerge rm;
	int			r;

	rm.pm = pm;
	for (r = part; r < pm->nranges; r += nparts)
	{
		const size_t *b0 = pm->bounds + (size_t) r * k;
		size_t		out = 0;
		size_t		left = 0;
		int			c;

		/* the range's place in the output: the rows of all earlier ranges */
		for (c = 0; c < k; c++)
		{
			out += b0[c];
			rm.pos[c] = b0[c];
			rm.end[c] = b0[k + c];
			left += rm.end[c] - rm.pos[c];
		}
		rm.tree[0] = gs_loser_tree_build(rm.tree, k, gs_range_before_cb, &rm);
		while (left-- > 0)
		{
			int			w = rm.tree[0];
			int			node;

			if (pm->keyidx)
				pm->keyidx[out] = (uint32) (pm->chunks[w].base + rm.pos[w]);
			pm->rows[out++] = pm->chunks[w].perm[rm.pos[w]++];
			for (node = (w + k) / 2; node >= 1; node /= 2)
			{
				int			l = rm.tree[node];

				if (gs_range_before(&rm, l, w))
				{
					rm.tree[node] = w;
					w = l;
				}
			}
			rm.tree[0] = w;
			if ((left % INTERRUPT_INTERVAL) == 0 && *stop)
				return;
		}
	}
}

/*
 * Merge the chunks into rows[] (and, when keyidx is not NULL, where each
 * row's key is into keyidx[]) on threads; false when it can't be done so
 * (keys that need PostgreSQL's comparators, one thread, few rows, many
 * chunks) and the caller merges on the backend.
 */
static bool
gs_par_merge_chunks(GsSortState *s, uint32 *rows, uint32 *keyidx, size_t n)
{
	int			k = s->nchunks;
	int			nthreads = Min(gpusort_cpu_threads, GS_CPU_THREADS_MAX);
	int			nranges = nthreads * PAR_MERGE_RANGES_PER_THREAD;
	int			kb = s->key_bytes;
	GsParMerge	pm;
	const char **samples;
	int			nsamples = 0;
	int			c;
	int			r;

	if (!s->exact || s->any_lossy || nthreads <= 1 ||
		n < PAR_MERGE_MIN_ROWS || k > GS_PAR_MERGE_MAX_CHUNKS)
		return false;

	pm.keys = s->keys;
	pm.key_bytes = kb;
	pm.nchunks = k;
	pm.chunks = s->chunks;
	pm.nranges = nranges;
	pm.rows = rows;
	pm.keyidx = keyidx;
	pm.bounds = palloc((size_t) (nranges + 1) * k * sizeof(size_t));

	/* splitters: every k-th of the sorted samples, nranges - 1 in all */
	samples = palloc((size_t) k * nranges * sizeof(char *));
	for (c = 0; c < k; c++)
	{
		const GsChunk *ch = &s->chunks[c];

		for (r = 1; r < nranges; r++)
			samples[nsamples++] = s->keys +
				(ch->base + ch->nrows * r / nranges) * kb;
	}
	qsort_arg(samples, nsamples, sizeof(char *), gs_key_qsort_cmp, &kb);
	for (c = 0; c < k; c++)
	{
		pm.bounds[c] = 0;
		pm.bounds[(size_t) nranges * k + c] = s->chunks[c].nrows;
	}
	for (r = 1; r < nranges; r++)
	{
		const char *split = samples[(size_t) r * nsamples / nranges];

		for (c = 0; c < k; c++)
		{
			size_t		at = gs_chunk_lower_bound(&pm, c, split);

			/* splitters ascend, but equal ones must not step back */
			pm.bounds[(size_t) r * k + c] =
				Max(at, pm.bounds[(size_t) (r - 1) * k + c]);
		}
	}
	pfree(samples);

	/*
	 * bounds[r][c] is where range r starts in chunk c; the output offset of
	 * range r is the sum over the chunks, which gs_par_merge_part works out
	 * from the same numbers.
	 */
	while (!gs_parallel(gs_par_merge_part, &pm, nthreads))
		;
	pfree(pm.bounds);
	return true;
}

/*
 * Merge the batch's sorted chunks into rows[], the batch rows in sorted
 * order, and (when keyidx is not NULL) keyidx[], where their keys are in
 * the key buffer: on threads where gs_par_merge_chunks can, else here.
 */
static void
gs_merge_chunk_rows(GsSortState *s, uint32 *rows, uint32 *keyidx)
{
	GsMerge    *m;
	GsSource   *src;
	size_t		i = 0;
	int			c;

	if (gs_par_merge_chunks(s, rows, keyidx, s->nrows))
		return;
	m = gs_merge_start(s, s->nchunks);
	for (c = 0; c < s->nchunks; c++)
	{
		m->src[c].chunk = &s->chunks[c];
		gs_source_next(s, &m->src[c]);
	}
	gs_merge_ready(s, m);
	while ((src = gs_merge_next(s, m)) != NULL)
	{
		rows[i] = src->row;
		if (keyidx)
			keyidx[i] = (uint32) ((src->key - s->keys) / s->key_bytes);
		if ((++i % INTERRUPT_INTERVAL) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	Assert(i == s->nrows);
	MemoryContextReset(s->mergecxt);
}

/* all rows are in and fit in memory: merge chunks into sorted[] */
static void
gs_merge_chunks_to_array(GsSortState *s)
{
	size_t		n = s->nrows;
	size_t		i = 0;
	uint32	   *order = NULL;	/* batch rows in sorted order */
	uint32	   *rows = NULL;

	if (s->nchunks == 1)
		order = s->chunks[0].perm;
	else if (s->nchunks > 1)
	{
		instr_time	t0;

		/*
		 * Merge the chunks' keys and row numbers, which are read in order,
		 * into an array of row numbers (on threads when the keys alone
		 * decide the order); the tuple pointers are gathered afterwards, as
		 * for one chunk.  Touching each tuple pointer during the merge
		 * itself would cost a cache miss a row that nothing overlaps.
		 */
		rows = MemoryContextAllocHuge(s->cxt, Max(n, 1) * sizeof(uint32));
		gs_note_mem(s, (int64) n * sizeof(uint32));

		INSTR_TIME_SET_CURRENT(t0);
		gs_merge_chunk_rows(s, rows, NULL);
		s->merge_ms += gs_elapsed_ms(t0);
		order = rows;
	}

	/* the keys are done with, and so are the chunks' orders when merged */
	gs_keybuf_free(s->keys_engine, s->keys);
	s->keys = NULL;
	if (rows)
	{
		for (i = 0; i < (size_t) s->nchunks; i++)
			pfree(s->chunks[i].perm);
		s->nchunks = 0;
	}

	/* gather the row pointers into sorted order once */
	s->sorted = MemoryContextAllocHuge(s->cxt, Max(n, 1) * sizeof(MinimalTuple));
	gs_advise_huge(s->sorted, n * sizeof(MinimalTuple));
	gs_note_mem(s, (int64) n * sizeof(MinimalTuple));
	s->nsorted = n;
	if (order)
		gs_gather(s->sorted, s->tuples, order, n);

	/* permutations and the arrival-order array are done with */
	if (rows)
		pfree(rows);
	for (i = 0; i < (size_t) s->nchunks; i++)
		pfree(s->chunks[i].perm);
	s->nchunks = 0;
	pfree(s->tuples);
	s->tuples = NULL;
}

/*
 * The final merge on threads (see the top of the file), or NULL where it
 * can't be: keys that need PostgreSQL's comparators for ties, a single
 * thread allowed, or rows too large for a stream's blocks.
 */
static GsMerge *
gs_merge_streams(GsSortState *s)
{
	int			nstreams = Min(gpusort_cpu_threads, s->nruns);
	size_t		block;
	size_t		readsize;
	GsMerge    *m;
	int			t;

	if (!s->exact || s->any_lossy || nstreams < 2)
		return NULL;
	block = gs_stream_block_size(s->mem_limit, nstreams);
	if (2 * (gs_stream_tuple_offset(s->key_bytes) +
			 MAXALIGN(s->max_tuple_len)) > block)
		return NULL;
	readsize = (size_t) (s->mem_limit / 2 / s->nruns);
	readsize = Max(readsize, MERGE_MIN_BUFFER);
	readsize = Min(readsize, MERGE_MAX_BUFFER);
	readsize = Max(readsize, TAPE_ROW_HDR + s->key_bytes + s->max_tuple_len);

	m = gs_merge_start(s, nstreams);
	for (t = 0; t < nstreams; t++)
	{
		int			first = s->nruns * t / nstreams;
		int			last = s->nruns * (t + 1) / nstreams;

		m->src[t].stream = gs_stream_start(s->mergecxt, s->file, s->key_bytes,
										   &s->runs[first], last - first,
										   block, readsize);
		if (m->src[t].stream == NULL)
		{
			/* no thread to be had: stop those started, merge here */
			MemoryContextReset(s->mergecxt);
			return NULL;
		}
	}
	for (t = 0; t < nstreams; t++)
		gs_source_next(s, &m->src[t]);
	gs_merge_ready(s, m);
	s->nstreams = nstreams;
	return m;
}

/* add up how long the backend waited for a merge's threads */
static void
gs_merge_waits(GsSortState *s, GsMerge *m)
{
	int			i;

	for (i = 0; i < m->nsrc; i++)
	{
		if (m->src[i].stream)
			s->merge_wait_ms += gs_stream_wait_ms(m->src[i].stream);
	}
}

/* merge runs in passes until one merge can produce the result */
static void
gs_merge_passes(GsSortState *s)
{
	while (s->nruns > s->merge_order)
	{
		GsRun	   *old = s->runs;
		int			nold = s->nruns;
		int			first;

		/* the merged runs of this pass start a new list */
		s->runs = NULL;
		s->nruns = 0;
		s->runs_cap = 0;
		for (first = 0; first < nold; first += s->merge_order)
		{
			int			n = Min(s->merge_order, nold - first);
			GsWriter	w;
			GsMerge    *m = gs_merge_runs(s, old + first, n);
			GsSource   *src;

			w.run = gs_new_run(s);
			w.size = SPILL_WRITE_BUFFER;
			w.buf = MemoryContextAlloc(s->mergecxt, w.size);
			w.used = 0;
			while ((src = gs_merge_next(s, m)) != NULL)
				gs_writer_put(s, &w, src->key, src->lossy, src->tup);
			gs_writer_emit(s, &w, w.buf, w.used);
			MemoryContextReset(s->mergecxt);
		}
		pfree(old);
		s->merge_passes++;
	}
}

void
gs_sort_perform(GsSortState *s)
{
	instr_time	t0;

	Assert(s->status == GS_LOADING);
	if (s->load_started)
		s->load_ms = gs_elapsed_ms(s->load_start);

	if (s->nruns == 0)
	{
		/* everything is in memory */
		gs_close_chunk(s, s->nchunks > 0);
		gs_finish_chunks(s);
		gs_merge_chunks_to_array(s);
		s->status = GS_SORTED;
		s->current = 0;
		s->eof_reached = false;
		s->markpos = 0;
		s->markeof = false;
		return;
	}

	/* spill the last batch too, and give the batches' memory back */
	gs_spill_batch(s);
	gs_spill_wait(s);
	gs_free_batch(s);
	if (s->overlap)
	{
		gs_swap_batches(s);
		gs_free_batch(s);
	}

	INSTR_TIME_SET_CURRENT(t0);
	gs_merge_passes(s);
	s->merge = gs_merge_streams(s);
	if (s->merge == NULL)
		s->merge = gs_merge_runs(s, s->runs, s->nruns);
	s->merge_passes++;
	s->status = GS_MERGING;

	if (s->random_access)
	{
		/* materialise the final merge where it can be read any way */
		MemoryContext oldcxt = MemoryContextSwitchTo(s->cxt);
		GsSource   *src;
		size_t		i = 0;

		s->store = tuplestore_begin_heap(true, false, s->work_mem_kb);
		tuplestore_set_eflags(s->store, EXEC_FLAG_REWIND | EXEC_FLAG_BACKWARD);
		(void) tuplestore_alloc_read_pointer(s->store, EXEC_FLAG_REWIND |
											 EXEC_FLAG_BACKWARD);
		s->store_slot = MakeSingleTupleTableSlot(s->tupdesc, &TTSOpsMinimalTuple);
		while ((src = gs_merge_next(s, s->merge)) != NULL)
		{
			ExecStoreMinimalTuple(src->tup, s->store_slot, false);
			tuplestore_puttupleslot(s->store, s->store_slot);
			if ((++i % INTERRUPT_INTERVAL) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		ExecClearTuple(s->store_slot);
		MemoryContextSwitchTo(oldcxt);
		gs_merge_waits(s, s->merge);
		s->merge = NULL;
		MemoryContextReset(s->mergecxt);
		s->status = GS_STORED;
	}
	s->merge_ms += gs_elapsed_ms(t0);
	INSTR_TIME_SET_CURRENT(s->stream_start);
}

static inline void
gs_store(GsSortState *s, size_t pos, TupleTableSlot *slot)
{
	ExecStoreMinimalTuple(s->sorted[pos], slot, false);
}

bool
gs_sort_get(GsSortState *s, bool forward, TupleTableSlot *slot)
{
	switch (s->status)
	{
		case GS_SORTED:
			break;
		case GS_STORED:
			return tuplestore_gettupleslot(s->store, forward, false, slot);
		case GS_MERGING:
			{
				GsSource   *src;

				if (!forward)
					elog(ERROR, "gpusort: backward scan without random access");
				src = gs_merge_next(s, s->merge);
				if (src == NULL)
				{
					/* the final merge's time, as rows were taken */
					if (!s->merge_timed)
					{
						s->merge_ms += gs_elapsed_ms(s->stream_start);
						gs_merge_waits(s, s->merge);
						s->merge_timed = true;
					}
					ExecClearTuple(slot);
					return false;
				}
				ExecStoreMinimalTuple(src->tup, slot, false);
				return true;
			}
		default:
			elog(ERROR, "gpusort: rows requested before the sort");
	}

	if (forward)
	{
		if (s->current < s->nsorted)
		{
			size_t		ahead = s->current + PREFETCH_DISTANCE;

			if (ahead < s->nsorted)
				__builtin_prefetch(s->sorted[ahead]);
			gs_store(s, s->current++, slot);
			return true;
		}
		s->eof_reached = true;
		ExecClearTuple(slot);
		return false;
	}

	/* backward: the row before the one last returned, as tuplesort does */
	if (s->current == 0)
	{
		ExecClearTuple(slot);
		return false;
	}
	if (s->eof_reached)
		s->eof_reached = false;
	else
	{
		s->current--;
		if (s->current == 0)
		{
			ExecClearTuple(slot);
			return false;
		}
	}
	gs_store(s, s->current - 1, slot);
	return true;
}

void
gs_sort_markpos(GsSortState *s)
{
	if (s->status == GS_STORED)
		tuplestore_copy_read_pointer(s->store, 0, 1);
	else if (s->status == GS_SORTED)
	{
		s->markpos = s->current;
		s->markeof = s->eof_reached;
	}
	else
		elog(ERROR, "gpusort: mark without random access");
}

void
gs_sort_restorepos(GsSortState *s)
{
	if (s->status == GS_STORED)
		tuplestore_copy_read_pointer(s->store, 1, 0);
	else if (s->status == GS_SORTED)
	{
		s->current = s->markpos;
		s->eof_reached = s->markeof;
	}
	else
		elog(ERROR, "gpusort: restore without random access");
}

bool
gs_sort_can_rewind(GsSortState *s)
{
	return s->status == GS_SORTED || s->status == GS_STORED;
}

void
gs_sort_rewind(GsSortState *s)
{
	Assert(gs_sort_can_rewind(s));
	if (s->status == GS_STORED)
		tuplestore_rescan(s->store);
	else
	{
		s->current = 0;
		s->eof_reached = false;
		s->markpos = 0;
		s->markeof = false;
	}
}

void
gs_sort_report(GsSortState *s, GsSortReport *r)
{
	StringInfoData buf;

	memset(r, 0, sizeof(*r));
	r->fallback = s->fallback;
	r->key_bytes = s->key_bytes;
	r->exact = s->exact && !s->any_lossy;
	r->rows = s->total_rows;
	r->chunks = s->total_chunks;
	r->runs = s->total_runs;
	r->merge_passes = s->merge_passes;
	r->load_ms = s->load_ms;
	r->sort_ms = Max(s->engine_ms, s->sort_ms);
	r->wait_ms = s->sort_ms;
	r->transfer_ms = s->transfer_ms;
	r->tiebreak_ms = s->tiebreak_ms;
	r->tiebreak_rows = s->tiebreak_rows;
	r->spill_ms = s->spill_ms;
	r->spill_wait_ms = s->spill_wait_ms;
	r->merge_ms = s->merge_ms;
	r->merge_wait_ms = s->merge_wait_ms;
	r->mem_bytes = s->mem_peak;
	r->streams = s->nstreams;
	if (s->file)
		r->disk_kb = (gs_temp_peak(s->file) + 1023) / 1024;
	if (s->sort_engine)
	{
		r->engine = s->sort_engine->ops->name;
		r->device = s->sort_engine->info.name;
	}
	initStringInfo(&buf);
	gs_keyplan_describe(s->kp, &buf);
	r->keydesc = buf.data;
}

void
gs_sort_end(GsSortState *s)
{
	if (s->store)
		tuplestore_end(s->store);
	if (s->store_slot)
		ExecDropSingleTupleTableSlot(s->store_slot);
	/*
	 * The key buffer, the merge's threads and the temporary file go with
	 * the context (see gs_keybuf_alloc and spill.c).
	 */
	MemoryContextDelete(s->cxt);
}
