/*-------------------------------------------------------------------------
 *
 * gpusort_keys.h
 *	  Normalized keys: sort column values -> order-preserving bytes.
 *
 * A key plan is built once per sort from the sort columns.  It fixes the
 * key width (one of the engine's widths, see gpusort_engine.h) and, column
 * by column, how each value is written.  Encoded keys compare as the engine
 * compares them (unsigned words, most significant first); the byte string
 * they represent is big-endian.
 *
 * A key is "exact" when equal keys imply equal sort columns, so the engine's
 * order is final.  Otherwise rows with equal keys must be tie-broken with
 * PostgreSQL's comparators over all sort columns.  Exactness has two parts:
 * a static one (every sort column is fully encoded: gs_keyplan_exact) and a
 * per-row one (gs_encode_key returns true when this row's encoding lost
 * information, e.g. a text value longer than its prefix).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_KEYS_H
#define GPUSORT_KEYS_H

#include "postgres.h"

#include "access/attnum.h"
#include "access/tupdesc.h"
#include "lib/stringinfo.h"

#include "gpusort_compat.h"

typedef struct GsKeyPlan GsKeyPlan;

/*
 * Planner side: can a sort column of type typid, ordered by sortop under
 * collation, be encoded (at least as a prefix)?  When not, *why (if given)
 * gets a short reason for EXPLAIN VERBOSE / debugging.
 */
extern bool gs_column_encodable(Oid typid, Oid sortop, Oid collation,
								const char **why);

/*
 * Executor side: build the key plan.  attnos are 1-based attribute numbers
 * in tupdesc; sortops/collations/nulls_first are as in a Sort plan node.
 * max_key_bytes caps the key width (4..32).  Allocates in
 * CurrentMemoryContext.  Returns NULL when the leading column cannot be
 * encoded.
 */
extern GsKeyPlan *gs_keyplan_create(int ncols, const AttrNumber *attnos,
									const Oid *sortops, const Oid *collations,
									const bool *nulls_first, TupleDesc tupdesc,
									int max_key_bytes);

/* key width in bytes: 4, 8, 16, 24 or 32 */
extern int	gs_keyplan_key_bytes(const GsKeyPlan *kp);

/* number of leading sort columns that contribute to the key */
extern int	gs_keyplan_ncols_encoded(const GsKeyPlan *kp);

/* true when every sort column is fully encoded (see file header) */
extern bool gs_keyplan_exact(const GsKeyPlan *kp);

/*
 * Encode one row.  values/isnull are the input tuple's deformed columns,
 * indexed by attno - 1 (as in a TupleTableSlot's tts_values/tts_isnull,
 * deformed at least up to the largest sort attno).  Writes exactly
 * key_bytes bytes at out (any alignment).  Returns true when this row's
 * encoding lost information, so that rows with a key equal to it need a
 * tie-break.  Must be cheap: it runs once per input row.
 */
extern bool gs_encode_key(GsKeyPlan *kp, const Datum *values,
						  const bool *isnull, void *out);

/*
 * Keys derived again from a stored row (keys_derive.c), so that a sorted
 * run on disk may leave them out.  body is a MinimalTuple's bytes from
 * MINIMAL_TUPLE_DATA_OFFSET on, at any alignment.  gs_keyplan_derives:
 * may any row's key be derived?  gs_key_derivable: may this row's?
 * gs_keyplan_derivable_natts: if not 0, a row's key may be derived
 * exactly when its tuple has at least that many attributes (an index tuple
 * always), so that callers need not ask gs_key_derivable per row.
 * gs_keyplan_derives_fast: fixed-width columns at known offsets, whose
 * key costs less derived than encoded from the deformed row;
 * gs_keyplan_derives_cheaply: those, or one text column in C order at a
 * known offset, encoded where its bytes lie once gs_key_derivable says yes.
 * gs_keyplan_derives_one: the key is one fixed-width column by value,
 * derived more cheaply than encoded.
 * gs_key_derive: write this row's key (key_bytes at out), as gs_encode_key
 * did, returning what it returned; gs_key_derive_data: the same from the
 * data of a tuple without NULLs.  The last three call nothing of
 * PostgreSQL: threads call them.
 */
extern bool gs_keyplan_derives(const GsKeyPlan *kp);
extern bool gs_keyplan_derives_fast(const GsKeyPlan *kp);
extern bool gs_keyplan_derives_cheaply(const GsKeyPlan *kp);
extern bool gs_keyplan_derives_one(const GsKeyPlan *kp);
extern int	gs_keyplan_derivable_natts(const GsKeyPlan *kp);
extern bool gs_key_derivable(const GsKeyPlan *kp, const char *body);
extern bool gs_key_derive(GsKeyPlan *kp, const char *body, void *out);
extern bool gs_key_derive_data(GsKeyPlan *kp, const char *data, void *out);

/* the same for a plan over an index's columns, from an index tuple */
extern bool gs_key_derivable_index(const GsKeyPlan *kp, const char *itup);
extern bool gs_key_derive_index(GsKeyPlan *kp, const char *itup, void *out);

/*
 * gs_keyplan_ties_by_bytes: is the plan one text column in C order, whose
 * values' order is their bytes' (then their lengths)?  gs_key_tie: that
 * order of two stored rows that gs_key_derivable said yes to (each as
 * gs_key_derive takes it), as the column's comparator gives it (DESC and
 * NULLs included), from their bytes; gs_key_tie_index: the same of two
 * index tuples.  Threads call them, to order rows whose keys are lossy.
 */
extern bool gs_keyplan_ties_by_bytes(const GsKeyPlan *kp);
extern int	gs_key_tie(const GsKeyPlan *kp, const char *a, size_t a_off,
					   const char *b, size_t b_off);
extern int	gs_key_tie_index(const GsKeyPlan *kp, const char *a, const char *b);

/*
 * One line for EXPLAIN VERBOSE, e.g. "int8 (8 B), text C prefix (23 B)";
 * appended to buf.
 */
extern void gs_keyplan_describe(const GsKeyPlan *kp, StringInfo buf);

#endif							/* GPUSORT_KEYS_H */
