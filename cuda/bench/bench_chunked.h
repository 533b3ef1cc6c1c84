/*-------------------------------------------------------------------------
 *
 * bench_chunked.h
 *	  What the files of the chunked benchmark (cuda/build/bench_chunked)
 *	  share:
 *	   - bench_chunked.cu: main, the options, the chunk pipeline through the
 *		 engine, the report; the thread count and the timing helpers;
 *	   - chunked_merge.cu: the parallel k-way merge of the sorted chunks and
 *		 its variants (--merge);
 *	   - chunked_cpu.cu: the CPU sort the chunked sort is measured against,
 *		 and the check of both outputs.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef BENCH_CHUNKED_H
#define BENCH_CHUNKED_H

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <vector>

/* bench_chunked.cu */
extern int	nthreads;			/* T (--threads) */
extern double now_ms(void);
extern void parallel_for(size_t n, const std::function<void(int, size_t, size_t)> &f);

/* chunked_merge.cu */
struct Run
{
	const uint64_t *keys;		/* sorted */
	const uint32_t *perm;		/* chunk-local row index of keys[i] */
	size_t		n;
	uint64_t	base;			/* global index of the chunk's row 0 */
};

/* the merge variants (--merge), described in chunked_merge.cu */
enum MergeVariant
{
	MV_PAIR,
	MV_PAIR_PF,
	MV_ONE_PF,
	MV_TILES,
	MV_TILES_NT,
	MV_CASCADE,
	MV_TILES64,
	MV_TILES64_NT,
	MV_COUNT
};

extern const char *const merge_names[MV_COUNT];
extern size_t tile_rows;		/* --tile-rows */
extern int	merge_variant(const char *name);
extern void parallel_merge(int variant, const std::vector<Run> &runs, size_t n,
						   uint64_t *out_keys, uint32_t *out_idx, double *split_ms);

/* chunked_cpu.cu */
extern void cpu_sort(const uint64_t *src, size_t n, int bits, uint64_t *out_keys,
					 uint32_t *out_idx, uint64_t *tmp_keys, uint32_t *tmp_idx,
					 double *scatter_ms);
extern bool check_sorted(const char *what, const uint64_t *src, size_t n,
						 const uint64_t *keys, const uint32_t *idx);

#endif							/* BENCH_CHUNKED_H */
