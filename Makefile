# gpusort: PostgreSQL extension that runs sorts through a radix-sort engine
# (CPU always, CUDA when a toolkit is found at build time).

EXTENSION = gpusort
EXTVERSION = 0.3
MODULE_big = gpusort
DATA = gpusort--0.1.sql gpusort--0.2.sql gpusort--0.3.sql \
	gpusort--0.1--0.2.sql gpusort--0.2--0.3.sql
PGFILEDESC = "gpusort - sorts on the GPU"

OBJS = \
	src/exec/gpusort.o \
	src/common/settings.o \
	src/engine/engine.o \
	src/service/gpu_probe.o \
	src/engine_cpu/engine_cpu.o \
	src/engine_cpu/engine_cpu_async.o \
	src/engine_cpu/engine_cpu_radix.o \
	src/keys/keys.o \
	src/keys/keys_encode.o \
	src/keys/keys_derive.o \
	src/exec/planner.o \
	src/exec/shards.o \
	src/exec/plan_walk.o \
	src/exec/declined.o \
	src/common/stats.o \
	src/exec/exec.o \
	src/sort/sortstate.o \
	src/sort/sort_util.o \
	src/sort/sort_load.o \
	src/sort/sort_chunks.o \
	src/sort/sort_runs.o \
	src/sort/sort_writer.o \
	src/sort/sort_merge.o \
	src/sort/sort_emit.o \
	src/sort/sort_parallel.o \
	src/sort/load_budget.o \
	src/sort/load_finish.o \
	src/sort/load_blocks.o \
	src/sort/sort_heapread.o \
	src/runs/spill.o \
	src/runs/spill_stream.o \
	src/runs/spill_stream_thread.o \
	src/runs/loser_tree.o \
	src/runs/shm_reap.o \
	src/keys/keys_sql.o \
	src/service/service.o \
	src/service/service_client.o \
	src/common/lifecycle.o \
	$(patsubst $(srcdir)/%.c,%.o,$(wildcard $(srcdir)/src/nbtree/index*.c))

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

# src/ is in folders by subsystem (src/<folder>/README.md; docs/architecture.md);
# every folder is on the include path so "x.h" needs no folder prefix
GS_SRC_DIRS = include common exec nbtree sort runs keys engine service engine_cpu
PG_CPPFLAGS = $(patsubst %,-I$(srcdir)/src/%,$(GS_SRC_DIRS)) -DGPUSORT_VERSION=\"$(EXTVERSION)\"
# the CPU engine sorts chunks on a worker thread of its own
PG_CFLAGS = -pthread
SHLIB_LINK = -ldl -licui18n -licuuc -lm -pthread
# Calls between our own files are bound inside the library: no other object
# replaces gpusort's functions, so the per-row calls of the load and the
# merge (index tuple in, key encoded, row taken) need not go through the
# PLT, and the compiler may inline a global function within its file.
PG_CFLAGS += -fno-semantic-interposition
SHLIB_LINK += -Wl,-Bsymbolic-functions

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every sql/ file must be in the list (and nothing else)
ifneq ($(sort $(REGRESS)),$(sort $(patsubst $(srcdir)/sql/%.sql,%,$(wildcard $(srcdir)/sql/*.sql))))
$(error REGRESS and sql/*.sql differ: list each test file once, in the order it runs)
endif

# PGXS tracks no header dependencies: an object is rebuilt when any of
# src/*/*.h changes (a struct that grew in one object but not another crashed)
$(filter src/%.o,$(OBJS)): $(wildcard $(srcdir)/src/*/*.h)

# The CUDA engine (cuda/) is built when nvcc is on PATH or under
# /usr/local/cuda, unless the caller says WITH_CUDA=no.
-include $(srcdir)/cuda/cuda.mk

# A build outside the source tree (VPATH, as pg_buildext does for each
# PostgreSQL version) puts the objects in src/<folder>/ under the build
# directory.
ifneq ($(abspath $(srcdir)),$(CURDIR))
$(OBJS) $(OBJS:.o=.bc): | src/.dir
src/.dir:
	$(MKDIR_P) $(addprefix src/,$(GS_SRC_DIRS))
	touch $@
endif

# The whole suite again with every sort sent through the gpusort service
# (its "fake" device sorts with the CPU engine inside the service process),
# so the service's data path is checked on machines without a GPU too.
installcheck-service:
	PGOPTIONS="$(PGOPTIONS) -c gpusort.service_fault=fake -c gpusort.engine=gpu" \
		$(MAKE) installcheck
.PHONY: installcheck-service
