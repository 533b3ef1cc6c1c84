/*
 * engine_bench.c
 *	  Throughput of the CPU sort engine against libc qsort on the same keys.
 *
 *	  engine_bench [rows] [repetitions]		(default 10000000 rows, 5)
 *
 * For each input the keys are regenerated (untimed) before every run; the
 * engine sort produces the permutation (and, in the KEYS_OUT rows, the
 * sorted keys, as the tie-break path asks for), qsort sorts
 * the key array itself with a word-by-word comparator.  Prints the median
 * wall time, the rate in M rows/s, and the median CPU time of the process
 * (steadier than wall time on a shared machine).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusort_engine.h"

static size_t cmp_bytes;

static double
clock_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1.0e6;
}

#define now_ms() clock_ms(CLOCK_MONOTONIC)
#define cpu_ms() clock_ms(CLOCK_PROCESS_CPUTIME_ID)

static uint64_t rng_state = 12345;

static uint64_t
rnd(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int
key_cmp(const void *a, const void *b)
{
	size_t		w;

	if (cmp_bytes == 4)
	{
		uint32_t	x = *(const uint32_t *) a,
					y = *(const uint32_t *) b;

		return x < y ? -1 : x > y;
	}
	for (w = 0; w < cmp_bytes / 8; w++)
	{
		uint64_t	x = ((const uint64_t *) a)[w],
					y = ((const uint64_t *) b)[w];

		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

static int
dbl_cmp(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

typedef struct bench_input
{
	const char *name;
	int			key_bytes;
	uint64_t	range;			/* 0: full 64-bit words */
	int			flags;			/* GS_SORT_* for the engine */
} bench_input;

/* word 0 of a small-range key looks like a sign-flipped int8 */
static void
generate(uint64_t *keys64, size_t n, const bench_input *in)
{
	size_t		i;

	if (in->key_bytes == 4)
	{
		uint32_t   *k = (uint32_t *) keys64;

		for (i = 0; i < n; i++)
			k[i] = in->range ? (uint32_t) (0x80000000u + rnd() % in->range)
				: (uint32_t) rnd();
		return;
	}
	for (i = 0; i < n * (in->key_bytes / 8); i++)
	{
		if (in->range == 0)
			keys64[i] = rnd();
		else if (i % (in->key_bytes / 8) == 0)
			keys64[i] = (1ull << 63) + rnd() % in->range;
		else
			keys64[i] = rnd() % in->range;
	}
}

int
main(int argc, char **argv)
{
	static const bench_input inputs[] = {
		{"int4 uniform", 4, 0},
		{"int8 uniform", 8, 0},
		{"int8 range 1e6", 8, 1000000},
		{"int8 range 1000", 8, 1000},
		{"16 B uniform", 16, 0},
		{"16 B range 1000 per word", 16, 1000},
		{"32 B uniform", 32, 0},
		{"16 B uniform, KEYS_OUT", 16, 0, GS_SORT_KEYS_OUT},
		{"32 B uniform, KEYS_OUT", 32, 0, GS_SORT_KEYS_OUT},
	};
	size_t		n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
	int			reps = argc > 2 ? atoi(argv[2]) : 5;
	const gs_engine_ops *ops = gpusort_cpu_engine(GS_ENGINE_ABI_VERSION);
	gs_engine  *eng;
	char		errbuf[GS_ERRBUF_SIZE];
	uint32_t   *perm = malloc(n * sizeof(uint32_t));
	double	   *t_eng = malloc(reps * sizeof(double));
	double	   *t_q = malloc(reps * sizeof(double));
	double	   *c_eng = malloc(reps * sizeof(double));
	double	   *c_q = malloc(reps * sizeof(double));
	size_t		ii;

	if (reps < 1 || ops == NULL || perm == NULL ||
		ops->create(&eng, errbuf, sizeof(errbuf)) != GS_OK)
	{
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	printf("%zu rows, median of %d\n", n, reps);
	printf("| keys | engine ms | engine cpu ms | engine M rows/s | passes | qsort ms | qsort cpu ms | qsort M rows/s | speedup |\n");
	printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	for (ii = 0; ii < sizeof(inputs) / sizeof(inputs[0]); ii++)
	{
		const bench_input *in = &inputs[ii];
		size_t		bytes = n * in->key_bytes;
		void	   *keys;
		gs_sort_stats stats;
		int			r;

		if (ops->keybuf_alloc(eng, bytes, &keys, errbuf, sizeof(errbuf)) != GS_OK)
		{
			fprintf(stderr, "%s\n", errbuf);
			return 1;
		}
		for (r = 0; r < reps; r++)
		{
			double		t0,
						c0;
			gs_status	st;

			rng_state = 1000 + r;
			generate(keys, n, in);
			c0 = cpu_ms();
			t0 = now_ms();
			st = ops->sort(eng, keys, n, in->key_bytes, perm, in->flags,
						   NULL, NULL, &stats, errbuf, sizeof(errbuf));
			t_eng[r] = now_ms() - t0;
			c_eng[r] = cpu_ms() - c0;
			if (st != GS_OK)
			{
				fprintf(stderr, "sort failed: %s\n", errbuf);
				return 1;
			}

			rng_state = 1000 + r;
			generate(keys, n, in);
			cmp_bytes = in->key_bytes;
			c0 = cpu_ms();
			t0 = now_ms();
			qsort(keys, n, in->key_bytes, key_cmp);
			t_q[r] = now_ms() - t0;
			c_q[r] = cpu_ms() - c0;
		}
		qsort(t_eng, reps, sizeof(double), dbl_cmp);
		qsort(t_q, reps, sizeof(double), dbl_cmp);
		qsort(c_eng, reps, sizeof(double), dbl_cmp);
		qsort(c_q, reps, sizeof(double), dbl_cmp);
		printf("| %s | %.0f | %.0f | %.1f | %d | %.0f | %.0f | %.1f | %.1fx |\n",
			   in->name, t_eng[reps / 2], c_eng[reps / 2],
			   n / t_eng[reps / 2] / 1000.0, stats.passes,
			   t_q[reps / 2], c_q[reps / 2], n / t_q[reps / 2] / 1000.0,
			   t_q[reps / 2] / t_eng[reps / 2]);
		fflush(stdout);
		ops->keybuf_free(eng, keys, bytes);
	}
	ops->destroy(eng);
	free(perm);
	free(t_eng);
	free(t_q);
	free(c_eng);
	free(c_q);
	return 0;
}
