/*-------------------------------------------------------------------------
 *
 * keys_encode.c
 *	  Key encoding: one row's sort column values -> its normalized key.
 *
 * This file owns gs_encode_key and the per-type encoders under it.  It runs
 * once per row: no catalog access, no palloc unless detoasting.  It reads
 * the key plan that keys.c built (its layout is in keys_int.h) and calls
 * only PostgreSQL (detoasting, hashing) and ICU, never keys.c.  How the
 * plan chooses widths, places and NULL handling is described in keys.c.
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
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/hashfn.h"
#include "fmgr.h"
#include "port/pg_bswap.h"
#include "utils/date.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#ifdef USE_ICU
#include <unicode/ucol.h>
#include <unicode/uiter.h>
#endif

#include "gpusort_engine.h"
#include "gpusort_keys.h"
#include "keys_int.h"

/* ---------------------------------------------------------------------
 * Encoding (per row: no catalog access, no palloc unless detoasting)
 * ---------------------------------------------------------------------
 */

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

		if (!isnull[col->attidx])
			return gs_encode_fast_value(kp, values[col->attidx], out);

		/*
		 * On an extreme, a NULL needs no flag itself: a value that lands
		 * there is flagged, and a run of equal keys is tie-broken when any
		 * of its rows is.
		 */
		code = col->nulls_first ? 0 : col->code_mask;
		if (col->nullmode == GSN_BYTE)
			code = col->nulls_first ? 0 : (uint64) 1 << (8 * col->vbytes);
		gs_fast_key_put(kp, code, out);
		return lossy || !kp->exact;
	}

	/* one text column in C order, not NULL: the same bytes, inline */
	if (kp->text_one && !isnull[kp->cols[0].attidx])
	{
		const char *s;
		int			len;
		void	   *tofree;

		text_value(values[kp->cols[0].attidx], kp->cols[0].width + 1, &s,
				   &len, &tofree);
		lossy = gs_encode_text_c(kp, s, len, out);
		if (tofree)
			pfree(tofree);
		return lossy;
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

	gs_store_key(key, kp->key_bytes, out);
	return lossy || !kp->exact;
}
