#!/bin/sh
# cuda/gpu-run.sh: on the GPU machine, build (unless cuda/build was carried),
# run the engine test, then the benchmarks.  Logs and tables go to $OUT.
#   GS_COMMIT=<sha> sh cuda/gpu-run.sh [test-args]
#   GS_BENCH=no skips bench_engine; GS_CHUNKED=no skips bench_chunked
set -u
OUT=${OUT:-/tmp/gs-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader
if [ ! -x cuda/build/test_engine ] || [ ! -x cuda/build/bench_engine ] ||
	[ ! -x cuda/build/bench_chunked ]; then
	make -j16 cuda-test cuda-bench >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
timeout "${GS_TEST_TIMEOUT:-300}" cuda/build/test_engine "$@" >"$OUT/test.log" 2>&1
echo "test exit: $?"
grep -E "FAIL|passed|device:|async" "$OUT/test.log" | head -40
if [ "${GS_BENCH:-yes}" = yes ]; then
	timeout "${GS_BENCH_TIMEOUT:-300}" cuda/build/bench_engine --commit "${GS_COMMIT:-unknown}" \
		--out "$OUT/engine.md" ${GS_BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
	echo "bench exit: $?"
	cat "$OUT/bench.log"
fi
if [ "${GS_CHUNKED:-yes}" = yes ]; then
	timeout "${GS_CHUNKED_TIMEOUT:-300}" cuda/build/bench_chunked --commit "${GS_COMMIT:-unknown}" \
		--out "$OUT/engine-chunked.md" ${GS_CHUNKED_ARGS:-} >"$OUT/chunked.log" 2>&1
	echo "chunked exit: $?"
	cat "$OUT/chunked.log"
fi
