/*-------------------------------------------------------------------------
 *
 * test_engine.cu
 *	  Correctness test of the CUDA engine through its public ops table,
 *	  against a host reference (std::sort of the same keys).
 *
 * Usage: test_engine [--large] [--quick] [--async | --width KB]
 *	 --large  also 1e8 and 4e8 rows (needs ~30 GB of device memory)
 *	 --quick  fewer sizes
 *	 --async  the API and asynchronous cases only
 *	 --width  the synchronous cases of one key width only (so that the
 *	          widths can run as parallel processes)
 * Prints one line per failure and "N passed, N failed"; exits 1 on any
 * failure, 77 when there is no usable device.
 *
 * Checks per sort: perm is a permutation of 0..n-1; the keys taken in perm
 * order never decrease; they equal std::sort of the keys (n <= 2M); with
 * GS_SORT_KEYS_OUT, keys[] holds exactly those keys.
 *
 * Asynchronous sorts (sort_submit / sort_wait / sort_abort): pairs of
 * different sizes and widths waited in order, a pipeline of two
 * outstanding, refused calls (a third submit, a synchronous sort while
 * sorts are outstanding, waits out of order), submit then abort, cancel
 * during a wait (a canceled sort must leave keys[] as given), and
 * synchronous sorts once everything is drained.
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
#include "test/splitmix.cuh"

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
			uint64_t	u = splitmix64(s * 8 + j);
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
						uint64_t	r = zipf_rank(splitmix64(s * 8 + 7), e);

						v = splitmix64(r * 64 + j + seed);
						break;
					}
				case AND2:
					v = u & splitmix64(s * 8 + j + 100000);
					break;
				case AND4:
					v = u & splitmix64(s * 8 + j + 100000) & splitmix64(s * 8 + j + 200000) &
						splitmix64(s * 8 + j + 300000);
					break;
				case FEW:
					v = splitmix64((splitmix64(s * 8 + 7) % 16) * 64 + j + seed);
					break;
				case ALLEQ:
					v = splitmix64(seed * 64 + j);
					break;
				case LOWBITS:
					v = splitmix64(seed * 64 + j);
					if (j == W - 1)
						v = (v & ~0xFFFull) | (u & 0xFFF);
					break;
				case HIGHBITS:
					v = splitmix64(seed * 64 + j);
					if (j == 0)
					{
						int			top = k.kb == 4 ? 20 : 52;

						v = (v & ((1ull << top) - 1)) | ((u >> 52) << top);
					}
					break;
				case SPLIT:
					/* top 4 and bottom 8 bits vary: ties on any top window */
					v = splitmix64(seed * 64 + j);
					if (j == 0)
						v = (v & ~(0xFull << (k.kb == 4 ? 28 : 60))) |
							((u >> 60) << (k.kb == 4 ? 28 : 60));
					if (j == W - 1)
						v = (v & ~0xFFull) | (u & 0xFF);
					break;
				case PREFIXDUP:
					v = j == 0 ? splitmix64(seed * 64 + (splitmix64(s * 8 + 7) & 3)) : u;
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

/*
 * Check one sort's output: perm (n + 1 entries, the last one a guard
 * holding 0xDEADBEEF) is a permutation of 0..n-1 that puts orig in order,
 * equal to std::sort's order for n <= 2M; with keys_out, k holds the keys
 * in that order.  On failure, says why in detail.
 */
static bool
verify(const Keys &orig, const Keys &k, const uint32_t *perm, size_t n,
	   bool keys_out, char *detail, size_t dlen)
{
	/* a permutation? */
	std::vector<unsigned char> seen(n, 0);
	bool		ok = true;

	for (size_t i = 0; i < n && ok; i++)
	{
		if (perm[i] >= n || seen[perm[i]])
		{
			snprintf(detail, dlen, "perm[%zu]=%u is out of range or repeated",
					 i, perm[i]);
			ok = false;
		}
		else
			seen[perm[i]] = 1;
	}
	if (ok && perm[n] != 0xDEADBEEF)
	{
		snprintf(detail, dlen, "wrote past perm[n-1]");
		ok = false;
	}
	/* in order? */
	for (size_t i = 1; i < n && ok; i++)
	{
		if (orig.cmp(perm[i - 1], orig, perm[i]) > 0)
		{
			snprintf(detail, dlen, "keys out of order at %zu", i);
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
				snprintf(detail, dlen, "differs from std::sort at %zu", i);
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
				snprintf(detail, dlen, "keys[%zu] is not the key of perm[%zu]",
						 i, i);
				ok = false;
			}
		}
	}
	return ok;
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
		bool		ok = verify(orig, k, perm.data(), n, keys_out, detail, sizeof(detail));

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

	/*
	 * What the gpusort service uses: an instance per device (one past the
	 * last must be refused), and memory the caller owns registered once
	 * and sorted in place.
	 */
	{
		gs_engine  *other = NULL;
		int			count = info.device_count;
		size_t		n = 100000;
		size_t		bytes = 4 << 20;
		void	   *mem = NULL;

		st = ops->create_on_device(&other, count, errbuf, sizeof(errbuf));
		report(st == GS_ERR_NODEVICE && other == NULL, "create_on_device past the last",
			   0, NDIST, 0, gs_status_name(st));
		st = ops->create_on_device(&other, count - 1, errbuf, sizeof(errbuf));
		report(st == GS_OK, "create_on_device on the last device", 0, NDIST, 0, errbuf);
		if (posix_memalign(&mem, 1 << 21, bytes) == 0)
		{
			uint64_t   *k = (uint64_t *) mem;
			uint32_t   *pm = (uint32_t *) ((char *) mem + n * 8);
			bool		ok;

			st = ops->host_register(eng, mem, bytes, errbuf, sizeof(errbuf));
			report(st == GS_OK, "host_register", 0, NDIST, 0, errbuf);
			for (size_t i = 0; i < n; i++)
				k[i] = (i * 2654435761u) % 1000003;
			st = ops->sort(other ? other : eng, k, n, 8, pm, GS_SORT_KEYS_OUT, NULL,
						   NULL, NULL, errbuf, sizeof(errbuf));
			ok = st == GS_OK;
			for (size_t i = 1; ok && i < n; i++)
				ok = k[i - 1] <= k[i];
			report(ok, "sort in registered memory", 8, NDIST, n, errbuf);
			ops->host_unregister(eng, mem);
			free(mem);
		}
		if (other)
			ops->destroy(other);
	}

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
			k[i] = splitmix64(i);
		st = ops->sort(eng, k.data(), n, 8, pm.data(), 0, cancel_now, NULL, NULL,
					   errbuf, sizeof(errbuf));
		report(st == GS_ERR_CANCELED, "cancel", 8, UNIFORM, n, errbuf);
	}
}

/* ---------------------------------------------------------------------
 * asynchronous sorts
 * --------------------------------------------------------------------- */

/* one asynchronous sort's inputs: keys in a keybuf, perm pinned or not */
struct AsyncSort
{
	int			kb;
	size_t		n;
	Dist		d;
	bool		keys_out;
	bool		perm_pinned;
	void	   *buf;			/* keybuf */
	Keys		k;
	Keys		orig;
	uint32_t   *perm;			/* n + 1 entries */
	gs_ticket	ticket;
	bool		ready;

	AsyncSort(int kb_, size_t n_, Dist d_, bool keys_out_, bool perm_pinned_,
			  uint64_t seed)
	:	kb(kb_), n(n_), d(d_), keys_out(keys_out_), perm_pinned(perm_pinned_),
		buf(NULL), perm(NULL), ticket(0), ready(false)
	{
		char		errbuf[GS_ERRBUF_SIZE];
		void	   *pp = NULL;

		k = {kb, n, NULL};
		orig = {kb, n, NULL};
		if (ops->keybuf_alloc(eng, n * kb, &buf, errbuf, sizeof(errbuf)) != GS_OK)
		{
			report(false, "keybuf_alloc", kb, d, n, errbuf);
			buf = NULL;
			return;
		}
		if (perm_pinned)
		{
			if (ops->keybuf_alloc(eng, (n + 1) * sizeof(uint32_t), &pp, errbuf,
								  sizeof(errbuf)) != GS_OK)
			{
				report(false, "keybuf_alloc", kb, d, n, errbuf);
				pp = NULL;
			}
			perm = (uint32_t *) pp;
		}
		else
			perm = (uint32_t *) malloc((n + 1) * sizeof(uint32_t));
		if (perm == NULL)
			return;
		for (size_t i = 0; i <= n; i++)
			perm[i] = 0xDEADBEEF;
		k.data = (unsigned char *) buf;
		orig.data = (unsigned char *) malloc(n * kb + 1);
		generate(k, d, seed);
		memcpy(orig.data, k.data, n * kb);
		ready = true;
	}
	~AsyncSort()
	{
		if (buf)
			ops->keybuf_free(eng, buf, n * kb);
		if (perm && perm_pinned)
			ops->keybuf_free(eng, perm, (n + 1) * sizeof(uint32_t));
		else
			free(perm);
		free(orig.data);
	}
	gs_status	submit(char *errbuf)
	{
		return ops->sort_submit(eng, buf, n, kb, perm,
								keys_out ? GS_SORT_KEYS_OUT : 0, &ticket,
								errbuf, GS_ERRBUF_SIZE);
	}
	/* check a finished sort */
	void		check(const char *what)
	{
		char		detail[256] = "";
		bool		ok = verify(orig, k, perm, n, keys_out, detail, sizeof(detail));

		report(ok, what, kb, d, n, detail);
	}
	/* keys[] as given? (after a failed sort) */
	bool		unchanged() const
	{
		return n == 0 || memcmp(k.data, orig.data, n * kb) == 0;
	}
};

/* wait for s and check it */
static void
async_wait_check(AsyncSort &s, const char *what)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_sort_stats stats;
	gs_status	st;

	st = ops->sort_wait(eng, s.ticket, NULL, NULL, &stats, errbuf, sizeof(errbuf));
	if (st != GS_OK)
	{
		report(false, what, s.kb, s.d, s.n, errbuf);
		return;
	}
	s.check(what);
}

struct PollCount
{
	int			fire_after;		/* say "stop" from this poll on */
	int			polls;
};

static int
cancel_after(void *arg)
{
	PollCount  *pc = (PollCount *) arg;

	return pc->polls++ >= pc->fire_after;
}

/*
 * With a and b outstanding: a third submit, a synchronous sort, a wait
 * out of order and a wait for an unknown ticket are all refused.
 */
static void
async_refusals(const AsyncSort &b)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;
	gs_ticket	t3;
	uint32_t	pm[2];
	uint64_t	kk[2] = {2, 1};

	st = ops->sort_submit(eng, kk, 2, 8, pm, 0, &t3, errbuf, sizeof(errbuf));
	report(st == GS_ERR_INVALID, "third submit refused", 8, NDIST, 2,
		   gs_status_name(st));
	st = ops->sort(eng, kk, 2, 8, pm, 0, NULL, NULL, NULL, errbuf, sizeof(errbuf));
	report(st == GS_ERR_INVALID, "sync sort while async refused", 8, NDIST, 2,
		   gs_status_name(st));
	st = ops->sort_wait(eng, b.ticket, NULL, NULL, NULL, errbuf, sizeof(errbuf));
	report(st == GS_ERR_INVALID, "wait out of order refused", 8, NDIST, 2,
		   gs_status_name(st));
	st = ops->sort_wait(eng, 12345678, NULL, NULL, NULL, errbuf, sizeof(errbuf));
	report(st == GS_ERR_INVALID, "wait unknown ticket refused", 8, NDIST, 2,
		   gs_status_name(st));
}

/* pairs of different sizes and widths, waited in order */
static void
async_pairs(void)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;
	struct
	{
		int			kb1;
		size_t		n1;
		int			kb2;
		size_t		n2;
	}			pairs[] = {
		{8, 1000000, 4, 300000},
		{16, 2000000, 8, 10},
		{32, 100000, 24, 5000000},
		{8, 0, 8, 1000},
		{4, 1, 32, 1000000},
		{8, 20000000, 8, 20000000},
		{24, 3000000, 16, 3000000},
	};

	for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++)
	{
		AsyncSort	a(pairs[p].kb1, pairs[p].n1, (Dist) (p % NDIST), p % 2 == 0,
					  true, 1000 + p);
		AsyncSort	b(pairs[p].kb2, pairs[p].n2, (Dist) ((p + 5) % NDIST),
					  p % 3 != 0, p % 2 == 1, 2000 + p);

		if (!a.ready || !b.ready)
			continue;
		st = a.submit(errbuf);
		report(st == GS_OK && a.ticket != 0, "submit", a.kb, a.d, a.n, errbuf);
		if (st != GS_OK)
			continue;
		st = b.submit(errbuf);
		report(st == GS_OK && b.ticket != 0 && b.ticket != a.ticket, "submit",
			   b.kb, b.d, b.n, errbuf);
		if (st != GS_OK)
		{
			async_wait_check(a, "async pair");
			continue;
		}
		if (p == 0)
			async_refusals(b);
		async_wait_check(a, "async pair (first)");
		async_wait_check(b, "async pair (second)");
	}
}

/* a pipeline: at most two outstanding, each waited before the next submit */
static void
async_pipeline(void)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;
	const int	kbs[] = {8, 8, 4, 16, 8, 32, 8, 24};
	const size_t ns[] = {4000000, 3000000, 5000000, 1000000, 7000000, 500000,
	2000000, 1500000};
	const int	N = 8;
	AsyncSort  *q[N];

	for (int i = 0; i < N; i++)
	{
		q[i] = new AsyncSort(kbs[i], ns[i], i % 3 == 0 ? UNIFORM : (Dist) i,
							 i % 2 == 0, i % 4 != 3, 3000 + i);
		if (!q[i]->ready)
			report(false, "pipeline setup", kbs[i], UNIFORM, ns[i], "no memory");
	}
	for (int i = 0; i < N; i++)
	{
		if (i >= 2)
			async_wait_check(*q[i - 2], "async pipeline");
		st = q[i]->submit(errbuf);
		report(st == GS_OK, "pipeline submit", q[i]->kb, q[i]->d, q[i]->n, errbuf);
	}
	async_wait_check(*q[N - 2], "async pipeline");
	async_wait_check(*q[N - 1], "async pipeline");
	for (int i = 0; i < N; i++)
		delete q[i];
}

/* submit + abort, then the engine still works */
static void
async_aborts(void)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;

	for (int round = 0; round < 3; round++)
	{
		AsyncSort	a(8, 30000000, UNIFORM, true, true, 4000 + round);
		AsyncSort	b(16, 10000000, ZIPF_10, true, false, 5000 + round);
		AsyncSort	c(8, 100000, AND2, true, true, 6000 + round);

		if (!a.ready || !b.ready || !c.ready)
			continue;
		st = a.submit(errbuf);
		report(st == GS_OK, "submit before abort", 8, UNIFORM, a.n, errbuf);
		if (round > 0)
		{
			st = b.submit(errbuf);
			report(st == GS_OK, "submit before abort", 16, ZIPF_10, b.n, errbuf);
		}
		if (round == 2)
		{
			/* let the first one finish first */
			struct timespec ts = {0, 200000000};

			nanosleep(&ts, NULL);
		}
		ops->sort_abort(eng);
		ops->sort_abort(eng);
		st = c.submit(errbuf);
		report(st == GS_OK, "submit after abort", 8, AND2, c.n, errbuf);
		if (st == GS_OK)
			async_wait_check(c, "async after abort");
	}
}

/* cancel during wait: CANCELED with keys[] as given, or a correct sort */
static void
async_cancels(void)
{
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;
	const int	fire[] = {0, 0, 1, 2, 3, 5, 10, 30, 100};
	int			canceled = 0;

	for (size_t f = 0; f < sizeof(fire) / sizeof(fire[0]); f++)
	{
		int			kb = f % 2 ? 16 : 8;
		AsyncSort	a(kb, 30000000, UNIFORM, true, f % 3 != 2, 7000 + f);
		AsyncSort	b(8, 2000000, ZIPF_08, true, true, 8000 + f);
		PollCount	pc = {fire[f], 0};
		char		what[64];

		if (!a.ready || !b.ready)
			continue;
		snprintf(what, sizeof(what), "cancel after %d polls", fire[f]);
		st = a.submit(errbuf);
		if (st == GS_OK)
			st = b.submit(errbuf);
		if (st != GS_OK)
		{
			report(false, what, kb, UNIFORM, a.n, errbuf);
			ops->sort_abort(eng);
			continue;
		}
		st = ops->sort_wait(eng, a.ticket, cancel_after, &pc, NULL, errbuf,
							sizeof(errbuf));
		if (st == GS_ERR_CANCELED)
		{
			canceled++;
			report(a.unchanged(), what, kb, UNIFORM, a.n,
				   "keys[] changed by a canceled sort");
		}
		else if (st == GS_OK)
			a.check(what);
		else
			report(false, what, kb, UNIFORM, a.n, errbuf);
		/* the one behind it is not canceled */
		if (f % 2 == 0)
			async_wait_check(b, "wait after a canceled wait");
		else
		{
			ops->sort_abort(eng);
			report(true, "abort after a canceled wait", 8, ZIPF_08, b.n, "");
		}
	}
	report(canceled > 0, "some waits canceled", 8, UNIFORM, 30000000,
		   "no wait came back canceled");
	printf("async cancel: %d of %zu waits canceled\n", canceled,
		   sizeof(fire) / sizeof(fire[0]));
}

static void
run_async_cases(void)
{
	/* abort with nothing outstanding, twice: a no-op */
	ops->sort_abort(eng);
	ops->sort_abort(eng);

	async_pairs();
	async_pipeline();
	async_aborts();
	async_cancels();

	/* everything drained: synchronous sorts work again */
	run_case(8, UNIFORM, 3000000, true, 9001);
	run_case(16, ZIPF_10, 1000000, false, 9002);
	run_case(4, FEW, 100000, true, 9003);

	printf("async cases done: %d passed, %d failed so far\n", npassed, nfailed);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	bool		large = false,
				quick = false,
				async_only = false;
	int			only_width = 0;
	char		errbuf[GS_ERRBUF_SIZE];
	gs_status	st;
	const int	widths[] = {4, 8, 16, 24, 32};

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--large") == 0)
			large = true;
		else if (strcmp(argv[i], "--quick") == 0)
			quick = true;
		else if (strcmp(argv[i], "--async") == 0)
			async_only = true;
		else if (strcmp(argv[i], "--width") == 0 && i + 1 < argc)
			only_width = atoi(argv[++i]);
		else
		{
			fprintf(stderr, "usage: %s [--large] [--quick] [--async | --width KB]\n", argv[0]);
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
	if (only_width == 0)
	{
		run_api_cases();
		run_async_cases();
	}
	if (async_only)
	{
		ops->destroy(eng);
		printf("%d passed, %d failed\n", npassed, nfailed);
		return nfailed ? 1 : 0;
	}

	for (int wi = 0; wi < 5; wi++)
	{
		int			kb = widths[wi];
		std::vector<size_t> sizes = {0, 1, 2, 3, 255, 256, 257, 1000};
		std::vector<size_t> edges;

		if (only_width != 0 && kb != only_width)
			continue;

#define EDGES(P) \
		edges = {hrs::Policy<P>::Partition::TILE, 2 * hrs::Policy<P>::Partition::TILE, \
				 hrs::Policy<P>::MERGE_LIMIT, hrs::Policy<P>::PRESCAN_ROWS, \
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
