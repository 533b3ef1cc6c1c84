/*-------------------------------------------------------------------------
 *
 * lifecycle.c
 *	  When gpusort takes sorts at all: only in a server that preloads it,
 *	  and only in a database where the extension exists.
 *
 * The planner and utility hooks are installed when the library is loaded
 * through shared_preload_libraries, and never by a later load (LOAD, a call
 * of one of the extension's functions, CREATE EXTENSION): a session does
 * not start replacing sorts half-way because some function loaded the
 * library, and such a server has no gpusort service anyway.  CREATE
 * EXTENSION in a server that does not preload gpusort warns.
 *
 * Whether the extension exists in this backend's database is cached: one
 * look-up in pg_extension, again after an invalidation that may mean the
 * extension was created or dropped.  pg_extension has no system cache of
 * its own, but the extension owns functions, and creating or dropping one
 * sends a pg_proc cache invalidation to every backend.  While the
 * extension exists, the cache listens for one of its functions (by the
 * hash value of its OID); while it does not, for any function, since any
 * function created may be the first of a new gpusort.  When the extension
 * may have been dropped, and when a look-up finds it created, cached plans
 * are invalidated too, so that a prepared statement is planned again with
 * or without GpuSorts (a session that only executes prepared statements
 * plans nothing: it notices a new extension at its next planning).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/plancache.h"
#include "utils/syscache.h"

#include "gpusort_int.h"

bool		gs_preloaded = false;

typedef enum GsExtState
{
	GS_EXT_UNKNOWN = 0,			/* look it up at the next use */
	GS_EXT_LOOKING,				/* being looked up */
	GS_EXT_ABSENT,
	GS_EXT_PRESENT
} GsExtState;

static GsExtState ext_state = GS_EXT_UNKNOWN;
/* the answer of the last look-up */
static GsExtState ext_last = GS_EXT_UNKNOWN;
/* the pg_proc cache hash value of one of the extension's functions; 0: none */
static uint32 ext_func_hash = 0;
static bool ext_callback_registered = false;

/*
 * In _PG_init of a load that is not the preload: CREATE EXTENSION (or
 * ALTER EXTENSION UPDATE) loads the library when it creates the
 * extension's C functions, so this is where such a server learns that it
 * is missing something.
 */
void
gs_lifecycle_init(void)
{
	gs_preloaded = process_shared_preload_libraries_in_progress;
	if (!gs_preloaded && creating_extension)
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gpusort is not in shared_preload_libraries"),
				 errdetail("Until the server loads gpusort at start, sorts, index builds and CLUSTER stay PostgreSQL's."),
				 errhint("Add gpusort to shared_preload_libraries and restart the server.")));
}

static void
gs_ext_proc_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (ext_state == GS_EXT_PRESENT && hashvalue != 0 &&
		ext_func_hash != 0 && hashvalue != ext_func_hash)
		return;
	if (ext_state == GS_EXT_PRESENT)
	{
		/*
		 * Perhaps dropped: plans made with a GpuSort are made again (the
		 * look-up tells, at the next use, whether it really went).
		 */
		ResetPlanCache();
	}
	ext_state = GS_EXT_UNKNOWN;
}

/* one function that belongs to extension extoid, or InvalidOid */
static Oid
gs_extension_function(Oid extoid)
{
	Relation	rel;
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			fn = InvalidOid;

	rel = table_open(DependRelationId, AccessShareLock);
	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(ExtensionRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, DependReferenceIndexId, true, NULL, 2, key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);

		if (dep->classid == ProcedureRelationId &&
			dep->deptype == DEPENDENCY_EXTENSION)
		{
			fn = dep->objid;
			break;
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return fn;
}

/*
 * Does the extension exist in this database?  Outside a transaction (no
 * catalog access) the last answer stands, or "no" if there is none.
 */
static bool
gs_extension_present(void)
{
	Oid			extoid;
	Oid			fn;

	/* (a look-up that an error cut short left GS_EXT_LOOKING: look again) */
	if (ext_state == GS_EXT_PRESENT || ext_state == GS_EXT_ABSENT)
		return ext_state == GS_EXT_PRESENT;
	if (!IsTransactionState())
		return false;
	if (!ext_callback_registered)
	{
		CacheRegisterSyscacheCallback(PROCOID, gs_ext_proc_callback, (Datum) 0);
		ext_callback_registered = true;
	}

	/*
	 * An invalidation that comes while looking (the catalogs' locks accept
	 * them) leaves the state unknown: the next use looks again.
	 */
	ext_state = GS_EXT_LOOKING;
	extoid = get_extension_oid("gpusort", true);
	fn = OidIsValid(extoid) ? gs_extension_function(extoid) : InvalidOid;
	ext_func_hash = OidIsValid(fn) ?
		GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(fn)) : 0;
	if (ext_state == GS_EXT_LOOKING)
		ext_state = OidIsValid(extoid) ? GS_EXT_PRESENT : GS_EXT_ABSENT;

	/*
	 * Created since the last look: plans made without it (prepared
	 * statements) are made again, now with GpuSorts.
	 */
	if (OidIsValid(extoid) && ext_last == GS_EXT_ABSENT)
		ResetPlanCache();
	ext_last = OidIsValid(extoid) ? GS_EXT_PRESENT : GS_EXT_ABSENT;
	return OidIsValid(extoid);
}

/*
 * May gpusort take this backend's sorts, index builds and CLUSTERs now?
 * gpusort.enabled, preloaded, and the extension created in this database.
 */
bool
gs_active(void)
{
	return gpusort_enabled && gs_preloaded && gs_extension_present();
}
