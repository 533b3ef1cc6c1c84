# gpusort: PostgreSQL extension that runs sorts through a radix-sort engine
# (CPU always, CUDA when a toolkit is found at build time).

EXTENSION = gpusort
EXTVERSION = 0.1
MODULE_big = gpusort
DATA = gpusort--0.1.sql
PGFILEDESC = "gpusort - sorts on the GPU"

OBJS = \
	src/gpusort.o \
	src/engine.o \
	src/engine_cpu.o \
	src/keys.o \
	src/planner.o \
	src/exec.o \
	src/sortstate.o \
	src/spill.o \
	src/keys_sql.o \
	$(patsubst %.c,%.o,$(wildcard src/index*.c))

# pg_regress suites, one file per concern; order matters only for "setup"
REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --load-extension=gpusort

PG_CPPFLAGS = -I$(srcdir)/src
# the CPU engine sorts chunks on a worker thread of its own
PG_CFLAGS = -pthread
SHLIB_LINK = -ldl -licui18n -licuuc -lm -pthread

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: an object is rebuilt when any of
# src/*.h changes (a struct that grew in one object but not another crashed)
$(filter src/%.o,$(OBJS)): $(wildcard $(srcdir)/src/*.h)

# The CUDA engine (cuda/) is built when nvcc is on PATH or under
# /usr/local/cuda, unless the caller says WITH_CUDA=no.
-include $(srcdir)/cuda/cuda.mk
