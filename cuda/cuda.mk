# cuda/cuda.mk: the CUDA engine (libgpusort_cuda.so), its test and benchmark.
#
# Included by the top-level Makefile after PGXS.  nvcc is taken from $(NVCC),
# else from PATH, else /usr/local/cuda/bin/nvcc; WITH_CUDA=no turns the engine
# off.  Without nvcc the extension builds CPU-only.
#
#   make                      also builds cuda/libgpusort_cuda.so
#   make install              also installs it into $(pkglibdir)
#   make cuda-test            builds cuda/build/test_engine
#   make cuda-check           builds and runs it (needs a GPU)
#   make cuda-bench           builds cuda/build/bench_engine and
#                             cuda/build/bench_chunked (the chunked sort through
#                             the engine API, with the CPU engine compiled in)

WITH_CUDA ?= yes

ifneq ($(WITH_CUDA),no)
ifeq ($(NVCC),)
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
endif
endif

ifneq ($(WITH_CUDA),no)
ifneq ($(NVCC),)

CUDA_DIR = $(srcdir)/cuda
CUDA_BUILD = cuda/build
CUDA_LIB = cuda/libgpusort_cuda.so
CUDA_WIDTHS = 4 8 16 24 32

# sm_90 machine code, plus compute_90 PTX for later devices
CUDA_ARCH_FLAGS ?= -gencode=arch=compute_90,code=sm_90 \
	-gencode=arch=compute_90,code=compute_90
NVCCFLAGS ?= -O3
CUDA_FLAGS = -std=c++17 $(NVCCFLAGS) $(CUDA_ARCH_FLAGS) \
	-Xcompiler -fPIC -Xcompiler -fvisibility=hidden -Xcompiler -Wall \
	-I$(srcdir)/src/include -I$(CUDA_DIR)

CUDA_HEADERS = $(wildcard $(CUDA_DIR)/*.cuh $(CUDA_DIR)/*.h) \
	$(srcdir)/src/include/gpusort_engine.h
CUDA_ENGINE_OBJS = $(CUDA_BUILD)/gpusort_cuda.o $(CUDA_BUILD)/hrs_dispatch.o \
	$(patsubst %,$(CUDA_BUILD)/hrs_width_%.o,$(CUDA_WIDTHS))

all: $(CUDA_LIB)

$(CUDA_BUILD)/.dir:
	mkdir -p $(CUDA_BUILD)
	touch $@

$(CUDA_BUILD)/hrs_width_%.o: $(CUDA_DIR)/hrs_width.cu $(CUDA_HEADERS) $(CUDA_BUILD)/.dir
	$(NVCC) $(CUDA_FLAGS) -DHRS_KB=$* -c $< -o $@

$(CUDA_BUILD)/%.o: $(CUDA_DIR)/%.cu $(CUDA_HEADERS) $(CUDA_BUILD)/.dir
	$(NVCC) $(CUDA_FLAGS) -c $< -o $@

$(CUDA_LIB): $(CUDA_ENGINE_OBJS)
	$(NVCC) $(CUDA_ARCH_FLAGS) -shared -cudart static -o $@ $(CUDA_ENGINE_OBJS)

$(CUDA_BUILD)/test_engine: $(CUDA_DIR)/test/test_engine.cu $(CUDA_ENGINE_OBJS) $(CUDA_HEADERS) $(CUDA_DIR)/test/splitmix.cuh
	$(NVCC) $(CUDA_FLAGS) -cudart static -o $@ $< $(CUDA_ENGINE_OBJS)

$(CUDA_BUILD)/bench_engine: $(CUDA_DIR)/bench/bench_engine.cu $(CUDA_ENGINE_OBJS) $(CUDA_HEADERS) $(CUDA_DIR)/test/splitmix.cuh
	$(NVCC) $(CUDA_FLAGS) -cudart static -o $@ $< $(CUDA_ENGINE_OBJS)

# the CPU engine is PG-free: compiled on its own into the chunked benchmark
CPU_ENGINE_BENCH_OBJS = $(patsubst %,$(CUDA_BUILD)/%_bench.o,engine_cpu engine_cpu_async engine_cpu_radix)

$(CPU_ENGINE_BENCH_OBJS): $(CUDA_BUILD)/%_bench.o: $(srcdir)/src/engine_cpu/%.c $(srcdir)/src/include/gpusort_engine.h $(srcdir)/src/engine_cpu/engine_cpu_int.h $(CUDA_BUILD)/.dir
	$(CC) -std=gnu99 -O2 -fPIC -I$(srcdir)/src/include -I$(srcdir)/src/engine_cpu -c $< -o $@

# the chunked benchmark's merge and CPU sort, compiled apart from its main file
CHUNKED_BENCH_OBJS = $(patsubst %,$(CUDA_BUILD)/%.o,chunked_merge chunked_cpu)

$(CHUNKED_BENCH_OBJS): $(CUDA_BUILD)/%.o: $(CUDA_DIR)/bench/%.cu $(CUDA_DIR)/bench/bench_chunked.h $(srcdir)/src/include/gpusort_engine.h $(CUDA_BUILD)/.dir
	$(NVCC) $(CUDA_FLAGS) -Xcompiler -pthread -c $< -o $@

$(CUDA_BUILD)/bench_chunked: $(CUDA_DIR)/bench/bench_chunked.cu $(CHUNKED_BENCH_OBJS) $(CUDA_ENGINE_OBJS) $(CPU_ENGINE_BENCH_OBJS) $(CUDA_HEADERS) $(CUDA_DIR)/bench/bench_chunked.h $(CUDA_DIR)/test/splitmix.cuh
	$(NVCC) $(CUDA_FLAGS) -Xcompiler -pthread -cudart static -o $@ $< $(CHUNKED_BENCH_OBJS) $(CUDA_ENGINE_OBJS) $(CPU_ENGINE_BENCH_OBJS)

.PHONY: cuda-test cuda-check cuda-bench install-cuda uninstall-cuda clean-cuda

cuda-test: $(CUDA_BUILD)/test_engine
cuda-bench: $(CUDA_BUILD)/bench_engine $(CUDA_BUILD)/bench_chunked
cuda-check: $(CUDA_BUILD)/test_engine
	$(CUDA_BUILD)/test_engine

install: install-cuda
install-cuda: $(CUDA_LIB)
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)'
	$(INSTALL_SHLIB) $(CUDA_LIB) '$(DESTDIR)$(pkglibdir)/'

uninstall: uninstall-cuda
uninstall-cuda:
	rm -f '$(DESTDIR)$(pkglibdir)/libgpusort_cuda.so'

endif
endif

clean: clean-cuda
clean-cuda:
	rm -rf cuda/build cuda/libgpusort_cuda.so
