/*-------------------------------------------------------------------------
 *
 * index_rows.c
 *	  What a btree build knows of its index's rows: the key plan and the
 *	  normalized key of a row, the index's comparators, the unique
 *	  violation, and the in-place form of fixed-width tuples.  The
 *	  primitives index_sort.c, index_parallel.c and index_cluster.c call.
 *
 * A row's key is the encoded key columns (gpusort_keys.h) followed by one
 * 64-bit word holding the heap TID, so that the engine's order is btree
 * order whenever the columns are encoded exactly; where they are not,
 * the index's own comparators decide (sort support, as tuplesort does),
 * then the TID.
 *
 * It calls down only: the key encoder and PostgreSQL.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/tableam.h"
#include "catalog/catalog.h"
#include "catalog/pg_am.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "optimizer/plancat.h"
#include "portability/instr_time.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sortsupport.h"

#include "gpusort_int.h"
#include "gpusort_keys.h"
#include "gpusort_spill.h"
#include "gpusort_stats.h"
#include "index_int.h"

/* column part of the key: at most this many bytes, so the TID fits */
#define GS_IDX_MAX_COL_BYTES	24

/* the fewest rows a build expects */
#define GS_IDX_MIN_ROWS			1024

/*
 * The key plan over the leading key columns the encoder accepts; NULL when
 * it accepts not even the first.
 */
static GsKeyPlan *
gs_idx_keyplan(GsIdxBuild *b, int *ncols_planned)
{
	Relation	index = b->index;
	AttrNumber	attnos[INDEX_MAX_KEYS];
	Oid			sortops[INDEX_MAX_KEYS];
	Oid			colls[INDEX_MAX_KEYS];
	bool		nulls_first[INDEX_MAX_KEYS];
	int			ncols = 0;
	int			maxbytes;
	int			i;

	for (i = 0; i < b->nkeyatts; i++)
	{
		int16		opt = index->rd_indoption[i];
		Oid			type = index->rd_opcintype[i];
		Oid			op;

		op = get_opfamily_member(index->rd_opfamily[i], type, type,
								 (opt & INDOPTION_DESC) ?
								 BTGreaterStrategyNumber :
								 BTLessStrategyNumber);
		if (!OidIsValid(op) ||
			!gs_column_encodable(TupleDescAttr(b->itupdesc, i)->atttypid,
								 op, index->rd_indcollation[i], NULL))
			break;
		attnos[i] = i + 1;
		sortops[i] = op;
		colls[i] = index->rd_indcollation[i];
		nulls_first[i] = (opt & INDOPTION_NULLS_FIRST) != 0;
		ncols++;
	}
	*ncols_planned = ncols;
	if (ncols == 0)
		return NULL;

	maxbytes = Min(gpusort_max_key_bytes, GS_IDX_MAX_COL_BYTES);
	return gs_keyplan_create(ncols, attnos, sortops, colls, nulls_first,
							 b->itupdesc, maxbytes);
}

/*
 * Tuples formed in place when every column is fixed-width (no TOAST, no
 * varlena), and small enough that index_form_tuple could never refuse one
 * (a NULL bitmap adds at most a MAXALIGN'd word).
 */
static void
gs_idx_init_fixed(GsIdxBuild *b)
{
	Size		off = 0;
	int			i;

	b->fixed = false;
	for (i = 0; i < b->itupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(b->itupdesc, i);

		if (att->attlen <= 0)
			return;
		off = att_align_nominal(off, att->attalign);
		b->fixed_off[i] = (uint16) (IndexInfoFindDataOffset(0) + off);
		b->fixed_len[i] = att->attbyval ? att->attlen : -att->attlen;
		off += att->attlen;
	}
	b->fixed_natts = b->itupdesc->natts;
	b->fixed_size = MAXALIGN(IndexInfoFindDataOffset(0) + off);
	b->fixed = b->fixed_size + MAXIMUM_ALIGNOF <= INDEX_SIZE_MASK;
}

/* an index of one variable-width column: see gs_idx_form_var1 */
static void
gs_idx_init_var1(GsIdxBuild *b)
{
	Form_pg_attribute att = TupleDescAttr(b->itupdesc, 0);

	b->var1 = b->itupdesc->natts == 1 && att->attlen == -1;
	/* (heap_fill_tuple shortens the headers of all but PLAIN storage) */
	b->var1_packable = att->attstorage != TYPSTORAGE_PLAIN;
}

/*
 * gs_idx_form_fixed's tuple of values with a NULL among them: a NULL
 * bitmap, and the others' values packed after it, as heap_fill_tuple puts
 * them
 */
void
gs_idx_form_fixed_nulls(const GsIdxBuild *b, Datum *values, bool *isnull,
						Size size, IndexTuple dst)
{
	TupleDesc	desc = b->itupdesc;
	Size		hoff = IndexInfoFindDataOffset(INDEX_NULL_MASK);
	uint16		tupmask = 0;

	memset(dst, 0, size);
	heap_fill_tuple(desc, values, isnull, (char *) dst + hoff,
					heap_compute_data_size(desc, values, isnull),
					&tupmask, (bits8 *) dst + sizeof(IndexTupleData));
	dst->t_info = (unsigned short) (size | INDEX_NULL_MASK);
}

/*
 * Set up b for index: its key plan and key layout (the same in the leader
 * and in parallel workers).  False when the leading key column cannot be
 * encoded.
 */
bool
gs_idx_init(GsIdxBuild *b, Relation heap, Relation index,
			IndexInfo *indexInfo)
{
	int			ncols_planned;

	memset(b, 0, sizeof(GsIdxBuild));
	b->cxt = CurrentMemoryContext;
	b->heap = heap;
	b->index = index;
	b->itupdesc = RelationGetDescr(index);
	b->nkeyatts = IndexRelationGetNumberOfKeyAttributes(index);
	b->isunique = indexInfo->ii_Unique;
	b->nulls_not_distinct = indexInfo->ii_NullsNotDistinct;

	b->kp = gs_idx_keyplan(b, &ncols_planned);
	if (b->kp == NULL)
		return false;
	b->colbytes = gs_keyplan_key_bytes(b->kp);
	b->colwords = (b->colbytes + 7) / 8;
	b->keybytes = (b->colwords + 1) * 8;
	Assert(GS_KEY_BYTES_VALID(b->keybytes));
	b->exact = ncols_planned == b->nkeyatts &&
		gs_keyplan_ncols_encoded(b->kp) == b->nkeyatts &&
		gs_keyplan_exact(b->kp);
	gs_idx_init_fixed(b);
	gs_idx_init_var1(b);
	b->derive_key = b->fixed && gs_keyplan_derives_one(b->kp);
	return true;
}

void
gs_idx_sortsupport(GsIdxBuild *b)
{
	int			i;

	b->ssup = (SortSupport) palloc0(b->nkeyatts * sizeof(SortSupportData));
	for (i = 0; i < b->nkeyatts; i++)
	{
		SortSupport s = &b->ssup[i];
		int16		opt = b->index->rd_indoption[i];

		s->ssup_cxt = CurrentMemoryContext;
		s->ssup_collation = b->index->rd_indcollation[i];
		s->ssup_nulls_first = (opt & INDOPTION_NULLS_FIRST) != 0;
		s->ssup_attno = i + 1;
		s->abbreviate = false;
		gs_PrepareSortSupportFromIndexRel(b->index,
										  (opt & INDOPTION_DESC) != 0, s);
	}
}

/* compare the key columns of two index tuples, as the btree orders them */
int
gs_idx_cmp_cols(GsIdxBuild *b, IndexTuple t1, IndexTuple t2)
{
	int			i;

	for (i = 0; i < b->nkeyatts; i++)
	{
		Datum		d1,
					d2;
		bool		n1,
					n2;
		int			c;

		d1 = index_getattr(t1, i + 1, b->itupdesc, &n1);
		d2 = index_getattr(t2, i + 1, b->itupdesc, &n2);
		c = ApplySortComparator(d1, n1, d2, n2, &b->ssup[i]);
		if (c != 0)
			return c;
	}
	return 0;
}

/* the error btbuild raises for two live tuples with equal keys */
void
gs_idx_unique_violation(GsIdxBuild *b, IndexTuple itup)
{
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	char	   *key_desc;

	index_deform_tuple(itup, b->itupdesc, values, isnull);
	key_desc = BuildIndexValueDescription(b->index, values, isnull);
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("could not create unique index \"%s\"",
					RelationGetRelationName(b->index)),
			 key_desc ? errdetail("Key %s is duplicated.", key_desc) :
			 errdetail("Duplicate keys exist."),
			 errtableconstraint(b->heap,
								RelationGetRelationName(b->index))));
}

/* any key column NULL? */
bool
gs_idx_key_has_null(GsIdxBuild *b, IndexTuple itup)
{
	int			i;

	if (!IndexTupleHasNulls(itup))
		return false;
	for (i = 0; i < b->nkeyatts; i++)
		if (att_isnull(i, (bits8 *) itup + sizeof(IndexTupleData)))
			return true;
	return false;
}

/*
 * The normalized key of one row into key (keybytes): the encoded key
 * columns, then the heap TID.  Returns true when the encoding was lossy.
 */
bool
gs_idx_encode(GsIdxBuild *b, Datum *values, bool *isnull, ItemPointer tid,
			  uint64 *key)
{
	bool		lossy;

	/* whole words: straight into the key */
	if (b->colbytes == b->colwords * 8)
	{
		lossy = gs_encode_key(b->kp, values, isnull, key);
		key[b->colwords] = gs_idx_tid_word(tid);
		return lossy;
	}
	lossy = gs_encode_key(b->kp, values, isnull, b->colbuf);
	if (b->colbytes == 4)
	{
		uint32		w;

		memcpy(&w, b->colbuf, sizeof(w));
		key[0] = (uint64) w << 32;
	}
	else
		memcpy(key, b->colbuf, b->colbytes);
	key[b->colwords] = gs_idx_tid_word(tid);
	return lossy;
}

/*
 * What a run on disk must hold of a row (the sort core's run format,
 * gpusort_exec.h): the key is left out where the key plan can derive it
 * again from the index tuple (keys_derive.c), with the TID word from the
 * tuple's own TID, and the MAXALIGN padding after the index tuple is left
 * out; so a record takes what PostgreSQL's build writes, a length word and
 * the index tuple.  These run on the threads that write and merge runs:
 * they read the tuple at any alignment and call nothing of PostgreSQL's.
 */
bool
gs_idx_key_derivable(void *arg, const char *data)
{
	GsIdxBuild *b = (GsIdxBuild *) arg;

	return gs_key_derivable_index(b->kp, data);
}

/* gs_idx_key_derive's widening of a 4-byte column part, out of its way */
static pg_noinline bool
gs_idx_key_derive4(GsIdxBuild *b, const char *data, char *key)
{
	bool		lossy = gs_key_derive_index(b->kp, data, key);
	uint32		w;
	uint64		k0;

	/* to the top of the first word */
	memcpy(&w, key, sizeof(w));
	k0 = (uint64) w << 32;
	memcpy(key, &k0, sizeof(k0));
	return lossy;
}

/*
 * The key gs_idx_encode made for the row whose index tuple is data,
 * written straight into key where the column part is whole words (a
 * stream's thread does this for every row it reads).  The TID word goes
 * first, so that the column part's derivation is a tail call: no frame,
 * no registers saved, and no local whose address a call takes (which cost
 * a stack protector's check a row).
 */
bool
gs_idx_key_derive(void *arg, const char *data, size_t data_off, char *key)
{
	GsIdxBuild *b = (GsIdxBuild *) arg;
	const char *tid = data + offsetof(IndexTupleData, t_tid);
	uint16		hi;
	uint16		lo;
	uint16		posid;
	uint64		tidword;

	/* gs_idx_tid_word's, from the fields (a local ItemPointerData, too) */
	memcpy(&hi, tid + offsetof(ItemPointerData, ip_blkid) +
		   offsetof(BlockIdData, bi_hi), sizeof(hi));
	memcpy(&lo, tid + offsetof(ItemPointerData, ip_blkid) +
		   offsetof(BlockIdData, bi_lo), sizeof(lo));
	memcpy(&posid, tid + offsetof(ItemPointerData, ip_posid), sizeof(posid));
	tidword = ((uint64) (((uint32) hi << 16) | lo) << 16) | posid;
	memcpy(key + b->colwords * 8, &tidword, sizeof(tidword));
	if (unlikely(b->colbytes == 4))
		return gs_idx_key_derive4(b, data, key);
	return gs_key_derive_index(b->kp, data, key);
}

/* the bytes of a row a run keeps: its index tuple, or all with a payload */
size_t
gs_idx_row_keep(void *arg, const char *data)
{
	GsIdxBuild *b = (GsIdxBuild *) arg;
	unsigned short t_info;

	if (b->payload)
		return SIZE_MAX;
	memcpy(&t_info, data + offsetof(IndexTupleData, t_info), sizeof(t_info));
	return t_info & INDEX_SIZE_MASK;
}

/*
 * The rows the build should expect: the planner's estimate of the heap's,
 * that fraction of them, a sixteenth for a partial index (it may take few:
 * start small, grow as needed).
 */
double
gs_idx_estimate_rows(GsIdxBuild *b, bool partial, double fraction)
{
	BlockNumber pages;
	double		allvisfrac;
	double		est;

	estimate_rel_size(b->heap, NULL, &pages, &est, &allvisfrac);
	est *= fraction;
	if (partial)
		est /= 16;
	return Max(est, GS_IDX_MIN_ROWS);
}

/*
 * The data bytes the key columns of a tuple without NULLs take when they
 * are all fixed-width, else 0.
 */
int
gs_idx_fixed_key_bytes(GsIdxBuild *b)
{
	int			off = 0;
	int			i;

	for (i = 0; i < b->nkeyatts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(b->itupdesc, i);

		if (att->attlen <= 0)
			return 0;
		off = att_align_nominal(off, att->attalign) + att->attlen;
	}
	return off;
}

