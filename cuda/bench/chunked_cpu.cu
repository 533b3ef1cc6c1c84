/*-------------------------------------------------------------------------
 *
 * chunked_cpu.cu
 *	  What the chunked benchmark (bench_chunked.cu) measures its sort
 *	  against and checks it with: the parallel CPU sort built on gpusort's
 *	  CPU engine, and the check of a sorted output against the source.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <vector>

#include "gpusort_engine.h"
#include "bench_chunked.h"

/* ---------------------------------------------------------------------
 * the CPU sort: parallel MSD pass, then the CPU engine per bucket
 * --------------------------------------------------------------------- */

void
cpu_sort(const uint64_t *src, size_t n, int bits, uint64_t *out_keys,
		 uint32_t *out_idx, uint64_t *tmp_keys, uint32_t *tmp_idx,
		 double *scatter_ms)
{
	const gs_engine_ops *cops = gpusort_cpu_engine(GS_ENGINE_ABI_VERSION);
	std::vector<uint64_t> ors(nthreads, 0);
	int			shift;
	size_t		B = (size_t) 1 << bits;
	std::vector<size_t> hist((size_t) nthreads * B, 0);
	std::vector<size_t> bstart(B + 1, 0);
	double		t0 = now_ms();

	if (n == 0)
		return;

	/*
	 * The CPU engine mallocs its workspace per call: keep such blocks in
	 * the heap (no mmap, no trim) so that bucket after bucket reuses warm
	 * pages instead of faulting fresh ones in.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);	/* glibc's largest */
	mallopt(M_TRIM_THRESHOLD, 1 << 30);

	/* the bits that vary */
	parallel_for(n, [&](int t, size_t lo, size_t hi) {
		uint64_t	o = 0,
					k0 = src[0];

		for (size_t i = lo; i < hi; i++)
			o |= src[i] ^ k0;
		ors[t] = o;
	});
	uint64_t	o = 0;

	for (uint64_t x : ors)
		o |= x;
	{
		int			top = o ? 64 - __builtin_clzll(o) : 0;

		shift = top > bits ? top - bits : 0;
	}
	uint64_t	dmask = B - 1;

	parallel_for(n, [&](int t, size_t lo, size_t hi) {
		size_t	   *h = &hist[(size_t) t * B];

		for (size_t i = lo; i < hi; i++)
			h[(src[i] >> shift) & dmask]++;
	});
	/* bucket d, thread t writes from bstart[d] + sum of earlier threads' counts */
	{
		size_t		sum = 0;

		for (size_t d = 0; d < B; d++)
		{
			bstart[d] = sum;
			for (int t = 0; t < nthreads; t++)
			{
				size_t		c = hist[(size_t) t * B + d];

				hist[(size_t) t * B + d] = sum;
				sum += c;
			}
		}
		bstart[B] = sum;
	}
	parallel_for(n, [&](int t, size_t lo, size_t hi) {
		size_t	   *h = &hist[(size_t) t * B];

		for (size_t i = lo; i < hi; i++)
		{
			uint64_t	k = src[i];
			size_t		p = h[(k >> shift) & dmask]++;

			tmp_keys[p] = k;
			tmp_idx[p] = (uint32_t) i;
		}
	});
	*scatter_ms = now_ms() - t0;

	/* buckets to the CPU engine, largest-first is not needed for uniform data */
	std::atomic<size_t> next(0);
	std::atomic<int> failed(0);

	parallel_for(nthreads, [&](int, size_t, size_t) {
		gs_engine  *ce;
		char		errbuf[GS_ERRBUF_SIZE];
		std::vector<uint32_t> perm;

		if (cops->create(&ce, errbuf, sizeof(errbuf)) != GS_OK)
		{
			failed = 1;
			return;
		}
		for (size_t d; (d = next.fetch_add(1)) < B;)
		{
			size_t		a = bstart[d],
						m = bstart[d + 1] - a;
			gs_status	st;

			if (m == 0)
				continue;
			if (perm.size() < m)
				perm.resize(m);
			st = cops->sort(ce, tmp_keys + a, m, 8, perm.data(), GS_SORT_KEYS_OUT,
							NULL, NULL, NULL, errbuf, sizeof(errbuf));
			if (st != GS_OK)
			{
				fprintf(stderr, "CPU engine: %s\n", errbuf);
				failed = 1;
				break;
			}
			memcpy(out_keys + a, tmp_keys + a, m * sizeof(uint64_t));
			for (size_t i = 0; i < m; i++)
				out_idx[a + i] = tmp_idx[a + perm[i]];
		}
		cops->destroy(ce);
	});
	if (failed)
	{
		fprintf(stderr, "the CPU sort failed\n");
		exit(1);
	}
}

/* ---------------------------------------------------------------------
 * checks
 * --------------------------------------------------------------------- */

bool
check_sorted(const char *what, const uint64_t *src, size_t n,
			 const uint64_t *keys, const uint32_t *idx)
{
	std::vector<uint64_t> seen((n + 63) / 64 + 1, 0);
	std::atomic<size_t> bad(0);
	std::atomic<size_t> first_bad(SIZE_MAX);

	parallel_for(n, [&](int, size_t lo, size_t hi) {
		size_t		b = 0;

		for (size_t i = lo; i < hi; i++)
		{
			uint32_t	x = idx[i];
			bool		ok = x < n && src[x] == keys[i] &&
				(i == 0 || keys[i - 1] <= keys[i]);

			if (ok)
			{
				uint64_t	bit = 1ull << (x & 63);
				uint64_t	old = __atomic_fetch_or(&seen[x >> 6], bit, __ATOMIC_RELAXED);

				ok = (old & bit) == 0;
			}
			if (!ok)
			{
				if (b++ == 0)
				{
					size_t		f = first_bad.load();

					while (i < f && !first_bad.compare_exchange_weak(f, i))
						;
				}
			}
		}
		bad += b;
	});
	if (bad)
	{
		size_t		i = first_bad;

		printf("FAIL %s: %zu bad rows, first at %zu (key %llu, index %u)\n", what,
			   (size_t) bad, i, (unsigned long long) keys[i], idx[i]);
		return false;
	}
	return true;
}
