/*-------------------------------------------------------------------------
 *
 * keys.c
 *	  Normalized keys: sort column values -> order-preserving bytes.
 *
 * A key is a big-endian byte string of one engine width (4, 8, 16, 24 or
 * 32 bytes) in which the sort columns are laid out one after the other.
 * Comparing two keys as unsigned byte strings gives the order of the sort
 * columns under their sort operators, directions and NULLS FIRST/LAST.
 *
 * Column encodings (ascending; DESC inverts the value bytes, never the
 * null-indicator byte):
 *
 *	int2/int4/int8	two's complement with the sign bit flipped
 *	oid, pg_lsn		the unsigned value
 *	money			as int8; "char" as its unsigned byte
 *	bool			1 = false, 2 = true (one byte)
 *	date			sign flipped; -infinity -> 1, +infinity -> 2^32-2
 *	timestamp[tz]	as date, in 64 bits
 *	time			microseconds + 1 in 5 bytes
 *	float4/float8	IEEE bits, all bits inverted for negatives and the sign
 *					bit set for positives; -0 is +0 and every NaN is one
 *					value above +Infinity
 *	interval		the 128-bit linear span PostgreSQL compares (months as
 *					30 days, days as 24 hours), biased into 80 bits
 *	uuid			the 16 bytes
 *	numeric			class byte (-Inf, <0, 0, >0, +Inf, NaN), then for finite
 *					nonzero values the base-10000 weight and digits of the
 *					magnitude (inverted for negatives); a prefix
 *	text etc.		C-ordered collations: the bytes (bpchar without its
 *					trailing spaces), zero padded; a prefix.  ICU: a prefix
 *					of the ICU sort key
 *
 * Width.  Fixed-width columns are packed in order into the smallest engine
 * width that holds them (at most max_key_bytes); a column that does not fit
 * ends the key (its leading bytes fill what room is left, and the plan is
 * not exact).  numeric and text columns are prefixes and always end the
 * key: C-ordered text takes the rest of max_key_bytes, numeric and ICU text
 * at most 16 bytes (ICU sort keys are slow to compute) up to the end of the
 * width they need.  Collations that are neither C-ordered nor ICU (libc
 * locales other than C, POSIX and C.UTF-8), nondeterministic collations and
 * other types end the key too; as the leading column they are not encodable.
 *
 * NULLs.  Most encodings never produce the all-zero and all-ones values, so
 * a NULL simply takes one of them (zero for NULLS FIRST, all ones for NULLS
 * LAST) and the column stays exact.  int2/int4/int8/oid/pg_lsn/"char"/uuid
 * use their whole range; they get a null-indicator byte in front, except when they are the
 * last encoded column and dropping the byte saves a key width step: then
 * NULL takes the extreme value too, and any row whose column lands on that
 * extreme is reported lossy so that the executor tie-breaks it (a run of
 * equal keys is tie-broken when any row in it is lossy; NULLs themselves
 * need no flag).  Text does the same (it always is the last encoded
 * column).
 *
 * Lossy values (truncated text or numeric, ICU keys, collisions with NULL)
 * only ever occur in the last encoded column, so a lossy row can only tie
 * with rows whose key is equal in every byte, and tie-breaking runs of equal
 * keys is enough.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <locale.h>
#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
#include "utils/uuid.h"

#ifdef USE_ICU
#include <unicode/ucol.h>
#include <unicode/uiter.h>
#endif

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

struct GsKeyPlan
{
	int			ncols;			/* sort columns */
	int			nenc;			/* encoded columns */
	int			key_bytes;
	int			used_bytes;		/* bytes before the zero padding */
	bool		exact;
	bool		fast;			/* one fixed column of <= 8 bytes */
	int			fast_shift;		/* bits to shift its code left */
	GsKeyCol	cols[FLEXIBLE_ARRAY_MEMBER];
};

/* ---------------------------------------------------------------------
 * Classification (catalog lookups happen here only)
 * ---------------------------------------------------------------------
 */

/* "C.UTF-8" and spellings of it: code point order, i.e. UTF-8 byte order */
static bool
locale_name_is_c_utf8(const char *name)
{
	if (name == NULL)
		return false;
	return pg_strcasecmp(name, "C.UTF-8") == 0 ||
		pg_strcasecmp(name, "C.utf8") == 0;
}

/*
 * Which text encoding serves collation for a string type.  Returns false
 * with *why when none does.
 */
static bool
classify_collation(Oid collation, bool *icu, pg_locale_t *localep,
				   const char **why)
{
	pg_locale_t locale;
	const char *lcname = NULL;

	*icu = false;
	*localep = NULL;
	if (!OidIsValid(collation))
	{
		*why = "no collation";
		return false;
	}
	if (gs_lc_collate_is_c(collation))
		return true;

	locale = pg_newlocale_from_collation(collation);
	if (locale && locale->provider == COLLPROVIDER_ICU)
	{
#ifdef USE_ICU
		if (!locale->deterministic)
		{
			*why = "nondeterministic collation";
			return false;
		}
		if (GetDatabaseEncoding() != PG_UTF8)
		{
			*why = "ICU collation in a non-UTF8 database";
			return false;
		}
		*icu = true;
		*localep = locale;
		return true;
#else
		*why = "ICU collation";
		return false;
#endif
	}

	/* libc: only C.UTF-8 has a byte order we can trust */
	if (GetDatabaseEncoding() == PG_UTF8)
	{
		HeapTuple	tp;
		Datum		d;
		bool		isnull;

		/*
		 * The collation's name from the catalogs, on every version, rather
		 * than the process's LC_COLLATE: from 17 on PostgreSQL compares
		 * through a locale_t of its own even for the database default.
		 */
		if (collation == DEFAULT_COLLATION_OID)
		{
			tp = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));
			if (HeapTupleIsValid(tp))
			{
				d = SysCacheGetAttr(DATABASEOID, tp, Anum_pg_database_datcollate,
									&isnull);
				if (!isnull)
					lcname = TextDatumGetCString(d);
				ReleaseSysCache(tp);
			}
		}
		else
		{
			tp = SearchSysCache1(COLLOID, ObjectIdGetDatum(collation));
			if (HeapTupleIsValid(tp))
			{
				d = SysCacheGetAttr(COLLOID, tp, Anum_pg_collation_collcollate,
									&isnull);
				if (!isnull)
					lcname = TextDatumGetCString(d);
				ReleaseSysCache(tp);
			}
		}
		if (locale_name_is_c_utf8(lcname))
			return true;
	}
	*why = "libc collation other than C";
	return false;
}

/*
 * The kind for a column, or false with *why.  sortop must be the default
 * btree "<" or ">" of the base type; *desc says which.
 */
static bool
classify_column(Oid typid, Oid sortop, Oid collation, GsKind *kind,
				bool *desc, pg_locale_t *localep, const char **why)
{
	Oid			basetype = getBaseType(typid);
	TypeCacheEntry *tc;
	bool		icu;

	*localep = NULL;
	tc = lookup_type_cache(basetype, TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
	if (OidIsValid(tc->lt_opr) && sortop == tc->lt_opr)
		*desc = false;
	else if (OidIsValid(tc->gt_opr) && sortop == tc->gt_opr)
		*desc = true;
	else
	{
		*why = "not the type's default ordering";
		return false;
	}

	switch (basetype)
	{
		case INT2OID:
			*kind = GSK_INT2;
			return true;
		case INT4OID:
			*kind = GSK_INT4;
			return true;
		case INT8OID:
		case MONEYOID:
			*kind = GSK_INT8;
			return true;
		case PG_LSNOID:
			*kind = GSK_UINT8;
			return true;
		case CHAROID:
			*kind = GSK_CHAR;
			return true;
		case OIDOID:
			*kind = GSK_OID;
			return true;
		case BOOLOID:
			*kind = GSK_BOOL;
			return true;
		case DATEOID:
			*kind = GSK_DATE;
			return true;
		case TIMEOID:
			*kind = GSK_TIME;
			return true;
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			*kind = GSK_TIMESTAMP;
			return true;
		case FLOAT4OID:
			*kind = GSK_FLOAT4;
			return true;
		case FLOAT8OID:
			*kind = GSK_FLOAT8;
			return true;
		case INTERVALOID:
#ifdef HAVE_INT128
			*kind = GSK_INTERVAL;
			return true;
#else
			*why = "interval without 128-bit integers";
			return false;
#endif
		case UUIDOID:
			*kind = GSK_UUID;
			return true;
		case NUMERICOID:
			*kind = GSK_NUMERIC;
			return true;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
			if (!classify_collation(collation, &icu, localep, why))
				return false;
			if (basetype == BPCHAROID)
				*kind = icu ? GSK_BPCHAR_ICU : GSK_BPCHAR_C;
			else if (basetype == NAMEOID)
				*kind = icu ? GSK_NAME_ICU : GSK_NAME_C;
			else
				*kind = icu ? GSK_TEXT_ICU : GSK_TEXT_C;
			return true;
		default:
			*why = "unsupported type";
			return false;
	}
}

/* value bytes of a fixed-width kind */
static int
kind_vbytes(GsKind kind)
{
	switch (kind)
	{
		case GSK_BOOL:
		case GSK_CHAR:
			return 1;
		case GSK_INT2:
			return 2;
		case GSK_INT4:
		case GSK_OID:
		case GSK_DATE:
		case GSK_FLOAT4:
			return 4;
		case GSK_TIME:
			return 5;
		case GSK_INT8:
		case GSK_UINT8:
		case GSK_TIMESTAMP:
		case GSK_FLOAT8:
			return 8;
		case GSK_INTERVAL:
			return 10;
		case GSK_UUID:
			return 16;
		default:
			return 0;
	}
}

/* does the kind use every value of its width (so NULL needs room)? */
static bool
kind_full_range(GsKind kind)
{
	return kind == GSK_INT2 || kind == GSK_INT4 || kind == GSK_INT8 ||
		kind == GSK_OID || kind == GSK_UINT8 || kind == GSK_CHAR ||
		kind == GSK_UUID;
}

static const char *
kind_name(GsKind kind)
{
	switch (kind)
	{
		case GSK_INT2:
			return "int2";
		case GSK_INT4:
			return "int4";
		case GSK_INT8:
			return "int8";
		case GSK_OID:
			return "oid";
		case GSK_UINT8:
			return "uint8";
		case GSK_CHAR:
			return "char";
		case GSK_BOOL:
			return "bool";
		case GSK_DATE:
			return "date";
		case GSK_TIME:
			return "time";
		case GSK_TIMESTAMP:
			return "timestamp";
		case GSK_FLOAT4:
			return "float4";
		case GSK_FLOAT8:
			return "float8";
		case GSK_INTERVAL:
			return "interval";
		case GSK_UUID:
			return "uuid";
		case GSK_NUMERIC:
			return "numeric prefix";
		case GSK_TEXT_C:
			return "text C prefix";
		case GSK_BPCHAR_C:
			return "bpchar C prefix";
		case GSK_NAME_C:
			return "name C prefix";
		case GSK_TEXT_ICU:
			return "text ICU prefix";
		case GSK_BPCHAR_ICU:
			return "bpchar ICU prefix";
		case GSK_NAME_ICU:
			return "name ICU prefix";
	}
	return "?";
}

bool
gs_column_encodable(Oid typid, Oid sortop, Oid collation, const char **why)
{
	GsKind		kind;
	bool		desc;
	pg_locale_t locale;
	const char *dummy;

	if (why == NULL)
		why = &dummy;
	return classify_column(typid, sortop, collation, &kind, &desc, &locale,
						   why);
}

/* smallest engine width holding n bytes */
static int
width_for(int n)
{
	if (n <= 4)
		return 4;
	return ((n + 7) / 8) * 8;
}

/* largest engine width not above max_key_bytes */
static int
max_width(int max_key_bytes)
{
	if (max_key_bytes >= GS_MAX_KEY_BYTES)
		return GS_MAX_KEY_BYTES;
	if (max_key_bytes < 8)
		return 4;
	return (max_key_bytes / 8) * 8;
}

GsKeyPlan *
gs_keyplan_create(int ncols, const AttrNumber *attnos, const Oid *sortops,
				  const Oid *collations, const bool *nulls_first,
				  TupleDesc tupdesc, int max_key_bytes)
{
	GsKeyPlan  *kp;
	int			maxw = max_width(max_key_bytes);
	int			total = 0;
	bool		exact = true;
	int			i;

	kp = palloc0(offsetof(GsKeyPlan, cols) + Max(ncols, 1) * sizeof(GsKeyCol));
	kp->ncols = ncols;

	for (i = 0; i < ncols; i++)
	{
		GsKeyCol   *col = &kp->cols[i];
		Form_pg_attribute att;
		GsKind		kind;
		bool		desc;
		pg_locale_t locale;
		const char *why;
		int			room = maxw - total;

		if (attnos[i] < 1 || attnos[i] > tupdesc->natts)
			elog(ERROR, "invalid sort column %d", attnos[i]);
		att = TupleDescAttr(tupdesc, attnos[i] - 1);
		if (!classify_column(att->atttypid, sortops[i], collations[i],
							 &kind, &desc, &locale, &why))
			break;				/* this column and the rest: tie-break */
		if (room < 1)
			break;

		col->attidx = attnos[i] - 1;
		col->kind = kind;
		col->desc = desc;
		col->nulls_first = nulls_first[i];
		col->off = total;
#ifdef USE_ICU
		col->ucol = (GSK_IS_ICU(kind) && locale) ? locale->info.icu.ucol : NULL;
		if (col->ucol)
		{
			int			k;

			col->icache = palloc(GS_ICU_CACHE_SLOTS * sizeof(GsIcuCacheEnt));
			for (k = 0; k < GS_ICU_CACHE_SLOTS; k++)
				col->icache[k].len = -1;
		}
#endif

		if (GSK_IS_VARIABLE(kind))
		{
			/* a prefix filling the rest of the key; always the last one */
			col->nullmode = (kind == GSK_NUMERIC) ? GSN_FOLDED : GSN_EXTREME;
			col->width = room;
			if (GSK_IS_ICU(kind))
			{
				/* equal sort keys may still differ; ICU keys cost per byte */
				exact = false;
				col->width = Min(room, GS_ICU_PREFIX_MAX);
			}
			else if (kind == GSK_NUMERIC)
				col->width = Min(room, GS_NUMERIC_PREFIX_MAX);
			/* up to the end of the key width that takes anyway */
			col->width = Min(room, width_for(total + col->width) - total);
			total += col->width;
			kp->nenc = i + 1;
			break;
		}

		col->vbytes = kind_vbytes(kind);
		col->code_mask = col->vbytes >= 8 ? PG_UINT64_MAX :
			(((uint64) 1) << (8 * col->vbytes)) - 1;
		if (!kind_full_range(kind))
		{
			if (col->vbytes <= room)
			{
				col->nullmode = GSN_FOLDED;
				col->width = col->vbytes;
				total += col->width;
				kp->nenc = i + 1;
				continue;
			}
		}
		else if (col->vbytes + 1 <= room)
		{
			col->nullmode = GSN_BYTE;
			col->width = col->vbytes + 1;
			total += col->width;
			kp->nenc = i + 1;
			continue;
		}
		else if (col->vbytes <= room)
		{
			/* fits only without its null byte: NULL on the extreme */
			col->nullmode = GSN_EXTREME;
			col->width = col->vbytes;
			total += col->width;
			kp->nenc = i + 1;
			break;
		}

		/* does not fit: its leading bytes, NULL on the extreme, lossy */
		col->nullmode = GSN_EXTREME;
		col->truncated = true;
		col->width = room;
		total = maxw;
		exact = false;
		kp->nenc = i + 1;
		break;
	}

	if (kp->nenc == 0)
	{
		pfree(kp);
		return NULL;
	}
	if (kp->nenc < ncols)
		exact = false;

	kp->key_bytes = width_for(total);

	/* the last column's null byte goes when that saves a width step */
	{
		GsKeyCol   *last = &kp->cols[kp->nenc - 1];

		if (last->nullmode == GSN_BYTE &&
			width_for(total - 1) < kp->key_bytes)
		{
			last->nullmode = GSN_EXTREME;
			last->width--;
			total--;
			kp->key_bytes = width_for(total);
		}
	}
	Assert(kp->key_bytes <= maxw && GS_KEY_BYTES_VALID(kp->key_bytes));

	kp->used_bytes = total;
	kp->exact = exact;

	/* one fixed column of at most 8 bytes: computed in one integer */
	if (kp->nenc == 1 && !GSK_IS_VARIABLE(kp->cols[0].kind) &&
		!kp->cols[0].truncated && kp->cols[0].vbytes <= 8 &&
		kp->cols[0].width <= kp->key_bytes && kp->key_bytes <= 8)
	{
		kp->fast = true;
		kp->fast_shift = 8 * (kp->key_bytes - kp->cols[0].width);
	}
	return kp;
}

int
gs_keyplan_key_bytes(const GsKeyPlan *kp)
{
	return kp->key_bytes;
}

int
gs_keyplan_ncols_encoded(const GsKeyPlan *kp)
{
	return kp->nenc;
}

bool
gs_keyplan_exact(const GsKeyPlan *kp)
{
	return kp->exact;
}

void
gs_keyplan_describe(const GsKeyPlan *kp, StringInfo buf)
{
	int			i;

	for (i = 0; i < kp->nenc; i++)
	{
		const GsKeyCol *col = &kp->cols[i];

		if (i > 0)
			appendStringInfoString(buf, ", ");
		appendStringInfo(buf, "%s%s%s (%d B", kind_name(col->kind),
						 col->desc ? " desc" : "",
						 col->truncated ? " truncated" : "", col->width);
		if (col->nullmode == GSN_BYTE)
			appendStringInfoString(buf, ", null byte");
		else if (col->nullmode == GSN_EXTREME)
			appendStringInfoString(buf, ", null on extreme");
		appendStringInfoChar(buf, ')');
	}
	if (kp->nenc < kp->ncols)
		appendStringInfo(buf, ", %d more tie-broken", kp->ncols - kp->nenc);
	appendStringInfo(buf, "; key %d B, %s", kp->key_bytes,
					 kp->exact ? "exact" : "tie-break");
}

/* ---------------------------------------------------------------------
 * Encoding (per row: no catalog access, no palloc unless detoasting)
 * ---------------------------------------------------------------------
 */

/* ascending code of a fixed kind of at most 8 bytes; never 0 or all ones
 * for the folded kinds */
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

/* write the low n bytes of v big-endian */
static inline void
put_be(uint8 *dst, uint64 v, int n)
{
	int			i;

	for (i = n - 1; i >= 0; i--)
	{
		dst[i] = (uint8) v;
		v >>= 8;
	}
}

/* ascending bytes of a fixed kind into dst[0 .. vbytes) */
static void
fixed_bytes(const GsKeyCol *col, Datum d, uint8 *dst)
{
	switch (col->kind)
	{
		case GSK_UUID:
			memcpy(dst, DatumGetUUIDP(d)->data, UUID_LEN);
			break;
#ifdef HAVE_INT128
		case GSK_INTERVAL:
			{
				Interval   *iv = DatumGetIntervalP(d);
				int128		span;
				uint128		biased;

				/* the span interval_cmp compares: 30-day months, 24 h days */
				span = (int128) iv->time +
					((int128) iv->month * 30 + iv->day) * USECS_PER_DAY;
				/* |span| < 2^73: bias into 80 bits, extremes unused */
				biased = (uint128) span + ((uint128) 1 << 79);
				put_be(dst, (uint64) (biased >> 64), 2);
				put_be(dst + 2, (uint64) biased, 8);
			}
			break;
#endif
		default:
			put_be(dst, fixed_code(col->kind, d), col->vbytes);
			break;
	}
}

/*
 * numeric, read straight from its stored form (a short-header varlena is
 * fine).  The header word: top two bits 10 = short form (sign bit 0x2000,
 * weight in the low 7 bits, 0x40 its sign); 11 = special (0xC000 NaN,
 * 0xD000 +Inf, 0xF000 -Inf); 00/01 = long form, positive/negative, followed
 * by an int16 weight.  Then base-10000 int16 digits, stored without leading
 * or trailing zeros.
 */
#define GS_NUMCLASS_NINF	1
#define GS_NUMCLASS_NEG		2
#define GS_NUMCLASS_ZERO	3
#define GS_NUMCLASS_POS		4
#define GS_NUMCLASS_PINF	5
#define GS_NUMCLASS_NAN		6

static bool
encode_numeric(const char *data, int len, uint8 *dst, int room)
{
	uint16		hdr;
	int			weight;
	bool		neg;
	const char *digits;
	int			ndigits;
	int			n;
	int			i;
	bool		lossy = false;

	memcpy(&hdr, data, sizeof(hdr));
	if ((hdr & 0xC000) == 0xC000)
	{
		if ((hdr & 0xF000) == 0xD000)
			dst[0] = GS_NUMCLASS_PINF;
		else if ((hdr & 0xF000) == 0xF000)
			dst[0] = GS_NUMCLASS_NINF;
		else
			dst[0] = GS_NUMCLASS_NAN;
		return false;
	}
	if ((hdr & 0xC000) == 0x8000)
	{
		neg = (hdr & 0x2000) != 0;
		weight = (hdr & 0x3F);
		if (hdr & 0x40)
			weight |= ~0x3F;
		digits = data + sizeof(uint16);
	}
	else
	{
		int16		w;

		neg = (hdr & 0xC000) == 0x4000;
		memcpy(&w, data + sizeof(uint16), sizeof(w));
		weight = w;
		digits = data + 2 * sizeof(uint16);
	}
	ndigits = (len - (digits - data)) / (int) sizeof(int16);
	if (ndigits <= 0)
	{
		dst[0] = GS_NUMCLASS_ZERO;
		return false;
	}

	dst[0] = neg ? GS_NUMCLASS_NEG : GS_NUMCLASS_POS;
	n = 1;
	if (room >= 3)
	{
		put_be(dst + 1, (uint16) weight ^ 0x8000, 2);
		n = 3;
	}
	else
		lossy = true;
	for (i = 0; i < ndigits; i++)
	{
		int16		dg;

		if (n + 2 > room)
		{
			lossy = true;
			break;
		}
		memcpy(&dg, digits + i * sizeof(int16), sizeof(dg));
		put_be(dst + n, (uint16) dg, 2);
		n += 2;
	}
	if (neg)
	{
		/* larger magnitude sorts lower; padding counts as zero digits */
		for (i = 1; i < room; i++)
			dst[i] = ~dst[i];
	}
	return lossy;
}

/* text-like value: pointer/length, maybe detoasted (*tofree) */
static inline void
text_value(Datum d, int slice, const char **str, int *len, void **tofree)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);

	*tofree = NULL;
	if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
	{
		/* compressed or out of line */
		if (slice > 0)
			v = pg_detoast_datum_slice(v, 0, slice);
		else
			v = pg_detoast_datum_packed(v);
		*tofree = v;
	}
	*str = VARDATA_ANY(v);
	*len = VARSIZE_ANY_EXHDR(v);
}

static inline int
bpchar_truelen(const char *s, int len)
{
	while (len > 0 && s[len - 1] == ' ')
		len--;
	return len;
}

#ifdef USE_ICU
static void
icu_prefix(const GsKeyCol *col, const char *s, int len, uint8 *dst)
{
	int			room = col->width;
	GsIcuCacheEnt *ent = NULL;
	UCharIterator iter;
	uint32_t	state[2] = {0, 0};
	UErrorCode	status = U_ZERO_ERROR;
	int32_t		n;

	if (len <= GS_ICU_CACHE_STRLEN)
	{
		ent = &col->icache[hash_bytes((const unsigned char *) s, len) &
						   (GS_ICU_CACHE_SLOTS - 1)];
		if (ent->len == len && memcmp(ent->str, s, len) == 0)
		{
			memcpy(dst, ent->key, room);
			return;
		}
	}

	uiter_setUTF8(&iter, s, len);
	n = ucol_nextSortKeyPart(col->ucol, &iter, state, dst, room, &status);
	if (U_FAILURE(status))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute an ICU sort key"),
				 errdetail("ucol_nextSortKeyPart failed: %s.",
						   u_errorName(status))));
	/* the rest stays zero: ICU sort key bytes are never zero */
	(void) n;

	if (ent)
	{
		ent->len = len;
		memcpy(ent->str, s, len);
		memcpy(ent->key, dst, room);
	}
}
#endif

/*
 * A variable-width column: writes col->width bytes at dst (already zero)
 * in ascending order.  Returns true when lossy.
 */
static bool
encode_variable(const GsKeyCol *col, Datum d, uint8 *dst)
{
	int			room = col->width;
	const char *s;
	int			len;
	void	   *tofree = NULL;
	bool		lossy = false;

	switch (col->kind)
	{
		case GSK_NUMERIC:
			text_value(d, 0, &s, &len, &tofree);
			lossy = encode_numeric(s, len, dst, room);
			break;
		case GSK_TEXT_C:
			text_value(d, room + 1, &s, &len, &tofree);
			if (len > room)
			{
				len = room;
				lossy = true;
			}
			memcpy(dst, s, len);
			break;
		case GSK_BPCHAR_C:
			text_value(d, 0, &s, &len, &tofree);
			len = bpchar_truelen(s, len);
			if (len > room)
			{
				len = room;
				lossy = true;
			}
			memcpy(dst, s, len);
			break;
		case GSK_NAME_C:
			s = NameStr(*DatumGetName(d));
			len = strnlen(s, NAMEDATALEN);
			if (len > room)
			{
				len = room;
				lossy = true;
			}
			memcpy(dst, s, len);
			break;
#ifdef USE_ICU
		case GSK_TEXT_ICU:
			text_value(d, 0, &s, &len, &tofree);
			icu_prefix(col, s, len, dst);
			lossy = true;
			break;
		case GSK_BPCHAR_ICU:
			text_value(d, 0, &s, &len, &tofree);
			icu_prefix(col, s, bpchar_truelen(s, len), dst);
			lossy = true;
			break;
		case GSK_NAME_ICU:
			s = NameStr(*DatumGetName(d));
			icu_prefix(col, s, strnlen(s, NAMEDATALEN), dst);
			lossy = true;
			break;
#endif
		default:
			elog(ERROR, "unexpected key kind %d", (int) col->kind);
	}
	if (tofree)
		pfree(tofree);
	return lossy;
}

/* are dst[0 .. n) all equal to b? */
static inline bool
all_bytes(const uint8 *dst, int n, uint8 b)
{
	int			i;

	for (i = 0; i < n; i++)
		if (dst[i] != b)
			return false;
	return true;
}

/* the key bytes (big-endian string) -> engine words */
static inline void
store_key(const uint8 *be, int key_bytes, void *out)
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

bool
gs_encode_key(GsKeyPlan *kp, const Datum *values, const bool *isnull,
			  void *out)
{
	uint8		key[GS_MAX_KEY_BYTES + 8];
	bool		lossy = false;
	int			i;

	if (likely(kp->fast))
	{
		const GsKeyCol *col = &kp->cols[0];
		uint64		code;
		uint64		v;

		if (isnull[col->attidx])
		{
			/*
			 * On an extreme, a NULL needs no flag itself: a value that lands
			 * there is flagged, and a run of equal keys is tie-broken when
			 * any of its rows is.
			 */
			code = col->nulls_first ? 0 : col->code_mask;
			if (col->nullmode == GSN_BYTE)
				code = col->nulls_first ? 0 : (uint64) 1 << (8 * col->vbytes);
		}
		else
		{
			code = fixed_code(col->kind, values[col->attidx]);
			if (col->desc)
				code = ~code & col->code_mask;
			if (col->nullmode == GSN_EXTREME)
				lossy = (code == (col->nulls_first ? 0 : col->code_mask));
			else if (col->nullmode == GSN_BYTE && col->nulls_first)
				code |= (uint64) 1 << (8 * col->vbytes);
		}
		v = code << kp->fast_shift;
		if (kp->key_bytes == 4)
		{
			uint32		w = (uint32) v;

			memcpy(out, &w, 4);
		}
		else
			memcpy(out, &v, 8);
		return lossy || !kp->exact;
	}

	memset(key, 0, kp->key_bytes);
	for (i = 0; i < kp->nenc; i++)
	{
		const GsKeyCol *col = &kp->cols[i];
		uint8	   *dst = key + col->off;
		int			vw = col->width;
		int			j;

		if (col->nullmode == GSN_BYTE)
		{
			/* indicator: 0 sorts first */
			*dst++ = (isnull[col->attidx] == col->nulls_first) ? 0 : 1;
			vw--;
			if (isnull[col->attidx])
				continue;		/* value bytes stay zero */
		}
		else if (isnull[col->attidx])
		{
			memset(dst, col->nulls_first ? 0x00 : 0xFF, vw);
			continue;			/* see the fast path about the flag */
		}

		if (col->vbytes <= 8 && !col->truncated && !GSK_IS_VARIABLE(col->kind))
		{
			/*
			 * One 8-byte big-endian store; the bytes past the column are
			 * zero and belong to the next column (written after this one)
			 * or to the padding, and key[] has room for the overrun.
			 */
			uint64		code = fixed_code(col->kind, values[col->attidx]);
			uint64		w;

			if (col->desc)
				code ^= col->code_mask;
			if (col->nullmode == GSN_EXTREME &&
				code == (col->nulls_first ? 0 : col->code_mask))
				lossy = true;
			w = pg_hton64(code << (64 - 8 * col->vbytes));
			memcpy(dst, &w, sizeof(w));
			continue;
		}

		if (GSK_IS_VARIABLE(col->kind))
		{
			if (encode_variable(col, values[col->attidx], dst))
				lossy = true;
		}
		else if (col->truncated)
		{
			uint8		tmp[GS_MAX_KEY_BYTES];

			fixed_bytes(col, values[col->attidx], tmp);
			memcpy(dst, tmp, vw);
		}
		else
			fixed_bytes(col, values[col->attidx], dst);

		if (col->desc)
			for (j = 0; j < vw; j++)
				dst[j] = ~dst[j];
		if (col->nullmode == GSN_EXTREME &&
			all_bytes(dst, vw, col->nulls_first ? 0x00 : 0xFF))
			lossy = true;
	}

	store_key(key, kp->key_bytes, out);
	return lossy || !kp->exact;
}
