/*-------------------------------------------------------------------------
 *
 * keys_sql.c
 *	  gpusort_normalized_key(): the key encoder, callable from SQL.
 *
 * Builds a one-column key plan exactly as the executor would (default
 * btree ordering of the value's type, the call's collation, a 32-byte cap)
 * and returns the key as big-endian bytes, so that bytea order is key
 * order.  For tests and debugging.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "gpusort_engine.h"
#include "gpusort_keys.h"
#include "keys_int.h"

PG_FUNCTION_INFO_V1(gpusort_normalized_key);

/* the plan for the last argument shape, kept in fn_extra */
typedef struct NkCache
{
	Oid			typid;
	Oid			collation;
	bool		descending;
	bool		nulls_first;
	GsKeyPlan  *kp;
} NkCache;

static GsKeyPlan *
nk_plan(FunctionCallInfo fcinfo, Oid typid, Oid collation, bool descending,
		bool nulls_first)
{
	NkCache    *c = (NkCache *) fcinfo->flinfo->fn_extra;
	MemoryContext old;
	TypeCacheEntry *tc;
	TupleDesc	tupdesc;
	AttrNumber	attno = 1;
	Oid			sortop;
	const char *why = NULL;

	if (c && c->typid == typid && c->collation == collation &&
		c->descending == descending && c->nulls_first == nulls_first)
		return c->kp;

	tc = lookup_type_cache(getBaseType(typid),
						   TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
	sortop = descending ? tc->gt_opr : tc->lt_opr;
	if (!OidIsValid(sortop))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("could not identify an ordering operator for type %s",
						format_type_be(typid))));
	if (!gs_column_encodable(typid, sortop, collation, &why))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gpusort cannot encode keys of type %s",
						format_type_be(typid)),
				 errdetail("The key encoder reports: %s.", why)));

	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	if (c == NULL)
		c = palloc0(sizeof(NkCache));
	tupdesc = CreateTemplateTupleDesc(1);
	TupleDescInitEntry(tupdesc, 1, "value", typid, -1, 0);
	c->kp = gs_keyplan_create(1, &attno, &sortop, &collation, &nulls_first,
							  tupdesc, GS_MAX_KEY_BYTES);
	MemoryContextSwitchTo(old);
	if (c->kp == NULL)
		elog(ERROR, "key plan for type %s could not be built",
			 format_type_be(typid));
	c->typid = typid;
	c->collation = collation;
	c->descending = descending;
	c->nulls_first = nulls_first;
	fcinfo->flinfo->fn_extra = c;
	return c->kp;
}

/*
 * gpusort_normalized_key(value anyelement, descending bool, nulls_first bool)
 * A NULL descending means false; a NULL nulls_first means PostgreSQL's
 * default for the direction (NULLS FIRST exactly when descending).
 */
Datum
gpusort_normalized_key(PG_FUNCTION_ARGS)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 0);
	bool		descending = PG_ARGISNULL(1) ? false : PG_GETARG_BOOL(1);
	bool		nulls_first = PG_ARGISNULL(2) ? descending : PG_GETARG_BOOL(2);
	GsKeyPlan  *kp;
	Datum		value;
	bool		isnull;
	uint64		words[GS_MAX_KEY_BYTES / 8];
	int			key_bytes;
	bytea	   *result;
	char	   *p;

	if (!OidIsValid(typid))
		ereport(ERROR,
				(errcode(ERRCODE_INDETERMINATE_DATATYPE),
				 errmsg("could not determine the type of the value")));

	kp = nk_plan(fcinfo, typid, PG_GET_COLLATION(), descending, nulls_first);
	isnull = PG_ARGISNULL(0);
	value = isnull ? (Datum) 0 : PG_GETARG_DATUM(0);
	(void) gs_encode_key(kp, &value, &isnull, words);

	key_bytes = gs_keyplan_key_bytes(kp);
	result = palloc(VARHDRSZ + key_bytes);
	SET_VARSIZE(result, VARHDRSZ + key_bytes);
	p = VARDATA(result);
	/* the engine's words as the big-endian bytes they came from (a swap) */
	gs_store_key((const uint8 *) words, key_bytes, p);
	PG_RETURN_BYTEA_P(result);
}
