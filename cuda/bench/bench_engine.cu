/*-------------------------------------------------------------------------
 *
 * bench_engine.cu
 *	  Benchmark: the hybrid radix sort (device-resident data, as inside the
 *	  engine after the upload) against cub::DeviceRadixSort::SortPairs on
 *	  the same keys, u32 row index as the value.
 *
 * Usage: bench_engine [--out FILE.md] [--commit SHA] [--max-n N] [--reps R]
 *                     [--only N:DIST:KEY[,N:DIST:KEY...]]
 *
 * Axes: n in {1e6, 1e7, 1e8, 4e8} x {uniform, zipf (s = 1.0 over 1e6 ranks,
 * hashed over the key space), entropy-reduced (AND of 2 uniform words)} x
 * {u32, u64, 16-byte key}.  The 16-byte key is two u64 words, word 0 most
 * significant; CUB sorts it through its decomposer API (a struct of two
 * u64 members), i.e. 16 eight-bit LSD passes.
 *
 * Times: CUDA events around each sort on one stream, median of R (default
 * 7, 5 at 4e8) after one warm-up.  Our time includes everything the engine
 * does on the device for a sort (prepass, passes, host waits between
 * passes, local sorts, writing sorted keys and the permutation); the input
 * copy that restores the keys before each run is outside the events.
 * "floor B/pair" is one read of the key plus one write of key and value,
 * (2 * key + 4) bytes; "% of copy BW" is that floor's traffic over the
 * measured time, as a fraction of a measured device-to-device copy.
 * Each of our results is checked against CUB's sorted keys.
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

#include <cub/device/device_radix_sort.cuh>

#include "test/splitmix.cuh"

#include "hrs.h"
#include "hrs_key.cuh"

#define CK(call) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
		{ \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
					cudaGetErrorString(e_)); \
			exit(1); \
		} \
	} while (0)

enum BDist
{
	B_UNIFORM, B_ZIPF, B_AND2
};
static const char *bdist_name[] = {"uniform", "zipf", "entropy"};

__device__ uint64_t
gen_word(BDist d, uint64_t i, int j, uint64_t seed)
{
	uint64_t	s = seed * 0x1000003ull + i;

	switch (d)
	{
		case B_UNIFORM:
			return splitmix64(s * 8 + j);
		case B_ZIPF:
			{
				double		u = (double) (splitmix64(s * 8 + 7) >> 11) / 9007199254740992.0;
				uint64_t	r = (uint64_t) pow(1e6, u);

				return splitmix64(r * 64 + j + seed);
			}
		default:
			return splitmix64(s * 8 + j) & splitmix64(s * 8 + j + 100000);
	}
}

/* words: 1 (u32 or u64) or 2 (16-byte key) */
__global__ void
gen_kernel(void *keys, size_t n, int kb, BDist d, uint64_t seed)
{
	size_t		i = blockIdx.x * (size_t) blockDim.x + threadIdx.x;

	for (; i < n; i += (size_t) gridDim.x * blockDim.x)
	{
		if (kb == 4)
			((uint32_t *) keys)[i] = (uint32_t) gen_word(d, i, 0, seed);
		else if (kb == 8)
			((uint64_t *) keys)[i] = gen_word(d, i, 0, seed);
		else
		{
			((uint64_t *) keys)[2 * i] = gen_word(d, i, 0, seed);
			((uint64_t *) keys)[2 * i + 1] = gen_word(d, i, 1, seed);
		}
	}
}

__global__ void
iota_kernel(uint32_t *v, size_t n)
{
	size_t		i = blockIdx.x * (size_t) blockDim.x + threadIdx.x;

	for (; i < n; i += (size_t) gridDim.x * blockDim.x)
		v[i] = (uint32_t) i;
}

__global__ void
diff_kernel(const unsigned long long *a, const unsigned long long *b,
			size_t words, unsigned long long *count)
{
	size_t		i = blockIdx.x * (size_t) blockDim.x + threadIdx.x;
	unsigned long long c = 0;

	for (; i < words; i += (size_t) gridDim.x * blockDim.x)
		c += a[i] != b[i];
	if (c)
		atomicAdd(count, c);
}

static float
median(std::vector<float> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

struct Result
{
	float		ours_ms,
				cub_ms;
	int			passes;
	bool		ok;
};

template <typename CubKey>
static float
time_cub(const void *kin, void *kout, const uint32_t *vin, uint32_t *vout,
		 size_t n, int reps, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1)
{
	size_t		temp = 0;
	void	   *d_temp = NULL;
	std::vector<float> t;

	if constexpr (sizeof(CubKey) == 16)
	{
		CK(cub::DeviceRadixSort::SortPairs(NULL, temp, (const CubKey *) kin,
										   (CubKey *) kout, vin, vout, (int64_t) n,
										   hrs::WideKeyDecomposer<2>(), s));
		CK(cudaMalloc(&d_temp, temp));
		for (int r = 0; r <= reps; r++)
		{
			CK(cudaEventRecord(e0, s));
			CK(cub::DeviceRadixSort::SortPairs(d_temp, temp, (const CubKey *) kin,
											   (CubKey *) kout, vin, vout, (int64_t) n,
											   hrs::WideKeyDecomposer<2>(), s));
			CK(cudaEventRecord(e1, s));
			CK(cudaEventSynchronize(e1));
			float		ms;

			CK(cudaEventElapsedTime(&ms, e0, e1));
			if (r > 0)
				t.push_back(ms);
		}
	}
	else
	{
		CK(cub::DeviceRadixSort::SortPairs(NULL, temp, (const CubKey *) kin,
										   (CubKey *) kout, vin, vout, (int64_t) n,
										   0, (int) sizeof(CubKey) * 8, s));
		CK(cudaMalloc(&d_temp, temp));
		for (int r = 0; r <= reps; r++)
		{
			CK(cudaEventRecord(e0, s));
			CK(cub::DeviceRadixSort::SortPairs(d_temp, temp, (const CubKey *) kin,
											   (CubKey *) kout, vin, vout, (int64_t) n,
											   0, (int) sizeof(CubKey) * 8, s));
			CK(cudaEventRecord(e1, s));
			CK(cudaEventSynchronize(e1));
			float		ms;

			CK(cudaEventElapsedTime(&ms, e0, e1));
			if (r > 0)
				t.push_back(ms);
		}
	}
	CK(cudaFree(d_temp));
	return median(t);
}

static Result
bench_one(size_t n, BDist d, int kb, int reps, int sm_count, void *staging)
{
	Result		res = {0, 0, 0, false};
	size_t		kbytes = n * kb;
	void	   *input,
			   *cub_kout,
			   *keys[2];
	uint32_t   *cub_vin,
			   *cub_vout,
			   *vals[2];
	void	   *temp;
	size_t		temp_bytes = hrs::temp_bytes(kb, n);
	cudaStream_t s,
				side;
	cudaEvent_t side_mark[2];
	cudaEvent_t e0,
				e1,
				poll;
	char		errbuf[GS_ERRBUF_SIZE];
	std::vector<float> t;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&side_mark[0], cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&side_mark[1], cudaEventDisableTiming));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventCreateWithFlags(&poll, cudaEventDisableTiming));
	CK(cudaMalloc(&input, kbytes));
	CK(cudaMalloc(&cub_kout, kbytes));
	CK(cudaMalloc(&cub_vin, n * 4));
	CK(cudaMalloc(&cub_vout, n * 4));
	gen_kernel<<<sm_count * 16, 256, 0, s>>>(input, n, kb, d, 12345 + kb);
	iota_kernel<<<sm_count * 16, 256, 0, s>>>(cub_vin, n);
	CK(cudaGetLastError());

	/* CUB first; its buffers are freed before ours are taken */
	if (kb == 4)
		res.cub_ms = time_cub<uint32_t>(input, cub_kout, cub_vin, cub_vout, n, reps, s, e0, e1);
	else if (kb == 8)
		res.cub_ms = time_cub<uint64_t>(input, cub_kout, cub_vin, cub_vout, n, reps, s, e0, e1);
	else
		res.cub_ms = time_cub<hrs::WideKey<2>>(input, cub_kout, cub_vin, cub_vout, n, reps, s, e0, e1);
	CK(cudaFree(cub_vin));
	CK(cudaFree(cub_vout));

	CK(cudaMalloc(&keys[0], kbytes));
	CK(cudaMalloc(&keys[1], kbytes));
	CK(cudaMalloc(&vals[0], n * 4));
	CK(cudaMalloc(&vals[1], n * 4));
	CK(cudaMalloc(&temp, temp_bytes));

	hrs::SortArgs a;

	memset(&a, 0, sizeof(a));
	a.n = n;
	a.key_bytes = kb;
	a.keys[0] = keys[0];
	a.keys[1] = keys[1];
	a.vals[0] = vals[0];
	a.vals[1] = vals[1];
	a.temp = temp;
	a.temp_bytes = temp_bytes;
	a.keys_out = true;
	a.sm_count = sm_count;
	a.stream = s;
	a.event = poll;
	a.side = side;
	a.side_mark[0] = side_mark[0];
	a.side_mark[1] = side_mark[1];
	a.staging = staging;

	for (int r = 0; r <= reps; r++)
	{
		hrs::SortResult sr;
		float		ms;

		CK(cudaMemcpyAsync(keys[0], input, kbytes, cudaMemcpyDeviceToDevice, s));
		CK(cudaEventRecord(e0, s));
		if (hrs::sort(a, &sr, errbuf, sizeof(errbuf)) != GS_OK)
		{
			fprintf(stderr, "hrs::sort failed: %s\n", errbuf);
			exit(1);
		}
		CK(cudaEventRecord(e1, s));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (r > 0)
			t.push_back(ms);
		res.passes = sr.passes;
	}
	res.ours_ms = median(t);

	/* same sorted keys as CUB? */
	{
		unsigned long long *cnt,
					h = 1;

		CK(cudaMalloc(&cnt, sizeof(*cnt)));
		CK(cudaMemsetAsync(cnt, 0, sizeof(*cnt), s));
		diff_kernel<<<sm_count * 16, 256, 0, s>>>((const unsigned long long *) keys[0],
												  (const unsigned long long *) cub_kout,
												  kbytes / 8, cnt);
		CK(cudaMemcpyAsync(&h, cnt, sizeof(h), cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
		res.ok = h == 0;
		CK(cudaFree(cnt));
	}
	CK(cudaFree(temp));
	CK(cudaFree(keys[0]));
	CK(cudaFree(keys[1]));
	CK(cudaFree(vals[0]));
	CK(cudaFree(vals[1]));
	CK(cudaFree(input));
	CK(cudaFree(cub_kout));
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	CK(cudaEventDestroy(poll));
	CK(cudaStreamDestroy(s));
	CK(cudaStreamDestroy(side));
	CK(cudaEventDestroy(side_mark[0]));
	CK(cudaEventDestroy(side_mark[1]));
	return res;
}

static double
copy_bandwidth(void)
{
	size_t		bytes = (size_t) 4 << 30;
	void	   *a,
			   *b;
	cudaEvent_t e0,
				e1;
	std::vector<float> t;

	CK(cudaMalloc(&a, bytes));
	CK(cudaMalloc(&b, bytes));
	CK(cudaMemset(a, 1, bytes));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int r = 0; r < 6; r++)
	{
		float		ms;

		CK(cudaEventRecord(e0));
		CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (r > 0)
			t.push_back(ms);
	}
	CK(cudaFree(a));
	CK(cudaFree(b));
	return 2.0 * bytes / (median(t) * 1e-3);	/* read + write */
}

int
main(int argc, char **argv)
{
	const char *out = NULL;
	const char *commit = "unknown";
	double		max_n = 4e8;
	int			reps_arg = 0;
	const char *only = NULL;
	cudaDeviceProp prop;
	void	   *staging;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
			out = argv[++i];
		else if (strcmp(argv[i], "--commit") == 0 && i + 1 < argc)
			commit = argv[++i];
		else if (strcmp(argv[i], "--max-n") == 0 && i + 1 < argc)
			max_n = atof(argv[++i]);
		else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps_arg = atoi(argv[++i]);
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
			only = argv[++i];	/* e.g. 1e8:uniform:u64 */
		else
		{
			fprintf(stderr, "usage: %s [--out FILE] [--commit SHA] [--max-n N] [--reps R] [--only N:DIST:KEY[,...]]\n",
					argv[0]);
			return 2;
		}
	}
	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaHostAlloc(&staging, hrs::STAGING_BYTES, cudaHostAllocDefault));

	double		bw = only ? 4.3e12 : copy_bandwidth();
	char		head[1024];
	std::vector<char> table;
	char		line[512];
	int			bad = 0;

	snprintf(head, sizeof(head),
			 "# CUDA engine vs CUB radix sort\n\n"
			 "Device: %s (%d SMs); commit %s; measured device-to-device copy: %.2f TB/s "
			 "(read + write).\nCommand: `make cuda-bench && cuda/build/bench_engine --out ...`; "
			 "median of %s runs after a warm-up, CUDA events, data already on the device, "
			 "u32 row index as value; ours writes sorted keys and the permutation.\n\n"
			 "| n | dist | key | ours ms | ours Gpairs/s | CUB ms | CUB Gpairs/s | ours/CUB | "
			 "passes | floor B/pair | ours %% of copy BW | CUB %% of copy BW | check |\n"
			 "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
			 prop.name, prop.multiProcessorCount, commit, bw / 1e12,
			 reps_arg ? "R" : "7 (5 at 4e8)");
	fputs(head, stdout);
	fflush(stdout);
	table.insert(table.end(), head, head + strlen(head));

	const double sizes[] = {1e6, 1e7, 1e8, 4e8};
	const int	kbs[] = {4, 8, 16};

	for (double nd : sizes)
	{
		if (nd > max_n)
			continue;
		for (int di = 0; di < 3; di++)
			for (int kb : kbs)
			{
				size_t		n = (size_t) nd;
				char		tag[64];

				snprintf(tag, sizeof(tag), "%.0e:%s:%s", nd, bdist_name[di],
						 kb == 4 ? "u32" : kb == 8 ? "u64" : "16B");
				if (only != NULL)
				{
					/* a comma-separated list of N:DIST:KEY */
					bool		found = false;
					const char *o = only;

					while (*o && !found)
					{
						char		one[64],
									want[64];
						size_t		len = strcspn(o, ",");

						snprintf(one, sizeof(one), "%.*s", (int) len, o);
						snprintf(want, sizeof(want), "%.0e:%s", atof(one),
								 strchr(one, ':') ? strchr(one, ':') + 1 : "");
						found = strcmp(want, tag) == 0;
						o += len + (o[len] == ',');
					}
					if (!found)
						continue;
				}
				int			reps = reps_arg ? reps_arg : (nd >= 4e8 ? 5 : 7);
				Result		r = bench_one(n, (BDist) di, kb, reps, prop.multiProcessorCount,
										  staging);
				double		floor_b = 2.0 * kb + 4;
				double		ours_g = n / (r.ours_ms * 1e-3) / 1e9;
				double		cub_g = n / (r.cub_ms * 1e-3) / 1e9;

				snprintf(line, sizeof(line),
						 "| %.0e | %s | %s | %.3f | %.2f | %.3f | %.2f | %.2f | %d | %.0f | %.0f%% | %.0f%% | %s |\n",
						 nd, bdist_name[di], kb == 4 ? "u32" : kb == 8 ? "u64" : "16B",
						 r.ours_ms, ours_g, r.cub_ms, cub_g, r.cub_ms / r.ours_ms,
						 r.passes, floor_b,
						 100.0 * floor_b * n / (r.ours_ms * 1e-3) / bw,
						 100.0 * floor_b * n / (r.cub_ms * 1e-3) / bw,
						 r.ok ? "ok" : "MISMATCH");
				fputs(line, stdout);
				fflush(stdout);
				table.insert(table.end(), line, line + strlen(line));
				if (!r.ok)
					bad++;
			}
	}
	if (out)
	{
		FILE	   *f = fopen(out, "w");

		if (f == NULL)
		{
			perror(out);
			return 1;
		}
		fwrite(table.data(), 1, table.size(), f);
		fclose(f);
	}
	CK(cudaFreeHost(staging));
	return bad ? 1 : 0;
}
