/*
 * engine_bench.c
 *	  Throughput of the CPU sort engine against libc qsort on the same keys.
 *
 *	  engine_bench [rows] [repetitions]		(default 10000000 rows, 5)
 *	  engine_bench --pipeline [rows] [chunk rows] [repetitions] [rounds]
 *
 * For each input the keys are regenerated (untimed) before every run; the
 * engine sort produces the permutation (and, in the KEYS_OUT rows, the
 * sorted keys, as the tie-break path asks for), qsort sorts
 * the key array itself with a word-by-word comparator.  Prints the median
 * wall time, the rate in M rows/s, and the median CPU time of the process
 * (steadier than wall time on a shared machine).
 *
 * --pipeline measures what sort_submit is for: rows are produced chunk by
 * chunk (a stand-in for a backend reading and encoding tuples) and each
 * chunk sorted, once serially (produce, sort(), produce, sort(), ...) and
 * once with the next chunk produced while the engine's worker sorts the
 * previous one (GS_MAX_INFLIGHT buffers).  rounds (default 8) sets the
 * producer's cost per row: hash rounds of a few ns each.
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

/*
 * The producer: fill a chunk with 8-byte keys at roughly the cost of
 * encoding a tuple's key in a backend (a few hash rounds per row).
 */
static int	produce_rounds = 8;

static void
produce(uint64_t *keys, size_t n)
{
	size_t		i;

	for (i = 0; i < n; i++)
	{
		uint64_t	v = rnd();
		int			r;

		for (r = 0; r < produce_rounds; r++)
			v = (v ^ (v >> 29)) * 0xBF58476D1CE4E5B9ull;
		keys[i] = v;
	}
}

static int
pipeline_bench(size_t n, size_t chunk, int reps)
{
	const gs_engine_ops *ops = gpusort_cpu_engine(GS_ENGINE_ABI_VERSION);
	gs_engine  *eng;
	char		errbuf[GS_ERRBUF_SIZE];
	uint64_t   *buf[GS_MAX_INFLIGHT];
	uint32_t   *perm[GS_MAX_INFLIGHT];
	gs_ticket	tk[GS_MAX_INFLIGHT];
	double	   *t_prod = malloc(reps * sizeof(double));
	double	   *t_sort = malloc(reps * sizeof(double));
	double	   *t_ser = malloc(reps * sizeof(double));
	double	   *t_pipe = malloc(reps * sizeof(double));
	double	   *t_wait = malloc(reps * sizeof(double));
	double	   *t_wsort = malloc(reps * sizeof(double));
	size_t		nchunks = (n + chunk - 1) / chunk;
	int			r,
				b;

	if (ops == NULL || ops->create(&eng, errbuf, sizeof(errbuf)) != GS_OK)
		return 1;
	for (b = 0; b < GS_MAX_INFLIGHT; b++)
	{
		buf[b] = malloc(chunk * sizeof(uint64_t));
		perm[b] = malloc(chunk * sizeof(uint32_t));
		if (buf[b] == NULL || perm[b] == NULL)
			return 1;
	}
	for (r = 0; r < reps; r++)
	{
		double		t0,
					prod = 0,
					sort = 0,
					waited = 0,
					wsort = 0;
		size_t		k;

		/* serial: produce a chunk, sort it, next */
		rng_state = 1000 + r;
		t0 = now_ms();
		for (k = 0; k < nchunks; k++)
		{
			size_t		m = k + 1 < nchunks ? chunk : n - k * chunk;
			double		t1 = now_ms(),
						t2;

			produce(buf[0], m);
			t2 = now_ms();
			if (ops->sort(eng, buf[0], m, 8, perm[0], 0, NULL, NULL, NULL,
						  errbuf, sizeof(errbuf)) != GS_OK)
				return 1;
			prod += t2 - t1;
			sort += now_ms() - t2;
		}
		t_ser[r] = now_ms() - t0;
		t_prod[r] = prod;
		t_sort[r] = sort;

		/* pipelined: produce chunk k while chunk k-1 sorts */
		rng_state = 1000 + r;
		t0 = now_ms();
		for (k = 0; k < nchunks + GS_MAX_INFLIGHT; k++)
		{
			b = (int) (k % GS_MAX_INFLIGHT);
			if (k >= GS_MAX_INFLIGHT && k - GS_MAX_INFLIGHT < nchunks)
			{
				gs_sort_stats st;
				double		t1 = now_ms();

				if (ops->sort_wait(eng, tk[b], NULL, NULL, &st, errbuf,
								   sizeof(errbuf)) != GS_OK)
					return 1;
				waited += now_ms() - t1;
				wsort += st.total_ms;
			}
			if (k < nchunks)
			{
				size_t		m = k + 1 < nchunks ? chunk : n - k * chunk;

				produce(buf[b], m);
				if (ops->sort_submit(eng, buf[b], m, 8, perm[b], 0, &tk[b],
									 errbuf, sizeof(errbuf)) != GS_OK)
					return 1;
			}
		}
		t_pipe[r] = now_ms() - t0;
		t_wait[r] = waited;
		t_wsort[r] = wsort;
	}
	qsort(t_prod, reps, sizeof(double), dbl_cmp);
	qsort(t_sort, reps, sizeof(double), dbl_cmp);
	qsort(t_ser, reps, sizeof(double), dbl_cmp);
	qsort(t_pipe, reps, sizeof(double), dbl_cmp);
	qsort(t_wait, reps, sizeof(double), dbl_cmp);
	qsort(t_wsort, reps, sizeof(double), dbl_cmp);
	printf("%zu rows of int8-like keys in chunks of %zu, %d hash rounds a "
		   "row, median of %d\n", n, chunk, produce_rounds, reps);
	printf("| produce ms | sort ms | serial ms | pipelined ms | speedup | pipelined: sorts ms | waited ms |\n");
	printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	printf("| %.0f | %.0f | %.0f | %.0f | %.2fx | %.0f | %.0f |\n",
		   t_prod[reps / 2], t_sort[reps / 2], t_ser[reps / 2],
		   t_pipe[reps / 2], t_ser[reps / 2] / t_pipe[reps / 2],
		   t_wsort[reps / 2], t_wait[reps / 2]);
	ops->destroy(eng);
	for (b = 0; b < GS_MAX_INFLIGHT; b++)
	{
		free(buf[b]);
		free(perm[b]);
	}
	free(t_prod);
	free(t_sort);
	free(t_ser);
	free(t_pipe);
	free(t_wait);
	free(t_wsort);
	return 0;
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

	if (argc > 1 && strcmp(argv[1], "--pipeline") == 0)
	{
		size_t		pn = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000000;
		size_t		pc = argc > 3 ? strtoull(argv[3], NULL, 10) : 1000000;
		int			pr = argc > 4 ? atoi(argv[4]) : 5;

		if (argc > 5)
			produce_rounds = atoi(argv[5]);

		if (pn == 0 || pc == 0 || pr < 1)
		{
			fprintf(stderr, "bad --pipeline arguments\n");
			return 1;
		}
		free(perm);
		free(t_eng);
		free(t_q);
		free(c_eng);
		free(c_q);
		return pipeline_bench(pn, pc, pr);
	}
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
