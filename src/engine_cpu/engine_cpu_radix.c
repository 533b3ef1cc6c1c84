/*-------------------------------------------------------------------------
 *
 * engine_cpu_radix.c
 *	  The CPU engine's sort: a most-significant-digit-first radix sort of
 *	  (normalized key, row index) records, one sort on the calling thread.
 *
 * This file owns the sort itself (gs_cpu_sort_keys), the argument checks
 * shared by sort() and sort_submit(), and the small helpers the other CPU
 * engine files use (error text, huge-page advice).  It is the bottom layer of
 * the CPU engine: it calls only the C library and the caller's cancel
 * callback, never engine_cpu.c or engine_cpu_async.c.  Like the rest of the
 * engine it includes no PostgreSQL header, never prints and never longjmps.
 *
 * Algorithm.  Each row becomes a record {u64 key word, u32 row index}.  The
 * records are sorted MSD-first with 8-bit digits, scattering between two
 * ping-pong buffers:
 *
 *	 - One cheap read pass over the keys (an OR of each key XOR the first)
 *	   finds the digits of the first 64-bit key word that are the same for
 *	   every row (a small key range, a constant leading column); they are
 *	   never counted or visited again.
 *	 - The first scatter reads the caller's keys directly and builds the
 *	   records as it goes, so no separate copy pass is needed.
 *	 - Each bucket is then sorted on the next digit, recursively.  A digit
 *	   that puts a whole bucket into one sub-bucket costs a count but no move.
 *	   Buckets of at most GS_CPU_SMALL_SORT rows are finished by insertion
 *	   sort, which compares whole keys.
 *	 - Wider keys (16..32 bytes) keep only one key word in the record: when a
 *	   bucket is still tied after all eight digits of word w, word w+1 of its
 *	   rows is fetched from the caller's key array by row index (a gather that
 *	   reads rows in ascending order, since every scatter is stable) and the
 *	   bucket is sorted on that word.  Records stay 12 bytes whatever the key
 *	   width, and rows whose first word already differs never pay for the rest
 *	   of their key.
 *
 * Recursion depth is bounded by the number of digits in the key (at most 32
 * for 32-byte keys), and each level keeps one 256-entry count array on the
 * stack.  Why MSD and not LSD: on 10M uniform 8-byte keys MSD moves each
 * record about three times (after three digits buckets are below the small
 * sort threshold) where LSD moves it eight times; on narrow-range keys both
 * skip the constant digits, and MSD's per-bucket passes run in cache.
 *
 * 4-byte keys take a path of their own (see "4-byte keys" below): key and
 * row fit in one 8-byte record, which moves a third fewer bytes.
 *
 * Temporary memory is one malloc of 2 * n records (24 bytes a row, 16 for
 * 4-byte keys, 32 for 32-byte keys with GS_SORT_KEYS_OUT), freed before
 * returning on every path.
 *
 * Failures leave keys[] as given (the engine API promises it, so that the
 * caller can sort them again elsewhere): the sort only reads the caller's
 * keys while it works in its own record buffers, and writes keys[] (with
 * GS_SORT_KEYS_OUT) only after the sort has finished, when nothing can fail
 * or be canceled any more.  A failed workspace malloc or a cancel returns
 * before that point.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "engine_cpu_int.h"

/*
 * Buckets of at most this many rows are finished by insertion sort instead
 * of another radix pass.  A radix pass over a bucket costs two passes over
 * it plus a 256-entry count clear and prefix sum, which only pays above a
 * few dozen rows.  Measured on 1M-10M uniform 8-byte keys: 48 and 64 are
 * best; 16 pays for extra radix levels, 96 for quadratic insertion sorts.
 */
#define GS_CPU_SMALL_SORT		48

/*
 * The cancel callback is called after about this many records have been
 * moved or counted since the last call.  Large passes are cut into chunks
 * of this size so that even one pass over 4G rows stays responsive.
 */
#define GS_CPU_CANCEL_INTERVAL	((size_t) 1 << 20)

#define GS_RADIX_BITS	8
#define GS_RADIX		(1 << GS_RADIX_BITS)
#define GS_WORD_DIGITS	8		/* 8-bit digits in a 64-bit key word */

/*
 * One row during the sort: the key word being sorted on, and the row.
 * Packed to 12 bytes where the compiler allows it: the sort is bound by
 * moving records, and 12 bytes instead of 16 measured 10-15% faster on 10M
 * rows (unaligned loads cost nothing on x86-64 and ARMv8).
 */
#if defined(__GNUC__) || defined(__clang__)
#define GS_PACKED __attribute__((packed))
#else
#define GS_PACKED
#endif

typedef struct GS_PACKED gs_rec
{
	uint64_t	key;
	uint32_t	idx;
} gs_rec;

/* everything one sort call needs, passed down the recursion */
typedef struct gs_cpu_sort
{
	const unsigned char *keys;	/* caller's keys, row-major */
	size_t		key_bytes;
	int			nwords;			/* 64-bit words per key (1 for 4-byte keys) */
	int			ndigits;		/* digits in word 0 (4 for 4-byte keys) */
	gs_rec	   *final;			/* buffer that must hold the result */
	gs_rec	   *final_end;
	uint64_t   *final32;		/* the same for 4-byte keys' records */
	uint64_t   *final32_end;
	gs_cancel_fn cancel;
	void	   *cancel_arg;
	size_t		since_check;	/* records moved since the last cancel call */
	int			canceled;
	uint64_t	moved;			/* records scattered (for stats->passes) */
} gs_cpu_sort;

/* the error text of a failed call, when the caller gave a buffer */
void
gs_cpu_set_error(char *errbuf, size_t errlen, const char *fmt,...)
{
	va_list		ap;

	if (errbuf == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(errbuf, errlen, fmt, ap);
	va_end(ap);
}

static double
gs_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1.0e6;
}

/*
 * Account for "count" records processed; returns non-zero (and remembers)
 * when the cancel callback asks to stop.
 */
static inline int
gs_tick(gs_cpu_sort *s, size_t count)
{
	s->since_check += count;
	if (s->since_check >= GS_CPU_CANCEL_INTERVAL)
	{
		s->since_check = 0;
		if (s->cancel != NULL && s->cancel(s->cancel_arg) != 0)
			s->canceled = 1;
	}
	return s->canceled;
}

/* digit d (0 = most significant) of a key word */
static inline unsigned
gs_digit(uint64_t key, int d)
{
	return (unsigned) (key >> (56 - GS_RADIX_BITS * d)) & (GS_RADIX - 1);
}

/* word w of row idx's key; word 0 of a 4-byte key is the key shifted up */
static inline uint64_t
gs_key_word(const gs_cpu_sort *s, uint32_t idx, int w)
{
	const unsigned char *row = s->keys + (size_t) idx * s->key_bytes;

	if (s->key_bytes == 4)
		return (uint64_t) *(const uint32_t *) row << 32;
	return ((const uint64_t *) row)[w];
}

/* compare the words after word w of two rows' keys */
static inline int
gs_rest_less(const gs_cpu_sort *s, uint32_t a, uint32_t b, int w)
{
	const uint64_t *ka = (const uint64_t *) (s->keys + (size_t) a * s->key_bytes);
	const uint64_t *kb = (const uint64_t *) (s->keys + (size_t) b * s->key_bytes);
	int			i;

	for (i = w + 1; i < s->nwords; i++)
	{
		if (ka[i] != kb[i])
			return ka[i] < kb[i];
	}
	return 0;
}

/* record a sorts before record b, whose key words w are in .key */
static inline int
gs_rec_less(const gs_cpu_sort *s, const gs_rec *a, const gs_rec *b, int w)
{
	if (a->key != b->key)
		return a->key < b->key;
	if (w + 1 >= s->nwords)
		return 0;
	return gs_rest_less(s, a->idx, b->idx, w);
}

/* insertion sort of a small bucket on its whole key from word w on */
static void
gs_small_sort(const gs_cpu_sort *s, gs_rec *r, size_t n, int w)
{
	size_t		i;

	for (i = 1; i < n; i++)
	{
		gs_rec		v = r[i];
		size_t		j = i;

		while (j > 0 && gs_rec_less(s, &v, &r[j - 1], w))
		{
			r[j] = r[j - 1];
			j--;
		}
		r[j] = v;
	}
}

/*
 * Mask of the digits (bit d = digit d) on which all n key words agree,
 * taken from records (when r != NULL) or from word 0 of the caller's rows
 * 0 .. n-1.  One OR of XORs per row: far cheaper than counting every digit's
 * histogram, and it finds the constant digits just as well.
 */
static unsigned
gs_constant_digits(gs_cpu_sort *s, const gs_rec *r, size_t n, int ndigits)
{
	uint64_t	first = r ? r[0].key : gs_key_word(s, 0, 0);
	uint64_t	diff = 0;
	unsigned	mask = 0;
	size_t		start;
	int			d;

	for (start = 0; start < n; start += GS_CPU_CANCEL_INTERVAL)
	{
		size_t		end = n - start > GS_CPU_CANCEL_INTERVAL ?
			start + GS_CPU_CANCEL_INTERVAL : n;
		size_t		i;

		if (r != NULL)
		{
			for (i = start; i < end; i++)
				diff |= r[i].key ^ first;
		}
		else if (s->key_bytes == 4)
		{
			const uint32_t *k = (const uint32_t *) s->keys;
			uint32_t	f32 = (uint32_t) (first >> 32);
			uint32_t	d32 = 0;

			for (i = start; i < end; i++)
				d32 |= k[i] ^ f32;
			diff |= (uint64_t) d32 << 32;
		}
		else
		{
			const uint64_t *k = (const uint64_t *) s->keys;
			size_t		stride = (size_t) s->nwords;

			for (i = start; i < end; i++)
				diff |= k[i * stride] ^ first;
		}
		if (gs_tick(s, end - start))
			return 0;
	}
	for (d = 0; d < ndigits; d++)
	{
		if (gs_digit(diff, d) == 0)
			mask |= 1u << d;
	}
	return mask;
}

/* end of the chunk of a long loop that starts at i, before a cancel check */
static inline size_t
gs_chunk_end(size_t i, size_t n)
{
	return n - i > GS_CPU_CANCEL_INTERVAL ? i + GS_CPU_CANCEL_INTERVAL : n;
}

/*
 * Turn counts into bucket start offsets; returns the number of non-empty
 * buckets.  Offsets are relative to the bucket's segment, so below 2^32.
 */
static int
gs_offsets(const uint32_t *count, uint32_t *off)
{
	uint32_t	sum = 0;
	int			nonempty = 0;
	int			b;

	for (b = 0; b < GS_RADIX; b++)
	{
		off[b] = sum;
		sum += count[b];
		nonempty += (count[b] != 0);
	}
	return nonempty;
}

static void gs_msd(gs_cpu_sort *s, gs_rec *cur, gs_rec *oth, size_t n,
				   int w, int d, unsigned cmask);

/*
 * After a scatter into dst (offsets computed from count), sort every bucket
 * on the following digit.
 */
static void
gs_recurse_buckets(gs_cpu_sort *s, gs_rec *dst, gs_rec *src,
				   const uint32_t *count, int w, int d, unsigned cmask)
{
	size_t		off = 0;
	int			b;

	for (b = 0; b < GS_RADIX && !s->canceled; b++)
	{
		size_t		c = count[b];

		if (c == 1)
		{
			if (dst < s->final || dst >= s->final_end)
				src[off] = dst[off];
		}
		else if (c > 1)
			gs_msd(s, dst + off, src + off, c, w, d + 1, cmask);
		off += c;
	}
}

/*
 * Sort the n records at cur (oth is scratch space at the same offset of the
 * other buffer) on key word w from digit d on, and leave them in s->final.
 * cmask: digits of word w known to be equal across these records.
 */
static void
gs_msd(gs_cpu_sort *s, gs_rec *cur, gs_rec *oth, size_t n,
	   int w, int d, unsigned cmask)
{
	uint32_t	count[GS_RADIX];
	uint32_t	off[GS_RADIX];
	int			ndigits = (w == 0) ? s->ndigits : GS_WORD_DIGITS;
	int			in_final = (cur >= s->final && cur < s->final_end);
	size_t		i,
				j,
				end;

	for (;;)
	{
		if (s->canceled)
			return;
		if (n <= GS_CPU_SMALL_SORT)
		{
			gs_small_sort(s, cur, n, w);
			break;
		}

		/* skip the digits every record shares */
		while (d < ndigits && (cmask & (1u << d)))
			d++;

		if (d == ndigits)
		{
			/* tied on the whole of word w: go on with the next word */
			if (w + 1 >= s->nwords)
				break;
			w++;
			ndigits = GS_WORD_DIGITS;
			for (i = 0; i < n; i = end)
			{
				end = gs_chunk_end(i, n);
				for (j = i; j < end; j++)
					cur[j].key = gs_key_word(s, cur[j].idx, w);
				if (gs_tick(s, end - i))
					return;
			}
			cmask = gs_constant_digits(s, cur, n, ndigits);
			d = 0;
			continue;
		}

		memset(count, 0, sizeof(count));
		for (i = 0; i < n; i = end)
		{
			end = gs_chunk_end(i, n);
			for (j = i; j < end; j++)
				count[gs_digit(cur[j].key, d)]++;
			if (gs_tick(s, end - i))
				return;
		}

		if (gs_offsets(count, off) == 1)
		{
			/* one bucket holds everything: nothing to move */
			d++;
			continue;
		}

		/* scatter cur -> oth, stable */
		for (i = 0; i < n; i = end)
		{
			end = gs_chunk_end(i, n);
			for (j = i; j < end; j++)
				oth[off[gs_digit(cur[j].key, d)]++] = cur[j];
			if (gs_tick(s, end - i))
				return;
		}
		s->moved += n;
		gs_recurse_buckets(s, oth, cur, count, w, d, cmask);
		return;
	}

	/* sorted in cur; make sure it ends up in the final buffer */
	if (!in_final)
		memcpy(oth, cur, n * sizeof(gs_rec));
}

/*
 * Sort the caller's keys into records in buf[0 .. n-1] (buf has room for
 * 2n records).  Returns non-zero when canceled.
 */
static int
gs_radix_sort(gs_cpu_sort *s, gs_rec *buf, size_t n)
{
	gs_rec	   *a = buf;
	gs_rec	   *b = buf + n;
	uint32_t	count[GS_RADIX];
	uint32_t	off[GS_RADIX];
	unsigned	cmask;
	int			d;
	size_t		i,
				j,
				end;

	s->final = a;
	s->final_end = a + n;

	if (n <= GS_CPU_SMALL_SORT)
	{
		for (i = 0; i < n; i++)
		{
			a[i].key = gs_key_word(s, (uint32_t) i, 0);
			a[i].idx = (uint32_t) i;
		}
		gs_small_sort(s, a, n, 0);
		return 0;
	}

	cmask = gs_constant_digits(s, NULL, n, s->ndigits);
	if (s->canceled)
		return 1;
	for (d = 0; d < s->ndigits && (cmask & (1u << d)); d++)
		;

	if (d == s->ndigits)
	{
		/* word 0 is the same everywhere: build records in place, go on */
		for (i = 0; i < n; i = end)
		{
			end = gs_chunk_end(i, n);
			for (j = i; j < end; j++)
			{
				a[j].key = gs_key_word(s, (uint32_t) j, 0);
				a[j].idx = (uint32_t) j;
			}
			if (gs_tick(s, end - i))
				return 1;
		}
		gs_msd(s, a, b, n, 0, d, cmask);
		return s->canceled;
	}

	/* count the first varying digit, then scatter the keys into b */
	memset(count, 0, sizeof(count));
	for (i = 0; i < n; i = end)
	{
		end = gs_chunk_end(i, n);
		for (j = i; j < end; j++)
			count[gs_digit(gs_key_word(s, (uint32_t) j, 0), d)]++;
		if (gs_tick(s, end - i))
			return 1;
	}
	gs_offsets(count, off);
	for (i = 0; i < n; i = end)
	{
		end = gs_chunk_end(i, n);
		for (j = i; j < end; j++)
		{
			uint64_t	k = gs_key_word(s, (uint32_t) j, 0);
			gs_rec	   *r = &b[off[gs_digit(k, d)]++];

			r->key = k;
			r->idx = (uint32_t) j;
		}
		if (gs_tick(s, end - i))
			return 1;
	}
	s->moved += n;
	gs_recurse_buckets(s, b, a, count, 0, d, cmask);
	return s->canceled;
}

/* ---------------------------------------------------------------------
 * 4-byte keys
 *
 * A 4-byte key and its row index fit in one 8-byte record, key << 32 | row,
 * so for these keys records are plain uint64_t instead of 12-byte gs_recs:
 * a third less memory traffic per move, and no gather is ever needed.  The
 * sort is the same MSD radix sort on the record's four key digits; ordering
 * whole records also orders equal keys by row, which is allowed.  Against
 * 12-byte records (thread CPU time, median of 9, 10M keys): uniform 1.23x
 * faster, a 1e6-value range 1.38x, uniform with GS_SORT_KEYS_OUT 1.25x;
 * 1M uniform keys 1.3x.
 * --------------------------------------------------------------------- */

static inline uint64_t
gs_rec32(const uint32_t *keys, size_t i)
{
	return (uint64_t) keys[i] << 32 | (uint64_t) i;
}

static void
gs_small_sort32(uint64_t *r, size_t n)
{
	size_t		i;

	for (i = 1; i < n; i++)
	{
		uint64_t	v = r[i];
		size_t		j = i;

		while (j > 0 && v < r[j - 1])
		{
			r[j] = r[j - 1];
			j--;
		}
		r[j] = v;
	}
}

static void gs_msd32(gs_cpu_sort *s, uint64_t *cur, uint64_t *oth,
					 size_t n, int d, unsigned cmask);

static void
gs_recurse_buckets32(gs_cpu_sort *s, uint64_t *dst, uint64_t *src,
					 const uint32_t *count, int d, unsigned cmask)
{
	size_t		off = 0;
	int			b;

	for (b = 0; b < GS_RADIX && !s->canceled; b++)
	{
		size_t		c = count[b];

		if (c == 1)
		{
			if (dst < s->final32 || dst >= s->final32_end)
				src[off] = dst[off];
		}
		else if (c > 1)
			gs_msd32(s, dst + off, src + off, c, d + 1, cmask);
		off += c;
	}
}

/* gs_msd for 4-byte keys' records (digits 0 .. 3 of the record) */
static void
gs_msd32(gs_cpu_sort *s, uint64_t *cur, uint64_t *oth, size_t n,
		 int d, unsigned cmask)
{
	uint32_t	count[GS_RADIX];
	uint32_t	off[GS_RADIX];
	int			in_final = (cur >= s->final32 && cur < s->final32_end);
	size_t		i,
				j,
				end;

	for (;;)
	{
		if (s->canceled)
			return;
		if (n <= GS_CPU_SMALL_SORT)
		{
			gs_small_sort32(cur, n);
			break;
		}
		while (d < 4 && (cmask & (1u << d)))
			d++;
		if (d == 4)
			break;				/* equal keys, in row order (stable) */

		memset(count, 0, sizeof(count));
		for (i = 0; i < n; i = end)
		{
			end = gs_chunk_end(i, n);
			for (j = i; j < end; j++)
				count[gs_digit(cur[j], d)]++;
			if (gs_tick(s, end - i))
				return;
		}
		if (gs_offsets(count, off) == 1)
		{
			d++;
			continue;
		}
		for (i = 0; i < n; i = end)
		{
			end = gs_chunk_end(i, n);
			for (j = i; j < end; j++)
				oth[off[gs_digit(cur[j], d)]++] = cur[j];
			if (gs_tick(s, end - i))
				return;
		}
		s->moved += n;
		gs_recurse_buckets32(s, oth, cur, count, d, cmask);
		return;
	}
	if (!in_final)
		memcpy(oth, cur, n * sizeof(uint64_t));
}

/* gs_radix_sort for 4-byte keys: buf has room for 2n records */
static int
gs_radix_sort32(gs_cpu_sort *s, uint64_t *buf, size_t n)
{
	const uint32_t *k = (const uint32_t *) s->keys;
	uint64_t   *a = buf;
	uint64_t   *b = buf + n;
	uint32_t	count[GS_RADIX];
	uint32_t	off[GS_RADIX];
	unsigned	cmask;
	int			d;
	size_t		i,
				j,
				end;

	s->final32 = a;
	s->final32_end = a + n;

	if (n <= GS_CPU_SMALL_SORT)
	{
		for (i = 0; i < n; i++)
			a[i] = gs_rec32(k, i);
		gs_small_sort32(a, n);
		return 0;
	}

	cmask = gs_constant_digits(s, NULL, n, 4);
	if (s->canceled)
		return 1;
	for (d = 0; d < 4 && (cmask & (1u << d)); d++)
		;
	if (d == 4)
	{
		/* every key is the same: row order is sorted order */
		for (i = 0; i < n; i = end)
		{
			end = gs_chunk_end(i, n);
			for (j = i; j < end; j++)
				a[j] = gs_rec32(k, j);
			if (gs_tick(s, end - i))
				return 1;
		}
		return 0;
	}

	/* count the first varying digit, then scatter the keys into b */
	memset(count, 0, sizeof(count));
	for (i = 0; i < n; i = end)
	{
		end = gs_chunk_end(i, n);
		for (j = i; j < end; j++)
			count[(k[j] >> (24 - GS_RADIX_BITS * d)) & (GS_RADIX - 1)]++;
		if (gs_tick(s, end - i))
			return 1;
	}
	gs_offsets(count, off);
	for (i = 0; i < n; i = end)
	{
		end = gs_chunk_end(i, n);
		for (j = i; j < end; j++)
			b[off[(k[j] >> (24 - GS_RADIX_BITS * d)) & (GS_RADIX - 1)]++] =
				gs_rec32(k, j);
		if (gs_tick(s, end - i))
			return 1;
	}
	s->moved += n;
	gs_recurse_buckets32(s, b, a, count, d, cmask);
	return s->canceled;
}

/*
 * Large buffers are touched once each, page by page, right after they are
 * allocated: huge pages spare most of the page faults (a 1.6 GB key
 * buffer took 400,000 of them).  Buffers below 256 MB (the batches of a
 * sort larger than work_mem, sorted one after another) stay on small
 * pages, where the kernel need not find free huge pages for them.
 */
#define CPU_HUGE_MIN_BYTES	((size_t) 256 * 1024 * 1024)

void
gs_cpu_advise_huge(void *p, size_t len)
{
#ifdef MADV_HUGEPAGE
	const uintptr_t huge = 2 * 1024 * 1024;
	uintptr_t	start = ((uintptr_t) p + huge - 1) & ~(huge - 1);
	uintptr_t	end = ((uintptr_t) p + len) & ~(huge - 1);

	if (p != NULL && len >= CPU_HUGE_MIN_BYTES && end > start)
		(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
#endif
}

/* the argument checks of sort() and sort_submit() */
gs_status
gs_cpu_check_args(const void *keys, size_t n, int key_bytes,
				  const uint32_t *perm, char *errbuf, size_t errlen)
{
	if (!GS_KEY_BYTES_VALID(key_bytes))
	{
		gs_cpu_set_error(errbuf, errlen, "unsupported key width %d", key_bytes);
		return GS_ERR_INVALID;
	}
	if (n > GS_MAX_ROWS)
	{
		gs_cpu_set_error(errbuf, errlen, "too many rows for one sort: %zu", n);
		return GS_ERR_INVALID;
	}
	if (n > 0 && (keys == NULL || perm == NULL))
	{
		gs_cpu_set_error(errbuf, errlen, "sort called without keys or output");
		return GS_ERR_INVALID;
	}
	return GS_OK;
}

/*
 * One sort, on the calling thread: sort() itself, and each job of the
 * worker thread.  The arguments have been checked.
 */
gs_status
gs_cpu_sort_keys(void *keys, size_t n, int key_bytes,
				 uint32_t *perm, int flags,
				 gs_cancel_fn cancel, void *cancel_arg,
				 gs_sort_stats *stats, char *errbuf, size_t errlen)
{
	double		t0 = gs_now_ms();
	double		t1;
	gs_cpu_sort *s;
	gs_rec	   *buf;
	void	   *work;			/* buf, as raw memory */
	size_t		work_bytes;
	size_t		i;

	if (stats != NULL)
		memset(stats, 0, sizeof(*stats));

	if (n == 0)
	{
		if (stats != NULL)
			stats->total_ms = gs_now_ms() - t0;
		return GS_OK;
	}
	if (n > SIZE_MAX / GS_MAX_KEY_BYTES)
	{
		gs_cpu_set_error(errbuf, errlen, "too many rows for one sort: %zu", n);
		return GS_ERR_NOMEM;
	}

	/* two record buffers; with KEYS_OUT, also room to gather the keys */
	work_bytes = 2 * n * (key_bytes == 4 ? sizeof(uint64_t) : sizeof(gs_rec));
	if ((flags & GS_SORT_KEYS_OUT) && n * (size_t) key_bytes > work_bytes)
		work_bytes = n * (size_t) key_bytes;
	s = malloc(sizeof(gs_cpu_sort));
	work = malloc(work_bytes);
	gs_cpu_advise_huge(work, work_bytes);
	buf = work;
	if (s == NULL || buf == NULL)
	{
		free(s);
		free(buf);
		gs_cpu_set_error(errbuf, errlen,
						 "could not allocate %zu bytes of sort workspace",
						 work_bytes);
		return GS_ERR_NOMEM;
	}
	memset(s, 0, sizeof(gs_cpu_sort));
	s->keys = keys;
	s->key_bytes = (size_t) key_bytes;
	s->nwords = key_bytes == 4 ? 1 : key_bytes / 8;
	s->ndigits = key_bytes == 4 ? 4 : GS_WORD_DIGITS;
	s->cancel = cancel;
	s->cancel_arg = cancel_arg;

	/* keys[] is only read until the sort is complete (see the top) */
	if (key_bytes == 4)
	{
		uint64_t   *r = work;

		if (gs_radix_sort32(s, r, n))
		{
			free(work);
			free(s);
			gs_cpu_set_error(errbuf, errlen, "sort canceled");
			return GS_ERR_CANCELED;
		}
		t1 = gs_now_ms();
		for (i = 0; i < n; i++)
			perm[i] = (uint32_t) r[i];
		if (flags & GS_SORT_KEYS_OUT)
		{
			uint32_t   *k = keys;

			for (i = 0; i < n; i++)
				k[i] = (uint32_t) (r[i] >> 32);
		}
	}
	else if (gs_radix_sort(s, buf, n))
	{
		free(buf);
		free(s);
		gs_cpu_set_error(errbuf, errlen, "sort canceled");
		return GS_ERR_CANCELED;
	}
	else
	{
		t1 = gs_now_ms();
		for (i = 0; i < n; i++)
			perm[i] = buf[i].idx;
	}

	if ((flags & GS_SORT_KEYS_OUT) && key_bytes != 4)
	{
		if (key_bytes == 8)
		{
			uint64_t   *k = keys;

			for (i = 0; i < n; i++)
				k[i] = buf[i].key;
		}
		else
		{
			/*
			 * Wider keys: gather them in sorted order into the workspace
			 * (sized for it), then copy back.  This is one random read per
			 * row, about 80 ns each on 10M 32-byte keys (TLB bound, software
			 * prefetch did not help); applying perm in place by following
			 * its cycles was 5x slower still, the misses being dependent.
			 */
			uint64_t   *tmp = work;
			const uint64_t *src = (const uint64_t *) s->keys;
			size_t		nw = (size_t) s->nwords;
			size_t		w;

			for (i = 0; i < n; i++)
			{
				const uint64_t *row = src + (size_t) perm[i] * nw;

				for (w = 0; w < nw; w++)
					tmp[i * nw + w] = row[w];
			}
			memcpy(keys, tmp, n * s->key_bytes);
		}
	}

	if (stats != NULL)
	{
		stats->sort_ms = t1 - t0;
		stats->passes = (int) ((s->moved + n - 1) / n);
		stats->total_ms = gs_now_ms() - t0;
	}
	free(buf);
	free(s);
	return GS_OK;
}
