/*-------------------------------------------------------------------------
 *
 * gpusort_spill.h
 *	  Temporary files for sorted runs and work spread over threads
 *	  (spill.c), and the threads that merge runs into streams
 *	  (spill_stream.c).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_SPILL_H
#define GPUSORT_SPILL_H

#include "postgres.h"

#include "access/htup_details.h"
#include "lib/stringinfo.h"
#include "utils/palloc.h"

#include "gpusort_compat.h"

/*
 * A row on disk: a uint32 word, then the row's key unless the word says it
 * is left out, then the row's bytes.  The word's top bit says whether the
 * key was encoded lossily, the next whether the key is left out.
 *
 * A key is left out where the sort can derive it again from the row (see
 * keys_derive.c): whoever reads the record derives it through the
 * format's derive (GsKeyDeriveFn), which writes the key of the row whose
 * bytes on disk (see below) are at body, at any alignment.  It runs on the
 * streams' threads, and so calls nothing of PostgreSQL.
 *
 * The sort's tape rows (GsTapeFormat.rows false): the rest of the word is
 * the MinimalTuple's length (a tuple is shorter than 1 GB, MaxAllocSize,
 * so 30 bits take it), and the tuple follows from MINIMAL_TUPLE_DATA_OFFSET
 * on (its t_len and padding are not written: the word restores them).
 * Where the key is left out, the derivation says whether it was lossy,
 * and the top bit says instead whether the tuple's header is left out
 * too: a tuple without NULLs whose header is the one every such tuple of
 * the sort has (std_natts, std_infomask, std_hoff), give or take one of
 * the hint bit sets of gs_tape_hints (a tuple copied from a table's page
 * keeps them), which bits 28-29 name; the length then takes 28 bits, and
 * only the tuple's data follows.  A one-column int8 row then takes 12
 * bytes, as PostgreSQL's sort of a single Datum does.
 *
 * A variant's rows (rows true: a btree build's, CLUSTER's; gpusort_exec.h)
 * live in an envelope of a MinimalTuple header, a flags byte at flags_off
 * and the variant's data from data_off on, MAXALIGN'd.  Their word holds
 * the flags byte and the data's length (at most TAPE_ROW_MAX_LEN), and
 * how many zero bytes at the data's end are not written (up to 7, the
 * padding of a MAXALIGN'd index tuple); only the data's other bytes
 * follow.  So a btree build's record is as large as PostgreSQL's: a
 * length word and the index tuple.
 *
 * Either way a record is at most TAPE_ROW_HDR + key_bytes + t_len bytes.
 */
#define TAPE_ROW_HDR	sizeof(uint32)
#define TAPE_LOSSY_BIT	((uint32) 1 << 31)
#define TAPE_NOKEY_BIT	((uint32) 1 << 30)
#define TAPE_LEN_MASK	(TAPE_NOKEY_BIT - 1)
#define TAPE_ROW_FLAGS_SHIFT 22
#define TAPE_ROW_TRIM_SHIFT 19
#define TAPE_ROW_TRIM_MAX	7
#define TAPE_ROW_MAX_LEN	(((uint32) 1 << TAPE_ROW_TRIM_SHIFT) - 1)
#define TAPE_NOHDR_BIT		TAPE_LOSSY_BIT	/* with TAPE_NOKEY_BIT */
#define TAPE_HINTS_SHIFT	28
#define TAPE_NOHDR_LEN_MASK	(((uint32) 1 << TAPE_HINTS_SHIFT) - 1)

/* the hint bits a tuple whose header is left out may carry: set h */
static inline uint16
gs_tape_hints(int h)
{
	switch (h)
	{
		case 0:
			return 0;
		case 1:
			return HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID;
		case 2:
			return HEAP_XMIN_FROZEN | HEAP_XMAX_INVALID;
		default:
			return HEAP_XMAX_INVALID;
	}
}

/*
 * derive(arg, body, body_off, key): body is what the record holds of the
 * row, which goes at body_off in the tuple (see GsTapeRec): for tape rows
 * at MINIMAL_TUPLE_DATA_OFFSET, or past a header left out at the tuple's
 * data.  Returns whether the key is lossy.
 */
typedef bool (*GsKeyDeriveFn) (void *arg, const char *body, size_t body_off,
							   char *key);

/*
 * tie(arg, a, a_off, b, b_off): the order of two rows whose keys are equal
 * in their first tie_bytes (a and b what records hold of them, at any
 * alignment, going at a_off and b_off in their tuples, as for derive), as
 * PostgreSQL's comparators give it but from the rows' bytes alone, so on
 * any thread; the key's bytes after tie_bytes order rows it finds equal.
 */
typedef int (*GsRowTieFn) (void *arg, const char *a, size_t a_off,
						   const char *b, size_t b_off);

typedef struct GsTapeFormat
{
	int			key_bytes;
	bool		rows;			/* a variant's rows (see above) */
	uint16		flags_off;		/* rows: where the envelope's flags are */
	uint16		data_off;		/* rows: where its data starts */
	GsKeyDeriveFn derive;		/* keys left out, or NULL if none is */
	void	   *derive_arg;
	GsRowTieFn	tie;			/* lossy keys a merge's threads order, or
								 * NULL: the keys alone decide there */
	void	   *tie_arg;
	int			tie_bytes;
	/* tape rows: the header of a tuple without NULLs (0 natts: none) */
	uint16		std_natts;
	uint16		std_infomask;
	uint8		std_hoff;
	/* the same as the writer checks it (gs_tape_std_init) */
	uint64		std_word;
	uint64		std_mask;
	uint64		std_hint_words[4];
	uint16		std_infomasks[4];	/* and t_infomask under each hint set */
} GsTapeFormat;

/* what a record's word says of the row (gs_tape_decode) */
typedef struct GsTapeRec
{
	size_t		head;			/* bytes of the word and the key */
	size_t		body_off;		/* where the bytes on disk go in the tuple */
	size_t		body_len;		/* how many there are */
	uint32		t_len;			/* the tuple's length */
} GsTapeRec;

static inline void
gs_tape_decode(const GsTapeFormat *tf, uint32 word, GsTapeRec *rec)
{
	rec->head = TAPE_ROW_HDR + ((word & TAPE_NOKEY_BIT) ? 0 : tf->key_bytes);
	if (tf->rows)
	{
		uint32		len = word & TAPE_ROW_MAX_LEN;

		rec->t_len = tf->data_off + len;
		rec->body_off = tf->data_off;
		rec->body_len = len -
			((word >> TAPE_ROW_TRIM_SHIFT) & TAPE_ROW_TRIM_MAX);
	}
	else if ((word & (TAPE_NOKEY_BIT | TAPE_NOHDR_BIT)) ==
			 (TAPE_NOKEY_BIT | TAPE_NOHDR_BIT))
	{
		rec->t_len = word & TAPE_NOHDR_LEN_MASK;
		rec->body_off = tf->std_hoff - MINIMAL_TUPLE_OFFSET;
		rec->body_len = rec->t_len - rec->body_off;
	}
	else
	{
		rec->t_len = word & TAPE_LEN_MASK;
		rec->body_off = MINIMAL_TUPLE_DATA_OFFSET;
		rec->body_len = rec->t_len - MINIMAL_TUPLE_DATA_OFFSET;
	}
}

/*
 * The t_hoff of a tuple without NULLs (SizeofMinimalTupleHeader MAXALIGN'd,
 * counted from where a heap tuple's header would start): the only std_hoff
 * a sort sets
 */
#define TAPE_STD_HOFF \
	(MAXALIGN(SizeofMinimalTupleHeader) + MINIMAL_TUPLE_OFFSET)

/*
 * Where the writer reads a tuple's header in one word: from t_len's end,
 * through t_infomask2, t_infomask, t_hoff and the one byte of padding
 * before the data of a tuple without NULLs (mt_padding, the word's first
 * bytes, masked off)
 */
#define TAPE_STD_WORD_OFF	(offsetof(MinimalTupleData, mt_padding) + \
	sizeof(((MinimalTupleData *) NULL)->mt_padding) - 2)

/* the word of a tuple whose header is std, hint set h: its bytes at off */
static inline uint64
gs_tape_std_word_of(const GsTapeFormat *tf, int h)
{
	union
	{
		MinimalTupleData t;
		char		b[TAPE_STD_HOFF - MINIMAL_TUPLE_OFFSET];
	}			u;
	uint64		w;

	memset(&u, 0, sizeof(u));
	u.t.t_infomask2 = tf->std_natts;
	u.t.t_infomask = tf->std_infomask | gs_tape_hints(h);
	u.t.t_hoff = tf->std_hoff;
	memcpy(&w, u.b + TAPE_STD_WORD_OFF, sizeof(w));
	return w;
}

/*
 * Fill in the words gs_tape_std_header compares and the t_infomasks
 * gs_tape_restore writes (a switch a row in the streams' threads), once
 * std_natts, std_infomask and std_hoff are set
 */
static inline void
gs_tape_std_init(GsTapeFormat *tf)
{
	char		m[sizeof(uint64)];
	int			h;

	StaticAssertStmt(TAPE_STD_WORD_OFF + sizeof(uint64) ==
					 TAPE_STD_HOFF - MINIMAL_TUPLE_OFFSET,
					 "a tuple's header and padding end a word past t_len");
	Assert(tf->std_hoff == TAPE_STD_HOFF);
	/* all but the two bytes of mt_padding in the word */
	memset(m, 0xFF, sizeof(m));
	memset(m, 0, offsetof(MinimalTupleData, t_infomask2) - TAPE_STD_WORD_OFF);
	memcpy(&tf->std_mask, m, sizeof(uint64));
	tf->std_word = gs_tape_std_word_of(tf, 0);
	for (h = 0; h < 4; h++)
	{
		tf->std_hint_words[h] = gs_tape_std_word_of(tf, h) ^ tf->std_word;
		tf->std_infomasks[h] = tf->std_infomask | gs_tape_hints(h);
	}
}

/*
 * May the header of tape row tup be left out (see above)?  If so, the
 * number of its hint bit set (gs_tape_hints), else -1.  (Run for every
 * row twice, as it is counted and as it is written: the header and the
 * padding after it are compared as one word, gs_tape_std_init's.)
 */
static inline int
gs_tape_std_header(const GsTapeFormat *tf, MinimalTuple tup)
{
	uint64		w;
	uint64		d;

	if (tf->std_natts == 0 || tup->t_len > TAPE_NOHDR_LEN_MASK)
		return -1;
	Assert(tf->std_hoff == TAPE_STD_HOFF);
	/* (a tuple is at least SizeofMinimalTupleHeader, in MAXALIGN'd space) */
	memcpy(&w, (const char *) tup + TAPE_STD_WORD_OFF, sizeof(w));
	d = (w & tf->std_mask) ^ tf->std_word;
	if (d == 0)
		return 0;
	if (d == tf->std_hint_words[1])
		return 1;
	if (d == tf->std_hint_words[2])
		return 2;
	if (d == tf->std_hint_words[3])
		return 3;
	return -1;
}

/* does the word say whether the key is lossy? (else its derivation does) */
static inline bool
gs_tape_lossy_in_word(const GsTapeFormat *tf, uint32 word)
{
	return tf->rows || !(word & TAPE_NOKEY_BIT);
}

/*
 * The rest of a tuple of rec->t_len bytes at dst whose bytes on disk are
 * (or go) at dst + rec->body_off: header, flags, zeros.
 */
static inline void
gs_tape_restore(const GsTapeFormat *tf, uint32 word, const GsTapeRec *rec,
				char *dst)
{
	/*
	 * Zeros before the row's bytes: inline stores for the two places they
	 * start (a call to memset for every row read back cost more than the
	 * rest of this)
	 */
	if (rec->body_off == MAXALIGN(MINIMAL_TUPLE_DATA_OFFSET))
		memset(dst, 0, MAXALIGN(MINIMAL_TUPLE_DATA_OFFSET));
	else if (rec->body_off == MINIMAL_TUPLE_DATA_OFFSET)
		memset(dst, 0, MINIMAL_TUPLE_DATA_OFFSET);
	else
		memset(dst, 0, rec->body_off);
	((MinimalTuple) dst)->t_len = rec->t_len;
	if (!tf->rows && rec->body_off > MINIMAL_TUPLE_DATA_OFFSET)
	{
		MinimalTuple tup = (MinimalTuple) dst;

		/*
		 * The header left out (see above).  Stores only: the block was last
		 * read on another core, and reading its line back (as
		 * HeapTupleHeaderSetNatts would) stalled a stream's thread on it.
		 */
		tup->t_infomask2 = tf->std_natts;
		tup->t_infomask = tf->std_infomasks[(word >> TAPE_HINTS_SHIFT) & 3];
		tup->t_hoff = tf->std_hoff;
	}
	else if (tf->rows)
	{
		size_t		end = rec->body_off + rec->body_len;

		dst[tf->flags_off] = (char) (uint8) (word >> TAPE_ROW_FLAGS_SHIFT);
		/* the padding left out, often none */
		if (end < rec->t_len)
			memset(dst + end, 0, rec->t_len - end);
	}
}

/*
 * The first word of a normalized key (a 4-byte key widened), which the
 * merges compare first; the words after it are native uint64 too.
 */
static inline uint64
gs_key_word0(const char *key, int key_bytes)
{
	if (key_bytes == 4)
	{
		uint32		x;

		memcpy(&x, key, 4);
		return x;
	}
	else
	{
		uint64		x;

		memcpy(&x, key, 8);
		return x;
	}
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

/*
 * The order of two rows of a merge's threads whose first words are equal:
 * the rest of their keys, or, where the format has a tie function, the
 * keys' first tie_bytes, then the rows' bytes (da at da_off, db at db_off,
 * see GsRowTieFn), then the keys' bytes after tie_bytes.
 */
static inline int
gs_tape_cmp_rest(const GsTapeFormat *tf, const char *ka, const char *kb,
				 const char *da, size_t da_off, const char *db, size_t db_off)
{
	int			w;
	int			c;

	if (tf->tie == NULL)
		return gs_key_cmp_rest(ka, kb, tf->key_bytes);
	for (w = 8; w < tf->key_bytes; w += 8)
	{
		uint64		x;
		uint64		y;

		if (w == tf->tie_bytes &&
			(c = tf->tie(tf->tie_arg, da, da_off, db, db_off)) != 0)
			return c;
		memcpy(&x, ka + w, 8);
		memcpy(&y, kb + w, 8);
		if (x != y)
			return x < y ? -1 : 1;
	}
	if (tf->tie_bytes == tf->key_bytes)
		return tf->tie(tf->tie_arg, da, da_off, db, db_off);
	return 0;
}

/* where a record's whole tuple keeps what the tie function reads */
static inline size_t
gs_tape_tuple_body_off(const GsTapeFormat *tf)
{
	return tf->rows ? tf->data_off : MINIMAL_TUPLE_DATA_OFFSET;
}

/*
 * Loser trees over n inputs (the merges of sort_merge.c and
 * spill_stream.c; built by loser_tree.c): node 1 is the root, inputs are
 * the leaves n .. 2n-1, tree[node] holds the loser of the match at node.
 * gs_loser_tree_build plays every match and returns the winner;
 * before(arg, a, b) says whether input a's item comes first.
 * Each merge replays a winner's path itself, where speed matters.
 */
typedef bool (*GsBeforeFn) (void *arg, int a, int b);

extern int	gs_loser_tree_build(int *tree, int n, GsBeforeFn before, void *arg);

/*
 * Input w of such a tree moved on to an item whose first key word is wk:
 * replay its path to the root and return the new winner (also in
 * tree[0]).  tree_k0[node] holds the first key word of tree[node]'s item.
 * Random keys make each match a coin toss, which a branch mispredicts half
 * the time, so the words are compared and the winner chosen with masks
 * (not ?:, which compilers turn into branches); before() decides only
 * between equal words.
 */
static pg_attribute_always_inline int
gs_loser_tree_replay(int *tree, uint64 *tree_k0, int n, int w, uint64 wk,
					 GsBeforeFn before, void *arg)
{
	int			node;

	for (node = (w + n) / 2; node >= 1; node /= 2)
	{
		int			l = tree[node];
		uint64		lk = tree_k0[node];
		bool		swap = lk < wk;
		uint64		mask;
		int			imask;

		if (unlikely(lk == wk))
			swap = before(arg, l, w);
		mask = (uint64) 0 - (uint64) swap;
		imask = (int) (uint32) mask;
		tree[node] = l ^ ((l ^ w) & imask);
		tree_k0[node] = lk ^ ((lk ^ wk) & mask);
		w ^= (l ^ w) & imask;
		wk ^= (lk ^ wk) & mask;
	}
	tree[0] = w;
	return w;
}

/* a sorted run: a stretch of the sort's temporary file */
typedef struct GsRun
{
	int64		offset;
	int64		bytes;
	size_t		nrows;
	size_t		nkeyed;			/* rows whose key it holds: their key can't
								 * be derived from their bytes */
} GsRun;

/* ---- the temporary file ---- */

typedef struct GsTempFile GsTempFile;

extern GsTempFile *gs_temp_create(MemoryContext cxt);
extern void gs_temp_charge(GsTempFile *f, int64 len);
extern int64 gs_temp_place(GsTempFile *f, int64 len);
extern int64 gs_temp_extend(GsTempFile *f, int64 len);
extern bool gs_temp_is_shared(GsTempFile *f);
extern int	gs_temp_pwrite(GsTempFile *f, const void *buf, size_t len,
						   int64 off);
extern int	gs_temp_pread(GsTempFile *f, void *buf, size_t len, int64 off);
extern bool gs_temp_map(GsTempFile *f);
extern int64 gs_temp_discard(GsTempFile *f, int64 from, int64 to, bool all);
extern void gs_temp_error(GsTempFile *f, int err, bool writing) pg_attribute_noreturn();
extern int64 gs_temp_peak(GsTempFile *f);
extern void gs_temp_close(GsTempFile *f);

/*
 * The temporary file shared with parallel workers while they write runs
 * into it (sort_parallel.c): its name, and the counters that place the
 * bytes every process adds, in shared memory.  The file stays the
 * leader's: it is created, removed and reported by the leader alone.
 */
typedef struct GsTempShared
{
	char		path[MAXPGPATH];
	int64		end;			/* bytes assigned (atomic) */
	int64		held;			/* bytes on disk (atomic) */
	int64		peak;			/* most bytes held at once (atomic) */
} GsTempShared;

extern void gs_temp_share(GsTempFile *f, GsTempShared *sh);
extern void gs_temp_unshare(GsTempFile *f);
extern GsTempFile *gs_temp_attach(MemoryContext cxt, GsTempShared *sh);

/* ---- work spread over threads ---- */

/*
 * One part of a parallel task.  It must not call PostgreSQL (no palloc, no
 * elog) and should return soon after *stop becomes true.
 */
typedef void (*GsPartFn) (void *arg, int part, int nparts,
						  volatile bool *stop);

typedef struct GsTask GsTask;

extern GsTask *gs_task_start(MemoryContext parent, GsPartFn fn, void *arg,
							 int nparts);
extern GsTask *gs_task_start_copy(MemoryContext parent, GsPartFn fn,
								  const void *arg, Size argsize, int nparts);
extern bool gs_task_wait(GsTask *t);
extern void gs_task_cancel(GsTask *t);
extern void gs_tasks_stop(int level);
extern bool gs_parallel(GsPartFn fn, void *arg, int nparts);

/*
 * The backend's waits for threads (tasks' and streams') wake this often to
 * look for interrupts, at a deadline from gs_deadline.
 */
#define WAIT_POLL_MS		10

struct timespec;
extern void gs_deadline(struct timespec *ts, int ms);

/* ---- fresh memory: huge pages, and pages faulted in by a thread ---- */

/* transparent huge page size on x86-64 and arm64 with 4 kB base pages */
#define HUGE_PAGE_BYTES		(2 * 1024 * 1024)

/* sort_util.c: ask for transparent huge pages over [p, p + len) */
extern void gs_advise_huge(void *p, size_t len);

/* ranges of fresh memory to populate in the background (sort_load.c) */
#define GS_PREFAULT_RANGES	4
typedef struct GsPrefault
{
	char	   *start[GS_PREFAULT_RANGES];
	size_t		len[GS_PREFAULT_RANGES];

	/*
	 * A range of a shared mapping that the process is done with, whose page
	 * table entries are dropped first (its contents stay; see sort_load.c)
	 */
	char	   *drop;
	size_t		drop_len;
} GsPrefault;

extern void gs_populate_start(MemoryContext cxt, GsTask **task,
							  const GsPrefault *pf);
extern void gs_populate_wait(GsTask **task);

/* ---- runs merged by threads into streams of rows (spill_stream.c) ---- */

typedef struct GsStream GsStream;

/*
 * A record of a stream: its length (a multiple of MAXIMUM_ALIGNOF), then at
 * STREAM_KEY_OFFSET the row's key, then at gs_stream_tuple_offset() the
 * row as a complete MinimalTuple.
 */
#define STREAM_KEY_OFFSET	MAXALIGN(sizeof(uint32))

static inline size_t
gs_stream_tuple_offset(int key_bytes)
{
	return STREAM_KEY_OFFSET + MAXALIGN(key_bytes);
}

extern size_t gs_stream_block_size(int64 mem, int nstreams);
extern GsStream *gs_stream_start(MemoryContext cxt, GsTempFile *f,
								 const GsTapeFormat *tf, const GsRun *runs,
								 int nruns, size_t block_size,
								 size_t read_size);
extern GsStream *gs_stream_cascade(MemoryContext cxt, GsStream **inputs,
								   int n, size_t block_size);
extern const char *gs_stream_next(GsStream *st);
extern const char *const *gs_stream_next_refs(GsStream *st, size_t *n);
extern double gs_stream_wait_ms(GsStream *st);
extern void gs_stream_report(GsStream *st, StringInfo buf);

#endif							/* GPUSORT_SPILL_H */
