/*-------------------------------------------------------------------------
 *
 * service_client.c
 *	  The backend's side of the gpusort service: one more sort engine.
 *
 * The "service" engine implements gs_engine_ops on top of the service's
 * shared memory (gpusort_service.h).  keybuf_alloc hands out a run of
 * slices of the shared pool, so the sort state encodes its keys straight
 * into memory the service pinned (when the pool is full, ordinary memory:
 * a sort of such keys copies them into slices for the request).  A sort
 * takes one request entry and a run of slices for the permutation, queues
 * the request, sets the service's latch and waits on the backend's own
 * latch, polling the cancel callback whenever it wakes (query cancel sets
 * the latch too).  Every GS_SERVICE_POLL_MS it also checks that the
 * service it queued with is still the one running.
 *
 * Nothing here may throw: failures come back as gs_status with text, and
 * engine.c turns them into a sort on the CPU engine.
 *
 * The admission decision (service or CPU engine, per sort) and the
 * gpusort_service_status() function are here too.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "gpusort_int.h"
#include "gpusort_service.h"
#include "gpusort_stats.h"

/* a key buffer of this backend */
typedef struct SvcBuf
{
	char	   *ptr;
	Size		bytes;
	bool		shared;			/* in the pool: slices [first, first + nslices) */
	int			first;
	int			nslices;
	struct SvcBuf *next;
} SvcBuf;

/* an outstanding request of this backend */
typedef struct SvcOut
{
	gs_ticket	ticket;			/* 0: entry unused */
	int			req;			/* index into ctl->requests */
	void	   *keys;			/* the caller's */
	uint32_t   *perm;
	size_t		n;
	int			key_bytes;
	int			flags;
	int			perm_first;		/* slices holding the permutation */
	int			perm_nslices;
	int			bounce_first;	/* slices holding a copy of the keys, or -1 */
	int			bounce_nslices;
} SvcOut;

struct gs_engine
{
	SvcBuf	   *bufs;
	gs_ticket	next_ticket;
	SvcOut		out[GS_MAX_INFLIGHT];
};

static struct gs_engine svc_client;
static bool svc_client_ready = false;

#define SLICES_FOR(bytes) ((int) (((bytes) + GS_SLICE_BYTES - 1) / GS_SLICE_BYTES))

/* ---------------------------------------------------------------------
 * slices
 * --------------------------------------------------------------------- */

/* a run of n free slices, now owned by this backend; -1 if none */
static int
svc_slices_alloc(int n)
{
	GsServiceCtl *ctl = gs_service;
	int			run = 0,
				i,
				found = -1;

	if (n <= 0 || n > ctl->nslices)
		return -1;
	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	for (i = 0; i < ctl->nslices; i++)
	{
		if (ctl->slices[i].owner < 0 && ctl->slices[i].pins == 0)
		{
			if (++run == n)
			{
				found = i - n + 1;
				break;
			}
		}
		else
			run = 0;
	}
	if (found >= 0)
		for (i = found; i < found + n; i++)
		{
			ctl->slices[i].owner = gs_my_procno();
			ctl->slices[i].owner_pid = MyProcPid;
		}
	LWLockRelease(ctl->lock);
	return found;
}

/* grow run [first, first + n) to m slices in place, if they are free */
static bool
svc_slices_extend(int first, int n, int m)
{
	GsServiceCtl *ctl = gs_service;
	bool		ok = true;
	int			i;

	if (first + m > ctl->nslices)
		return false;
	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	for (i = first + n; i < first + m; i++)
		if (ctl->slices[i].owner >= 0 || ctl->slices[i].pins != 0)
			ok = false;
	if (ok)
		for (i = first + n; i < first + m; i++)
		{
			ctl->slices[i].owner = gs_my_procno();
			ctl->slices[i].owner_pid = MyProcPid;
		}
	LWLockRelease(ctl->lock);
	return ok;
}

static void
svc_slices_free(int first, int n)
{
	GsServiceCtl *ctl = gs_service;
	int			i;

	if (first < 0)
		return;
	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	for (i = first; i < first + n && i < ctl->nslices; i++)
	{
		if (ctl->slices[i].owner == gs_my_procno())
		{
			ctl->slices[i].owner = -1;
			ctl->slices[i].owner_pid = 0;
		}
	}
	LWLockRelease(ctl->lock);
}

/* ---------------------------------------------------------------------
 * the engine
 * --------------------------------------------------------------------- */

static void svc_abort(gs_engine *eng);

/* at backend exit: no request outstanding, no slice kept */
static void
svc_client_exit(int code, Datum arg)
{
	GsServiceCtl *ctl = gs_service;
	int			i;

	svc_abort(&svc_client);
	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	for (i = 0; i < ctl->nslices; i++)
	{
		if (ctl->slices[i].owner == gs_my_procno())
		{
			ctl->slices[i].owner = -1;
			ctl->slices[i].owner_pid = 0;
		}
	}
	LWLockRelease(ctl->lock);
}

static gs_status
svc_create(gs_engine **out, char *errbuf, size_t errlen)
{
	if (gs_service == NULL || MyProc == NULL ||
		gs_my_procno() >= gs_service->nprocs)
	{
		*out = NULL;
		snprintf(errbuf, errlen, "the gpusort service is not available in this process");
		return GS_ERR_NODEVICE;
	}
	if (!svc_client_ready)
	{
		memset(&svc_client, 0, sizeof(svc_client));
		svc_client.next_ticket = 1;
		on_shmem_exit(svc_client_exit, (Datum) 0);
		svc_client_ready = true;
	}
	*out = &svc_client;
	return GS_OK;
}

static void
svc_destroy(gs_engine *eng)
{
	svc_abort(eng);
}

static gs_status
svc_device_info(gs_engine *eng, gs_device_info *info, char *errbuf,
				size_t errlen)
{
	GsServiceCtl *ctl = gs_service;
	uint64		budget;

	memset(info, 0, sizeof(*info));
	if (ctl->ndevices > 0)
		snprintf(info->name, sizeof(info->name), "%s", ctl->devices);
	else
		snprintf(info->name, sizeof(info->name), "fake device in the gpusort service");
	info->device_count = ctl->ndevices;
	/* a chunk's keys and permutation must fit a quarter of the pool */
	budget = ctl->pool_bytes;
	if (ctl->device_budget > 0)
		budget = Min(budget, ctl->device_budget);
	info->total_mem = budget;
	info->free_mem = budget;
	return GS_OK;
}

static SvcBuf *
svc_buf_find(gs_engine *eng, void *ptr)
{
	SvcBuf	   *b;

	for (b = eng->bufs; b != NULL; b = b->next)
		if (b->ptr == ptr)
			return b;
	return NULL;
}

static gs_status
svc_keybuf_alloc(gs_engine *eng, size_t bytes, void **ptr, char *errbuf,
				 size_t errlen)
{
	SvcBuf	   *b = malloc(sizeof(SvcBuf));
	int			first;

	*ptr = NULL;
	if (b == NULL)
	{
		snprintf(errbuf, errlen, "out of host memory");
		return GS_ERR_NOMEM;
	}
	if (bytes == 0)
		bytes = 1;
	memset(b, 0, sizeof(*b));
	b->bytes = bytes;
	b->first = -1;
	first = svc_slices_alloc(SLICES_FOR(bytes));
	if (first >= 0)
	{
		b->shared = true;
		b->first = first;
		b->nslices = SLICES_FOR(bytes);
		b->ptr = gs_service->pool + (Size) first * GS_SLICE_BYTES;
	}
	else
	{
		/* the pool is full: ordinary memory, copied when sorted */
		b->ptr = malloc(bytes);
		if (b->ptr == NULL)
		{
			free(b);
			snprintf(errbuf, errlen, "out of host memory");
			return GS_ERR_NOMEM;
		}
	}
	b->next = eng->bufs;
	eng->bufs = b;
	*ptr = b->ptr;
	return GS_OK;
}

static void
svc_keybuf_free(gs_engine *eng, void *ptr, size_t bytes)
{
	SvcBuf	  **p;

	for (p = &eng->bufs; *p != NULL; p = &(*p)->next)
	{
		SvcBuf	   *b = *p;

		if (b->ptr != ptr)
			continue;
		if (b->shared)
			svc_slices_free(b->first, b->nslices);
		else
			free(b->ptr);
		*p = b->next;
		free(b);
		return;
	}
}

static gs_status
svc_keybuf_realloc(gs_engine *eng, void **ptr, size_t old_bytes,
				   size_t new_bytes, char *errbuf, size_t errlen)
{
	SvcBuf	   *b = svc_buf_find(eng, *ptr);
	void	   *np;
	gs_status	st;

	if (b == NULL)
	{
		snprintf(errbuf, errlen, "unknown key buffer");
		return GS_ERR_INVALID;
	}
	if (new_bytes == 0)
		new_bytes = 1;
	if (b->shared && SLICES_FOR(new_bytes) <= b->nslices)
	{
		b->bytes = new_bytes;
		return GS_OK;
	}
	if (b->shared && svc_slices_extend(b->first, b->nslices, SLICES_FOR(new_bytes)))
	{
		b->nslices = SLICES_FOR(new_bytes);
		b->bytes = new_bytes;
		return GS_OK;
	}
	if (!b->shared)
	{
		np = realloc(b->ptr, new_bytes);
		if (np == NULL)
		{
			snprintf(errbuf, errlen, "out of host memory");
			return GS_ERR_NOMEM;
		}
		b->ptr = np;
		b->bytes = new_bytes;
		*ptr = np;
		return GS_OK;
	}
	st = svc_keybuf_alloc(eng, new_bytes, &np, errbuf, errlen);
	if (st != GS_OK)
		return st;
	memcpy(np, *ptr, Min(old_bytes, new_bytes));
	svc_keybuf_free(eng, *ptr, old_bytes);
	*ptr = np;
	return GS_OK;
}

/* is [p, p + len) inside a pool buffer of this backend? */
static bool
svc_in_my_pool(gs_engine *eng, const char *p, Size len)
{
	SvcBuf	   *b;

	for (b = eng->bufs; b != NULL; b = b->next)
		if (b->shared && p >= b->ptr &&
			p + len <= b->ptr + (Size) b->nslices * GS_SLICE_BYTES)
			return true;
	return false;
}

static SvcOut *
svc_out_find(gs_engine *eng, gs_ticket ticket)
{
	int			k;

	for (k = 0; k < GS_MAX_INFLIGHT; k++)
		if (eng->out[k].ticket == ticket && ticket != 0)
			return &eng->out[k];
	return NULL;
}

static void
svc_out_release(SvcOut *o)
{
	svc_slices_free(o->perm_first, o->perm_nslices);
	svc_slices_free(o->bounce_first, o->bounce_nslices);
	o->ticket = 0;
}

static gs_status
svc_submit(gs_engine *eng, void *keys, size_t n, int key_bytes,
		   uint32_t *perm, int flags, gs_ticket *ticket, char *errbuf,
		   size_t errlen)
{
	GsServiceCtl *ctl = gs_service;
	SvcOut	   *o = NULL;
	GsRequest  *req;
	Size		kbytes = n * (Size) key_bytes;
	Size		key_off;
	Latch	   *latch;
	int			k;

	*ticket = 0;
	if (!GS_KEY_BYTES_VALID(key_bytes) || n == 0 || n > GS_MAX_ROWS ||
		keys == NULL || perm == NULL)
	{
		snprintf(errbuf, errlen, "invalid sort arguments (n=%zu, key_bytes=%d)",
				 n, key_bytes);
		return GS_ERR_INVALID;
	}
	for (k = 0; k < GS_MAX_INFLIGHT; k++)
		if (eng->out[k].ticket == 0)
		{
			o = &eng->out[k];
			break;
		}
	if (o == NULL)
	{
		snprintf(errbuf, errlen, "too many outstanding sorts");
		return GS_ERR_INVALID;
	}
	memset(o, 0, sizeof(*o));
	o->req = gs_my_procno() * GS_MAX_INFLIGHT + k;
	o->keys = keys;
	o->perm = perm;
	o->n = n;
	o->key_bytes = key_bytes;
	o->flags = flags;
	o->bounce_first = -1;
	o->perm_first = -1;

	if (svc_in_my_pool(eng, keys, kbytes))
		key_off = (char *) keys - ctl->pool;
	else
	{
		/* keys in ordinary memory: a copy in slices travels instead */
		o->bounce_nslices = SLICES_FOR(kbytes);
		o->bounce_first = svc_slices_alloc(o->bounce_nslices);
		if (o->bounce_first < 0)
		{
			snprintf(errbuf, errlen, "no free slice of gpusort.service_memory for %zu bytes of keys",
					 (size_t) kbytes);
			return GS_ERR_DEVICE_NOMEM;
		}
		key_off = (Size) o->bounce_first * GS_SLICE_BYTES;
		memcpy(ctl->pool + key_off, keys, kbytes);
	}
	o->perm_nslices = SLICES_FOR(n * sizeof(uint32));
	o->perm_first = svc_slices_alloc(o->perm_nslices);
	if (o->perm_first < 0)
	{
		svc_out_release(o);
		snprintf(errbuf, errlen, "no free slice of gpusort.service_memory for the permutation");
		return GS_ERR_DEVICE_NOMEM;
	}

	req = &ctl->requests[o->req];
	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	latch = ctl->service_latch;
	if (ctl->state == GS_SVC_STOPPED || latch == NULL)
	{
		LWLockRelease(ctl->lock);
		svc_out_release(o);
		snprintf(errbuf, errlen, "the gpusort service is not running");
		return GS_ERR_NODEVICE;
	}
	/* DONE: an answer nobody waited for (an abandoned request) */
	if (req->state != GS_REQ_FREE && req->state != GS_REQ_DONE)
	{
		/* a canceled request this backend left to the service, still held */
		LWLockRelease(ctl->lock);
		svc_out_release(o);
		snprintf(errbuf, errlen, "request entry %d is still in use", o->req);
		return GS_ERR_INTERNAL;
	}
	req->owner = gs_my_procno();
	req->owner_pid = MyProcPid;
	req->fault = gpusort_service_fault;
	req->ticket = eng->next_ticket++;
	req->generation = ctl->generation;
	req->key_off = key_off;
	req->perm_off = (Size) o->perm_first * GS_SLICE_BYTES;
	req->n = n;
	req->key_bytes = key_bytes;
	req->flags = flags;
	req->cancel = 0;
	req->status = GS_OK;
	req->err[0] = '\0';
	req->state = GS_REQ_QUEUED;
	gs_service_pin(req->key_off, kbytes, 1);
	gs_service_pin(req->perm_off, n * sizeof(uint32), 1);
	ctl->queue[ctl->qtail] = o->req;
	ctl->qtail = (ctl->qtail + 1) % (ctl->nrequests + 1);
	ctl->queue_len++;
	ctl->queued_rows += n;
	LWLockRelease(ctl->lock);
	SetLatch(latch);

	o->ticket = req->ticket;
	*ticket = o->ticket;
	return GS_OK;
}

/*
 * keys[i] holds row perm[i]'s key: put every key back at its row, in place,
 * following the permutation's cycles (perm[] is used up as the marker).
 */
static void
svc_unsort_keys(char *keys, uint32 *perm, size_t n, int key_bytes)
{
	char		carry[GS_MAX_KEY_BYTES];
	char		swap[GS_MAX_KEY_BYTES];
	size_t		s;

	for (s = 0; s < n; s++)
	{
		size_t		j = s;

		if (perm[s] == s)
			continue;
		memcpy(carry, keys + s * (size_t) key_bytes, key_bytes);
		for (;;)
		{
			size_t		dest = perm[j];

			perm[j] = (uint32) j;
			if (dest == s || dest >= n)
			{
				memcpy(keys + s * (size_t) key_bytes, carry, key_bytes);
				break;
			}
			memcpy(swap, keys + dest * (size_t) key_bytes, key_bytes);
			memcpy(keys + dest * (size_t) key_bytes, carry, key_bytes);
			memcpy(carry, swap, key_bytes);
			j = dest;
		}
	}
}

/*
 * Wait until the service answered o's request.  cancel == NULL: no cancel
 * polling, but the request is canceled at once (sort_abort).  Returns the
 * request's status; *canceled tells whether cancel asked to stop.
 */
static gs_status
svc_wait_done(gs_engine *eng, SvcOut *o, gs_cancel_fn cancel, void *cancel_arg,
			  bool abort, bool restore, gs_sort_stats *stats, char *errbuf,
			  size_t errlen)
{
	GsServiceCtl *ctl = gs_service;
	GsRequest  *req = &ctl->requests[o->req];
	gs_status	st;
	bool		canceled = abort;
	time_t		canceled_at = 0;

	/*
	 * An abort (also from an abort or exit callback) cancels at once, and
	 * gives up waiting as a canceled wait does: a device that hangs must
	 * not hang the backend's error path.
	 */
	if (abort)
	{
		Latch	   *latch = ctl->service_latch;

		req->cancel = 1;
		canceled_at = time(NULL);
		if (latch)
			SetLatch(latch);
	}
	for (;;)
	{
		int			state;
		bool		gone;

		LWLockAcquire(ctl->lock, LW_SHARED);
		state = req->state;
		gone = ctl->generation != req->generation || ctl->service_pid == 0;
		LWLockRelease(ctl->lock);
		if (state == GS_REQ_DONE)
			break;
		if (gone)
		{
			/* the service went away without answering: nobody works on it */
			LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
			if (req->state == GS_REQ_QUEUED || req->state == GS_REQ_RUNNING)
			{
				gs_service_unpin(req);
				req->status = GS_ERR_NODEVICE;
				strlcpy(req->err, "the gpusort service stopped", sizeof(req->err));
				req->state = GS_REQ_DONE;
			}
			LWLockRelease(ctl->lock);
			break;
		}
		if (!canceled && cancel != NULL && cancel(cancel_arg))
		{
			Latch	   *latch = ctl->service_latch;

			canceled = true;
			canceled_at = time(NULL);
			req->cancel = 1;
			if (latch)
				SetLatch(latch);
		}
		else if (canceled_at != 0 &&
				 time(NULL) - canceled_at > GS_SERVICE_ABANDON_S)
		{
			/*
			 * The service does not let go of a canceled request (a device
			 * that hangs, say): leave it to the service.  Its slices stay
			 * pinned, so nobody else gets them before the service is done,
			 * and the entry is taken again once it is answered.
			 */
			svc_out_release(o);
			if (errbuf)
				snprintf(errbuf, errlen, "canceled; the gpusort service still holds the request");
			return GS_ERR_CANCELED;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 GS_SERVICE_POLL_MS, gs_wait_event(GS_WAIT_SERVICE));
		ResetLatch(MyLatch);
	}

	pg_read_barrier();
	st = (gs_status) req->status;
	if (abort)
	{
		/*
		 * Aborted: the caller's perm[] may be gone already, and a stopped
		 * sort's keys must be as given (its wait sorts them again).  Keys
		 * the service sorted in place are put back from the permutation.
		 */
		if (restore && st == GS_OK && (o->flags & GS_SORT_KEYS_OUT) &&
			o->bounce_first < 0)
			svc_unsort_keys(ctl->pool + req->key_off,
							(uint32 *) (ctl->pool + req->perm_off),
							o->n, o->key_bytes);
	}
	else if (st == GS_OK)
	{
		memcpy(o->perm, ctl->pool + req->perm_off, o->n * sizeof(uint32));
		if (o->bounce_first >= 0 && (o->flags & GS_SORT_KEYS_OUT))
			memcpy(o->keys, ctl->pool + req->key_off, o->n * (Size) o->key_bytes);
		if (stats)
			*stats = req->stats;
	}
	else if (errbuf)
		snprintf(errbuf, errlen, "%s", req->err);
	if (st != GS_OK && canceled)
		st = GS_ERR_CANCELED;

	LWLockAcquire(ctl->lock, LW_EXCLUSIVE);
	req->state = GS_REQ_FREE;
	req->ticket = 0;
	LWLockRelease(ctl->lock);
	svc_out_release(o);
	return st;
}

static gs_status
svc_wait(gs_engine *eng, gs_ticket ticket, gs_cancel_fn cancel,
		 void *cancel_arg, gs_sort_stats *stats, char *errbuf, size_t errlen)
{
	SvcOut	   *o = svc_out_find(eng, ticket);

	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (o == NULL)
	{
		snprintf(errbuf, errlen, "unknown ticket");
		return GS_ERR_INVALID;
	}
	return svc_wait_done(eng, o, cancel, cancel_arg, false, true, stats, errbuf,
						 errlen);
}

static gs_status
svc_sort(gs_engine *eng, void *keys, size_t n, int key_bytes, uint32_t *perm,
		 int flags, gs_cancel_fn cancel, void *cancel_arg,
		 gs_sort_stats *stats, char *errbuf, size_t errlen)
{
	gs_ticket	t;
	gs_status	st;

	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (n == 0)
		return GS_OK;
	if (n == 1)
	{
		perm[0] = 0;
		return GS_OK;
	}
	st = svc_submit(eng, keys, n, key_bytes, perm, flags, &t, errbuf, errlen);
	if (st != GS_OK)
		return st;
	return svc_wait(eng, t, cancel, cancel_arg, stats, errbuf, errlen);
}

/*
 * Stop every outstanding sort.  Keys the service sorted in place are put
 * back in their rows' order (the sort's wait sorts them again), except
 * those in [lo, hi): memory about to be freed.  Putting 22M keys back,
 * one dependent cache miss a key, took 3 s of a cancel on the H100.
 */
void
gs_service_abort_but(gs_engine *eng, const char *lo, const char *hi)
{
	int			k;

	for (k = 0; k < GS_MAX_INFLIGHT; k++)
	{
		SvcOut	   *o = &eng->out[k];
		const char *keys = (const char *) o->keys;

		if (o->ticket != 0)
			(void) svc_wait_done(eng, o, NULL, NULL, true,
								 !(lo != NULL && keys >= lo && keys < hi),
								 NULL, NULL, 0);
	}
}

static void
svc_abort(gs_engine *eng)
{
	gs_service_abort_but(eng, NULL, NULL);
}

const gs_engine_ops gs_service_ops = {
	.abi_version = GS_ENGINE_ABI_VERSION,
	.name = "service",
	.create = svc_create,
	.destroy = svc_destroy,
	.device_info = svc_device_info,
	.keybuf_alloc = svc_keybuf_alloc,
	.keybuf_realloc = svc_keybuf_realloc,
	.keybuf_free = svc_keybuf_free,
	.sort = svc_sort,
	.sort_submit = svc_submit,
	.sort_wait = svc_wait,
	.sort_abort = svc_abort,
};

bool
gs_service_is_engine(const gs_engine_ops *ops)
{
	return ops == &gs_service_ops;
}

/* ---------------------------------------------------------------------
 * admission control
 * --------------------------------------------------------------------- */

/*
 * May this backend send sorts to the service at all?  Reads shared state
 * only: a service without a device costs a backend nothing.
 */
bool
gs_service_usable(const char **why)
{
	GsServiceCtl *ctl = gs_service;

	if (ctl == NULL)
	{
		*why = "gpusort is not in shared_preload_libraries, so there is no gpusort service";
		return false;
	}
	if (ctl->nslices == 0)
	{
		*why = "gpusort.service_memory is 0";
		return false;
	}
	if (MyProc == NULL || gs_my_procno() >= ctl->nprocs)
	{
		*why = "the gpusort service does not serve this process";
		return false;
	}
	switch (ctl->state)
	{
		case GS_SVC_READY:
			return true;
		case GS_SVC_NO_DEVICE:
			if (gpusort_service_fault != GS_FAULT_NONE)
				return true;
			*why = ctl->reason[0] ? ctl->reason : "the gpusort service has no device";
			return false;
		default:
			*why = "the gpusort service is not running";
			return false;
	}
}

/*
 * Should this sort of n keys wait for the service, or is the CPU engine
 * sooner?  The expected time on the service is the rows queued ahead,
 * spread over its workers, plus this sort, at one worker's measured rate;
 * the CPU engine's is n at the rate this server's backends measured.
 * Until the service measured its rate it gets the sort; until backends
 * measured the CPU engine's, GS_CPU_ROWS_PER_MS_DEFAULT stands in.  With
 * gpusort.engine = gpu or a fault injected, it always does.
 */
bool
gs_service_admit(void *keys, size_t n, int key_bytes, char **why)
{
	GsServiceCtl *ctl = gs_service;
	const char *reason;
	double		svc,
				cpu,
				gpu_ms,
				cpu_ms;
	uint64		queued;
	int			workers;

	if (!gs_service_usable(&reason))
	{
		*why = pstrdup(reason);
		return false;
	}
	if (gpusort_service_fault != GS_FAULT_NONE ||
		gpusort_engine_choice == GS_ENGINE_GPU)
		return true;
	svc = ctl->svc_rows_per_ms;
	cpu = ctl->cpu_rows_per_ms;
	queued = ctl->queued_rows;
	workers = Max(ctl->nworkers, 1);
	if (svc <= 0)
		return true;			/* the service's first sorts measure it */
	if (cpu <= 0)
		cpu = GS_CPU_ROWS_PER_MS_DEFAULT;
	gpu_ms = ((double) queued / workers + n) / svc;
	cpu_ms = n / cpu;
	if (gpu_ms <= cpu_ms)
		return true;
	*why = psprintf(GS_FALLBACK_QUEUE_TEXT ": %llu rows ahead, expected %.1f ms against %.1f ms on the CPU engine",
					(unsigned long long) queued, gpu_ms, cpu_ms);
	return false;
}

/* a CPU engine sort of n rows took ms: the rate admission compares with */
void
gs_service_note_cpu_rate(size_t n, double ms)
{
	GsServiceCtl *ctl = gs_service;
	double		rate;

	if (ctl == NULL || n < 50000 || ms <= 0)
		return;
	rate = n / ms;
	/* unlocked: a lost update only delays the average a little */
	ctl->cpu_rows_per_ms = ctl->cpu_rows_per_ms <= 0 ? rate :
		0.8 * ctl->cpu_rows_per_ms + 0.2 * rate;
}

/* ---------------------------------------------------------------------
 * gpusort_service_status()
 * --------------------------------------------------------------------- */

PG_FUNCTION_INFO_V1(gpusort_service_status);

Datum
gpusort_service_status(PG_FUNCTION_ARGS)
{
	GsServiceCtl *ctl = gs_service;
	TupleDesc	tupdesc;
	Datum		values[15];
	bool		nulls[15];
	Datum		per_dev[GS_SERVICE_MAX_DEVICES];
	int			i,
				used = 0,
				pinned = 0;
	static const char *const states[] = {"stopped", "no device", "running"};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	memset(nulls, 0, sizeof(nulls));
	if (ctl == NULL)
	{
		for (i = 0; i < lengthof(nulls); i++)
			nulls[i] = true;
		nulls[1] = false;
		values[1] = CStringGetTextDatum("not preloaded");
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
	}

	LWLockAcquire(ctl->lock, LW_SHARED);
	for (i = 0; i < ctl->nslices; i++)
	{
		if (ctl->slices[i].owner >= 0 || ctl->slices[i].pins > 0)
			used++;
		if (ctl->slices[i].pins > 0)
			pinned++;
	}
	values[0] = Int32GetDatum(ctl->service_pid);
	nulls[0] = ctl->service_pid == 0;
	values[1] = CStringGetTextDatum(states[ctl->state]);
	values[2] = Int32GetDatum(ctl->ndevices);
	values[3] = CStringGetTextDatum(ctl->ndevices > 0 ? ctl->devices :
									ctl->reason[0] ? ctl->reason : "");
	values[4] = Int32GetDatum(ctl->nworkers);
	values[5] = Int32GetDatum(ctl->queue_len);
	values[6] = Int32GetDatum(ctl->running);
	values[7] = Int64GetDatum((int64) ctl->sorts_served);
	values[8] = Int64GetDatum((int64) ctl->sorts_failed);
	values[9] = Int64GetDatum((int64) ctl->bytes_moved);
	values[10] = Int32GetDatum(ctl->nslices);
	values[11] = Int32GetDatum(used);
	values[12] = Int64GetDatum((int64) ctl->pool_bytes);
	values[13] = Int64GetDatum((int64) used * (int64) GS_SLICE_BYTES);
	for (i = 0; i < ctl->ndevices && i < GS_SERVICE_MAX_DEVICES; i++)
		per_dev[i] = Int64GetDatum((int64) ctl->device_sorts[i]);
	values[14] = PointerGetDatum(construct_array(per_dev, i, INT8OID, 8,
												 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	LWLockRelease(ctl->lock);
	(void) pinned;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
