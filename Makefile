# gpusort: PostgreSQL extension that runs sorts through a radix-sort engine
# (CPU always, CUDA when a toolkit is found at build time).

EXTENSION = gpusort
EXTVERSION = 0.3
MODULE_big = gpusort
DATA = gpusort--0.1.sql gpusort--0.2.sql gpusort--0.3.sql \
	gpusort--0.1--0.2.sql gpusort--0.2--0.3.sql
PGFILEDESC = "gpusort - sorts on the GPU"

OBJS = \
	src/gpusort.o \
	src/settings.o \
	src/engine.o \
	src/gpu_probe.o \
	src/engine_cpu.o \
	src/engine_cpu_async.o \
	src/engine_cpu_radix.o \
	src/keys.o \
	src/keys_encode.o \
	src/planner.o \
	src/shards.o \
	src/plan_walk.o \
	src/declined.o \
	src/stats.o \
	src/exec.o \
	src/sortstate.o \
	src/sort_util.o \
	src/sort_load.o \
	src/sort_chunks.o \
	src/sort_runs.o \
	src/sort_writer.o \
	src/sort_merge.o \
	src/sort_emit.o \
	src/sort_parallel.o \
	src/load_budget.o \
	src/load_finish.o \
	src/sort_heapread.o \
	src/spill.o \
	src/spill_stream.o \
	src/spill_stream_thread.o \
	src/loser_tree.o \
	src/shm_reap.o \
	src/keys_sql.o \
	src/service.o \
	src/service_client.o \
	src/lifecycle.o \
	$(patsubst $(srcdir)/%.c,%.o,$(wildcard $(srcdir)/src/index*.c))

# The regression suite, by family, in the order it runs: setup first (the
# helpers every file uses), then the keys of each type, sorts, parallel
# loads, the service, statistics, index builds and CLUSTER, the life cycle,
# partitioned tables.  A few files use what an earlier one of the list
# made (sort_workmem: sort_cursor's walker).
REGRESS = setup \
	keys_int keys_float keys_datetime keys_text keys_text_libc \
	keys_text_encodings keys_multicolumn keys_function \
	sort_limit sort_plans sort_rescan sort_cursor sort_workmem sort_settings \
	sort_cancel sort_errors sort_fuzz sort_final_merge sort_in_workers \
	load_parallel load_runs load_page_scan load_cancel \
	service stats stats_libc \
	index_build index_cancel index_cluster index_cluster_progress \
	index_cluster_scan index_external index_parallel index_rebuild index_scan \
	lifecycle partitions
REGRESS_OPTS = --load-extension=gpusort

PG_CPPFLAGS = -I$(srcdir)/src -DGPUSORT_VERSION=\"$(EXTVERSION)\"
# the CPU engine sorts chunks on a worker thread of its own
PG_CFLAGS = -pthread
SHLIB_LINK = -ldl -licui18n -licuuc -lm -pthread

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every sql/ file must be in the list (and nothing else)
ifneq ($(sort $(REGRESS)),$(sort $(patsubst $(srcdir)/sql/%.sql,%,$(wildcard $(srcdir)/sql/*.sql))))
$(error REGRESS and sql/*.sql differ: list each test file once, in the order it runs)
endif

# PGXS tracks no header dependencies: an object is rebuilt when any of
# src/*.h changes (a struct that grew in one object but not another crashed)
$(filter src/%.o,$(OBJS)): $(wildcard $(srcdir)/src/*.h)

# The CUDA engine (cuda/) is built when nvcc is on PATH or under
# /usr/local/cuda, unless the caller says WITH_CUDA=no.
-include $(srcdir)/cuda/cuda.mk

# A build outside the source tree (VPATH, as pg_buildext does for each
# PostgreSQL version) puts the objects in src/ under the build directory.
ifneq ($(abspath $(srcdir)),$(CURDIR))
$(OBJS) $(OBJS:.o=.bc): | src/.dir
src/.dir:
	$(MKDIR_P) src
	touch $@
endif

# The whole suite again with every sort sent through the gpusort service
# (its "fake" device sorts with the CPU engine inside the service process),
# so the service's data path is checked on machines without a GPU too.
installcheck-service:
	PGOPTIONS="$(PGOPTIONS) -c gpusort.service_fault=fake -c gpusort.engine=gpu" \
		$(MAKE) installcheck
.PHONY: installcheck-service
