/*-------------------------------------------------------------------------
 *
 * sort_writer.c
 *	  The run writer: a new run of the sort's temporary file, and rows
 *	  written to it in the run record format (sortstate_int.h) through a
 *	  buffer.
 *
 * A primitive of the sort state: the writing of batches (sort_runs.c) and
 * the merge passes (sort_merge.c) call it; it calls the temporary files
 * (spill.c) only.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "gpusort_spill.h"
#include "sortstate_int.h"

/* a new, empty run; its caller places it in the sort's temporary file */
GsRun *
gs_new_run(GsSortState *s)
{
	GsRun	   *run;

	if (s->file == NULL)
		s->file = gs_temp_create(s->cxt);
	if (s->nruns == s->runs_cap)
	{
		s->runs_cap = Max(16, s->runs_cap * 2);
		s->runs = s->runs ?
			repalloc(s->runs, s->runs_cap * sizeof(GsRun)) :
			MemoryContextAlloc(s->cxt, s->runs_cap * sizeof(GsRun));
	}
	run = &s->runs[s->nruns++];
	run->offset = 0;
	run->bytes = 0;
	run->nrows = 0;
	run->nkeyed = 0;
	return run;
}

void
gs_writer_emit(GsSortState *s, GsWriter *w, const char *data, size_t len)
{
	int64		off;
	int			err;

	if (len == 0)
		return;
	/* the run's place was taken whole: other processes may share the file */
	Assert(w->run->bytes + (int64) len <= w->reserved);
	gs_temp_charge(s->file, len);
	off = w->run->offset + w->run->bytes;
	err = gs_temp_pwrite(s->file, data, len, off);
	if (err)
		gs_temp_error(s->file, err, true);
	w->run->bytes += len;
}

void
gs_writer_put(GsSortState *s, GsWriter *w, const char *key, bool lossy,
			  MinimalTuple tup)
{
	const char *bytes;
	size_t		body;
	uint32		word = gs_tape_word(&s->tape, tup, lossy, &bytes, &body);
	size_t		head = gs_tape_head(&s->tape, word);
	size_t		len = head + body;

	if (w->used + len > w->size)
	{
		gs_writer_emit(s, w, w->buf, w->used);
		w->used = 0;
	}
	gs_tape_put_head(&s->tape, w->buf + w->used, word, key);
	if (len <= w->size)
	{
		memcpy(w->buf + w->used + head, bytes, body);
		w->used += len;
	}
	else
	{
		/* larger than the buffer: its header, then the tuple from place */
		gs_writer_emit(s, w, w->buf, head);
		gs_writer_emit(s, w, bytes, body);
	}
	w->run->nrows++;
	if (!(word & TAPE_NOKEY_BIT))
		w->run->nkeyed++;
	if ((w->run->nrows % INTERRUPT_INTERVAL) == 0)
		CHECK_FOR_INTERRUPTS();
}
