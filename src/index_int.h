/*-------------------------------------------------------------------------
 *
 * index_int.h
 *	  btree index builds through gpusort: declarations shared by
 *	  src/index*.c.
 *
 * index.c        GUC, the hooks that hand a btree build to gpusort
 * index_build.c  the ambuild: heap scan, normalized keys, sort, checks
 * index_write.c  writes the sorted index tuples as btree pages
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_INDEX_INT_H
#define GPUSORT_INDEX_INT_H

#include "postgres.h"

#include "access/genam.h"
#include "access/itup.h"
#include "nodes/execnodes.h"
#include "utils/relcache.h"

/* index.c */
extern bool gs_index_build_enabled;
extern bool gs_index_wanted(void);

/* index_build.c: an ambuild with btbuild's signature */
extern IndexBuildResult *gs_btbuild(Relation heap, Relation index,
									IndexInfo *indexInfo);

/* index_write.c: the btree page writer */
typedef struct GsBtWriter GsBtWriter;

/*
 * Start writing the (empty) index.  deduplicate: merge equal keys into
 * posting lists when the index allows it (never for unique indexes).
 */
extern GsBtWriter *gs_btw_begin(Relation heap, Relation index, bool isunique);

/*
 * Add the next index tuple, in btree order (keys, then heap TID).
 * maybe_dup: false when the caller knows itup's key columns differ from
 * the previous tuple's (saves the deduplication check).
 */
extern void gs_btw_add(GsBtWriter *w, IndexTuple itup, bool maybe_dup);

/* write the last pages of every level and the metapage; sync */
extern void gs_btw_finish(GsBtWriter *w);

#endif							/* GPUSORT_INDEX_INT_H */
