/*-------------------------------------------------------------------------
 *
 * index_run.h
 *	  The runs of btree builds larger than maintenance_work_mem, as both
 *	  their writer (index_spill.c) and their merges (index_merge.c) see
 *	  them: the record format, buffer sizes, and the run writer.
 *
 * A row in a run: uint32 holding the tuple's size (low 16 bits) and the
 * row's flags (next 8 bits), 4 bytes of padding, the key (keybytes, a
 * multiple of 8), the index tuple (and its payload, when rows have one:
 * then the size covers both) padded to MAXALIGN.  Every record is a
 * multiple of 8 bytes, so records read into an aligned buffer can be used
 * where they lie.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef INDEX_RUN_H
#define INDEX_RUN_H

#include "gpusort_spill.h"
#include "index_int.h"

/* a record's header: size and flags, then padding up to the key */
#define GS_RUN_HDR			8
#define GS_RUN_SIZE_MASK	0xFFFF
#define GS_RUN_FLAGS_SHIFT	16

/*
 * Read buffers of a merge: about this size each, so that memory bounds the
 * fan-in (as PostgreSQL's tuplesort, which gives each input 256 kB and
 * merges at least 6 runs at a time); the output buffer of a merge pass
 * and of a run is of the same size.
 */
#define GS_RUN_BUFFER		((Size) 256 * 1024)
#define GS_RUN_BUFFER_MIN	((Size) 32 * 1024)
#define GS_MERGE_MIN_FANIN	6
#define GS_MERGE_MAX_FANIN	1024

/* how far ahead writing a run prefetches rows */
#define GS_SPILL_PREFETCH	8

/* rows between interrupt checks in the merge loops */
#define GS_SPILL_CFI_EVERY	4096

/*
 * Writes one run at the end of the build's file: its temporary file, or
 * in a parallel worker its file of the shared file set.
 */
typedef struct GsRunWriter
{
	GsIdxBuild *b;
	char	   *buf;
	Size		size;
	Size		used;
	GsIdxRun	run;
	bool		started;
	int64		reserved;		/* bytes placed up front, or 0 */
} GsRunWriter;

static inline Size
gs_rec_len(GsIdxBuild *b, uint32 hdr)
{
	return GS_RUN_HDR + b->keybytes + MAXALIGN(hdr & GS_RUN_SIZE_MASK);
}

static inline const uint64 *
gs_rec_key(const char *rec)
{
	return (const uint64 *) (rec + GS_RUN_HDR);
}

static inline IndexTuple
gs_rec_tuple(GsIdxBuild *b, char *rec)
{
	return (IndexTuple) (rec + GS_RUN_HDR + b->keybytes);
}

static inline uint8
gs_rec_flags(const char *rec)
{
	uint32		hdr;

	memcpy(&hdr, rec, sizeof(hdr));
	return (uint8) (hdr >> GS_RUN_FLAGS_SHIFT);
}

/* writing a run at the end of the build's file (index_spill.c) */
extern void gs_idx_rw_init(GsRunWriter *rw, GsIdxBuild *b, char *buf,
						   Size size, int64 total);
extern void gs_idx_rw_put(GsIdxBuild *b, GsRunWriter *rw, const uint64 *key,
						  IndexTuple itup, uint8 flags);
extern void gs_idx_rw_finish(GsRunWriter *rw);

#endif							/* INDEX_RUN_H */
