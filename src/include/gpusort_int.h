/*-------------------------------------------------------------------------
 *
 * gpusort_int.h
 *	  Declarations shared by the extension's C files (PostgreSQL side).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_INT_H
#define GPUSORT_INT_H

#include "postgres.h"

#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "port/atomics.h"

#include "gpusort_compat.h"

#include "gpusort_engine.h"

/* ---- GUCs (settings.c) ---- */
typedef enum GsEngineChoice
{
	GS_ENGINE_AUTO,				/* GPU when usable and worth it, else CPU */
	GS_ENGINE_GPU,				/* GPU whenever usable (still falls back) */
	GS_ENGINE_CPU				/* never touch the GPU */
} GsEngineChoice;

extern bool gpusort_enabled;
extern int	gpusort_engine_choice;	/* GsEngineChoice */
extern int	gpusort_min_rows;
extern int	gpusort_gpu_min_rows;
extern int	gpusort_max_key_bytes;
extern int	gpusort_topn_limit;
extern int	gpusort_gpu_memory_limit_kb;
extern int	gpusort_cpu_threads;
extern bool gpusort_parallel_load;

/*
 * Settings of the sort core and of the service, declared here with the
 * others so that settings.c (common/) needs nothing from the layers above.
 */

/* gpusort.sort_fault: a query cancel at one of these points, for tests */
typedef enum GsSortFault
{
	GS_SORT_FAULT_NONE,
	GS_SORT_FAULT_CANCEL_IN_COPY,	/* while the copy into sorted order ends */
	GS_SORT_FAULT_LOAD_NO_SHM,	/* /dev/shm has no room for a load */
	GS_SORT_FAULT_LOAD_SMALL_BUDGET,	/* a load's budget is soon spent */
	GS_SORT_FAULT_SLOW_CASCADE	/* a final merge's threads hand over late */
} GsSortFault;

extern int	gpusort_sort_fault;

/* gpusort.service_fault */
typedef enum GsServiceFault
{
	GS_FAULT_NONE = 0,
	GS_FAULT_FAKE,				/* pretend to have a device: CPU engine in
								 * the service */
	GS_FAULT_DEVICE_ERROR,		/* fail every request with a device error */
	GS_FAULT_CRASH,				/* the service exits mid-request */
	GS_FAULT_DELAY				/* hold requests (for cancel tests) */
} GsServiceFault;

extern int	gpusort_service_fault;

/* gpusort.service_memory */
extern int	gpusort_service_memory_mb;
#define GS_SERVICE_MEMORY_DEFAULT_MB 1024
/* the pool of a server without a GPU: for the fake device only (tests) */
#define GS_SERVICE_NO_GPU_POOL_MB	16

/* the most threads gpusort.cpu_threads allows */
#define GS_CPU_THREADS_MAX	64
extern char *gpusort_cuda_library;
#define GS_CUDA_LIBRARY_DEFAULT "$libdir/" GS_CUDA_LIBRARY_NAME

/* ---- large shared memory segments freed on a thread (shm_reap.c) ---- */

typedef struct GsReap GsReap;

extern GsReap *gs_reap_begin(void);
extern void gs_reap_zap(GsReap *r);
extern void gs_reap_end(GsReap *r);
extern void gs_reap_close(const int *fds, int n);

/* ---- engines (engine.c) ---- */

/* a usable engine instance; lives for the backend's lifetime */
typedef struct GsEngine
{
	const gs_engine_ops *ops;
	gs_engine  *eng;
	bool		is_gpu;
	gs_device_info info;
} GsEngine;

/* the CPU engine; never fails */
extern GsEngine *gs_engine_cpu(void);
/* a CPU engine for sorts made on one thread that calls nothing of ours */
extern GsEngine *gs_engine_cpu_thread(void);

/*
 * The engine a sort of about nrows rows should use under the current
 * settings.  Never NULL: when the GPU is wanted but unusable, returns the
 * CPU engine and sets *fallback (if given) to a short reason; otherwise
 * sets *fallback to NULL.
 */
extern GsEngine *gs_engine_choose(double nrows, const char **fallback);

/*
 * Key buffers from engine e, released automatically when memory context
 * owner is reset or deleted (so errors leak nothing).  Errors are raised
 * with ereport.
 */
extern void *gs_keybuf_alloc(GsEngine *e, size_t bytes, MemoryContext owner);
extern void *gs_keybuf_grow(GsEngine *e, void *ptr, size_t old_bytes,
							size_t new_bytes);
extern void gs_keybuf_free(GsEngine *e, void *ptr);

/*
 * Sort n keys held in a key buffer of e (see gpusort_engine.h).  When a GPU
 * engine fails (other than by cancel), the sort is redone by the CPU engine
 * and *fallback gets the reason (a palloc'd string holding the device's
 * text).  Honours query cancel (CHECK_FOR_INTERRUPTS).  Returns the engine
 * that did the sort.
 */
extern GsEngine *gs_engine_sort(GsEngine *e, void *keys, size_t n,
								int key_bytes, uint32 *perm, int flags,
								gs_sort_stats *stats, char **fallback);

/*
 * Asynchronous sorts.  gs_engine_submit starts sorting keys (held in a key
 * buffer, see above) and returns at once when the engine can sort in the
 * background; otherwise it sorts right away.  gs_engine_wait finishes the
 * job: it returns what gs_engine_sort would have (same fallback to the CPU
 * engine, same cancel handling) and must be called for every job, oldest
 * first.  The keys and perm of a job must not be touched, moved or freed
 * until its wait returned; if an ERROR intervenes, freeing any key buffer
 * (its memory context's cleanup does that) stops every outstanding job
 * first, and a job stopped that way is sorted again synchronously by its
 * wait, should one still come.
 */
typedef struct GsSortJob
{
	GsEngine   *engine;			/* engine the job was given to */
	void	   *keys;
	size_t		n;
	int			key_bytes;
	uint32	   *perm;
	int			flags;
	bool		pending;		/* outstanding on the engine */
	bool		done;			/* sorted synchronously at submit */
	gs_ticket	ticket;
	gs_sort_stats stats;		/* of a synchronous sort */
	GsEngine   *sorted_by;
	char	   *fallback;
	struct GsSortJob *next;		/* list of outstanding jobs */
} GsSortJob;

extern void gs_engine_submit(GsSortJob *job, GsEngine *e, void *keys,
							 size_t n, int key_bytes, uint32 *perm,
							 int flags);
extern GsEngine *gs_engine_wait(GsSortJob *job, gs_sort_stats *stats,
								char **fallback);

/* what gpusort_info() reports (gpu_probe.c; the path of a name: settings.c) */
extern char *gs_cuda_library_path(void);
extern char *gs_cuda_library_path_of(const char *name);
extern bool gs_cuda_built(void);

/*
 * is there perhaps a GPU?  File checks only: the postmaster may ask
 * (gpu_probe.c)
 */
typedef enum GsGpuProbe
{
	GS_GPU_MAYBE,				/* library and driver there: ask the devices */
	GS_GPU_NO_LIBRARY,			/* built without the CUDA engine */
	GS_GPU_NO_DRIVER			/* no NVIDIA driver loaded */
} GsGpuProbe;

extern GsGpuProbe gs_gpu_probe(void);
extern const char *gs_gpu_probe_reason(GsGpuProbe probe);

/* engine.c: what the gpusort service says */
extern bool gs_gpu_absent(void);
extern bool gs_cuda_loaded(void);
extern const char *gs_cuda_load_error(void);

/* ---- planner.c / exec.c ---- */
extern void gs_planner_init(void);
extern void gs_shards_init(void);
extern int	gs_shards_parallel_append(PlannedStmt *stmt, Plan *child,
									  Query *parse);

/* ---- plan_walk.c ---- */
extern void gs_plan_walk(Plan *plan, void (*visit) (Plan *plan, void *arg),
						 void *arg);
extern void gs_stmt_walk(PlannedStmt *stmt,
						 void (*visit) (Plan *plan, void *arg), void *arg);
extern void gs_exec_init(void);

/*
 * Ask the CPU for every cache line of a heap page, a page ahead of reading
 * it (the heap scans of index builds and of sorts: index_scan.c,
 * sort_heapread.c).  The barrier keeps the compiler from deleting the loop
 * as one without effects (gcc 12 does).
 */
static inline void
gs_prefetch_page(const char *page)
{
	int			off;

	for (off = 0; off < BLCKSZ; off += 64)
	{
		__builtin_prefetch(page + off, 0, 3);
		pg_compiler_barrier();
	}
}

/*
 * ---- tuples formed in place ----
 * gs_zero_tuple: zero the MAXALIGN'd room of a tuple of len bytes, by word
 * stores for the usual sizes (gcc turns a loop into a call to memset, ten
 * more instructions a row of a load).
 */
static pg_attribute_always_inline void
gs_zero_tuple(void *p, Size len)
{
	uint64	   *w = (uint64 *) p;

	switch (MAXALIGN(len) / sizeof(uint64))
	{
		case 4:
			w[3] = 0;
			/* FALLTHROUGH */
		case 3:
			w[2] = 0;
			/* FALLTHROUGH */
		case 2:
			w[1] = 0;
			w[0] = 0;
			break;
		default:
			memset(p, 0, MAXALIGN(len));
			break;
	}
}

/*
 * gs_store_fixed_value: a fixed-width value stored where the tuple keeps it.
 * len: the attribute's attlen when passed by value (1, 2, 4 or 8), its
 * negation when by reference; p aligned as the attribute is (the stores of
 * store_att_byval, without its look-ups in the descriptor)
 */
static pg_attribute_always_inline void
gs_store_fixed_value(char *p, Datum value, int16 len)
{
	switch (len)
	{
		case 8:
			*(int64 *) p = DatumGetInt64(value);
			break;
		case 4:
			*(int32 *) p = DatumGetInt32(value);
			break;
		case 2:
			*(int16 *) p = DatumGetInt16(value);
			break;
		case 1:
			*(char *) p = DatumGetChar(value);
			break;
		default:
			Assert(len < 0);
			memcpy(p, DatumGetPointer(value), -len);
			break;
	}
}

/* ---- index builds (src/nbtree/index*.c, optional) ---- */
extern void gs_index_init(bool install_hooks) __attribute__((weak));

/*
 * gpusort.index_fault (defined in settings.c with the other fault settings):
 * a query cancel at one of these points, an error or a pause, for tests
 */
#define GS_INDEX_FAULT_NONE				0
#define GS_INDEX_FAULT_CANCEL_IN_MERGE	1	/* a merge of runs starts */
#define GS_INDEX_FAULT_CANCEL_IN_WRITE	2	/* a btree page is finished */
#define GS_INDEX_FAULT_CANCEL_IN_RUN	3	/* a run's background write starts */
#define GS_INDEX_FAULT_ERROR_IN_WRITER	4	/* an error in a worker writing
											 * pages (index_pipe.c), not a
											 * cancel */
#define GS_INDEX_FAULT_HOLD_IN_WRITER	5	/* a worker writing pages sleeps
											 * at its first, until stopped */
extern int	gs_index_fault;

/* ---- when gpusort takes sorts (lifecycle.c) ---- */
extern bool gs_preloaded;		/* loaded by shared_preload_libraries */
extern void gs_lifecycle_init(void);
extern bool gs_active(void);

#endif							/* GPUSORT_INT_H */
