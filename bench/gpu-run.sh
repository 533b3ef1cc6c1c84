#!/usr/bin/env bash
# One pass on the GPU machine: build, test and benchmark gpusort there.
#
# Run from the repository root with the .gpu/ folder carried along, e.g. with
# the device tool:   run  command="bash bench/gpu-run.sh"  carry=[".gpu"]
# Prepare .gpu/ once, on a machine with package access (it is git-ignored):
#   /work/shared/gpu-machine/fetch-debs.sh .gpu/debs    (or ../shared/...)
#   cp /work/shared/gpu-machine/pg-up.sh .gpu/
#   (cd .gpu/debs && apt-get download libicu-dev)   # ICU headers for the build
#
# Steps (each with its own time limit; the whole stays under 9 minutes):
#   1. start PostgreSQL 15 from .gpu/debs (pg-up.sh) with big shared_buffers
#   2. make + make install of gpusort (with the CUDA engine) against it, and
#      restart it with shared_preload_libraries = gpusort
#   3. the pg_regress suite with gpusort.engine = gpu, gpusort.min_rows = 0
#      forced (PGOPTIONS), so every sort the tests make goes to the GPU
#   4. the CUDA engine's own test (make cuda-check) and benchmark (bench_engine)
#   5. bench/run.sh at GPU_RUN_ROWS rows with work_mem and maintenance_work_mem
#      8GB, stopping new cases in time
# Everything lands in $OUT (logs, trace.log of every command, results.csv,
# results.md, machine.csv, regression.diffs); a short summary is printed last.
#
# Environment (all optional):
#   GPU_RUN_ROWS    bench size (default 10000000)
#   GPU_RUN_BENCH   bench selection (default "--quick"), e.g.
#                   "--kinds full,mergejoin --keys i8u,tx,comp --widths narrow";
#                   may add --set options (they come after the memory ones)
#   GPU_RUN_SKIP    steps to skip, comma-separated: regress,cuda,engine-bench,bench
#                   (a benchmark-only pass: GPU_RUN_SKIP=regress,cuda,engine-bench;
#                   on a machine still warm from an earlier pass the build and
#                   the generated tables are reused)
#   GPU_RUN_LIMIT   total seconds (default 530)
#   GPU_RUN_REGRESS_S  the regression suite's own limit (default 360)
#   GS_COMMIT       commit to record; else .gpu/commit (write it before the run:
#                   git rev-parse --short HEAD > .gpu/commit), else git, else unknown

set -uo pipefail

T0=$(date +%s)
OUT=${OUT:-/tmp/gpu-run-out}
mkdir -p "$OUT"
ROWS=${GPU_RUN_ROWS:-10000000}
BENCH_SEL=${GPU_RUN_BENCH:---quick}
BENCH_SETS="--set work_mem=8GB --set maintenance_work_mem=8GB"
SKIP=",${GPU_RUN_SKIP:-},"
LIMIT=${GPU_RUN_LIMIT:-530}
JOBS=$(nproc)
if [ -z "${GS_COMMIT:-}" ] && [ -s .gpu/commit ]; then
	GS_COMMIT=$(head -n 1 .gpu/commit)
fi
export GS_COMMIT

BENCH_MIN=200		# seconds kept for the benchmark by the steps before it

# every command traced into trace.log; step lines and the summary on stdout
exec {trace_fd}>"$OUT/trace.log"
BASH_XTRACEFD=$trace_fd
PS4='+ [$(($(date +%s) - T0))s] '
set -x

elapsed() { echo $(($(date +%s) - T0)); }
left() { echo $((LIMIT - $(elapsed))); }
# a step's time limit: at most $1 s, leaving BENCH_MIN s (0: no time left)
budget()
{
	local b=$(($(left) - BENCH_MIN))
	[ "$b" -gt "$1" ] && b=$1
	[ "$b" -lt 10 ] && b=0
	echo "$b"
}
# run "$@" under the time limit budget $1 (fails with 124 when none is left)
limited()
{
	local b
	b=$(budget "$1")
	shift
	if [ "$b" -eq 0 ]; then
		echo "no time left for: $*"
		return 124
	fi
	timeout -k 5 "$b" "$@"
}
step() { echo "== [$(elapsed)s] $*"; }
skipped() { case "$SKIP" in *",$1,"*) return 0 ;; esac; return 1; }
summary=()
note() { summary+=("$*"); echo "   $*"; }

finish()
{
	set +x
	cp -f regression.diffs regression.out "$OUT/" 2>/dev/null
	cp -f /var/tmp/pg.log "$OUT/postgres.log" 2>/dev/null
	{
		echo
		echo "======== gpu-run summary ($(elapsed) s; files in \$OUT) ========"
		printf '%s\n' "${summary[@]}"
		if [ -f "$OUT/bench/results.md" ]; then
			echo
			cat "$OUT/bench/results.md"
		fi
	} | tee "$OUT/summary.txt"
	# non-zero when any step failed
	if printf '%s\n' "${summary[@]}" | grep -q 'FAIL'; then
		exit 1
	fi
}
trap finish EXIT

# ---- 1. PostgreSQL -----------------------------------------------------------
step "start PostgreSQL 15 from .gpu/debs"
[ -f .gpu/pg-up.sh ] || { note "FAIL: .gpu/pg-up.sh missing (carry .gpu)"; exit 1; }
mem_gb=$(awk '/MemTotal/ {printf "%d", $2 / 1048576}' /proc/meminfo)
sb=$((mem_gb / 4))
[ "$sb" -gt 32 ] && sb=32
# shellcheck disable=SC1091
# only shared_buffers here: the regression tests expect default settings;
# the benchmark sets its memory itself (BENCH_SETS)
source .gpu/pg-up.sh .gpu/debs -c shared_buffers=${sb}GB >"$OUT/pg-up.log" 2>&1 ||
	{ note "FAIL: pg-up.sh (see pg-up.log)"; exit 1; }
# shellcheck disable=SC1091
source bench/gpu-env.sh
note "postgres: $(pgsql -Atc 'SELECT version()' 2>&1 | cut -d, -f1)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$OUT/nvidia-smi.txt" 2>&1
note "gpu: $(head -n 1 "$OUT/nvidia-smi.txt")"

# ---- 2. build, install, preload ----------------------------------------------
# the CUDA engine's test and benchmark programs are built in the same make
targets=all
grep -q '^cuda-test:' cuda/cuda.mk 2>/dev/null && ! skipped cuda && targets+=" cuda-test"
grep -q '^cuda-bench:' cuda/cuda.mk 2>/dev/null && ! skipped engine-bench && targets+=" cuda-bench"
step "build and install gpusort (make -j$JOBS $targets)"
# shellcheck disable=SC2086
if ! limited 330 make -j"$JOBS" PG_CONFIG="$PG_CONFIG" with_llvm=no $targets >"$OUT/build.log" 2>&1 ||
	! make PG_CONFIG="$PG_CONFIG" with_llvm=no install >>"$OUT/build.log" 2>&1; then
	tail -n 30 "$OUT/build.log"
	note "FAIL: build (see build.log)"
	exit 1
fi
note "build: ok in $(elapsed) s so far; CUDA library: $(ls cuda/libgpusort_cuda.so 2>/dev/null || echo 'not built')"
pg_restart -c shared_preload_libraries=gpusort || { note "FAIL: restart with gpusort preloaded"; exit 1; }
# a warm machine keeps the database: recreate the extension from this build
pgsql -c "DROP EXTENSION IF EXISTS gpusort CASCADE" -c "CREATE EXTENSION gpusort" \
	-c "SELECT * FROM gpusort_info()" >"$OUT/gpusort_info.txt" 2>&1
cat "$OUT/gpusort_info.txt"

# ---- 3. pg_regress with the GPU engine forced ------------------------------------
if ! skipped regress; then
	step "pg_regress with gpusort.engine=gpu, gpusort.min_rows=0"
	PGOPTIONS="-c gpusort.engine=gpu -c gpusort.min_rows=0" \
		limited "${GPU_RUN_REGRESS_S:-360}" make PG_CONFIG="$PG_CONFIG" with_llvm=no installcheck \
		>"$OUT/regress.log" 2>&1
	rc=$?
	n_ok=$(grep -cE '^(test +| +)[^ ]+ +\.\.\. ok' "$OUT/regress.log")
	n_bad=$(grep -cE '^(test +| +)[^ ]+ +\.\.\. FAILED' "$OUT/regress.log")
	if [ "$rc" -eq 0 ]; then
		note "regress (GPU forced): $n_ok passed, $n_bad failed"
	else
		note "regress (GPU forced): FAIL rc=$rc, $n_ok passed, $n_bad failed: $(grep -E '\.\.\. FAILED' "$OUT/regress.log" | awk '{print ($1 == "test") ? $2 : $1}' | tr '\n' ' ')"
		[ "$rc" -eq 124 ] && note "   (timed out)"
	fi
fi

# ---- 4. the CUDA engine's own test and benchmark --------------------------------
if ! skipped cuda && [ -x cuda/build/test_engine ]; then
	step "make cuda-check"
	limited 150 make PG_CONFIG="$PG_CONFIG" with_llvm=no cuda-check >"$OUT/cuda-check.log" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		note "cuda-check: ok ($(tail -n 1 "$OUT/cuda-check.log"))"
	elif grep -q 'Error 77' "$OUT/cuda-check.log"; then
		note "cuda-check: skipped, no usable GPU: $(grep -m 1 -i 'device' "$OUT/cuda-check.log")"
	else
		note "cuda-check: FAIL rc=$rc (see cuda-check.log): $(tail -n 2 "$OUT/cuda-check.log" | head -n 1)"
	fi
fi
if ! skipped engine-bench && [ -x cuda/build/bench_engine ]; then
	step "engine benchmark (bench_engine, up to 1e7 keys)"
	if limited 60 cuda/build/bench_engine --max-n 10000000 --reps 3 --out "$OUT/engine-bench.md" \
			${GS_COMMIT:+--commit "$GS_COMMIT"} >"$OUT/engine-bench.log" 2>&1; then
		note "engine bench: ok (engine-bench.md)"
	else
		note "engine bench: FAIL or timeout (see engine-bench.log)"
	fi
fi

# ---- 5. bench/run.sh ----------------------------------------------------------
if ! skipped bench; then
	# stop starting cases early enough for the longest case to finish
	dl=$(($(left) - 90))
	step "bench/run.sh --rows $ROWS $BENCH_SEL (new cases until +${dl}s)"
	if [ "$dl" -lt 60 ]; then
		note "bench: skipped, only $(left) s left"
	else
		# shellcheck disable=SC2086
		timeout -k 10 $(($(left) - 10)) bash bench/run.sh --rows "$ROWS" $BENCH_SETS $BENCH_SEL \
			--deadline "$dl" --out "$OUT/bench" >"$OUT/bench.log" 2>&1
		rc=$?
		[ -f "$OUT/bench/results.md" ] || bash bench/run.sh --render-md "$OUT/bench" >/dev/null 2>&1
		cases=$(($(wc -l <"$OUT/bench/results.csv" 2>/dev/null || echo 1) - 1))
		note "bench: rc=$rc, $cases cases (bench.log; bench/results.csv)"
		grep -E '^data for|deadline' "$OUT/bench.log" | sed 's/^/   /'
	fi
fi
