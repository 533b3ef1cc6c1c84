/*-------------------------------------------------------------------------
 *
 * gpusort_compat.h
 *	  Every difference between the PostgreSQL versions gpusort supports
 *	  (15, 17 and 18), in one place.
 *
 * The rest of the code is written against PostgreSQL 15's API and spells
 * the few calls that changed through the names below; nothing outside this
 * file tests PG_VERSION_NUM.  Each entry says what changed and in which
 * release, so that a new call to a changed API finds its wrapper here (or
 * gets one added here, next to its kind).
 *
 * Every PostgreSQL-side header of gpusort (gpusort_int.h, gpusort_keys.h,
 * index_int.h, ...) includes it, so a .c file gets it through them.  The
 * macros name functions and fields that the calling file's own PostgreSQL
 * headers declare; the headers listed here are the ones a version moved.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUSORT_COMPAT_H
#define GPUSORT_COMPAT_H

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "gpusort supports PostgreSQL 15 to 18"
#endif

/* ---- headers that were split or moved ---- */

/*
 * 16: the varlena macros (VARDATA, SET_VARSIZE, ...) moved from postgres.h
 * to varatt.h, and PG_TEMP_FILE_PREFIX from storage/fd.h to
 * common/file_utils.h.
 */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#include "common/file_utils.h"
#endif

/*
 * 18: ExplainState moved to commands/explain_state.h and the
 * ExplainProperty*() functions to commands/explain_format.h;
 * commands/explain.h includes neither any more.
 */
#include "commands/explain.h"
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#endif

/* ---- compiler attributes ---- */

/*
 * 18: pg_attribute_noreturn(), written after a declaration, was replaced by
 * pg_noreturn, written before it.  The GCC attribute works in the old place
 * on every version.
 */
#ifndef pg_attribute_noreturn
#define pg_attribute_noreturn() __attribute__((noreturn))
#endif

/* ---- catalog and permissions ---- */

/*
 * 16: pg_class_ownercheck() and its per-catalog siblings became
 * object_ownercheck(classid, objectid, roleid).
 */
#if PG_VERSION_NUM >= 160000
#define gs_class_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define gs_class_ownercheck(relid, roleid) \
	pg_class_ownercheck((relid), (roleid))
#endif

/* ---- collations ---- */

/*
 * 18: lc_collate_is_c() is gone; the collation's pg_locale_t says whether it
 * sorts as C (collate_is_c, 17 and later).
 */
#if PG_VERSION_NUM >= 180000
#define gs_lc_collate_is_c(collid) \
	(pg_newlocale_from_collation(collid)->collate_is_c)
#else
#define gs_lc_collate_is_c(collid)	lc_collate_is_c(collid)
#endif

/* ---- storage ---- */

/*
 * 16: RelFileNode became RelFileLocator, and Relation's rd_node became
 * rd_locator; log_newpage() and the smgr take the new type.  This is the
 * relation's physical address, as log_newpage() wants it.
 */
#if PG_VERSION_NUM >= 160000
#define GS_REL_PHYSICAL(rel)	(&(rel)->rd_locator)
#else
#define GS_REL_PHYSICAL(rel)	(&(rel)->rd_node)
#endif

/* that address as a type, to pass it to another process */
#if PG_VERSION_NUM >= 160000
#include "storage/relfilelocator.h"
typedef RelFileLocator GsRelFile;
#else
#include "storage/relfilenode.h"
typedef RelFileNode GsRelFile;
#endif

/*
 * 17: BackendId became ProcNumber.  A relation's smgr handle in another
 * process than the one that created it (not a temporary relation).
 */
#if PG_VERSION_NUM >= 170000
#define GS_SMGR_OPEN_SHARED(rfile)	smgropen((rfile), INVALID_PROC_NUMBER)
#else
#define GS_SMGR_OPEN_SHARED(rfile)	smgropen((rfile), InvalidBackendId)
#endif

/* ---- btree ---- */

/*
 * 18: BTMaxItemSize no longer takes the page (the limit never depended on
 * it).
 */
#if PG_VERSION_NUM >= 180000
#define GS_BT_MAX_ITEM_SIZE(page)	BTMaxItemSize
#else
#define GS_BT_MAX_ITEM_SIZE(page)	BTMaxItemSize(page)
#endif

/* ---- sort support ---- */

/*
 * 18: PrepareSortSupportFromIndexRel() takes "reverse" (a DESC column)
 * instead of the btree strategy number.
 */
#if PG_VERSION_NUM >= 180000
#define gs_PrepareSortSupportFromIndexRel(rel, reverse, ssup) \
	PrepareSortSupportFromIndexRel((rel), (reverse), (ssup))
#else
#define gs_PrepareSortSupportFromIndexRel(rel, reverse, ssup) \
	PrepareSortSupportFromIndexRel((rel), \
								   (reverse) ? BTGreaterStrategyNumber : \
								   BTLessStrategyNumber, (ssup))
#endif

/* ---- messages gpusort shares with PostgreSQL ---- */

/*
 * 18: messages quote the names of configuration parameters.  gpusort's
 * temporary files raise PostgreSQL's own error, worded as that version
 * words it.
 */
#if PG_VERSION_NUM >= 180000
#define GS_MSG_TEMP_FILE_LIMIT \
	"temporary file size exceeds \"temp_file_limit\" (%dkB)"
#else
#define GS_MSG_TEMP_FILE_LIMIT \
	"temporary file size exceeds temp_file_limit (%dkB)"
#endif

/* ---- processes and latches ---- */

/*
 * 17: PGPROC.pgprocno is gone; a process's slot in ProcGlobal->allProcs is
 * MyProcNumber.  (Callers include storage/proc.h.)
 */
#if PG_VERSION_NUM >= 170000
#define gs_my_procno()	((int) MyProcNumber)
#else
#define gs_my_procno()	(MyProc->pgprocno)
#endif

/*
 * 17: CreateWaitEventSet() takes a ResourceOwner instead of a memory
 * context; a NULL owner puts the set in TopMemoryContext, as 15 does when
 * given that context.  For a set that lives as long as the process.
 */
#if PG_VERSION_NUM >= 170000
#define gs_CreateWaitEventSet(nevents)	CreateWaitEventSet(NULL, (nevents))
#else
#define gs_CreateWaitEventSet(nevents) \
	CreateWaitEventSet(TopMemoryContext, (nevents))
#endif

/* ---- wait events ---- */

/*
 * 17: wait events are generated from wait_event_names.txt, and the message
 * queue's took the names of their descriptions.
 */
#if PG_VERSION_NUM >= 170000
#define GS_WAIT_EVENT_MQ_RECEIVE	WAIT_EVENT_MESSAGE_QUEUE_RECEIVE
#else
#define GS_WAIT_EVENT_MQ_RECEIVE	WAIT_EVENT_MQ_RECEIVE
#endif

/*
 * 17: extensions name their own wait events (WaitEventExtensionNew(), shown
 * in pg_stat_activity with type Extension); before, all of them show as
 * "Extension".
 */
#if PG_VERSION_NUM >= 170000
#define gs_WaitEventExtensionNew(name)	WaitEventExtensionNew(name)
#else
#define gs_WaitEventExtensionNew(name)	((void) (name), PG_WAIT_EXTENSION)
#endif

/* ---- planner ---- */

/*
 * 18: a PathKey's direction is a CompareType (pk_cmptype: COMPARE_LT or
 * COMPARE_GT), no longer a btree strategy number (pk_strategy).
 */
#if PG_VERSION_NUM >= 180000
#define gs_pathkey_desc(pk)		((pk)->pk_cmptype == COMPARE_GT)
#else
#define gs_pathkey_desc(pk)		((pk)->pk_strategy == BTGreaterStrategyNumber)
#endif

/* ---- EXPLAIN ---- */

/*
 * 17: standard_ExplainOneQuery() is exported, for an ExplainOneQuery_hook
 * to call.  Before, a hook plans the query and calls ExplainOnePlan()
 * itself: declined.c defines gs_standard_ExplainOneQuery() then.
 */
#if PG_VERSION_NUM >= 170000
#define gs_standard_ExplainOneQuery	standard_ExplainOneQuery
#else
#define GS_NEED_STANDARD_EXPLAIN 1
#endif

#endif							/* GPUSORT_COMPAT_H */
