/*-------------------------------------------------------------------------
 *
 * keys.c
 *	  Key planning: which sort columns a normalized key holds, and where.
 *
 * A key is a big-endian byte string of one engine width (4, 8, 16, 24 or
 * 32 bytes) in which the sort columns are laid out one after the other.
 * Comparing two keys as unsigned byte strings gives the order of the sort
 * columns under their sort operators, directions and NULLS FIRST/LAST.
 *
 * This file owns the key plan (gs_keyplan_create and its accessors): it
 * classifies each sort column (type, sort operator, collation; all catalog
 * lookups of the key code happen here), chooses the key width, each column's
 * place and NULL handling, and says whether the plan is exact.  It calls
 * only PostgreSQL; keys_encode.c writes the keys a plan describes (the
 * encoding of each type is listed there) and calls nothing in this file.
 * keys_int.h holds the plan's layout, which both files read.
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

#include "access/htup_details.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "gpusort_engine.h"
#include "gpusort_keys.h"
#include "keys_int.h"

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
	kp->text_one = kp->nenc == 1 && kp->cols[0].kind == GSK_TEXT_C;
	gs_keyplan_derive_init(kp, tupdesc);
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
