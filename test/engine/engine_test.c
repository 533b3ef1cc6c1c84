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
 *	  engine_test			the suite (< 30 s)
 *	  engine_test --big		plus 10M-row cases
 *	  engine_test --quick	small sizes only (for valgrind)
 *
 * The last line is "N passed, M failed"; the exit status is 1 on failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusort_engine.h"

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

int
main(int argc, char **argv)
{
	static const int widths[] = {4, 8, 16, 24, 32};
	size_t		sizes[64];
	int			nsizes = 0;
	int			big = 0,
				quick = 0;
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
		else
		{
			fprintf(stderr, "usage: %s [--big|--quick]\n", argv[0]);
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

	test_cancel(quick ? (size_t) 2 << 20 : (size_t) 3 << 20);

	ops->destroy(eng);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
