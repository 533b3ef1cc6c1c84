/*-------------------------------------------------------------------------
 *
 * test_engine.cu
 *	  Correctness test of the CUDA engine through its public ops table,
 *	  against a host reference (std::sort of the same keys).
 *
 * Usage: test_engine [--large] [--quick]
 *	 --large  also 1e8 and 4e8 rows (needs ~30 GB of device memory)
 *	 --quick  fewer sizes
 * Prints one line per failure and "N passed, N failed"; exits 1 on any
 * failure, 77 when there is no usable device.
 *
 * Checks per sort: perm is a permutation of 0..n-1; the keys taken in perm
 * order never decrease; they equal std::sort of the keys (n <= 2M); with
 * GS_SORT_KEYS_OUT, keys[] holds exactly those keys.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "gpusort_engine.h"
#include "hrs_policy.cuh"

static const gs_engine_ops *ops;

static const char *
gs_status_name(gs_status st)
{
	static const char *names[] = {
		"GS_OK", "GS_ERR_INVALID", "GS_ERR_NOMEM", "GS_ERR_DEVICE_NOMEM",
		"GS_ERR_NODEVICE", "GS_ERR_DEVICE", "GS_ERR_CANCELED", "GS_ERR_INTERNAL"
	};

	return (unsigned) st < sizeof(names) / sizeof(names[0]) ? names[st] : "?";
}
static gs_engine *eng;
static int	npassed,
			nfailed;

/* splitmix64: fast, good enough, reproducible */
static inline uint64_t
mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

enum Dist
{
	UNIFORM, ZIPF_08, ZIPF_10, ZIPF_15, AND2, AND4, FEW, ALLEQ, SORTED,
	REVERSED, LOWBITS, HIGHBITS, PREFIXDUP, SPLIT, NDIST
};

static const char *dist_name[NDIST] = {
	"uniform", "zipf0.8", "zipf1.0", "zipf1.5", "and2", "and4", "few16",
	"allequal", "presorted", "reversed", "lowbits", "highbits", "prefixdup",
	"split"
};

/* row-major keys of kb bytes as 64-bit words (kb 4: one uint32 per row) */
struct Keys
{
	int			kb;
	size_t		n;
	unsigned char *data;

	int			words() const
	{
		return kb == 4 ? 1 : kb / 8;
	}
	uint64_t	word(size_t i, int j) const
	{
		if (kb == 4)
			return ((const uint32_t *) data)[i];
		return ((const uint64_t *) data)[i * (kb / 8) + j];
	}
	void		set(size_t i, int j, uint64_t v)
	{
		if (kb == 4)
			((uint32_t *) data)[i] = (uint32_t) v;
		else
			((uint64_t *) data)[i * (kb / 8) + j] = v;
	}
	int			cmp(size_t a, const Keys &o, size_t b) const
	{
		for (int j = 0; j < words(); j++)
		{
			uint64_t	x = word(a, j),
						y = o.word(b, j);

			if (x != y)
				return x < y ? -1 : 1;
		}
		return 0;
	}
};

static uint64_t
zipf_rank(uint64_t r, double s)
{
	const double M = 1e6;
	double		u = (double) (r >> 11) / 9007199254740992.0;
	double		x;

	if (fabs(s - 1.0) < 1e-9)
		x = pow(M, u);
	else
		x = pow((pow(M, 1.0 - s) - 1.0) * u + 1.0, 1.0 / (1.0 - s));
	return (uint64_t) x;
}

static void
generate(Keys &k, Dist d, uint64_t seed)
{
	int			W = k.words();
	uint64_t	mask = k.kb == 4 ? 0xFFFFFFFFull : ~0ull;

	for (size_t i = 0; i < k.n; i++)
	{
		uint64_t	s = seed * 0x1000003ull + i;

		for (int j = 0; j < W; j++)
		{
			uint64_t	u = mix(s * 8 + j);
			uint64_t	v;

			switch (d)
			{
				case UNIFORM:
				case SORTED:
				case REVERSED:
					v = u;
					break;
				case ZIPF_08:
				case ZIPF_10:
				case ZIPF_15:
					{
						double		e = d == ZIPF_08 ? 0.8 : d == ZIPF_10 ? 1.0 : 1.5;
						uint64_t	r = zipf_rank(mix(s * 8 + 7), e);

						v = mix(r * 64 + j + seed);
						break;
					}
				case AND2:
					v = u & mix(s * 8 + j + 100000);
					break;
				case AND4:
					v = u & mix(s * 8 + j + 100000) & mix(s * 8 + j + 200000) &
						mix(s * 8 + j + 300000);
					break;
				case FEW:
					v = mix((mix(s * 8 + 7) % 16) * 64 + j + seed);
					break;
				case ALLEQ:
					v = mix(seed * 64 + j);
					break;
				case LOWBITS:
					v = mix(seed * 64 + j);
					if (j == W - 1)
						v = (v & ~0xFFFull) | (u & 0xFFF);
					break;
				case HIGHBITS:
					v = mix(seed * 64 + j);
					if (j == 0)
					{
						int			top = k.kb == 4 ? 20 : 52;

						v = (v & ((1ull << top) - 1)) | ((u >> 52) << top);
					}
					break;
				case SPLIT:
					/* top 4 and bottom 8 bits vary: ties on any top window */
					v = mix(seed * 64 + j);
					if (j == 0)
						v = (v & ~(0xFull << (k.kb == 4 ? 28 : 60))) |
							((u >> 60) << (k.kb == 4 ? 28 : 60));
					if (j == W - 1)
						v = (v & ~0xFFull) | (u & 0xFF);
					break;
				case PREFIXDUP:
					v = j == 0 ? mix(seed * 64 + (mix(s * 8 + 7) & 3)) : u;
					break;
				default:
					v = u;
			}
			k.set(i, j, v & mask);
		}
	}
	if (d == SORTED || d == REVERSED)
	{
		std::vector<uint32_t> idx(k.n);

		for (size_t i = 0; i < k.n; i++)
			idx[i] = (uint32_t) i;
		std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
			return k.cmp(a, k, b) < 0;
		});
		if (d == REVERSED)
			std::reverse(idx.begin(), idx.end());
		std::vector<unsigned char> tmp(k.data, k.data + k.n * k.kb);

		for (size_t i = 0; i < k.n; i++)
			memcpy(k.data + i * k.kb, tmp.data() + (size_t) idx[i] * k.kb, k.kb);
	}
}

static void
report(bool ok, const char *what, int kb, Dist d, size_t n, const char *detail)
{
	if (ok)
		npassed++;
	else
	{
		nfailed++;
		if (nfailed > 60)
			return;
		printf("FAIL %s kb=%d dist=%s n=%zu: %s\n", what, kb,
			   d < NDIST ? dist_name[d] : "-", n, detail);
		fflush(stdout);
	}
}

/* one sort, fully checked */
static void
run_case(int kb, Dist d, size_t n, bool keys_out, uint64_t seed)
{
	char		errbuf[GS_ERRBUF_SIZE];
	void	   *buf = NULL;
	gs_status	st;
	gs_sort_stats stats;
	char		detail[256];

	st = ops->keybuf_alloc(eng, n * kb, &buf, errbuf, sizeof(errbuf));
	if (st != GS_OK)
	{
		report(false, "keybuf_alloc", kb, d, n, errbuf);
		return;
	}
	Keys		k = {kb, n, (unsigned char *) buf};
	Keys		orig = {kb, n, (unsigned char *) malloc(n * kb + 1)};
	std::vector<uint32_t> perm(n + 1, 0xDEADBEEF);

	generate(k, d, seed);
	memcpy(orig.data, k.data, n * kb);
	st = ops->sort(eng, buf, n, kb, perm.data(), keys_out ? GS_SORT_KEYS_OUT : 0,
				   NULL, NULL, &stats, errbuf, sizeof(errbuf));
	if (st != GS_OK)
	{
		report(false, "sort", kb, d, n, errbuf);
		goto out;
	}
	{
		/* a permutation? */
		std::vector<unsigned char> seen(n, 0);
		bool		ok = true;

		for (size_t i = 0; i < n && ok; i++)
		{
			if (perm[i] >= n || seen[perm[i]])
			{
				snprintf(detail, sizeof(detail), "perm[%zu]=%u is out of range or repeated",
						 i, perm[i]);
				ok = false;
			}
			else
				seen[perm[i]] = 1;
		}
		if (ok && perm[n] != 0xDEADBEEF)
		{
			snprintf(detail, sizeof(detail), "wrote past perm[n-1]");
			ok = false;
		}
		/* in order? */
		for (size_t i = 1; i < n && ok; i++)
		{
			if (orig.cmp(perm[i - 1], orig, perm[i]) > 0)
			{
				snprintf(detail, sizeof(detail), "keys out of order at %zu", i);
				ok = false;
			}
		}
		/* the same keys as std::sort gives */
		if (ok && n <= (1u << 21))
		{
			std::vector<uint32_t> ref(n);

			for (size_t i = 0; i < n; i++)
				ref[i] = (uint32_t) i;
			std::sort(ref.begin(), ref.end(), [&](uint32_t a, uint32_t b) {
				return orig.cmp(a, orig, b) < 0;
			});
			for (size_t i = 0; i < n && ok; i++)
			{
				if (orig.cmp(ref[i], orig, perm[i]) != 0)
				{
					snprintf(detail, sizeof(detail), "differs from std::sort at %zu", i);
					ok = false;
				}
			}
		}
		/* sorted keys handed back? */
		if (ok && keys_out)
		{
			for (size_t i = 0; i < n && ok; i++)
			{
				if (k.cmp(i, orig, perm[i]) != 0)
				{
					snprintf(detail, sizeof(detail), "keys[%zu] is not the key of perm[%zu]",
							 i, i);
					ok = false;
				}
			}
		}
		report(ok, keys_out ? "sort+keys" : "sort", kb, d, n, detail);
	}
out:
	free(orig.data);
	ops->keybuf_free(eng, buf, n * kb);
}

static int
cancel_now(void *arg)
{
	(void) arg;
	return 1;
}

/* API behaviour: bad arguments, cancel, realloc, info */
static void
run_api_cases(void)
{
	char		errbuf[GS_ERRBUF_SIZE];
	uint32_t	perm[4];
	uint64_t	keys[4] = {3, 1, 2, 0};
	gs_status	st;
	gs_device_info info;

	st = ops->sort(eng, keys, 4, 12, perm, 0, NULL, NULL, NULL, errbuf, sizeof(errbuf));
	report(st == GS_ERR_INVALID, "invalid key width", 12, NDIST, 4, gs_status_name(st));

	st = ops->device_info(eng, &info, errbuf, sizeof(errbuf));
	report(st == GS_OK && info.sm_count > 0 && info.total_mem > 0, "device_info", 0,
		   NDIST, 0, errbuf);
	if (st == GS_OK)
		printf("device: %s, cc %d.%d, %d SMs, %.1f GB, runtime %d, driver %d\n",
			   info.name, info.cc_major, info.cc_minor, info.sm_count,
			   info.total_mem / 1e9, info.runtime_version, info.driver_version);

	/* realloc keeps content */
	{
		void	   *p = NULL;
		bool		ok;

		st = ops->keybuf_alloc(eng, 1000, &p, errbuf, sizeof(errbuf));
		ok = st == GS_OK;
		if (ok)
		{
			memset(p, 0x5A, 1000);
			st = ops->keybuf_realloc(eng, &p, 1000, 1 << 20, errbuf, sizeof(errbuf));
			ok = st == GS_OK;
			for (int i = 0; ok && i < 1000; i++)
				ok = ((unsigned char *) p)[i] == 0x5A;
			ops->keybuf_free(eng, p, 1 << 20);
		}
		report(ok, "keybuf_realloc", 0, NDIST, 1000, errbuf);
	}

	/* cancel: a large sort stops, and the engine still works after */
	{
		size_t		n = 20000000;
		std::vector<uint64_t> k(n);
		std::vector<uint32_t> pm(n);

		for (size_t i = 0; i < n; i++)
			k[i] = mix(i);
		st = ops->sort(eng, k.data(), n, 8, pm.data(), 0, cancel_now, NULL, NULL,
					   errbuf, sizeof(errbuf));
		report(st == GS_ERR_CANCELED, "cancel", 8, UNIFORM, n, errbuf);
	}
}

int
main(int argc, char **argv)
{
	bool		large = false,
				quick = false;
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;
	const int	widths[] = {4, 8, 16, 24, 32};

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--large") == 0)
			large = true;
		else if (strcmp(argv[i], "--quick") == 0)
			quick = true;
		else
		{
			fprintf(stderr, "usage: %s [--large] [--quick]\n", argv[0]);
			return 2;
		}
	}
	ops = gpusort_cuda_engine(GS_ENGINE_ABI_VERSION);
	if (ops == NULL || gpusort_cuda_engine(GS_ENGINE_ABI_VERSION + 1) != NULL)
	{
		printf("FAIL entry point ABI check\n");
		return 1;
	}
	st = ops->create(&eng, errbuf, sizeof(errbuf));
	if (st != GS_OK)
	{
		printf("no usable device (%s): %s\n", gs_status_name(st), errbuf);
		return st == GS_ERR_NODEVICE ? 77 : 1;
	}
	run_api_cases();

	for (int wi = 0; wi < 5; wi++)
	{
		int			kb = widths[wi];
		std::vector<size_t> sizes = {0, 1, 2, 3, 255, 256, 257, 1000};
		std::vector<size_t> edges;

#define EDGES(P) \
		edges = {hrs::Policy<P>::Partition::TILE, 2 * hrs::Policy<P>::Partition::TILE, \
				 hrs::Policy<P>::MERGE_LIMIT, hrs::Policy<P>::SYNC_FREE_ROWS, \
				 256 * (size_t) hrs::Policy<P>::LOCAL_LIMIT}; \
		for (int c = 0; c < hrs::Policy<P>::NUM_LOCAL; c++) \
			edges.push_back(hrs::Policy<P>::local_tile(c))
		switch (kb)
		{
			case 4: EDGES(4); break;
			case 8: EDGES(8); break;
			case 16: EDGES(16); break;
			case 24: EDGES(24); break;
			default: EDGES(32); break;
		}
		for (size_t e : edges)
		{
			sizes.push_back(e - 1);
			sizes.push_back(e);
			sizes.push_back(e + 1);
		}
		for (size_t s : {10000ul, 100000ul, 1000000ul, 10000000ul})
			sizes.push_back(s);
		if (large)
		{
			sizes.push_back(100000000ul);
			sizes.push_back(400000000ul);
		}
		std::sort(sizes.begin(), sizes.end());
		sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());

		for (size_t n : sizes)
		{
			for (int d = 0; d < NDIST; d++)
			{
				/* the largest sizes: a few telling distributions only */
				if (n >= 10000000ul && quick)
					continue;
				if (n >= 100000000ul && d != UNIFORM && d != ZIPF_10 && d != AND2 &&
					d != ALLEQ)
					continue;
				if (quick && d % 3 != 0 && n > 1000)
					continue;
				run_case(kb, (Dist) d, n, (n + d) % 2 == 0, n * 131 + d * 7 + kb);
			}
		}
		printf("key width %d done: %d passed, %d failed so far\n", kb, npassed, nfailed);
		fflush(stdout);
	}

	ops->destroy(eng);
	printf("%d passed, %d failed\n", npassed, nfailed);
	return nfailed ? 1 : 0;
}
