/*-------------------------------------------------------------------------
 *
 * keys_derive.c
 *	  Keys derived again from a row's stored bytes, so that a sorted run on
 *	  disk need not hold them.
 *
 * A run record held a row's key beside its tuple: 8 bytes a row for an
 * int8 sort, 32 for a text one, which made gpusort's temporary files 30 to
 * 60% larger than PostgreSQL's for the same sort.  When the key is cheap to
 * compute again from the tuple, the record leaves it out and whoever reads
 * the record (the backend's merge, a stream's thread) derives it here.
 *
 * What a run leaves out must be derivable without PostgreSQL: the streams'
 * threads call gs_key_derive, and threads never call PostgreSQL (no palloc,
 * no elog, no detoasting).  So a key is derived only when:
 *	- every encoded column is of a kind whose encoding is arithmetic on the
 *	  stored value: the fixed kinds (interval aside, whose encoder reads an
 *	  8-byte field through a struct pointer, which a record at any
 *	  alignment must not do), and numeric and C-ordered text, bpchar and
 *	  name, which read their stored bytes.  ICU keys stay stored: they cost
 *	  about a microsecond each, their encoder keeps a cache that threads
 *	  would share, and may report errors;
 *	- and, for a row, its tuple holds every encoded column (a tuple with
 *	  fewer attributes would take the missing ones from the descriptor's
 *	  defaults) and each variable-width value among them is inline and
 *	  uncompressed (else deriving would detoast).  gs_key_derivable says
 *	  so per row, and the writer keeps the key of a row where it does not.
 *
 * The same deforming lets threads order two index tuples of one text
 * column in C order whose keys are equal (gs_key_tie_index): a lossy key
 * holds only the text's first bytes, and the rest are compared here, as
 * the column's comparator would (bytes, then length), for the rows that
 * gs_key_derivable_index said yes to.
 *
 * The stored tuple is read at any alignment (a stream's thread reads
 * records packed in its read buffer): fixed values are copied out, and
 * the offsets are computed as PostgreSQL's deforming computes them, from
 * the tuple's own start, which was MAXALIGNed when it was formed.
 *
 * Calls gs_encode_key (keys_encode.c) and PostgreSQL's tuple layout
 * macros only.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/itup.h"
#include "access/tupmacs.h"

#include "gpusort_keys.h"
#include "keys_int.h"

/* where a MinimalTuple's fields lie in its bytes from MINIMAL_TUPLE_DATA_OFFSET */
#define BODY_INFOMASK2	(offsetof(MinimalTupleData, t_infomask2) - MINIMAL_TUPLE_DATA_OFFSET)
#define BODY_INFOMASK	(offsetof(MinimalTupleData, t_infomask) - MINIMAL_TUPLE_DATA_OFFSET)
#define BODY_HOFF		(offsetof(MinimalTupleData, t_hoff) - MINIMAL_TUPLE_DATA_OFFSET)
#define BODY_BITS		(offsetof(MinimalTupleData, t_bits) - MINIMAL_TUPLE_DATA_OFFSET)

/* may a column of this kind be derived? (see the file header) */
static bool
kind_derivable(GsKind kind)
{
	if (GSK_IS_ICU(kind))
		return false;
	return kind != GSK_INTERVAL;
}

/*
 * Fill in the plan's derivation (gs_keyplan_create, last): whether keys
 * can be derived, and the layout of the attributes up to the last encoded
 * one.
 */
void
gs_keyplan_derive_init(GsKeyPlan *kp, TupleDesc tupdesc)
{
	int			natts = 0;
	bool		varlena = false;
	int			off = 0;
	int			i;

	kp->derive = GSD_NEVER;
	kp->derive_one = false;
	kp->derive_int = false;
	kp->derive_text = false;
	for (i = 0; i < kp->nenc; i++)
	{
		const GsKeyCol *col = &kp->cols[i];

		if (!kind_derivable(col->kind) || col->attidx >= GS_DERIVE_MAX_ATTS)
			return;
		natts = Max(natts, col->attidx + 1);
		if (TupleDescAttr(tupdesc, col->attidx)->attlen < 0)
			varlena = true;
	}

	kp->derive_natts = natts;
	for (i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);
		GsDeriveAtt *da = &kp->datt[i];

		da->len = att->attlen;
		da->align = att->attalign;
		da->byval = att->attbyval;
		da->varlena_key = false;
		if (att->attlen == -1)
		{
			int			c;

			for (c = 0; c < kp->nenc; c++)
				if (kp->cols[c].attidx == i)
					da->varlena_key = true;
		}

		/*
		 * Where it lies in a tuple without NULLs, if every attribute before
		 * is fixed-width: aligned, or for a varlena where its alignment
		 * starts (a short header is not aligned: derive_values)
		 */
		if (off < 0)
			da->fixoff = -1;
		else if (att->attlen > 0)
		{
			off = att_align_nominal(off, att->attalign);
			da->fixoff = off;
			off += att->attlen;
		}
		else
		{
			da->fixoff = off;
			off = -1;
		}
	}

	/* every encoded column at a known place (no varlena before it)? */
	kp->derive_fixed = true;
	for (i = 0; i < kp->nenc; i++)
		if (kp->datt[kp->cols[i].attidx].fixoff < 0)
			kp->derive_fixed = false;
	kp->derive = varlena ? GSD_CHECK : GSD_FIXED;
	/* one text column in C order at a known place: derive_text_at */
	kp->derive_text = kp->text_one && kp->derive_fixed;

	/*
	 * The plan's fast path (gs_encode_key's: one fixed-width column of at
	 * most 8 bytes) at a known offset: a row without NULLs has its key
	 * derived from that one value (gs_encode_fast_value), without deforming
	 */
	if (kp->fast && kp->derive == GSD_FIXED && kp->derive_fixed)
	{
		const GsDeriveAtt *da = &kp->datt[kp->cols[0].attidx];

		Assert(kp->nenc == 1);
		kp->derive_one = da->byval && da->fixoff >= 0 &&
			(da->len == 1 || da->len == 2 || da->len == 4 || da->len == 8);
		/* (copied out: one load a row instead of the lookup) */
		kp->derive_one_off = da->fixoff;
		kp->derive_one_len = da->len;
	}

	/* an integer kind stored as wide as it is encoded: derive_one_key */
	if (kp->derive_one)
	{
		const GsKeyCol *col = &kp->cols[0];
		uint64		flip;

		switch (col->kind)
		{
			case GSK_INT2:
			case GSK_INT4:
			case GSK_INT8:
				/* fixed_code's sign flip */
				flip = (uint64) 1 << (8 * col->vbytes - 1);
				break;
			case GSK_OID:
			case GSK_UINT8:
			case GSK_CHAR:
				flip = 0;
				break;
			default:
				return;
		}
		if (kp->datt[col->attidx].len != col->vbytes)
			return;
		if (col->desc)
			flip ^= col->code_mask;
		if (col->nullmode == GSN_BYTE && col->nulls_first)
			flip |= (uint64) 1 << (8 * col->vbytes);
		kp->derive_int = true;
		kp->derive_int_xor = flip;
		kp->derive_int_extreme = col->nullmode == GSN_EXTREME;
		kp->derive_int_null = col->nulls_first ? 0 : col->code_mask;
	}
}

bool
gs_keyplan_derives(const GsKeyPlan *kp)
{
	return kp->derive != GSD_NEVER;
}

/*
 * Is a key made faster from a formed row's bytes than from its deformed
 * values?  So for fixed-width columns at fixed offsets (derive_fixed; one
 * of them is the plan's inline case, derive_one): a row's load then skips
 * PostgreSQL's deforming of it, which cost more than encoding its key.
 */
bool
gs_keyplan_derives_fast(const GsKeyPlan *kp)
{
	return kp->derive == GSD_FIXED && kp->derive_fixed;
}

/*
 * Is the key one fixed-width column passed by value, whose derivation from
 * a row without NULLs is a load and a few operations (derive_one)?  Less
 * than encoding the column's value: an index build's rows, formed in
 * place, get their keys so.
 */
bool
gs_keyplan_derives_one(const GsKeyPlan *kp)
{
	return kp->derive == GSD_FIXED && kp->derive_one;
}

/*
 * Is a row's key made from its copied bytes no dearer than from its
 * deformed values, where gs_key_derivable says yes?  The fast derivations
 * (gs_keyplan_derives_fast), and one text column in C order at a known
 * place, whose bytes are encoded where they lie (derive_text).
 */
bool
gs_keyplan_derives_cheaply(const GsKeyPlan *kp)
{
	return gs_keyplan_derives_fast(kp) ||
		(kp->derive == GSD_CHECK && kp->derive_text);
}

/* (fixed-width columns only: gs_key_derivable checks nothing else) */
int
gs_keyplan_derivable_natts(const GsKeyPlan *kp)
{
	return kp->derive == GSD_FIXED ? kp->derive_natts : 0;
}

/* an attribute's value at p (any alignment) as a Datum */
static inline Datum
fetch_value(const GsDeriveAtt *da, const char *p)
{
	if (!da->byval)
		return PointerGetDatum(p);
	switch (da->len)
	{
		case 1:
			return CharGetDatum(*p);
		case 2:
			{
				int16		v;

				memcpy(&v, p, sizeof(v));
				return Int16GetDatum(v);
			}
		case 4:
			{
				int32		v;

				memcpy(&v, p, sizeof(v));
				return Int32GetDatum(v);
			}
		default:
			{
				int64		v;

				Assert(da->len == 8);
				memcpy(&v, p, sizeof(v));
				return Int64GetDatum(v);
			}
	}
}

/*
 * Deform the attributes the key needs from a stored row's data (data, at
 * any alignment; NULL bitmap bits if hasnull) into values/isnull (indexed
 * by attno - 1).  false when the key cannot be derived from this row (see
 * the file header); values then are incomplete.
 */
static bool
derive_values(const GsKeyPlan *kp, const char *data, bool hasnull,
			  const bits8 *bits, Datum *values, bool *isnull)
{
	int			off = 0;
	int			i;

	if (!hasnull && kp->derive_fixed)
	{
		/*
		 * The common case: every offset known beforehand (a walk over the
		 * attributes cost a text sort's backend merge more than reading
		 * its stored keys had)
		 */
		for (i = 0; i < kp->nenc; i++)
		{
			int			a = kp->cols[i].attidx;
			const GsDeriveAtt *da = &kp->datt[a];

			off = da->fixoff;
			isnull[a] = false;
			if (da->len == -1)
			{
				off = att_align_pointer(off, da->align, -1, data + off);
				if (VARATT_IS_EXTERNAL(data + off) ||
					VARATT_IS_COMPRESSED(data + off))
					return false;
			}
			values[a] = fetch_value(da, data + off);
		}
		return true;
	}

	for (i = 0; i < kp->derive_natts; i++)
	{
		const GsDeriveAtt *da = &kp->datt[i];

		if (hasnull && att_isnull(i, bits))
		{
			isnull[i] = true;
			values[i] = (Datum) 0;
			continue;
		}
		isnull[i] = false;
		if (da->len == -1)
			off = att_align_pointer(off, da->align, -1, data + off);
		else
			off = att_align_nominal(off, da->align);
		values[i] = fetch_value(da, data + off);
		if (da->varlena_key &&
			(VARATT_IS_EXTERNAL(data + off) || VARATT_IS_COMPRESSED(data + off)))
			return false;
		off = att_addlength_pointer(off, da->len, data + off);
	}
	return true;
}

/* the same from a MinimalTuple's bytes from MINIMAL_TUPLE_DATA_OFFSET on */
static bool
derive_heap_values(const GsKeyPlan *kp, const char *body, Datum *values,
				   bool *isnull)
{
	uint16		infomask2;
	uint16		infomask;
	uint8		hoff;

	memcpy(&infomask2, body + BODY_INFOMASK2, sizeof(uint16));
	memcpy(&infomask, body + BODY_INFOMASK, sizeof(uint16));
	memcpy(&hoff, body + BODY_HOFF, sizeof(uint8));
	if ((infomask2 & HEAP_NATTS_MASK) < kp->derive_natts)
		return false;
	/* t_hoff counts from where a heap tuple's header would start */
	return derive_values(kp, body + hoff - MINIMAL_TUPLE_OFFSET -
						 MINIMAL_TUPLE_DATA_OFFSET,
						 (infomask & HEAP_HASNULL) != 0,
						 (const bits8 *) (body + BODY_BITS), values, isnull);
}

/* the same from an index tuple's bytes (it always has every attribute) */
static bool
derive_index_values(const GsKeyPlan *kp, const char *itup, Datum *values,
					bool *isnull)
{
	unsigned short t_info;

	memcpy(&t_info, itup + offsetof(IndexTupleData, t_info), sizeof(t_info));
	return derive_values(kp, itup + IndexInfoFindDataOffset(t_info),
						 (t_info & INDEX_NULL_MASK) != 0,
						 (const bits8 *) (itup + sizeof(IndexTupleData)),
						 values, isnull);
}

/* the len bytes at p (any alignment) as an unsigned number */
static inline uint64
load_unsigned(const char *p, int len)
{
	switch (len)
	{
		case 1:
			return *(const uint8 *) p;
		case 2:
			{
				uint16		v;

				memcpy(&v, p, sizeof(v));
				return v;
			}
		case 4:
			{
				uint32		v;

				memcpy(&v, p, sizeof(v));
				return v;
			}
		default:
			{
				uint64		v;

				memcpy(&v, p, sizeof(v));
				return v;
			}
	}
}

/*
 * The key of the one column of a fast plan (see derive_one), whose value
 * is at p, not NULL.  For the integer kinds the code gs_encode_fast_value
 * makes is the value's bits, zero-extended, with constant bits flipped
 * (the sign bit; all of them for DESC; the null byte's for NULLS FIRST in
 * GSN_BYTE: that bit is above the value's), so derive_int_xor does it in
 * one step; only GSN_EXTREME's check for a value on the NULLs' extreme
 * remains.  Other kinds take gs_encode_fast_value.
 */
static pg_attribute_always_inline bool
derive_one_key(GsKeyPlan *kp, const char *p, void *out)
{
	if (kp->derive_int)
	{
		uint64		code = load_unsigned(p, kp->derive_one_len) ^
			kp->derive_int_xor;
		bool		lossy;

		lossy = kp->derive_int_extreme && code == kp->derive_int_null;
		gs_fast_key_put(kp, code, out);
		return lossy || !kp->exact;
	}
	return gs_encode_fast_value(kp,
								fetch_value(&kp->datt[kp->cols[0].attidx], p),
								out);
}

/*
 * Where the text value of a derive_text plan lies in the data of a row
 * without NULLs that has the column: at its offset, aligned unless its
 * header is a short one (as derive_values finds it)
 */
static inline const char *
derive_text_at(const GsKeyPlan *kp, const char *data)
{
	const GsDeriveAtt *da = &kp->datt[kp->cols[0].attidx];

	return data + att_align_pointer(da->fixoff, da->align, -1,
									data + da->fixoff);
}

/* may the key be derived from that value: is it inline, uncompressed? */
static inline bool
derive_text_ok(const char *p)
{
	return !VARATT_IS_EXTERNAL(p) && !VARATT_IS_COMPRESSED(p);
}

/* its key, as gs_encode_key made it (gs_encode_text_c) */
static inline bool
derive_text_key(const GsKeyPlan *kp, const char *p, void *out)
{
	return gs_encode_text_c(kp, VARDATA_ANY(p), VARSIZE_ANY_EXHDR(p), out);
}

/* the data of the row whose MinimalTuple bytes from its data offset are body */
static inline const char *
body_data(const char *body)
{
	uint8		hoff;

	memcpy(&hoff, body + BODY_HOFF, sizeof(uint8));
	/* t_hoff counts from where a heap tuple's header would start */
	return body + hoff - MINIMAL_TUPLE_OFFSET - MINIMAL_TUPLE_DATA_OFFSET;
}

/*
 * The entry points below take the common case -- the plan's fast path
 * (one fixed-width column of at most 8 bytes, kp->derive_one), a row
 * without NULLs -- inline; everything else goes to these, which deform
 * the row into arrays of GS_DERIVE_MAX_ATTS on the stack (whose set-up,
 * stack protector included, cost more than the derivation of an int8
 * key did, once per row read back from a run).
 */
static pg_noinline bool
derive_heap_key(GsKeyPlan *kp, const char *body, void *out)
{
	Datum		values[GS_DERIVE_MAX_ATTS];
	bool		isnull[GS_DERIVE_MAX_ATTS];
	bool		ok PG_USED_FOR_ASSERTS_ONLY;

	ok = derive_heap_values(kp, body, values, isnull);
	Assert(ok);
	return gs_encode_key(kp, values, isnull, out);
}

static pg_noinline bool
derive_data_key(GsKeyPlan *kp, const char *data, void *out)
{
	Datum		values[GS_DERIVE_MAX_ATTS];
	bool		isnull[GS_DERIVE_MAX_ATTS];
	bool		ok PG_USED_FOR_ASSERTS_ONLY;

	ok = derive_values(kp, data, false, NULL, values, isnull);
	Assert(ok);
	return gs_encode_key(kp, values, isnull, out);
}

static pg_noinline bool
derive_index_key(GsKeyPlan *kp, const char *itup, void *out)
{
	Datum		values[GS_DERIVE_MAX_ATTS];
	bool		isnull[GS_DERIVE_MAX_ATTS];
	bool		ok PG_USED_FOR_ASSERTS_ONLY;

	ok = derive_index_values(kp, itup, values, isnull);
	Assert(ok);
	return gs_encode_key(kp, values, isnull, out);
}

static pg_noinline bool
derivable_check(const GsKeyPlan *kp, const char *body, bool index)
{
	Datum		values[GS_DERIVE_MAX_ATTS];
	bool		isnull[GS_DERIVE_MAX_ATTS];

	if (index)
		return derive_index_values(kp, body, values, isnull);
	return derive_heap_values(kp, body, values, isnull);
}

/*
 * May a run leave out the key of the tuple whose bytes from
 * MINIMAL_TUPLE_DATA_OFFSET are at body?  Called for every row written,
 * by the backend and by the threads that write runs.
 */
bool
gs_key_derivable(const GsKeyPlan *kp, const char *body)
{
	if (kp->derive == GSD_FIXED)
	{
		uint16		infomask2;

		memcpy(&infomask2, body + BODY_INFOMASK2, sizeof(uint16));
		return (infomask2 & HEAP_NATTS_MASK) >= kp->derive_natts;
	}
	if (kp->derive == GSD_NEVER)
		return false;
	if (kp->derive_text)
	{
		uint16		infomask2;
		uint16		infomask;

		memcpy(&infomask2, body + BODY_INFOMASK2, sizeof(uint16));
		memcpy(&infomask, body + BODY_INFOMASK, sizeof(uint16));
		if ((infomask2 & HEAP_NATTS_MASK) >= kp->derive_natts &&
			!(infomask & HEAP_HASNULL))
			return derive_text_ok(derive_text_at(kp, body_data(body)));
	}
	return derivable_check(kp, body, false);
}

/*
 * Write the key of a tuple for which gs_key_derivable said yes at out
 * (key_bytes, any alignment), as gs_encode_key wrote it when the row came,
 * and return what gs_encode_key returned.  Safe on any thread.
 */
bool
gs_key_derive(GsKeyPlan *kp, const char *body, void *out)
{
	if (kp->derive_one)
	{
		uint16		infomask;
		uint8		hoff;

		memcpy(&infomask, body + BODY_INFOMASK, sizeof(uint16));
		memcpy(&hoff, body + BODY_HOFF, sizeof(uint8));
		/* (gs_key_derivable saw enough attributes) */
		if (!(infomask & HEAP_HASNULL))
			return derive_one_key(kp, body + hoff - MINIMAL_TUPLE_OFFSET -
								  MINIMAL_TUPLE_DATA_OFFSET +
								  kp->derive_one_off, out);
	}
	else if (kp->derive_text)
	{
		uint16		infomask;

		memcpy(&infomask, body + BODY_INFOMASK, sizeof(uint16));
		if (!(infomask & HEAP_HASNULL))
			return derive_text_key(kp, derive_text_at(kp, body_data(body)),
								   out);
	}
	return derive_heap_key(kp, body, out);
}

/*
 * The same from the data of a tuple without NULLs that has every
 * attribute (a run left its header out)
 */
bool
gs_key_derive_data(GsKeyPlan *kp, const char *data, void *out)
{
	if (kp->derive_one)
		return derive_one_key(kp, data + kp->derive_one_off, out);
	if (kp->derive_text)
		return derive_text_key(kp, derive_text_at(kp, data), out);
	return derive_data_key(kp, data, out);
}

/*
 * The same for a plan over an index's columns (a btree build's), from an
 * index tuple's bytes at any alignment
 */
bool
gs_key_derivable_index(const GsKeyPlan *kp, const char *itup)
{
	if (kp->derive == GSD_NEVER)
		return false;
	if (kp->derive == GSD_FIXED)
		return true;
	return derivable_check(kp, itup, true);
}

bool
gs_keyplan_ties_by_bytes(const GsKeyPlan *kp)
{
	return kp->text_one && kp->ncols == 1 && kp->derive != GSD_NEVER;
}

/*
 * A stored row's values: an index tuple's (index), or what a run holds of
 * a row, as gs_key_derive takes it (p at off)
 */
static bool
derive_stored_values(const GsKeyPlan *kp, const char *p, size_t off,
					 bool index, Datum *values, bool *isnull)
{
	if (index)
		return derive_index_values(kp, p, values, isnull);
	if (off == MINIMAL_TUPLE_DATA_OFFSET)
		return derive_heap_values(kp, p, values, isnull);
	/* a tuple without NULLs whose header the run left out: its data */
	return derive_values(kp, p, false, NULL, values, isnull);
}

/* gs_key_tie's and gs_key_tie_index's order of two stored rows */
static int
tie_stored(const GsKeyPlan *kp, const char *a, size_t a_off, const char *b,
		   size_t b_off, bool index)
{
	const GsKeyCol *col = &kp->cols[0];
	int			att = col->attidx;
	Datum		va[GS_DERIVE_MAX_ATTS];
	Datum		vb[GS_DERIVE_MAX_ATTS];
	bool		na[GS_DERIVE_MAX_ATTS];
	bool		nb[GS_DERIVE_MAX_ATTS];
	bool		ok PG_USED_FOR_ASSERTS_ONLY;
	const char *pa;
	const char *pb;
	int			la;
	int			lb;
	int			c;

	Assert(gs_keyplan_ties_by_bytes(kp));
	ok = derive_stored_values(kp, a, a_off, index, va, na);
	Assert(ok);
	ok = derive_stored_values(kp, b, b_off, index, vb, nb);
	Assert(ok);
	/* NULLs go where NULLS FIRST/LAST puts them, whatever the direction */
	if (na[att] || nb[att])
	{
		if (na[att] && nb[att])
			return 0;
		return (na[att] == col->nulls_first) ? -1 : 1;
	}
	pa = DatumGetPointer(va[att]);
	pb = DatumGetPointer(vb[att]);
	la = VARSIZE_ANY_EXHDR(pa);
	lb = VARSIZE_ANY_EXHDR(pb);
	c = memcmp(VARDATA_ANY(pa), VARDATA_ANY(pb), Min(la, lb));
	if (c == 0)
		c = (la > lb) - (la < lb);
	else
		c = c < 0 ? -1 : 1;
	return col->desc ? -c : c;
}

int
gs_key_tie(const GsKeyPlan *kp, const char *a, size_t a_off, const char *b,
		   size_t b_off)
{
	return tie_stored(kp, a, a_off, b, b_off, false);
}

int
gs_key_tie_index(const GsKeyPlan *kp, const char *a, const char *b)
{
	return tie_stored(kp, a, 0, b, 0, true);
}

bool
gs_key_derive_index(GsKeyPlan *kp, const char *itup, void *out)
{
	if (kp->derive_one)
	{
		unsigned short t_info;

		memcpy(&t_info, itup + offsetof(IndexTupleData, t_info),
			   sizeof(t_info));
		if (!(t_info & INDEX_NULL_MASK))
			return derive_one_key(kp, itup + IndexInfoFindDataOffset(t_info) +
								  kp->derive_one_off, out);
	}
	return derive_index_key(kp, itup, out);
}
