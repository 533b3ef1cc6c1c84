/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  gpusort's settings: the variables every file reads, their limits, the
 *	  checks of their values, and their definitions (gs_settings_define,
 *	  called by _PG_init).
 *
 * A bottom-layer file: it calls PostgreSQL only, so that any file may read
 * a setting without reaching back up to the module's entry point
 * (gpusort.c).  The variables are declared beside the enums of their
 * values (gpusort_int.h, gpusort_exec.h, gpusort_service.h).
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "utils/guc.h"

#include "gpusort_int.h"
#include "settings.h"

/* GUC limits, in one place */
#define GS_MIN_ROWS_DEFAULT		10000
#define GS_GPU_MIN_ROWS_DEFAULT	200000
#define GS_TOPN_LIMIT_DEFAULT	10000
#define GS_MAX_KEY_BYTES_DEFAULT 32
#define GS_CPU_THREADS_LEAST_DEFAULT 4

bool		gpusort_enabled = true;
int			gpusort_engine_choice = GS_ENGINE_AUTO;
int			gpusort_min_rows = GS_MIN_ROWS_DEFAULT;
int			gpusort_gpu_min_rows = GS_GPU_MIN_ROWS_DEFAULT;
int			gpusort_max_key_bytes = GS_MAX_KEY_BYTES_DEFAULT;
int			gpusort_topn_limit = GS_TOPN_LIMIT_DEFAULT;
int			gpusort_gpu_memory_limit_kb = 0;
int			gpusort_cpu_threads = GS_CPU_THREADS_LEAST_DEFAULT;
bool		gpusort_parallel_load = true;
char	   *gpusort_cuda_library = NULL;
int			gpusort_service_memory_mb = GS_SERVICE_MEMORY_DEFAULT_MB;

const struct config_enum_entry gs_engine_options[] = {
	{"auto", GS_ENGINE_AUTO, false},
	{"gpu", GS_ENGINE_GPU, false},
	{"cpu", GS_ENGINE_CPU, false},
	{NULL, 0, false}
};

static bool
check_max_key_bytes(int *newval, void **extra, GucSource source)
{
	if (!GS_KEY_BYTES_VALID(*newval))
	{
		GUC_check_errdetail("Valid key widths are 4, 8, 16, 24 and 32 bytes.");
		return false;
	}
	return true;
}

/*
 * gpusort.cuda_library: a file that is there, readable, and an ELF shared
 * object.  The default may be missing (a build without the CUDA engine).
 * The library is not opened here: this runs in the postmaster too, which
 * must never initialise CUDA (its runtime is not fork-safe), and opening
 * it runs the CUDA runtime's initialisers.  A library that is there but
 * cannot be opened (a missing dependency, another engine ABI) is reported
 * by the gpusort service when it starts.
 */
static bool
check_cuda_library(char **newval, void **extra, GucSource source)
{
	const char *hint = "Set it to the path of the " GS_CUDA_LIBRARY_NAME DLSUFFIX
		" that gpusort's \"make install\" builds, or reset it.";
	char	   *path;
	struct stat st;
	char		magic[4];
	int			fd;
	bool		ok = false;

	if (*newval == NULL || strcmp(*newval, GS_CUDA_LIBRARY_DEFAULT) == 0)
		return true;
	if ((*newval)[0] == '\0')
	{
		GUC_check_errdetail("The file name is empty.");
		GUC_check_errhint("%s", hint);
		return false;
	}
	/* "$libdir" needs the package library directory, set early in main() */
	if (pkglib_path[0] == '\0' && (*newval)[0] != '/')
		return true;

	path = gs_cuda_library_path_of(*newval);
	if (stat(path, &st) != 0)
		GUC_check_errdetail("Could not find file \"%s\": %m.", path);
	else if (!S_ISREG(st.st_mode))
		GUC_check_errdetail("\"%s\" is not a regular file.", path);
	else if ((fd = open(path, O_RDONLY | PG_BINARY, 0)) < 0)
		GUC_check_errdetail("Could not open file \"%s\": %m.", path);
	else
	{
		ok = read(fd, magic, sizeof(magic)) == sizeof(magic) &&
			memcmp(magic, "\177ELF", 4) == 0;
		close(fd);
		if (!ok)
			GUC_check_errdetail("\"%s\" is not a shared library.", path);
	}
	if (!ok)
		GUC_check_errhint("%s", hint);
	pfree(path);
	return ok;
}

/* ---- fault injection, for the tests only ---- */

/*
 * Every fault setting is defined here and only here.  They are for
 * gpusort's own tests, so users never see them: set by a superuser only,
 * read only by one (or a member of pg_read_all_settings), left out of SHOW
 * ALL and pg_settings, and never written into a sample configuration.
 */
#define GS_GUC_TEST_ONLY		(GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_SUPERUSER_ONLY)

int			gpusort_sort_fault = GS_SORT_FAULT_NONE;
int			gpusort_service_fault = GS_FAULT_NONE;
int			gs_index_fault = GS_INDEX_FAULT_NONE;

/*
 * gpusort.cpu_threads' default: half the cores this process may run on, at
 * least GS_CPU_THREADS_LEAST_DEFAULT.  Half, because a sort's threads work
 * beside the backend, its loading workers and the other sessions; on a
 * 16-core machine the final merge of a large sort ran fastest with 8.
 */
static int
gs_cpu_threads_default(void)
{
	int			ncores = 0;
#ifdef CPU_COUNT
	cpu_set_t	set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		ncores = CPU_COUNT(&set);
#endif
	if (ncores <= 0)
		ncores = (int) sysconf(_SC_NPROCESSORS_ONLN);
	return Min(Max(ncores / 2, GS_CPU_THREADS_LEAST_DEFAULT),
			   GS_CPU_THREADS_MAX);
}

static const struct config_enum_entry sort_fault_options[] = {
	{"none", GS_SORT_FAULT_NONE, false},
	{"cancel_in_copy", GS_SORT_FAULT_CANCEL_IN_COPY, false},
	{"load_no_shm", GS_SORT_FAULT_LOAD_NO_SHM, false},
	{"load_small_budget", GS_SORT_FAULT_LOAD_SMALL_BUDGET, false},
	{"slow_cascade", GS_SORT_FAULT_SLOW_CASCADE, false},
	{NULL, 0, false}
};

static const struct config_enum_entry service_fault_options[] = {
	{"none", GS_FAULT_NONE, false},
	{"fake", GS_FAULT_FAKE, false},
	{"device_error", GS_FAULT_DEVICE_ERROR, false},
	{"crash", GS_FAULT_CRASH, false},
	{"delay", GS_FAULT_DELAY, false},
	{NULL, 0, false}
};

static const struct config_enum_entry index_fault_options[] = {
	{"none", GS_INDEX_FAULT_NONE, false},
	{"cancel_in_merge", GS_INDEX_FAULT_CANCEL_IN_MERGE, false},
	{"cancel_in_write", GS_INDEX_FAULT_CANCEL_IN_WRITE, false},
	{"cancel_in_run", GS_INDEX_FAULT_CANCEL_IN_RUN, false},
	{"error_in_writer", GS_INDEX_FAULT_ERROR_IN_WRITER, false},
	{"hold_in_writer", GS_INDEX_FAULT_HOLD_IN_WRITER, false},
	{NULL, 0, false}
};

static void
gs_define_fault_settings(void)
{
	DefineCustomEnumVariable("gpusort.sort_fault",
							 "For testing only: injects a fault into gpusort's sorts.",
							 "\"cancel_in_copy\" cancels while a large parallel in-memory sort "
							 "waits for its copy of the rows into sorted order to end, the copy's last "
							 "thread held until the cancel stops it; \"load_no_shm\" makes a parallel "
							 "load find no room in /dev/shm; \"load_small_budget\" spends a parallel "
							 "load's shared memory budget at its first block; \"slow_cascade\" has the "
							 "threads of a final merge pause before a stream's last block and after the "
							 "merging thread finds a stream with no block ready.",
							 &gpusort_sort_fault,
							 GS_SORT_FAULT_NONE,
							 sort_fault_options,
							 PGC_SUSET,
							 GS_GUC_TEST_ONLY,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("gpusort.service_fault",
							 "For testing only: injects a fault into this session's requests to the gpusort service.",
							 "\"fake\" makes the service sort them with its CPU engine as if it had a "
							 "device, \"device_error\" fails them with a device error, \"crash\" makes the "
							 "service exit while it holds one, \"delay\" holds them until canceled (at most 30 s), "
							 "then sorts them as \"fake\" does.",
							 &gpusort_service_fault,
							 GS_FAULT_NONE,
							 service_fault_options,
							 PGC_SUSET,
							 GS_GUC_TEST_ONLY,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("gpusort.index_fault",
							 "For testing only: injects a query cancel, an error or a pause into gpusort's index builds and CLUSTER sorts.",
							 "\"cancel_in_merge\" cancels once a merge of sorted runs on disk starts, "
							 "\"cancel_in_write\" once the btree page writer finishes a page, "
							 "\"cancel_in_run\" once a run is being sorted and written in the background; "
							 "\"error_in_writer\" makes a parallel worker that logs and writes a build's pages fail, "
							 "\"hold_in_writer\" makes the first such worker sleep at its first page until stopped (at most 30 s).",
							 &gs_index_fault,
							 GS_INDEX_FAULT_NONE,
							 index_fault_options,
							 PGC_SUSET,
							 GS_GUC_TEST_ONLY,
							 NULL, NULL, NULL);
}

/*
 * The value of gpusort.cuda_library (or another name for the library) as
 * a file path: "$libdir/x" and a bare "x" mean pkglibdir/x.so.
 */
char *
gs_cuda_library_path_of(const char *name)
{
	char		path[MAXPGPATH];

	if (strncmp(name, "$libdir/", 8) == 0)
		snprintf(path, sizeof(path), "%s/%s%s", pkglib_path, name + 8,
				 strchr(name + 8, '.') ? "" : DLSUFFIX);
	else if (first_dir_separator(name) == NULL)
		snprintf(path, sizeof(path), "%s/%s%s", pkglib_path, name,
				 strchr(name, '.') ? "" : DLSUFFIX);
	else
		strlcpy(path, name, sizeof(path));
	return pstrdup(path);
}

/* Called by _PG_init: every setting, the fault settings last. */
void
gs_settings_define(void)
{
	DefineCustomBoolVariable("gpusort.enabled",
							 "Enables sorting through gpusort instead of PostgreSQL's own Sort.",
							 "When off, plans keep PostgreSQL's Sort nodes.",
							 &gpusort_enabled,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("gpusort.engine",
							 "Selects the engine that sorts the keys.",
							 "\"auto\" uses the GPU when one is usable and the sort has at least "
							 "gpusort.gpu_min_rows rows, \"gpu\" uses it whenever it is usable, "
							 "\"cpu\" never uses it.",
							 &gpusort_engine_choice,
							 GS_ENGINE_AUTO,
							 gs_engine_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gpusort.min_rows",
							"Sorts estimated to have fewer rows than this keep PostgreSQL's own Sort.",
							NULL,
							&gpusort_min_rows,
							GS_MIN_ROWS_DEFAULT,
							0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpusort.gpu_min_rows",
							"Sorts with fewer rows than this use the CPU engine when gpusort.engine is auto.",
							"Below this size moving keys to the GPU costs more than it saves.",
							&gpusort_gpu_min_rows,
							GS_GPU_MIN_ROWS_DEFAULT,
							0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpusort.max_key_bytes",
							"Sets the widest normalized key gpusort builds, in bytes.",
							"Wider keys hold longer text prefixes and more sort columns, so fewer "
							"ties need PostgreSQL's comparators; narrower keys sort faster.",
							&gpusort_max_key_bytes,
							GS_MAX_KEY_BYTES_DEFAULT,
							4, GS_MAX_KEY_BYTES,
							PGC_USERSET,
							GUC_UNIT_BYTE,
							check_max_key_bytes, NULL, NULL);

	DefineCustomIntVariable("gpusort.topn_limit",
							"Keeps PostgreSQL's top-N sort for ORDER BY ... LIMIT with a constant limit up to this many rows.",
							"A bounded heap sort of a small LIMIT is cheaper than sorting everything.",
							&gpusort_topn_limit,
							GS_TOPN_LIMIT_DEFAULT,
							0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpusort.gpu_memory_limit",
							"Sets the most GPU memory one sort uses for its keys.",
							"Larger sorts are cut into chunks of this size, each sorted on the "
							"GPU and merged on the CPU. 0 means half the device's free memory "
							"(and no limit for the CPU engine). Superuser-only: the devices "
							"are shared by every session.",
							&gpusort_gpu_memory_limit_kb,
							0,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpusort.cpu_threads",
							"Sets how many threads one sort may use for its CPU-side passes over the rows.",
							"Gathering the rows of a large sort into sorted order, writing its runs "
							"to disk and merging them are spread over this many threads. "
							"1 keeps every pass in the backend's own thread. The default is half "
							"the machine's cores, at least 4. Superuser-only: "
							"work_mem does not bound the threads a query starts.",
							&gpusort_cpu_threads,
							gs_cpu_threads_default(),
							1, GS_CPU_THREADS_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	/* parallel load (sort_parallel.c) */
	DefineCustomBoolVariable("gpusort.parallel_load",
							 "Lets parallel workers read, copy and encode the input of a large sort.",
							 "The planner gives a sort of a plain table scan loading workers when "
							 "PostgreSQL's parallel settings allow workers for that scan, and turns a "
							 "Gather Merge over sorts in workers into one sort loaded by as many workers.",
							 &gpusort_parallel_load,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);


	DefineCustomStringVariable("gpusort.cuda_library",
							   "Sets the file name of the CUDA engine library that the gpusort service opens.",
							   "A name without a directory is looked up in the PostgreSQL package library "
							   "directory. The service opens the library when it starts: after a change, "
							   "at the next server start or service restart.",
							   &gpusort_cuda_library,
							   GS_CUDA_LIBRARY_DEFAULT,
							   PGC_SIGHUP,
							   0,
							   check_cuda_library, NULL, NULL);

	/*
	 * The gpusort service (service.c).  Its pool is sized at server start,
	 * so the setting exists only when gpusort is preloaded: PostgreSQL
	 * refuses (FATAL) a server-start setting defined by a library loaded
	 * later, by CREATE EXTENSION or LOAD, and such a session has no service
	 * anyway.
	 */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("gpusort.service_memory",
								"Sets the shared memory the gpusort service pins for keys.",
								"Backends encode the keys of GPU sorts straight into this pool, cut "
								"into 1MB slices; sorts that find no free slice run on the CPU engine. "
								"0 turns the service's data path off. A server that finds no NVIDIA "
								"GPU at start (no driver, or no CUDA engine library) reserves at most "
								CppAsString2(GS_SERVICE_NO_GPU_POOL_MB) "MB.",
								&gpusort_service_memory_mb,
								GS_SERVICE_MEMORY_DEFAULT_MB,
								0, INT_MAX / 2,
								PGC_POSTMASTER,
								GUC_UNIT_MB,
								NULL, NULL, NULL);

	gs_define_fault_settings();
}
