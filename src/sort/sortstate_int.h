/*-------------------------------------------------------------------------
 *
 * sortstate_int.h
 *	  The sort state's insides, shared by sortstate.c (its life cycle),
 *	  sort_load.c, sort_runs.c, sort_merge.c and sort_emit.c.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SORTSTATE_INT_H
#define SORTSTATE_INT_H

#include "postgres.h"

#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "portability/instr_time.h"
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

/*
 * The final merge on stream threads reads a file mapped into memory
 * (gs_temp_map): a read buffer's refill is then a copy from the page cache,
 * not a system call, so each run needs only STREAM_READ_MIN bytes of it, and
 * half of work_mem takes that many more runs at once.  At the default 4MB
 * that is 4096 runs: a parallel load of 50M rows of an int8 key writes
 * about 1200 runs, of a text key about 2600, and a merge pass more than
 * the final merge writes the rows it merges to disk once more.
 */
#define STREAM_READ_MIN		512
#define MERGE_MAX_WIDE_ORDER 16384
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

/* a stretch of memory: the workers' shared blocks of rows */
typedef struct GsSpan
{
	char	   *addr;
	size_t		len;
} GsSpan;

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
	char	   *raw;			/* what was allocated, ptr aligned within */
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
	bool		single;			/* one source, read only as rows are taken */
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

/*
 * Writing a row's record (the format is in gpusort_spill.h): the format,
 * and what the sort says of each row.  omit(arg, body): may the record
 * leave the row's key out (the format's derive gets it back from body:
 * the tuple from MINIMAL_TUPLE_DATA_OFFSET on, or a variant's data)?
 * keep(arg, data): how many bytes at the start of a variant's data a
 * record must hold (the zeros after them, up to TAPE_ROW_TRIM_MAX, are
 * left out); NULL: all.  Both are called on the threads that write runs,
 * and so call nothing of PostgreSQL; their answers depend on the row
 * alone, so a row written again (a merge pass) takes the same bytes.
 */
typedef bool (*GsKeyOmitFn) (void *arg, const char *body);
typedef size_t (*GsRowKeepFn) (void *arg, const char *data);

typedef struct GsTapeOut
{
	GsTapeFormat tf;
	GsKeyOmitFn omit;			/* NULL: every key is written */
	GsRowKeepFn keep;
	void	   *arg;

	/*
	 * The same answers where they can be given once for the sort (at its
	 * begin), so that gs_tape_word, which runs twice a row (the row's bytes
	 * are counted as it comes, then it is written), calls nothing: for tape
	 * rows, omit_natts > 0 says that a tuple's key is left out exactly when
	 * it has that many attributes or more (fixed-width keys: omit is not
	 * called); for a variant's rows, omit_all that every key is left out,
	 * and keep_len_mask != 0 that keep is the uint16 at keep_len_off in the
	 * data, masked (an index tuple's t_info).
	 */
	uint16		omit_natts;
	bool		omit_all;
	uint16		keep_len_off;
	uint16		keep_len_mask;

	/*
	 * Set on a spill job's copy only: every row of its batch had its key
	 * derived from its own bytes as it came (gs_batch_note's derived), so
	 * omit would say yes to each and is not called.
	 */
	bool		omit_sure;
} GsTapeOut;

/*
 * The layout of the rows when every attribute is fixed-width and there
 * are at most GS_LAYOUT_MAX_ATTS of them (gs_row_layout_init; natts 0
 * otherwise): a row without NULLs is then formed from a slot's values by
 * stores at known offsets, where heap_fill_tuple would have placed them
 * (len 0: no layout).
 * Rows that a scan projects (a sort of some of a table's columns, the
 * input of most window functions, aggregates and joins) come so.
 *
 * Where only the last attribute is of variable width (a varlena), the
 * others are placed so too and tail_natts says where the last one's room
 * starts (gs_form_tail_row_at); natts and len are then 0.
 */
#define GS_LAYOUT_MAX_ATTS	32

typedef struct GsRowLayout
{
	int			natts;
	uint32		len;			/* the MinimalTuple's t_len */
	uint8		hoff;			/* its t_hoff */
	uint16		off[GS_LAYOUT_MAX_ATTS];	/* from the MinimalTuple */
	int16		attlen[GS_LAYOUT_MAX_ATTS]; /* negated by reference */
	/* a varlena last: the attributes (0: not so), its room, its storage */
	int			tail_natts;
	uint16		tail_start;		/* after the fixed ones, before alignment */
	char		tail_align;
	bool		tail_packable;	/* a short header where the value fits one */
} GsRowLayout;

extern void gs_row_layout_init(GsRowLayout *l, TupleDesc desc);

typedef struct GsSpillJob GsSpillJob;

struct GsSortState
{
	MemoryContext cxt;			/* owns everything below */
	MemoryContext tupcxt;		/* tuples too big for an arena block */
	MemoryContext mergecxt;		/* merge buffers */
	GsStatus	status;

	/* sort definition */
	TupleDesc	tupdesc;
	GsRowLayout layout;			/* of tupdesc's rows (gs_form_row) */
	GsSortDef	def;
	int			work_mem_kb;
	bool		random_access;

	/* keys */
	GsKeyPlan  *kp;				/* NULL for a variant's rows */
	GsTapeOut	tape;			/* the format of its runs' records */
	int			key_bytes;
	int			tie_bytes;		/* the part a tie-break replaces (see
								 * gs_sort_begin_rows) */
	GsRowCompareFn row_cmp;		/* a variant's comparison, or NULL */
	void	   *row_cmp_arg;
	GsRowTieFn	row_tie;		/* the same on threads, or NULL (GsRowsDef,
								 * gs_key_tie) */
	void	   *row_tie_arg;
	bool		exact;			/* static part: every column fully encoded */
	bool		load_derive;	/* gs_sort_put makes keys from the copied
								 * rows (gs_keyplan_derives_fast) */
	GsPageRows	page_rows;		/* how gs_sort_put_page copies rows */
	bool		page_check;		/* and asks gs_key_derivable of each */
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
	size_t		check_at;		/* nrows at which the next row runs
								 * gs_load_check; 0 after any change of the
								 * batch's arrays, chunks or memory */
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

	/* memory a thread populates ahead of the load (sort_load.c) */
	GsTask	   *prefault_task;
	GsPrefault	prefault;

	/* arena */
	char	   *blk_free;
	size_t		blk_left;
	size_t		next_blk_size;
	int64		arena_bytes;	/* arena memory this batch has taken */
	int64		batch_disk;		/* its rows' bytes in a run (gs_batch_note) */
	size_t		batch_noted;	/* rows counted in batch_disk */
	size_t		batch_derived;	/* of those, keys derived from the row */
	int64		batch_rec;		/* their one record size, or -1 if several */
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
	bool		bulk_rows;		/* rows came in through gs_sort_bulk_room */
	int			bulk_threads;	/* processes that loaded them */
	struct GsSortedCopy *copy;	/* that copy, while it goes on */
	GsSpan	   *shared_spans;	/* the workers' blocks of rows (sort_emit.c) */
	int			nshared_spans;
	int			shared_spans_cap;
	GsRun	   *runs;
	int			nruns;
	int			runs_cap;
	int			merge_order;
	GsMerge    *merge;			/* GS_MERGING */
	Tuplestorestate *store;		/* GS_STORED */
	TupleTableSlot *store_slot;

	/* reading GS_SORTED */
	size_t		ready;			/* sorted[] is filled in below this */
	size_t		current;		/* as in tuplesort: next row to return */
	bool		eof_reached;
	size_t		markpos;
	bool		markeof;

	/*
	 * report: the timings (and copy_bytes, tiebreak_rows) accumulate in
	 * rep as the sort goes; gs_sort_report adds the rest.  rep.sort_ms is
	 * the engine's own work (transfers and sort, maybe in the background),
	 * rep.wait_ms the backend's submitting and waiting for it.
	 */
	GsSortReport rep;
	double		total_rows;
	int			total_chunks;
	int			total_runs;
	int			merge_passes;
	int			nstreams;		/* threads of the final merge */
	GsStream   *cascade;		/* the final merge's single stream, if any:
								 * the rows are its records, handed out by
								 * reference and walked block by block */
	size_t		stream_tupoff;	/* where a record's tuple starts */
	const char *const *refs;	/* the block being walked */
	size_t		ref_n;
	size_t		ref_pos;
	uint64		ncompares;
	instr_time	stream_start;	/* the final merge began returning rows */
	bool		merge_timed;	/* and its time was taken */
	uint64		merged_out;		/* rows the final merge has returned */
	bool		emit_timed;
	instr_time	load_start;
	bool		load_started;
};

/*
 * Writing a run on the backend (merge passes): rows are formatted into a
 * buffer, which goes to the run's place when full.  The place is taken
 * whole beforehand (a merge's output is as long as its input), so that
 * the run stays one stretch when other processes write into the same file
 * (a parallel load's workers); its bytes are counted as they are written.
 */
typedef struct GsWriter
{
	GsRun	   *run;
	int64		reserved;		/* bytes placed for the run */
	char	   *buf;
	size_t		size;
	size_t		used;
} GsWriter;

static inline double
gs_elapsed_ms(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_MILLISEC(now);
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

/*
 * Rows taken in sorted order have their tuples scattered over the arena:
 * prefetch the pointer of a row some way ahead of row i of order[], then
 * the tuple of a nearer one (whose pointer came in by now).  Always
 * inlined: gcc 12 finds a function of prefetches alone to have no
 * effect and deletes its calls before it would inline them.
 */
static pg_attribute_always_inline void
gs_prefetch_row(GsSortState *s, const uint32 *order, size_t i, size_t n)
{
	if (i + GATHER_PREFETCH < n)
		__builtin_prefetch(&s->tuples[order[i + GATHER_PREFETCH]]);
	if (i + PREFETCH_DISTANCE < n)
		__builtin_prefetch(s->tuples[order[i + PREFETCH_DISTANCE]]);
}

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

/* compare the words of two keys in bytes [from, to), from past the first */
static inline int
gs_key_cmp_words(const char *a, const char *b, int from, int to)
{
	int			w;

	for (w = from; w < to; w += 8)
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

/*
 * A row's record: its word, returned, and the row's bytes written after
 * the word and the key (*body, *body_len).  Inlined: it runs twice a row,
 * and its callers need only part of what it works out (gs_batch_note the
 * bytes).
 */
static pg_attribute_always_inline uint32
gs_tape_word_of(const GsTapeOut *o, MinimalTuple tup, bool lossy,
				const char **body, size_t *body_len, bool rows, bool sure)
{
	uint32		word = lossy ? TAPE_LOSSY_BIT : 0;
	const char *data;
	uint32		len;
	size_t		keep;
	uint32		trim = 0;

	/* rows are no larger than MaxAllocSize (gs_form_row) */
	Assert(tup->t_len <= TAPE_LEN_MASK);
	Assert(rows == o->tf.rows);
	if (!rows)
	{
		int			hints;

		*body = (const char *) tup + MINIMAL_TUPLE_DATA_OFFSET;
		*body_len = tup->t_len - MINIMAL_TUPLE_DATA_OFFSET;
		if (o->omit_natts > 0)
		{
			/*
			 * The standard header first: its natts, the descriptor's, are
			 * enough for the key (the usual row then takes one test)
			 */
			Assert(o->tf.std_natts >= o->omit_natts);
			hints = gs_tape_std_header(&o->tf, tup);
			if (hints < 0)
				return HeapTupleHeaderGetNatts(tup) < o->omit_natts ?
					word | tup->t_len : TAPE_NOKEY_BIT | tup->t_len;
		}
		else
		{
			if (!sure && (o->omit == NULL || !o->omit(o->arg, *body)))
				return word | tup->t_len;
			/* the derivation tells the lossy ones: the top bit is free */
			hints = gs_tape_std_header(&o->tf, tup);
			if (hints < 0)
				return TAPE_NOKEY_BIT | tup->t_len;
		}
		*body = (const char *) tup + o->tf.std_hoff - MINIMAL_TUPLE_OFFSET;
		*body_len = tup->t_len - (o->tf.std_hoff - MINIMAL_TUPLE_OFFSET);
		return TAPE_NOKEY_BIT | TAPE_NOHDR_BIT |
			((uint32) hints << TAPE_HINTS_SHIFT) | tup->t_len;
	}

	data = (const char *) tup + o->tf.data_off;
	len = tup->t_len - o->tf.data_off;
	/* (gs_sort_row_alloc keeps a variant's rows that small) */
	Assert(len <= TAPE_ROW_MAX_LEN);
	if (o->keep_len_mask != 0)
	{
		uint16		v;

		memcpy(&v, data + o->keep_len_off, sizeof(v));
		keep = v & o->keep_len_mask;
	}
	else
		keep = o->keep ? o->keep(o->arg, data) : len;
	while (trim < TAPE_ROW_TRIM_MAX && len - trim > keep &&
		   data[len - 1 - trim] == 0)
		trim++;
	word |= len | (trim << TAPE_ROW_TRIM_SHIFT) |
		((uint32) *((const uint8 *) tup + o->tf.flags_off) <<
		 TAPE_ROW_FLAGS_SHIFT);
	if (o->omit_all || (o->omit != NULL && o->omit(o->arg, data)))
		word |= TAPE_NOKEY_BIT;
	*body = data;
	*body_len = len - trim;
	return word;
}

/*
 * The same where the caller does not know which kind of rows the sort
 * takes (gs_tape_word_of with rows constant: a caller that knows, or
 * loops over a batch, has the test and the other kind's code left out)
 */
static pg_attribute_always_inline uint32
gs_tape_word(const GsTapeOut *o, MinimalTuple tup, bool lossy,
			 const char **body, size_t *body_len)
{
	if (o->tf.rows)
		return gs_tape_word_of(o, tup, lossy, body, body_len, true, false);
	return gs_tape_word_of(o, tup, lossy, body, body_len, false,
						   o->omit_sure);
}

/* the bytes of a record's word and key */
static inline size_t
gs_tape_head(const GsTapeOut *o, uint32 word)
{
	return TAPE_ROW_HDR + ((word & TAPE_NOKEY_BIT) ? 0 : o->tf.key_bytes);
}

/*
 * The bytes of a row on disk (inlined as gs_tape_word is: once a row);
 * sure: the row's key is known to be derivable from its bytes
 */
static pg_attribute_always_inline size_t
gs_row_disk_bytes_of(const GsTapeOut *o, MinimalTuple tup, bool rows,
					 bool sure)
{
	const char *body;
	size_t		body_len;
	uint32		word = gs_tape_word_of(o, tup, false, &body, &body_len, rows,
									   sure);

	return gs_tape_head(o, word) + body_len;
}

static pg_attribute_always_inline size_t
gs_row_disk_bytes(const GsTapeOut *o, MinimalTuple tup)
{
	if (o->tf.rows)
		return gs_row_disk_bytes_of(o, tup, true, false);
	return gs_row_disk_bytes_of(o, tup, false, o->omit_sure);
}

/* write a record's word and key (unless left out) at dst; their bytes */
static inline size_t
gs_tape_put_head(const GsTapeOut *o, char *dst, uint32 word, const char *key)
{
	memcpy(dst, &word, sizeof(uint32));
	if (word & TAPE_NOKEY_BIT)
		return TAPE_ROW_HDR;
	memcpy(dst + TAPE_ROW_HDR, key, o->tf.key_bytes);
	return TAPE_ROW_HDR + o->tf.key_bytes;
}

/*
 * Count a row put into the batch: its run's bytes are then known before
 * the run is written, and the write need not add them up first.  derived:
 * its key was derived from its bytes (gs_key_derive), so the tape's omit
 * would say yes; the batch's run is then written without asking it, if
 * every row of the batch came so (batch_derived).
 */
static pg_attribute_always_inline void
gs_batch_note(GsSortState *s, MinimalTuple tup, bool rows, bool derived)
{
	int64		b = gs_row_disk_bytes_of(&s->tape, tup, rows, derived);

	s->batch_derived += derived;
	s->batch_disk += b;
	if (s->batch_noted++ == 0)
		s->batch_rec = b;
	else if (s->batch_rec != b)
		s->batch_rec = -1;
}

/*
 * Copy the slot's row as a MinimalTuple into memory that alloc(arg, len)
 * gives (the arena of sort_load.c, or shared memory for a parallel load,
 * sort_parallel.c: MAXALIGN'd, MAXALIGN(len) bytes).  natts is the
 * descriptor's number of attributes, layout its GsRowLayout.
 */
typedef char *(*GsRowAllocFn) (void *arg, Size len);

/*
 * A heap tuple that has every attribute of the rows (natts) as a
 * MinimalTuple: its bytes from the MinimalTuple's start copied as they
 * are (gs_form_row, and the loads that read a table's pages themselves)
 */
static inline MinimalTuple
gs_tuple_to_row(HeapTupleHeader th, uint32 t_len, GsRowAllocFn alloc,
				void *arg)
{
	Size		len = t_len - MINIMAL_TUPLE_OFFSET;
	MinimalTuple mt = (MinimalTuple) alloc(arg, len);

	memcpy(mt, (char *) th + MINIMAL_TUPLE_OFFSET, len);
	mt->t_len = len;
	return mt;
}

static inline MinimalTuple
gs_heap_to_row(HeapTuple ht, GsRowAllocFn alloc, void *arg)
{
	return gs_tuple_to_row(ht->t_data, ht->t_len, alloc, arg);
}

/* a row of values without NULLs, formed by layout l (natts > 0) */
static inline MinimalTuple
gs_form_fixed_row(const GsRowLayout *l, const Datum *values,
				  GsRowAllocFn alloc, void *arg)
{
	MinimalTuple mt = (MinimalTuple) alloc(arg, l->len);
	int			i;

	/* (the room is MAXALIGN'd: see GsRowAllocFn) */
	gs_zero_tuple(mt, l->len);
	mt->t_len = l->len;
	HeapTupleHeaderSetNatts(mt, l->natts);
	mt->t_hoff = l->hoff;
	for (i = 0; i < l->natts; i++)
		gs_store_fixed_value((char *) mt + l->off[i], values[i], l->attlen[i]);
	return mt;
}

/*
 * The first n fixed-width values of a row by layout l, copied into the row
 * at dst from a heap tuple's data src, where value i lies at src_off[i]
 * (a reader's fixed offsets, sort_heapread.c): as fetching and storing
 * them would.
 */
static pg_attribute_always_inline void
gs_copy_fixed_values(char *dst, const GsRowLayout *l, int n, const char *src,
					 const int32 *src_off)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		const char *from = src + src_off[i];
		char	   *to = dst + l->off[i];

		switch (l->attlen[i])
		{
			case 8:
				memcpy(to, from, 8);
				break;
			case 4:
				memcpy(to, from, 4);
				break;
			case 2:
				memcpy(to, from, 2);
				break;
			case 1:
				*to = *from;
				break;
			default:
				/* (by reference: the length negated) */
				memcpy(to, from, -l->attlen[i]);
				break;
		}
	}
}

/* a row of fixed-width values without NULLs from a heap tuple's data */
static pg_attribute_always_inline MinimalTuple
gs_form_fixed_row_at(const GsRowLayout *l, const char *src,
					 const int32 *src_off, GsRowAllocFn alloc, void *arg)
{
	MinimalTuple mt = (MinimalTuple) alloc(arg, l->len);

	gs_zero_tuple(mt, l->len);
	mt->t_len = l->len;
	HeapTupleHeaderSetNatts(mt, l->natts);
	mt->t_hoff = l->hoff;
	gs_copy_fixed_values((char *) mt, l, l->natts, src, src_off);
	return mt;
}

/*
 * The same where the last value is a varlena (l->tail_natts): its room in
 * src starts at its src_off, before alignment.  Stored as heap_fill_tuple
 * stores it: a short header or an external pointer as it is, unaligned; a
 * 4-byte header shortened where the value fits a short one and the
 * attribute is packable, else kept at the aligned start.
 */
static pg_attribute_always_inline MinimalTuple
gs_form_tail_row_at(const GsRowLayout *l, const char *src,
					const int32 *src_off, GsRowAllocFn alloc, void *arg)
{
	int			last = l->tail_natts - 1;
	const char *v = src + att_align_pointer(src_off[last], l->tail_align, -1,
											src + src_off[last]);
	Size		start = l->tail_start;
	Size		vlen;
	uint16		infomask = HEAP_HASVARWIDTH;
	bool		shorten = false;
	MinimalTuple mt;

	if (VARATT_IS_1B(v))
	{
		vlen = VARSIZE_ANY(v);
		if (VARATT_IS_EXTERNAL(v))
			infomask |= HEAP_HASEXTERNAL;
	}
	else if (l->tail_packable && VARATT_CAN_MAKE_SHORT(v))
	{
		vlen = VARATT_CONVERTED_SHORT_SIZE(v);
		shorten = true;
	}
	else
	{
		start = att_align_nominal(start, l->tail_align);
		vlen = VARSIZE(v);
	}
	mt = (MinimalTuple) alloc(arg, start + vlen);
	/* (the header and the padding up to the value's start) */
	gs_zero_tuple(mt, start);
	mt->t_len = start + vlen;
	HeapTupleHeaderSetNatts(mt, l->tail_natts);
	mt->t_infomask = infomask;
	mt->t_hoff = l->hoff;
	gs_copy_fixed_values((char *) mt, l, last, src, src_off);
	if (shorten)
	{
		SET_VARSIZE_SHORT((char *) mt + start, vlen);
		memcpy((char *) mt + start + 1, VARDATA(v), vlen - 1);
	}
	else
		memcpy((char *) mt + start, v, vlen);
	return mt;
}

/*
 * Can rows of natts attributes by layout l be copied as pr says: whole
 * tuples, or a projection whose values the layout places?
 */
static inline bool
gs_page_rows_fit(const GsPageRows *pr, const GsRowLayout *l, int natts)
{
	if (pr->fixed_off == NULL)
		return true;
	if (pr->var_tail)
		return l->tail_natts == natts;
	return l->len != 0 && l->natts == natts;
}

/*
 * The row of the tuple at off of a reader's page (gs_heapread_next_page)
 * copied from its bytes as pr says (gs_heapread_page_rows): the tuple
 * whole, or the picked values at their known offsets (layout l, the rows'
 * own: fixed-width values, or those and a varlena last).  NULL for a tuple that has to go through a slot: one without the
 * attributes the rows need, or a projection's with NULLs.
 */
static pg_attribute_always_inline MinimalTuple
gs_page_row(const GsPageRows *pr, const GsRowLayout *l, Page page,
			OffsetNumber off, GsRowAllocFn alloc, void *arg)
{
	ItemId		lp = PageGetItemId(page, off);
	HeapTupleHeader th = (HeapTupleHeader) PageGetItem(page, lp);

	if (unlikely(HeapTupleHeaderGetNatts(th) < pr->natts))
		return NULL;
	if (pr->fixed_off == NULL)
		return gs_tuple_to_row(th, ItemIdGetLength(lp), alloc, arg);
	if (unlikely(th->t_infomask & HEAP_HASNULL))
		return NULL;
	if (pr->walk != NULL)
		pr->walk(pr->walk_arg, (const char *) th + th->t_hoff);
	if (pr->var_tail)
		return gs_form_tail_row_at(l, (const char *) th + th->t_hoff,
								   pr->fixed_off, alloc, arg);
	return gs_form_fixed_row_at(l, (const char *) th + th->t_hoff,
								pr->fixed_off, alloc, arg);
}

static inline MinimalTuple
gs_form_row(TupleTableSlot *slot, int natts, const GsRowLayout *layout,
			GsRowAllocFn alloc, void *arg)
{
	MinimalTuple mt;
	bool		should_free;

	/* a projection's row of fixed-width values without NULLs */
	if (layout->len != 0 && layout->natts == natts && TTS_IS_VIRTUAL(slot))
	{
		int			i;

		slot_getallattrs(slot);
		for (i = 0; i < natts; i++)
			if (slot->tts_isnull[i])
				break;
		if (i == natts)
			return gs_form_fixed_row(layout, slot->tts_values, alloc, arg);
	}

	if (TTS_IS_MINIMALTUPLE(slot))
	{
		MinimalTuple src = ExecFetchSlotMinimalTuple(slot, &should_free);

		mt = (MinimalTuple) alloc(arg, src->t_len);
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
		if (HeapTupleHeaderGetNatts(ht->t_data) >= natts)
		{
			mt = gs_heap_to_row(ht, alloc, arg);
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
		int			ndesc = desc->natts;
		bool		hasnull = false;
		Size		hoff;
		Size		data_len;
		int			i;

		slot_getallattrs(slot);
		for (i = 0; i < ndesc; i++)
		{
			if (slot->tts_isnull[i])
			{
				hasnull = true;
				break;
			}
		}
		if (!hasnull && layout->len != 0 && layout->natts == ndesc)
			return gs_form_fixed_row(layout, slot->tts_values, alloc, arg);	/* a short heap tuple */
		hoff = SizeofMinimalTupleHeader;
		if (hasnull)
			hoff += BITMAPLEN(ndesc);
		hoff = MAXALIGN(hoff);
		data_len = heap_compute_data_size(desc, slot->tts_values,
										  slot->tts_isnull);
		/* as PostgreSQL's own forming of the row would fail (palloc) */
		if (hoff + data_len > MaxAllocSize)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("row is too big: size %zu, maximum size %zu",
							hoff + data_len, (size_t) MaxAllocSize)));
		mt = (MinimalTuple) alloc(arg, hoff + data_len);
		memset(mt, 0, hoff + data_len);
		mt->t_len = hoff + data_len;
		HeapTupleHeaderSetNatts(mt, ndesc);
		mt->t_hoff = hoff + MINIMAL_TUPLE_OFFSET;
		heap_fill_tuple(desc, slot->tts_values, slot->tts_isnull,
						(char *) mt + hoff, data_len, &mt->t_infomask,
						hasnull ? mt->t_bits : NULL);
		return mt;
	}
}

/* ---- sort_util.c: memory accounting and comparators ---- */
/*
 * The batch's memory: its rows, its chunks' buffers, and its arrays of
 * tuples, keys and lossy bits.  Inline: every row put asks.
 */
static inline int64
gs_mem_used(GsSortState *s)
{
	return s->arena_bytes + s->chunk_bytes +
		(int64) s->cap * (sizeof(MinimalTuple) + s->key_bytes) +
		(int64) (s->cap / 64 + 1) * sizeof(uint64);
}

extern void gs_note_mem(GsSortState *s, int64 extra);
extern int	gs_cmp_tuples(GsSortState *s, MinimalTuple ta, MinimalTuple tb);
extern int	gs_cmp_rows(const void *a, const void *b, void *arg);

/* ---- sort_load.c ---- */
extern void gs_prefault_wait(GsSortState *s);

/* ---- sort_chunks.c ---- */
extern void gs_finish_chunks(GsSortState *s);
extern void gs_close_chunk(GsSortState *s, bool keys_needed);

/* ---- sort_writer.c ---- */
extern GsRun *gs_new_run(GsSortState *s);
extern void gs_writer_emit(GsSortState *s, GsWriter *w, const char *data,
						   size_t len);
extern void gs_writer_put(GsSortState *s, GsWriter *w, const char *key,
						  bool lossy, MinimalTuple tup);

/* ---- sort_runs.c ---- */
extern void gs_free_batch(GsSortState *s);
extern void gs_swap_batches(GsSortState *s);
extern void gs_spill_wait(GsSortState *s);
extern void gs_spill_batch(GsSortState *s);

/* ---- sort_merge.c ---- */
extern GsSource *gs_merge_next(GsSortState *s, GsMerge *m);
extern GsMerge *gs_merge_runs(GsSortState *s, GsRun *runs, int n);
extern void gs_merge_chunk_rows(GsSortState *s, uint32 *rows, uint32 *keyidx);
extern GsMerge *gs_merge_streams(GsSortState *s, bool mapped);
extern int	gs_final_merge_order(GsSortState *s, bool mapped);
extern void gs_merge_waits(GsSortState *s, GsMerge *m);
extern void gs_merge_log_threads(GsSortState *s);
extern void gs_merge_passes(GsSortState *s);
extern void gs_merge_passes_to(GsSortState *s, int target, int width);

/* ---- sort_emit.c ---- */
extern void gs_merge_chunks_to_array(GsSortState *s);

#endif							/* SORTSTATE_INT_H */
