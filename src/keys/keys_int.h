/*-------------------------------------------------------------------------
 *
 * keys_int.h
 *	  The key plan's layout, shared by key planning (keys.c) and key
 *	  encoding (keys_encode.c); callers outside them see only gpusort_keys.h.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef KEYS_INT_H
#define KEYS_INT_H

#include <math.h>

#ifdef USE_ICU
#include <unicode/ucol.h>
#endif

#include "port/pg_bswap.h"
#include "utils/date.h"
#include "utils/timestamp.h"

#include "gpusort_engine.h"
#include "gpusort_keys.h"

/* how a column is written */
typedef enum GsKind
{
	GSK_INT2,
	GSK_INT4,
	GSK_INT8,
	GSK_OID,
	GSK_UINT8,					/* pg_lsn */
	GSK_CHAR,					/* "char", compared unsigned */
	GSK_BOOL,
	GSK_DATE,
	GSK_TIME,
	GSK_TIMESTAMP,				/* timestamp and timestamptz */
	GSK_FLOAT4,
	GSK_FLOAT8,
	GSK_INTERVAL,
	GSK_UUID,
	/* variable width: a prefix filling the rest of the key */
	GSK_NUMERIC,
	GSK_TEXT_C,					/* text, varchar: bytes */
	GSK_BPCHAR_C,				/* bytes without trailing spaces */
	GSK_NAME_C,
	GSK_TEXT_ICU,
	GSK_BPCHAR_ICU,
	GSK_NAME_ICU
} GsKind;

/*
 * Longest ICU sort-key prefix.  ucol_nextSortKeyPart costs about 1 us per 8
 * bytes it produces (32-character ASCII strings, root collation), which at
 * 32 bytes made encoding slower than PostgreSQL's whole sort; 16 bytes
 * still separates most strings and leaves the rest to the tie-break.
 */
#define GS_ICU_PREFIX_MAX	16

/*
 * Longest numeric prefix: class, weight and 6 base-10000 digits (24 decimal
 * digits) hold nearly every numeric exactly, at half the width of 32.
 */
#define GS_NUMERIC_PREFIX_MAX	16

#define GSK_IS_VARIABLE(k)	((k) >= GSK_NUMERIC)
#define GSK_IS_ICU(k)		((k) >= GSK_TEXT_ICU)

/*
 * ICU sort keys cost about a microsecond each, and sort columns often hold
 * few distinct strings, so each ICU column keeps the keys of short strings
 * it has seen in a small direct-mapped cache.
 */
#define GS_ICU_CACHE_SLOTS	1024	/* a power of 2 */
#define GS_ICU_CACHE_STRLEN 30

typedef struct GsIcuCacheEnt
{
	int16		len;			/* -1: empty */
	char		str[GS_ICU_CACHE_STRLEN];
	uint8		key[GS_MAX_KEY_BYTES];
} GsIcuCacheEnt;

/* how a NULL is told apart from the values */
typedef enum GsNullMode
{
	GSN_FOLDED,					/* the encoding leaves both extremes free */
	GSN_BYTE,					/* a null-indicator byte in front */
	GSN_EXTREME					/* NULL on an extreme; collisions are lossy */
} GsNullMode;

typedef struct GsKeyCol
{
	int			attidx;			/* attno - 1 */
	GsKind		kind;
	bool		desc;
	bool		nulls_first;
	GsNullMode	nullmode;
	bool		truncated;		/* fixed-width value cut short (always
								 * lossy, and the plan is not exact) */
	int			off;			/* first byte in the key */
	int			width;			/* bytes taken, null byte included */
	int			vbytes;			/* full value width of a fixed kind */
	uint64		code_mask;		/* all ones over vbytes (kinds <= 8 B) */
#ifdef USE_ICU
	UCollator  *ucol;
	struct GsIcuCacheEnt *icache;	/* recent short strings' sort keys */
#endif
} GsKeyCol;

/*
 * Deriving keys again from stored rows (keys_derive.c): never (a kind
 * that must not be derived on a thread), always (fixed-width columns
 * only: a tuple with every encoded column will do), or after a check of
 * each row's variable-width values (inline and uncompressed).
 */
typedef enum GsDeriveMode
{
	GSD_NEVER,
	GSD_FIXED,
	GSD_CHECK
} GsDeriveMode;

/* encoded columns past this attribute number keep their keys stored */
#define GS_DERIVE_MAX_ATTS	64

/* the layout of an attribute, as deforming a stored row needs it */
typedef struct GsDeriveAtt
{
	int16		len;			/* attlen */
	char		align;			/* attalign */
	bool		byval;
	bool		varlena_key;	/* a variable-width encoded column */
	int			fixoff;			/* its offset in a row without NULLs (a
								 * varlena's before its alignment), or -1
								 * after a variable-width attribute */
} GsDeriveAtt;

struct GsKeyPlan
{
	int			ncols;			/* sort columns */
	int			nenc;			/* encoded columns */
	int			key_bytes;
	int			used_bytes;		/* bytes before the zero padding */
	bool		exact;
	bool		fast;			/* one fixed column of <= 8 bytes */
	int			fast_shift;		/* bits to shift its code left */
	GsDeriveMode derive;		/* may runs leave keys out (keys_derive.c) */
	int			derive_natts;	/* attributes deformed to derive a key */
	bool		derive_fixed;	/* every encoded column at a fixoff */
	bool		derive_one;		/* fast, and its column at a fixoff */
	int			derive_one_off; /* derive_one: the column's fixoff ... */
	int			derive_one_len; /* ... and attlen */
	bool		derive_int;		/* and an integer kind (derive_one_key) */
	bool		text_one;		/* one encoded column, text in C order
								 * (gs_encode_text_c) */
	bool		derive_text;	/* and at a fixoff: derived without
								 * deforming (keys_derive.c) */
	bool		derive_int_extreme; /* GSN_EXTREME: the NULLs' code ... */
	uint64		derive_int_null;	/* ... is this, and a value's lossy */
	uint64		derive_int_xor; /* the bits its code flips */
	GsDeriveAtt datt[GS_DERIVE_MAX_ATTS];
	GsKeyCol	cols[FLEXIBLE_ARRAY_MEMBER];
};

/* keys_derive.c */
extern void gs_keyplan_derive_init(GsKeyPlan *kp, TupleDesc tupdesc);

/*
 * Ascending code of a fixed kind of at most 8 bytes; never 0 or all ones
 * for the folded kinds.  (Here, not in keys_encode.c: keys_derive.c makes
 * a key again from a stored value with it, inline.)
 */
static inline uint64
fixed_code(GsKind kind, Datum d)
{
	switch (kind)
	{
		case GSK_INT2:
			return (uint16) DatumGetInt16(d) ^ UINT64CONST(0x8000);
		case GSK_INT4:
			return (uint32) DatumGetInt32(d) ^ UINT64CONST(0x80000000);
		case GSK_INT8:
			return (uint64) DatumGetInt64(d) ^ UINT64CONST(0x8000000000000000);
		case GSK_OID:
			return (uint64) DatumGetObjectId(d);
		case GSK_UINT8:
			return (uint64) DatumGetInt64(d);
		case GSK_CHAR:
			return (uint8) DatumGetChar(d);
		case GSK_BOOL:
			return DatumGetBool(d) ? 2 : 1;
		case GSK_DATE:
			{
				DateADT		v = DatumGetDateADT(d);
				uint64		c;

				if (DATE_IS_NOBEGIN(v))
					return 1;
				if (DATE_IS_NOEND(v))
					return UINT64CONST(0xFFFFFFFE);
				c = (uint32) v ^ UINT64CONST(0x80000000);
				/* valid dates lie far inside; keep the extremes free */
				return Min(Max(c, 2), UINT64CONST(0xFFFFFFFD));
			}
		case GSK_TIME:
			{
				TimeADT		v = DatumGetTimeADT(d);

				/* 0 .. 24:00:00 in microseconds, well inside 40 bits */
				if (v < 0)
					v = 0;
				if (v > INT64CONST(0xFFFFFFFFFC))
					v = INT64CONST(0xFFFFFFFFFC);
				return (uint64) v + 1;
			}
		case GSK_TIMESTAMP:
			{
				Timestamp	v = DatumGetTimestamp(d);
				uint64		c;

				if (TIMESTAMP_IS_NOBEGIN(v))
					return 1;
				if (TIMESTAMP_IS_NOEND(v))
					return PG_UINT64_MAX - 1;
				c = (uint64) v ^ UINT64CONST(0x8000000000000000);
				return Min(Max(c, 2), PG_UINT64_MAX - 2);
			}
		case GSK_FLOAT4:
			{
				float4		f = DatumGetFloat4(d);
				uint32		u;

				if (isnan(f))
					return UINT64CONST(0xFFC00000);	/* above +Inf's code */
				if (f == 0)
					f = 0;		/* -0 is +0 */
				memcpy(&u, &f, sizeof(u));
				u = (u & 0x80000000) ? ~u : (u | 0x80000000);
				return u;
			}
		case GSK_FLOAT8:
			{
				float8		f = DatumGetFloat8(d);
				uint64		u;

				if (isnan(f))
					return UINT64CONST(0xFFF8000000000000);
				if (f == 0)
					f = 0;
				memcpy(&u, &f, sizeof(u));
				u = (u & UINT64CONST(0x8000000000000000)) ? ~u :
					(u | UINT64CONST(0x8000000000000000));
				return u;
			}
		default:
			Assert(false);
			return 0;
	}
}

/* a fast plan's key from its column's code, stored at out (any alignment) */
static pg_attribute_always_inline void
gs_fast_key_put(const GsKeyPlan *kp, uint64 code, void *out)
{
	uint64		v = code << kp->fast_shift;

	if (kp->key_bytes == 4)
	{
		uint32		w = (uint32) v;

		memcpy(out, &w, 4);
	}
	else
		memcpy(out, &v, 8);
}

/* the key bytes (a big-endian string) -> the engine's words, at out */
static inline void
gs_store_key(const uint8 *be, int key_bytes, void *out)
{
	if (key_bytes == 4)
	{
		uint32		w;

		memcpy(&w, be, 4);
		w = pg_ntoh32(w);
		memcpy(out, &w, 4);
	}
	else
	{
		int			i;

		for (i = 0; i < key_bytes; i += 8)
		{
			uint64		w;

			memcpy(&w, be + i, 8);
			w = pg_ntoh64(w);
			memcpy((char *) out + i, &w, 8);
		}
	}
}

/*
 * The key of a plan of one text column in C order (text_one) whose value,
 * not NULL, is the len bytes at str: gs_encode_key's, and keys_derive.c's
 * for a key derived again, the same bit for bit.  The column is the last
 * and only one (a variable-width kind, NULL on the extreme): its leading
 * bytes, zero-padded, inverted for DESC, then the words in native order.
 */
static pg_attribute_always_inline bool
gs_encode_text_c(const GsKeyPlan *kp, const char *str, int len, void *out)
{
	const GsKeyCol *col = &kp->cols[0];
	uint8		key[GS_MAX_KEY_BYTES + 8];
	uint8	   *dst = key + col->off;
	bool		lossy = false;
	bool		extreme;
	int			i;

	/*
	 * A value at least as long as an ascending column that fills the key
	 * alone (md5 strings, most long text): the key is its leading bytes,
	 * read where they lie, without zeroing and copying them first.
	 */
	if (len >= col->width && col->width == kp->key_bytes && !col->desc)
	{
		const uint8 edge = col->nulls_first ? 0x00 : 0xFF;

		Assert(col->off == 0);
		extreme = true;
		for (i = 0; i < col->width && extreme; i++)
			extreme = (uint8) str[i] == edge;
		gs_store_key((const uint8 *) str, kp->key_bytes, out);
		return len > col->width || extreme || !kp->exact;
	}

	memset(key, 0, kp->key_bytes);
	if (len > col->width)
	{
		len = col->width;
		lossy = true;
	}
	memcpy(dst, str, len);
	if (col->desc)
		for (i = 0; i < col->width; i++)
			dst[i] = ~dst[i];
	/* a value on the NULLs' extreme is flagged (see gs_encode_key) */
	extreme = true;
	for (i = 0; i < col->width && extreme; i++)
		extreme = dst[i] == (col->nulls_first ? 0x00 : 0xFF);
	gs_store_key(key, kp->key_bytes, out);
	return lossy || extreme || !kp->exact;
}

/*
 * The key of a fast plan (one fixed column of <= 8 bytes) whose value is
 * not NULL: gs_encode_key's, and keys_derive.c's for a key derived again,
 * which must be the same bit for bit (inline here: the streams' threads
 * derive a key for every row they read)
 */
static pg_attribute_always_inline bool
gs_encode_fast_value(const GsKeyPlan *kp, Datum value, void *out)
{
	const GsKeyCol *col = &kp->cols[0];
	bool		lossy = false;
	uint64		code;

	code = fixed_code(col->kind, value);
	if (col->desc)
		code = ~code & col->code_mask;
	if (col->nullmode == GSN_EXTREME)
		lossy = (code == (col->nulls_first ? 0 : col->code_mask));
	else if (col->nullmode == GSN_BYTE && col->nulls_first)
		code |= (uint64) 1 << (8 * col->vbytes);
	gs_fast_key_put(kp, code, out);
	return lossy || !kp->exact;
}

#endif							/* KEYS_INT_H */
