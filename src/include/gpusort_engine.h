/*-------------------------------------------------------------------------
 *
 * gpusort_engine.h
 *	  The one interface between the gpusort extension and a sort engine.
 *
 * An engine sorts fixed-width normalized keys and returns the permutation
 * that puts them in order.  Two engines implement this interface: the CPU
 * engine (src/engine_cpu/engine_cpu.c, always linked into the extension) and
 * the CUDA engine (cuda/, built as libgpusort_cuda.so and opened with dlopen
 * on first use).  This header therefore includes no PostgreSQL and no CUDA
 * header, and nothing that crosses it may longjmp or throw: every failure
 * comes back as a gs_status plus a NUL-terminated message in the caller's
 * errbuf.
 *
 * Key format.  A sort of n rows with key width key_bytes takes a row-major
 * array: row i's key starts at (char *) keys + i * key_bytes.
 *   - key_bytes == 4: the key is one native-endian uint32_t.
 *   - key_bytes == 8, 16, 24 or 32: the key is key_bytes / 8 native-endian
 *     uint64_t words; word 0 is the most significant.
 * Keys compare as unsigned integers, word by word, word 0 first.  The row
 * index of row i is i.  The result is perm[0 .. n-1] such that
 * key[perm[0]] <= key[perm[1]] <= ...  Rows with equal keys may come in any
 * order (the caller breaks ties itself when it needs to).
 *
 * Cancel.  Engines call cancel(cancel_arg) now and then (between passes,
 * while waiting for a device); when it returns non-zero they stop, release
 * what the sort took, and return GS_ERR_CANCELED.  The callback must not
 * longjmp.
 *
 * Asynchronous sorts.  sort_submit() starts the same sort as sort() and
 * returns at once with a ticket; the caller goes on (reading and encoding
 * the next chunk, say) and later calls sort_wait() for the ticket, which
 * returns the sort's status, stats and message exactly as sort() would
 * have.  Until then the engine owns keys[] and perm[]: the caller must
 * neither read, write nor free them.  At most GS_MAX_INFLIGHT sorts may be
 * outstanding on one engine; they run in submit order, and an engine may
 * overlap them (the CUDA engine uploads chunk k+1 while chunk k is being
 * sorted or downloaded).  sort_wait() must be called for every ticket,
 * oldest first, unless sort_abort() is called: that stops every outstanding
 * sort and returns only when the engine no longer touches caller memory;
 * it never fails, never blocks on anything but the engine's own work, and
 * is safe in error cleanup.  While sort_wait() waits it polls cancel as
 * sort() does; an outstanding sort nobody waits for does not see cancel
 * (the caller notices the cancel itself and calls sort_abort()).
 *
 * Failures.  When a sort fails (any status but GS_OK, including
 * GS_ERR_CANCELED), keys[] still holds the keys as they were given, so the
 * caller may sort them again on another engine; perm[] is unspecified.
 *
 * Threads.  An engine may run sorts on threads of its own.  Such threads
 * block every signal and never call back into the caller except through
 * cancel (which is only called from the thread that called sort() or
 * sort_wait()).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_ENGINE_H
#define GPUSORT_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* bumped whenever a struct or function below changes shape */
#define GS_ENGINE_ABI_VERSION 3

/* largest key, and the only widths an engine must accept */
#define GS_MAX_KEY_BYTES 32
#define GS_KEY_BYTES_VALID(b) \
	((b) == 4 || (b) == 8 || (b) == 16 || (b) == 24 || (b) == 32)

/* largest row count of one sort call: row indexes are 32-bit */
#define GS_MAX_ROWS ((size_t) UINT32_MAX)

/* size of the errbuf every caller passes */
#define GS_ERRBUF_SIZE 512

typedef enum gs_status
{
	GS_OK = 0,
	GS_ERR_INVALID,				/* bad argument (caller bug) */
	GS_ERR_NOMEM,				/* host memory exhausted */
	GS_ERR_DEVICE_NOMEM,		/* device memory exhausted */
	GS_ERR_NODEVICE,			/* no usable device / driver / runtime */
	GS_ERR_DEVICE,				/* any other device fault */
	GS_ERR_CANCELED,			/* cancel callback asked to stop */
	GS_ERR_INTERNAL				/* can't happen */
} gs_status;

/* flags for sort() */
#define GS_SORT_KEYS_OUT	0x01	/* on return keys[] holds the keys in
									 * sorted order (keys[i] is the key of
									 * row perm[i]); without it the contents
									 * of keys[] are unspecified afterwards */

typedef int (*gs_cancel_fn) (void *arg);

/* outstanding asynchronous sorts an engine must accept */
#define GS_MAX_INFLIGHT 2

/* names one asynchronous sort of one engine; never 0 */
typedef uint64_t gs_ticket;

/* what one sort call measured; every field is set (0 when not applicable) */
typedef struct gs_sort_stats
{
	double		upload_ms;		/* host -> device transfer */
	double		sort_ms;		/* the sort itself */
	double		download_ms;	/* device -> host transfer */
	double		total_ms;		/* wall time of the whole call */
	uint64_t	device_bytes;	/* device memory the call used at peak */
	int			passes;			/* partitioning passes over the data */
} gs_sort_stats;

typedef struct gs_device_info
{
	char		name[128];		/* "NVIDIA H200", "CPU" */
	int			device_count;	/* usable devices seen */
	int			device_id;		/* the one this engine uses */
	int			cc_major;		/* compute capability, 0 for CPU */
	int			cc_minor;
	int			sm_count;
	uint64_t	total_mem;		/* bytes; 0 when unknown */
	uint64_t	free_mem;
	int			runtime_version;	/* e.g. 13000; 0 for CPU */
	int			driver_version;
} gs_device_info;

/* one engine instance; opaque, one per backend */
typedef struct gs_engine gs_engine;

typedef struct gs_engine_ops
{
	int			abi_version;	/* GS_ENGINE_ABI_VERSION */
	const char *name;			/* "cpu", "cuda" */

	/*
	 * Create an instance.  A GPU engine initialises its device here (never
	 * before), so this is called lazily, in a backend, on first use.
	 */
	gs_status	(*create) (gs_engine **out, char *errbuf, size_t errlen);
	void		(*destroy) (gs_engine *eng);

	gs_status	(*device_info) (gs_engine *eng, gs_device_info *info,
								char *errbuf, size_t errlen);

	/*
	 * Key buffers: host memory the caller writes keys into.  A GPU engine
	 * hands out pinned memory here so keys are written once and copied at
	 * full bus speed.  keybuf_realloc keeps the first old_bytes of content.
	 * The caller passes the size back on free.  A permutation (perm[] of
	 * sort) may live in such a buffer too, so that a GPU engine can copy it
	 * back asynchronously.
	 */
	gs_status	(*keybuf_alloc) (gs_engine *eng, size_t bytes, void **ptr,
								 char *errbuf, size_t errlen);
	gs_status	(*keybuf_realloc) (gs_engine *eng, void **ptr,
								   size_t old_bytes, size_t new_bytes,
								   char *errbuf, size_t errlen);
	void		(*keybuf_free) (gs_engine *eng, void *ptr, size_t bytes);

	/*
	 * Sort n rows of key_bytes-wide keys (see the key format above); write
	 * the permutation into perm[0 .. n-1] (caller's memory).  flags: GS_SORT_*.
	 * stats may be NULL.
	 */
	gs_status	(*sort) (gs_engine *eng, void *keys, size_t n, int key_bytes,
						 uint32_t *perm, int flags,
						 gs_cancel_fn cancel, void *cancel_arg,
						 gs_sort_stats *stats, char *errbuf, size_t errlen);

	/*
	 * Asynchronous sorts (see above).  sort_submit fails only for a bad
	 * argument, too many outstanding sorts, or resources it could not get
	 * (then nothing was started); every failure of the sort itself comes
	 * from sort_wait.  stats may be NULL.
	 */
	gs_status	(*sort_submit) (gs_engine *eng, void *keys, size_t n,
								int key_bytes, uint32_t *perm, int flags,
								gs_ticket *ticket,
								char *errbuf, size_t errlen);
	gs_status	(*sort_wait) (gs_engine *eng, gs_ticket ticket,
							  gs_cancel_fn cancel, void *cancel_arg,
							  gs_sort_stats *stats,
							  char *errbuf, size_t errlen);
	void		(*sort_abort) (gs_engine *eng);

	/*
	 * For a process that serves the whole server (the gpusort service):
	 * create_on_device is create() on the given device (0 .. device_count-1
	 * of device_info); host_register page-locks caller memory once, so that
	 * keys and permutations placed anywhere in it move at full bus speed;
	 * host_unregister undoes it.  The CPU engine accepts device 0 only and
	 * treats registration as a no-op.  An instance is used by one thread at
	 * a time; a process may hold several instances on one device.
	 */
	gs_status	(*create_on_device) (gs_engine **out, int device,
									 char *errbuf, size_t errlen);
	gs_status	(*host_register) (gs_engine *eng, void *ptr, size_t bytes,
								  char *errbuf, size_t errlen);
	void		(*host_unregister) (gs_engine *eng, void *ptr);
} gs_engine_ops;

/*
 * Entry points.  The CUDA library exports GS_CUDA_ENTRY_SYMBOL with C
 * linkage; it returns NULL when abi_version differs from its own.
 */
typedef const gs_engine_ops *(*gs_engine_entry_fn) (int abi_version);

#define GS_CUDA_LIBRARY_NAME "libgpusort_cuda"
#define GS_CUDA_ENTRY_SYMBOL "gpusort_cuda_engine"

extern const gs_engine_ops *gpusort_cuda_engine(int abi_version);
extern const gs_engine_ops *gpusort_cpu_engine(int abi_version);

/* short English text for a status, never NULL */
extern const char *gs_status_text(gs_status st);

#ifdef __cplusplus
}
#endif

#endif							/* GPUSORT_ENGINE_H */
