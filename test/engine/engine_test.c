/*
 * engine_test.c
 *	  Tests of the CPU sort engine against a qsort reference.
 *
 * Every case sorts generated keys with the engine and checks that perm is a
 * permutation of 0 .. n-1, that the keys it selects are the reference's
 * sorted keys (so in order, and the same multiset), and with
 * GS_SORT_KEYS_OUT that keys[] was left sorted.  Sizes cover the edges of
 * the engine's small-sort threshold and of one radix digit; distributions
 * cover the digit-skipping and word-advancing paths.
 *
 * The asynchronous cases (sort_submit / sort_wait / sort_abort) check the
 * same results through the engine's worker thread, the ticket rules (oldest
 * first, at most GS_MAX_INFLIGHT), abort and destroy with sorts in flight,
 * cancel through sort_wait (keys[] unchanged), and that the worker takes no
 * signals.  Run them under valgrind and ThreadSanitizer too: make valgrind,
 * make helgrind, make tsan.
 *
 *	  engine_test			the suite (< 30 s)
 *	  engine_test --big		plus 10M-row cases
 *	  engine_test --quick	small sizes only (for valgrind)
 *	  engine_test --async	only the asynchronous cases (for thread checkers;
 *							with --quick, small sizes)
 *
 * The last line is "N passed, M failed"; the exit status is 1 on failure.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpusort_engine.h"

#define lengthof(a) (sizeof(a) / sizeof((a)[0]))

static int	passed;
static int	failed;
static size_t cur_key_bytes;

#define CHECK(cond, ...) \
	do { \
		if (cond) \
			passed++; \
		else \
		{ \
			failed++; \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__); \
			printf("\n"); \
		} \
	} while (0)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t
rnd(void)
{
	/* splitmix64 */
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* key word w of a row; for 4-byte keys the single word is the top 32 bits */
static void
set_word(unsigned char *row, int kb, int w, uint64_t v)
{
	if (kb == 4)
	{
		uint32_t	x = (uint32_t) (v >> 32);

		memcpy(row, &x, 4);
	}
	else
		memcpy(row + 8 * w, &v, 8);
}

static int
nwords_of(int kb)
{
	return kb == 4 ? 1 : kb / 8;
}

static int
key_cmp(const void *a, const void *b)
{
	if (cur_key_bytes == 4)
	{
		uint32_t	x,
					y;

		memcpy(&x, a, 4);
		memcpy(&y, b, 4);
		return x < y ? -1 : x > y;
	}
	else
	{
		size_t		w;

		for (w = 0; w < cur_key_bytes / 8; w++)
		{
			uint64_t	x,
						y;

			memcpy(&x, (const char *) a + 8 * w, 8);
			memcpy(&y, (const char *) b + 8 * w, 8);
			if (x != y)
				return x < y ? -1 : 1;
		}
		return 0;
	}
}

enum dist
{
	D_UNIFORM,
	D_EQUAL,
	D_FEW,
	D_SORTED,
	D_REVERSED,
	D_LOW_BYTE,
	D_TOP_BYTE,
	D_ENTROPY,
	D_ZIPF,
	D_SMALL_RANGE,
	D_FIRST_WORD_CONST,
	D_BIT_PER_BYTE,
	D_NDIST
};

static const char *const dist_names[] = {
	"uniform", "all-equal", "few-distinct", "presorted", "reversed",
	"low-byte-only", "top-byte-only", "entropy-reduced", "zipf",
	"small-range", "first-word-const", "one-bit-per-byte"
};

static void
generate(unsigned char *keys, size_t n, int kb, enum dist d, int param)
{
	int			nw = nwords_of(kb);
	uint64_t	base[4];
	uint64_t	few[8][4];
	size_t		i;
	int			w;

	for (w = 0; w < 4; w++)
		base[w] = rnd();
	for (i = 0; i < 8; i++)
		for (w = 0; w < 4; w++)
			few[i][w] = rnd();

	for (i = 0; i < n; i++)
	{
		unsigned char *row = keys + i * kb;

		for (w = 0; w < nw; w++)
		{
			uint64_t	v;

			switch (d)
			{
				case D_EQUAL:
					v = base[w];
					break;
				case D_FEW:
					v = few[(i * 7 + (i >> 3)) % 8 == 0 ? 0 : rnd() % 8][w];
					break;
				case D_LOW_BYTE:
					/* only the least significant byte of the key varies */
					v = base[w];
					if (w == nw - 1)
						v = kb == 4 ? (v & ~(0xFFull << 32)) | ((rnd() & 0xFF) << 32)
							: (v & ~0xFFull) | (rnd() & 0xFF);
					break;
				case D_TOP_BYTE:
					v = base[w];
					if (w == 0)
						v = (v & ~(0xFFull << 56)) | ((rnd() & 0xFF) << 56);
					break;
				case D_ENTROPY:
					{
						int			k;

						v = rnd();
						for (k = 1; k < param; k++)
							v &= rnd();
					}
					break;
				case D_ZIPF:
					{
						/* value rank ~ 1/x: a few very common keys */
						double		u = (double) (rnd() >> 11) / 9007199254740992.0;
						uint64_t	r = (uint64_t) exp(u * log(1.0e6));

						v = w == 0 ? (r * 0x9E3779B97F4A7C15ull) : r;
					}
					break;
				case D_SMALL_RANGE:
					/* a sign-flipped int8 in [-500, 500) in word 0 */
					v = w == 0 ? ((uint64_t) ((int64_t) (rnd() % 1000) - 500) ^ (1ull << 63))
						: rnd() % 3;
					if (kb == 4 && w == 0)
						v = ((rnd() % 1000) + 0x80000000ull - 500) << 32;
					break;
				case D_FIRST_WORD_CONST:
					v = w == 0 ? base[0] : rnd();
					break;
				case D_BIT_PER_BYTE:
					/* every digit has exactly two values: deep recursion */
					v = rnd() & 0x0101010101010101ull;
					break;
				case D_UNIFORM:
				case D_SORTED:
				case D_REVERSED:
				default:
					v = rnd();
					break;
			}
			set_word(row, kb, w, v);
		}
	}

	if (d == D_SORTED || d == D_REVERSED)
	{
		cur_key_bytes = kb;
		qsort(keys, n, kb, key_cmp);
		if (d == D_REVERSED)
		{
			unsigned char tmp[GS_MAX_KEY_BYTES];

			for (i = 0; i < n / 2; i++)
			{
				memcpy(tmp, keys + i * kb, kb);
				memcpy(keys + i * kb, keys + (n - 1 - i) * kb, kb);
				memcpy(keys + (n - 1 - i) * kb, tmp, kb);
			}
		}
	}
}

static const gs_engine_ops *ops;
static gs_engine *eng;

/* sort one generated input and check the result against qsort */
static void
run_case(size_t n, int kb, enum dist d, int param, int flags)
{
	size_t		bytes = n * kb;
	unsigned char *keys;
	unsigned char *orig = malloc(bytes + 1);
	unsigned char *ref = malloc(bytes + 1);
	uint32_t   *perm = malloc(n * sizeof(uint32_t) + 1);
	unsigned char *seen = calloc(n + 1, 1);
	char		errbuf[GS_ERRBUF_SIZE] = "";
	gs_sort_stats stats;
	gs_status	st;
	size_t		i;
	size_t		bad_perm = 0,
				bad_order = 0,
				bad_keys = 0;
	void	   *kp = NULL;

	st = ops->keybuf_alloc(eng, bytes, &kp, errbuf, sizeof(errbuf));
	if (st != GS_OK || !orig || !ref || !perm || !seen)
	{
		CHECK(0, "allocation for n=%zu failed", n);
		goto out;
	}
	keys = kp;
	generate(keys, n, kb, d, param);
	memcpy(orig, keys, bytes);
	memcpy(ref, keys, bytes);
	cur_key_bytes = kb;
	qsort(ref, n, kb, key_cmp);

	memset(&stats, 0xFF, sizeof(stats));
	st = ops->sort(eng, keys, n, kb, perm, flags, NULL, NULL, &stats,
				   errbuf, sizeof(errbuf));
	if (st != GS_OK)
	{
		CHECK(0, "sort n=%zu kb=%d %s: status %d (%s) %s", n, kb,
			  dist_names[d], st, gs_status_text(st), errbuf);
		goto out;
	}
	for (i = 0; i < n; i++)
	{
		if (perm[i] >= n || seen[perm[i]])
			bad_perm++;
		else
		{
			seen[perm[i]] = 1;
			if (memcmp(orig + (size_t) perm[i] * kb, ref + i * kb, kb) != 0)
				bad_order++;
		}
		if ((flags & GS_SORT_KEYS_OUT) &&
			memcmp(keys + i * kb, ref + i * kb, kb) != 0)
			bad_keys++;
	}
	CHECK(bad_perm == 0 && bad_order == 0 && bad_keys == 0,
		  "n=%zu kb=%d dist=%s param=%d flags=%d: %zu bad perm entries, "
		  "%zu out of order, %zu wrong output keys",
		  n, kb, dist_names[d], param, flags, bad_perm, bad_order, bad_keys);
	CHECK(stats.upload_ms == 0 && stats.download_ms == 0 &&
		  stats.device_bytes == 0 && stats.sort_ms >= 0 &&
		  stats.total_ms >= stats.sort_ms && stats.passes >= 0 &&
		  stats.passes <= 8 * nwords_of(kb),
		  "stats not filled: n=%zu sort %.3f total %.3f passes %d",
		  n, stats.sort_ms, stats.total_ms, stats.passes);

out:
	if (kp)
		ops->keybuf_free(eng, kp, bytes);
	free(orig);
	free(ref);
	free(perm);
	free(seen);
}

/* cancel callback: says stop on its stop_at'th call */
typedef struct cancel_state
{
	int			calls;
	int			stop_at;
} cancel_state;

static int
cancel_cb(void *arg)
{
	cancel_state *c = arg;

	c->calls++;
	return c->stop_at > 0 && c->calls >= c->stop_at;
}

static void
test_cancel(size_t n)
{
	static const int widths[] = {4, 8, 16, 32};
	static const enum dist dists[] = {D_UNIFORM, D_EQUAL, D_FIRST_WORD_CONST};
	size_t		wi,
				di;
	int			stop;

	for (wi = 0; wi < sizeof(widths) / sizeof(widths[0]); wi++)
	{
		for (di = 0; di < sizeof(dists) / sizeof(dists[0]); di++)
		{
			int			kb = widths[wi];
			unsigned char *keys = malloc(n * kb);
			uint32_t   *perm = malloc(n * sizeof(uint32_t));
			int			total_calls;
			int			si,
						last_stop = 0;
			cancel_state c = {0, 0};
			char		errbuf[GS_ERRBUF_SIZE];
			gs_sort_stats stats;
			gs_status	st;
			uint64_t	seed = rng_state;

			/* the same keys every time, so the calls come the same way */
			generate(keys, n, kb, dists[di], 0);
			/* a callback that never stops: counted, sort succeeds */
			st = ops->sort(eng, keys, n, kb, perm, 0, cancel_cb, &c, &stats,
						   errbuf, sizeof(errbuf));
			total_calls = c.calls;
			CHECK(st == GS_OK && total_calls >= (int) (n >> 20),
				  "cancel never: status %d, %d calls for n=%zu kb=%d",
				  st, total_calls, n, kb);
			/* stop at the first, second, middle and last call */
			for (si = 0; si < 4; si++)
			{
				stop = si < 2 ? si + 1 : si == 2 ? total_calls / 2 : total_calls;
				if (stop < 1 || (si > 0 && stop <= last_stop))
					continue;
				last_stop = stop;
				c.calls = 0;
				c.stop_at = stop;
				rng_state = seed;
				generate(keys, n, kb, dists[di], 0);
				errbuf[0] = '\0';
				st = ops->sort(eng, keys, n, kb, perm, GS_SORT_KEYS_OUT,
							   cancel_cb, &c, NULL, errbuf, sizeof(errbuf));
				CHECK(st == GS_ERR_CANCELED && c.calls == stop &&
					  errbuf[0] != '\0',
					  "cancel at call %d of %d (kb=%d %s): status %d, %d calls",
					  stop, total_calls, kb, dist_names[dists[di]], st,
					  c.calls);
			}
			free(keys);
			free(perm);
		}
	}
}

static void
test_api(void)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_device_info info;
	void	   *p = NULL;
	uint32_t	perm[4];
	uint64_t	k[4] = {3, 1, 2, 0};
	int			s;

	CHECK(gpusort_cpu_engine(GS_ENGINE_ABI_VERSION + 1) == NULL,
		  "wrong ABI version accepted");
	CHECK(ops->abi_version == GS_ENGINE_ABI_VERSION &&
		  strcmp(ops->name, "cpu") == 0, "ops header wrong");
	for (s = GS_OK; s <= GS_ERR_INTERNAL + 1; s++)
		CHECK(gs_status_text((gs_status) s) != NULL &&
			  gs_status_text((gs_status) s)[0] != '\0', "status text %d", s);
	CHECK(ops->device_info(eng, &info, errbuf, sizeof(errbuf)) == GS_OK &&
		  strcmp(info.name, "CPU") == 0 && info.device_count == 0 &&
		  info.total_mem == 0, "device_info");
	CHECK(ops->keybuf_alloc(eng, 16, &p, errbuf, sizeof(errbuf)) == GS_OK &&
		  p != NULL, "keybuf_alloc");
	memcpy(p, "0123456789abcdef", 16);
	CHECK(ops->keybuf_realloc(eng, &p, 16, 1 << 20, errbuf,
							  sizeof(errbuf)) == GS_OK &&
		  memcmp(p, "0123456789abcdef", 16) == 0, "keybuf_realloc keeps data");
	ops->keybuf_free(eng, p, 1 << 20);
	p = NULL;
	CHECK(ops->keybuf_alloc(eng, SIZE_MAX / 2, &p, errbuf,
							sizeof(errbuf)) == GS_ERR_NOMEM &&
		  errbuf[0] != '\0', "keybuf_alloc of SIZE_MAX/2 must fail");
	errbuf[0] = '\0';
	CHECK(ops->sort(eng, k, 4, 12, perm, 0, NULL, NULL, NULL, errbuf,
					sizeof(errbuf)) == GS_ERR_INVALID && errbuf[0] != '\0',
		  "key width 12 accepted");
	CHECK(ops->sort(eng, NULL, 4, 8, perm, 0, NULL, NULL, NULL, errbuf,
					sizeof(errbuf)) == GS_ERR_INVALID, "NULL keys accepted");
	CHECK(ops->sort(eng, NULL, 0, 8, NULL, 0, NULL, NULL, NULL, errbuf,
					sizeof(errbuf)) == GS_OK, "n = 0 with NULL buffers");
	CHECK(ops->sort(eng, k, 4, 8, perm, GS_SORT_KEYS_OUT, NULL, NULL, NULL,
					errbuf, sizeof(errbuf)) == GS_OK &&
		  perm[0] == 3 && perm[1] == 1 && perm[2] == 2 && perm[3] == 0 &&
		  k[0] == 0 && k[3] == 3, "tiny sort");
}

/* ---------------------------------------------------------------------
 * asynchronous sorts
 * --------------------------------------------------------------------- */

/* one asynchronous sort's input, reference and output */
typedef struct async_case
{
	size_t		n;
	int			kb;
	int			flags;
	enum dist	d;
	unsigned char *keys;
	unsigned char *orig;		/* keys as generated */
	unsigned char *ref;			/* keys sorted by qsort */
	uint32_t   *perm;
	gs_ticket	ticket;
} async_case;

static void
ac_init(async_case *c, size_t n, int kb, enum dist d, int flags)
{
	size_t		bytes = n * kb;

	memset(c, 0, sizeof(*c));
	c->n = n;
	c->kb = kb;
	c->d = d;
	c->flags = flags;
	c->keys = malloc(bytes + 1);
	c->orig = malloc(bytes + 1);
	c->ref = malloc(bytes + 1);
	c->perm = malloc(n * sizeof(uint32_t) + 1);
	if (!c->keys || !c->orig || !c->ref || !c->perm)
	{
		fprintf(stderr, "out of memory for %zu test rows\n", n);
		exit(2);
	}
	generate(c->keys, n, kb, d, 2);
	memcpy(c->orig, c->keys, bytes);
	memcpy(c->ref, c->keys, bytes);
	cur_key_bytes = kb;
	qsort(c->ref, n, kb, key_cmp);
}

static void
ac_free(async_case *c)
{
	free(c->keys);
	free(c->orig);
	free(c->ref);
	free(c->perm);
}

static int
ac_keys_unchanged(const async_case *c)
{
	return memcmp(c->keys, c->orig, c->n * c->kb) == 0;
}

/* check a finished sort against the reference, as run_case does */
static void
ac_verify(const async_case *c, const char *what)
{
	unsigned char *seen = calloc(c->n + 1, 1);
	size_t		bad_perm = 0,
				bad_order = 0,
				bad_keys = 0;
	size_t		i;
	int			kb = c->kb;

	for (i = 0; i < c->n; i++)
	{
		uint32_t	p = c->perm[i];

		if (p >= c->n || seen[p])
			bad_perm++;
		else
		{
			seen[p] = 1;
			if (memcmp(c->orig + (size_t) p * kb, c->ref + i * kb, kb) != 0)
				bad_order++;
		}
		if ((c->flags & GS_SORT_KEYS_OUT) &&
			memcmp(c->keys + i * kb, c->ref + i * kb, kb) != 0)
			bad_keys++;
	}
	CHECK(bad_perm == 0 && bad_order == 0 && bad_keys == 0,
		  "%s: n=%zu kb=%d dist=%s flags=%d: %zu bad perm entries, "
		  "%zu out of order, %zu wrong output keys", what, c->n, kb,
		  dist_names[c->d], c->flags, bad_perm, bad_order, bad_keys);
	free(seen);
}

static gs_status
ac_submit(gs_engine *e, async_case *c, char *errbuf)
{
	errbuf[0] = '\0';
	return ops->sort_submit(e, c->keys, c->n, c->kb, c->perm, c->flags,
							&c->ticket, errbuf, GS_ERRBUF_SIZE);
}

/* wait for c and check it: status OK, stats like sort()'s, right result */
static void
ac_wait_ok(gs_engine *e, async_case *c, const char *what)
{
	char		errbuf[GS_ERRBUF_SIZE] = "";
	gs_sort_stats stats;
	gs_status	st;

	memset(&stats, 0xFF, sizeof(stats));
	st = ops->sort_wait(e, c->ticket, NULL, NULL, &stats, errbuf,
						sizeof(errbuf));
	CHECK(st == GS_OK, "%s: sort_wait n=%zu kb=%d: status %d (%s) %s",
		  what, c->n, c->kb, st, gs_status_text(st), errbuf);
	if (st != GS_OK)
		return;
	ac_verify(c, what);
	CHECK(stats.upload_ms == 0 && stats.download_ms == 0 &&
		  stats.device_bytes == 0 && stats.sort_ms >= 0 &&
		  stats.total_ms >= stats.sort_ms && stats.passes >= 0 &&
		  stats.passes <= 8 * nwords_of(c->kb),
		  "%s: stats not filled: n=%zu sort %.3f total %.3f passes %d",
		  what, c->n, stats.sort_ms, stats.total_ms, stats.passes);
}

/* a row count between 0 and max, spread evenly over the orders of magnitude */
static size_t
random_n(size_t max)
{
	double		u = (double) (rnd() >> 11) / 9007199254740992.0;

	if (rnd() % 16 == 0)
		return (size_t) (rnd() % 50);
	return (size_t) exp(u * log((double) max + 1.0)) - 1;
}

static void
random_case(async_case *c, size_t maxn)
{
	static const int widths[] = {4, 8, 16, 24, 32};

	ac_init(c, random_n(maxn), widths[rnd() % lengthof(widths)],
			(enum dist) (rnd() % D_NDIST),
			(rnd() & 1) ? GS_SORT_KEYS_OUT : 0);
}

/*
 * Random sizes, widths and distributions, as a chunked sort would submit
 * them: up to GS_MAX_INFLIGHT in flight, the oldest waited for before the
 * next is submitted.
 */
static void
test_async_pipeline(int chunks, size_t maxn)
{
	async_case ring[GS_MAX_INFLIGHT];
	char		errbuf[GS_ERRBUF_SIZE];
	int			submitted = 0,
				waited = 0;

	while (waited < chunks)
	{
		if (submitted < chunks && submitted - waited < GS_MAX_INFLIGHT)
		{
			async_case *c = &ring[submitted % GS_MAX_INFLIGHT];
			gs_status	st;

			random_case(c, maxn);
			st = ac_submit(eng, c, errbuf);
			CHECK(st == GS_OK && c->ticket != 0,
				  "pipeline submit %d: status %d %s", submitted, st, errbuf);
			if (st != GS_OK)
			{
				ac_free(c);
				return;
			}
			submitted++;
		}
		else
		{
			async_case *c = &ring[waited % GS_MAX_INFLIGHT];

			ac_wait_ok(eng, c, "pipeline");
			ac_free(c);
			waited++;
		}
	}
}

/* two in flight, both waited in order; then one at a time, every width */
static void
test_async_basic(size_t n)
{
	static const int widths[] = {4, 8, 16, 24, 32};
	async_case a,
				b;
	char		errbuf[GS_ERRBUF_SIZE];
	size_t		wi;

	for (wi = 0; wi < lengthof(widths); wi++)
	{
		ac_init(&a, n, widths[wi], D_UNIFORM, GS_SORT_KEYS_OUT);
		ac_init(&b, n / 3 + 1, widths[(wi + 2) % 5], D_SMALL_RANGE, 0);
		CHECK(ac_submit(eng, &a, errbuf) == GS_OK, "submit a: %s", errbuf);
		CHECK(ac_submit(eng, &b, errbuf) == GS_OK, "submit b: %s", errbuf);
		CHECK(b.ticket != a.ticket && a.ticket != 0 && b.ticket != 0,
			  "tickets %llu and %llu", (unsigned long long) a.ticket,
			  (unsigned long long) b.ticket);
		ac_wait_ok(eng, &a, "two in flight, first");
		ac_wait_ok(eng, &b, "two in flight, second");
		ac_free(&a);
		ac_free(&b);

		ac_init(&a, n, widths[wi], D_FIRST_WORD_CONST, 0);
		CHECK(ac_submit(eng, &a, errbuf) == GS_OK, "submit: %s", errbuf);
		ac_wait_ok(eng, &a, "one in flight");
		ac_free(&a);
	}
}

/* the rules: argument checks, ticket order, the in-flight limit, sort() */
static void
test_async_errors(void)
{
	async_case a,
				b,
				c;
	char		errbuf[GS_ERRBUF_SIZE];
	gs_ticket	t = 0;
	gs_status	st;
	uint64_t	k[4] = {3, 1, 2, 0};
	uint32_t	perm[4];

	errbuf[0] = '\0';
	CHECK(ops->sort_wait(eng, 1, NULL, NULL, NULL, errbuf,
						 sizeof(errbuf)) == GS_ERR_INVALID && errbuf[0],
		  "wait with nothing outstanding");
	errbuf[0] = '\0';
	CHECK(ops->sort_submit(eng, k, 4, 12, perm, 0, &t, errbuf,
						   sizeof(errbuf)) == GS_ERR_INVALID && errbuf[0] &&
		  t == 0, "submit of key width 12");
	CHECK(ops->sort_submit(eng, NULL, 4, 8, perm, 0, &t, errbuf,
						   sizeof(errbuf)) == GS_ERR_INVALID && t == 0,
		  "submit of NULL keys");
	CHECK(ops->sort_submit(eng, k, 4, 8, perm, 0, NULL, errbuf,
						   sizeof(errbuf)) == GS_ERR_INVALID,
		  "submit without a ticket");
	CHECK(ops->sort(eng, k, 4, 8, perm, 0, NULL, NULL, NULL, errbuf,
					sizeof(errbuf)) == GS_OK, "failed submits left sorts behind");

	ac_init(&a, 20000, 8, D_UNIFORM, GS_SORT_KEYS_OUT);
	ac_init(&b, 30000, 16, D_ZIPF, GS_SORT_KEYS_OUT);
	ac_init(&c, 100, 4, D_UNIFORM, 0);
	CHECK(ac_submit(eng, &a, errbuf) == GS_OK, "submit a: %s", errbuf);
	CHECK(ac_submit(eng, &b, errbuf) == GS_OK, "submit b: %s", errbuf);
	st = ac_submit(eng, &c, errbuf);
	CHECK(st == GS_ERR_INVALID && errbuf[0] && c.ticket == 0,
		  "submit beyond GS_MAX_INFLIGHT: status %d", st);

	errbuf[0] = '\0';
	st = ops->sort_wait(eng, b.ticket, NULL, NULL, NULL, errbuf,
						sizeof(errbuf));
	CHECK(st == GS_ERR_INVALID && errbuf[0], "wait out of order: status %d",
		  st);
	CHECK(ops->sort_wait(eng, 0, NULL, NULL, NULL, errbuf,
						 sizeof(errbuf)) == GS_ERR_INVALID, "wait for ticket 0");
	CHECK(ops->sort_wait(eng, b.ticket + 1000, NULL, NULL, NULL, errbuf,
						 sizeof(errbuf)) == GS_ERR_INVALID,
		  "wait for an unknown ticket");

	errbuf[0] = '\0';
	st = ops->sort(eng, k, 4, 8, perm, 0, NULL, NULL, NULL, errbuf,
				   sizeof(errbuf));
	CHECK(st == GS_ERR_INVALID && errbuf[0],
		  "sort() with two sorts outstanding: status %d", st);

	ac_wait_ok(eng, &a, "after the refused calls, a");
	st = ops->sort(eng, k, 4, 8, perm, 0, NULL, NULL, NULL, errbuf,
				   sizeof(errbuf));
	CHECK(st == GS_ERR_INVALID, "sort() with one sort outstanding: %d", st);
	/* with one slot free again, a third submit is taken */
	CHECK(ac_submit(eng, &c, errbuf) == GS_OK, "submit c: %s", errbuf);
	ac_wait_ok(eng, &b, "after the refused calls, b");
	CHECK(ops->sort_wait(eng, a.ticket, NULL, NULL, NULL, errbuf,
						 sizeof(errbuf)) == GS_ERR_INVALID,
		  "second wait for the same ticket");
	ac_wait_ok(eng, &c, "after the refused calls, c");

	/* drained: sort() works again */
	k[0] = 3;
	k[1] = 1;
	k[2] = 2;
	k[3] = 0;
	st = ops->sort(eng, k, 4, 8, perm, GS_SORT_KEYS_OUT, NULL, NULL, NULL,
				   errbuf, sizeof(errbuf));
	CHECK(st == GS_OK && perm[0] == 3 && perm[3] == 0 && k[0] == 0 &&
		  k[3] == 3, "sync sort after draining: status %d", st);
	ac_free(&a);
	ac_free(&b);
	ac_free(&c);
}

/* sort_abort with nothing, one running and one queued; then a fresh submit */
static void
test_async_abort(size_t n)
{
	async_case a,
				b,
				c;
	char		errbuf[GS_ERRBUF_SIZE];
	gs_engine  *e2;
	int			round;

	/* on an engine that never started its thread, and twice */
	CHECK(ops->create(&e2, errbuf, sizeof(errbuf)) == GS_OK, "create");
	ops->sort_abort(e2);
	ops->sort_abort(e2);
	ops->destroy(e2);
	ops->sort_abort(eng);

	for (round = 0; round < 3; round++)
	{
		/* round 0 and 2 abort at once; round 1 after a is surely running */
		ac_init(&a, n, 32, D_UNIFORM, GS_SORT_KEYS_OUT);
		ac_init(&b, n / 2, 8, D_UNIFORM, round == 1 ? 0 : GS_SORT_KEYS_OUT);
		CHECK(ac_submit(eng, &a, errbuf) == GS_OK, "submit a: %s", errbuf);
		CHECK(ac_submit(eng, &b, errbuf) == GS_OK, "submit b: %s", errbuf);
		if (round == 1)
		{
			struct timespec ts = {0, 20 * 1000 * 1000};

			nanosleep(&ts, NULL);
		}
		ops->sort_abort(eng);

		/*
		 * The engine no longer touches them.  A sort that was stopped left
		 * its keys alone; one that finished first may have sorted them.
		 */
		CHECK(ac_keys_unchanged(&a) ||
			  memcmp(a.keys, a.ref, a.n * a.kb) == 0,
			  "abort round %d: keys of a neither as given nor sorted", round);
		CHECK(ac_keys_unchanged(&b) ||
			  memcmp(b.keys, b.ref, b.n * b.kb) == 0,
			  "abort round %d: keys of b neither as given nor sorted", round);
		CHECK(ops->sort_wait(eng, a.ticket, NULL, NULL, NULL, errbuf,
							 sizeof(errbuf)) == GS_ERR_INVALID &&
			  ops->sort_wait(eng, b.ticket, NULL, NULL, NULL, errbuf,
							 sizeof(errbuf)) == GS_ERR_INVALID,
			  "abort round %d: aborted tickets still waitable", round);
		ops->sort_abort(eng);

		/* a fresh submit works, and two may be in flight again */
		ac_init(&c, 5000 + round, 16, D_FEW, GS_SORT_KEYS_OUT);
		memcpy(a.keys, a.orig, a.n * a.kb);
		CHECK(ac_submit(eng, &a, errbuf) == GS_OK &&
			  ac_submit(eng, &c, errbuf) == GS_OK,
			  "submit after abort: %s", errbuf);
		ac_wait_ok(eng, &a, "after abort, a");
		ac_wait_ok(eng, &c, "after abort, c");
		ac_free(&a);
		ac_free(&b);
		ac_free(&c);
	}
}

/* cancel callback that records the thread it runs on */
typedef struct wait_cancel
{
	int			calls;
	int			stop_at;		/* stop at this call; 0: never */
	int			other_thread;	/* calls made on another thread */
	pthread_t	self;
} wait_cancel;

static int
wait_cancel_cb(void *arg)
{
	wait_cancel *w = arg;

	w->calls++;
	if (!pthread_equal(pthread_self(), w->self))
		w->other_thread++;
	return w->stop_at > 0 && w->calls >= w->stop_at;
}

/*
 * Cancel through sort_wait: a callback that fires at its first or third
 * call stops the sort, which reports GS_ERR_CANCELED with keys[] as given
 * (with GS_SORT_KEYS_OUT); the sort queued behind it is not affected.  The
 * sort is large (hundreds of ms) so that the callback fires while it runs,
 * but a heavily loaded machine (or valgrind, which runs one thread at a
 * time) may let it finish first: then it must simply have succeeded.
 */
static void
test_async_cancel(size_t n)
{
	static const int stops[] = {1, 3, 0};
	char		errbuf[GS_ERRBUF_SIZE];
	size_t		si;
	int			canceled = 0;

	for (si = 0; si < lengthof(stops); si++)
	{
		async_case a,
					b;
		wait_cancel w;
		gs_sort_stats stats;
		gs_status	st;

		memset(&w, 0, sizeof(w));
		w.self = pthread_self();
		w.stop_at = stops[si];
		ac_init(&a, n, 32, D_UNIFORM, GS_SORT_KEYS_OUT);
		ac_init(&b, 3000, 8, D_UNIFORM, GS_SORT_KEYS_OUT);
		CHECK(ac_submit(eng, &a, errbuf) == GS_OK &&
			  ac_submit(eng, &b, errbuf) == GS_OK, "submit: %s", errbuf);
		errbuf[0] = '\0';
		st = ops->sort_wait(eng, a.ticket, wait_cancel_cb, &w, &stats,
							errbuf, sizeof(errbuf));
		if (st == GS_ERR_CANCELED)
		{
			canceled++;
			CHECK(w.stop_at > 0 && w.calls == w.stop_at &&
				  errbuf[0] != '\0' && ac_keys_unchanged(&a) &&
				  stats.total_ms == 0,
				  "cancel at wait poll %d: %d calls, message \"%s\", keys %s",
				  w.stop_at, w.calls, errbuf,
				  ac_keys_unchanged(&a) ? "unchanged" : "CHANGED");
		}
		else
		{
			CHECK(st == GS_OK, "wait polling cancel (stop at %d): status %d "
				  "(%s)", w.stop_at, st, errbuf);
			if (st == GS_OK)
				ac_verify(&a, "wait polling cancel");
			if (w.stop_at > 0)
				printf("note: the sort finished before cancel call %d "
					   "(%d calls)\n", w.stop_at, w.calls);
		}
		CHECK(w.other_thread == 0, "cancel called on another thread");
		ac_wait_ok(eng, &b, "behind a canceled sort");
		ac_free(&a);
		ac_free(&b);
	}
	CHECK(canceled > 0, "no sort was canceled through sort_wait");
}

/* destroy with sorts in flight, idle, and never used */
static void
test_async_destroy(size_t n)
{
	async_case a,
				b;
	char		errbuf[GS_ERRBUF_SIZE];
	gs_engine  *e2;

	ac_init(&a, n, 16, D_UNIFORM, GS_SORT_KEYS_OUT);
	ac_init(&b, n, 8, D_ZIPF, 0);
	CHECK(ops->create(&e2, errbuf, sizeof(errbuf)) == GS_OK, "create");
	CHECK(ac_submit(e2, &a, errbuf) == GS_OK &&
		  ac_submit(e2, &b, errbuf) == GS_OK, "submit: %s", errbuf);
	ops->destroy(e2);
	CHECK(ac_keys_unchanged(&a) || memcmp(a.keys, a.ref, a.n * a.kb) == 0,
		  "destroy in flight: keys neither as given nor sorted");

	/* an engine whose worker is idle */
	memcpy(a.keys, a.orig, a.n * a.kb);
	CHECK(ops->create(&e2, errbuf, sizeof(errbuf)) == GS_OK, "create");
	CHECK(ac_submit(e2, &a, errbuf) == GS_OK, "submit: %s", errbuf);
	ac_wait_ok(e2, &a, "on a second engine");
	ops->destroy(e2);
	ac_free(&a);
	ac_free(&b);

	CHECK(ops->create(&e2, errbuf, sizeof(errbuf)) == GS_OK, "create");
	ops->destroy(e2);
	ops->destroy(NULL);
}

static volatile sig_atomic_t sig_count;
static pthread_t sig_thread;

static void
sig_handler(int signo)
{
	(void) signo;
	sig_thread = pthread_self();
	sig_count++;
}

/*
 * The worker blocks every signal: with SIGUSR1 blocked on this thread, a
 * process-directed SIGUSR1 sent while a sort runs stays pending (no thread
 * takes it) until this thread unblocks it.
 */
static void
test_async_signals(size_t n)
{
	async_case a;
	char		errbuf[GS_ERRBUF_SIZE];
	struct sigaction sa,
				old_sa;
	sigset_t	usr1,
				old_mask;
	struct timespec ts = {0, 10 * 1000 * 1000};
	int			before;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sig_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, &old_sa);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);

	ac_init(&a, n, 32, D_UNIFORM, 0);
	pthread_sigmask(SIG_BLOCK, &usr1, &old_mask);
	CHECK(ac_submit(eng, &a, errbuf) == GS_OK, "submit: %s", errbuf);
	kill(getpid(), SIGUSR1);
	nanosleep(&ts, NULL);
	before = sig_count;
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	CHECK(before == 0 && sig_count == 1 &&
		  pthread_equal(sig_thread, pthread_self()),
		  "SIGUSR1 taken by the worker (%d before unblocking, %d after)",
		  before, (int) sig_count);
	ac_wait_ok(eng, &a, "while a signal came");
	sigaction(SIGUSR1, &old_sa, NULL);
	ac_free(&a);
}

int
main(int argc, char **argv)
{
	static const int widths[] = {4, 8, 16, 24, 32};
	size_t		sizes[64];
	int			nsizes = 0;
	int			big = 0,
				quick = 0,
				async_only = 0;
	int			i,
				wi,
				d,
				ncase = 0;
	char		errbuf[GS_ERRBUF_SIZE];

	for (i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--big") == 0)
			big = 1;
		else if (strcmp(argv[i], "--quick") == 0)
			quick = 1;
		else if (strcmp(argv[i], "--async") == 0)
			async_only = 1;
		else
		{
			fprintf(stderr, "usage: %s [--big|--quick] [--async]\n", argv[0]);
			return 2;
		}
	}

	ops = gpusort_cpu_engine(GS_ENGINE_ABI_VERSION);
	if (ops == NULL || ops->create(&eng, errbuf, sizeof(errbuf)) != GS_OK)
	{
		printf("0 passed, 1 failed\n");
		return 1;
	}
	test_api();

	{
		static const size_t base[] = {0, 1, 2, 3, 15, 16, 17, 47, 48, 49,
		255, 256, 257, 1000, 4099, 100000};

		for (i = 0; i < (int) (sizeof(base) / sizeof(base[0])); i++)
			sizes[nsizes++] = base[i];
	}
	if (!quick)
		sizes[nsizes++] = 1000000;
	if (big)
		sizes[nsizes++] = 10000000;
	if (async_only)
		nsizes = 0;

	for (i = 0; i < nsizes; i++)
	{
		size_t		n = sizes[i];

		for (wi = 0; wi < 5; wi++)
		{
			for (d = 0; d < D_NDIST; d++)
			{
				int			flags = (ncase++ & 1) ? GS_SORT_KEYS_OUT : 0;

				/* the largest sizes: every width, but fewer distributions */
				if (n >= 1000000 && d != D_UNIFORM && d != D_SMALL_RANGE &&
					(d + wi) % 4 != 0)
					continue;
				if (d == D_ENTROPY)
				{
					run_case(n, widths[wi], d, 2, flags);
					run_case(n, widths[wi], d, 4, flags ^ GS_SORT_KEYS_OUT);
				}
				else
					run_case(n, widths[wi], d, 0, flags);
			}
		}
	}

	if (!async_only)
		test_cancel(quick ? (size_t) 2 << 20 : (size_t) 3 << 20);

	test_async_errors();
	test_async_basic(quick ? 20000 : 300000);
	test_async_pipeline(quick ? 24 : 60, quick ? 50000 : 400000);
	test_async_abort(quick ? (size_t) 1 << 20 : (size_t) 3 << 20);
	test_async_cancel(quick ? (size_t) 2 << 20 : (size_t) 3 << 20);
	test_async_destroy(quick ? (size_t) 1 << 20 : (size_t) 2 << 20);
	test_async_signals(quick ? (size_t) 1 << 20 : (size_t) 2 << 20);
	/* and the synchronous sort still works after all that */
	run_case(100000, 16, D_UNIFORM, 0, GS_SORT_KEYS_OUT);

	ops->destroy(eng);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
