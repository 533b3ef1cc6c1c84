#!/usr/bin/env bash
# GPU machine, one call: a perf profile of one gpusort statement's backend
# (all its threads) on 50M rows (g50 of bench/gpu-env.sh).  perf is not on
# that machine: carry this machine's binary and libraries, packed as
#   mkdir -p .gpu/perf/lib && cp /usr/bin/perf .gpu/perf/ &&
#   for l in $(ldd /usr/bin/perf | awk '/=>/ {print $3}'); do cp -L "$l" .gpu/perf/lib/; done &&
#   tar cJf .gpu/perf.tar.xz -C .gpu perf && rm -rf .gpu/perf
#   run  command="OUT=$OUT bash bench/gpu-perf.sh"  carry=[".gpu"]
# Env: PERF_SET (settings, default 8 maintenance workers, 64MB), PERF_SQL
# (the statement, default CREATE INDEX on g50(k)), PERF_RUNS (runs before
# the profiled one, default 1), PERF_ANNOTATE (more functions to annotate,
# of any thread), PERF_ALL (1: profile the whole machine, parallel workers
# included; $OUT/perf-postgres.txt then sums every postgres process).  Results: $OUT/perf-main.txt (the backend's
# own thread), $OUT/perf-all.txt (every thread, by thread), $OUT/stmt.txt.
set -uo pipefail
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*"; }
OUT=${OUT:-/tmp/gpu-perf}
ROWS=${ROWS:-50000000}
DEF_SET="SET max_parallel_maintenance_workers = 8; SET maintenance_work_mem = '64MB'"
PERF_SET=${PERF_SET:-$DEF_SET}
PERF_SQL=${PERF_SQL:-DROP INDEX IF EXISTS g50_s; SELECT pg_sleep(1); CREATE INDEX g50_s ON g50(k)}
PERF_RUNS=${PERF_RUNS:-1}
mkdir -p "$OUT"

mkdir -p /opt/perf && tar xJf .gpu/perf.tar.xz -C /opt
PERF() { LD_LIBRARY_PATH=/opt/perf/lib /opt/perf/perf "$@"; }
PERF --version || { echo "perf does not run here"; exit 1; }

# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs >"$OUT/pgup.log" 2>&1
# shellcheck disable=SC1091
source bench/gpu-env.sh
gs_bench_setup
say "built and loaded"

for ((r = 0; r < PERF_RUNS; r++)); do
	s=$(date +%s%N)
	pgsql -q -c "$PERF_SET" -c "${PERF_SQL//SELECT pg_sleep(1);/}" >/dev/null 2>&1
	say "unprofiled run: $(( ($(date +%s%N) - s) / 1000000 )) ms"
done

# untimed statements first, one at a time (PERF_PREP)
[ -n "${PERF_PREP:-}" ] && pgsql -q >/dev/null 2>&1 <<<"$PERF_PREP;"
pgsql -q -c "$PERF_SET; SET client_min_messages = debug2; SET gpusort.log_index_builds = on" -c "$PERF_SQL" >"$OUT/stmt.txt" 2>&1 &
stmt=$!
for _ in $(seq 1 50); do
	pid=$(pgsql -Atc "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep(1)%' AND pid <> pg_backend_pid()" | head -1)
	[ -n "$pid" ] && break
	sleep 0.05
done
say "profiling backend $pid"
# PERF_ALL=1: the whole machine (parallel workers too), not only the backend
if [ -n "${PERF_ALL:-}" ]; then target=(-a); else target=(-p "$pid"); fi
PERF record -F 999 -g "${target[@]}" -o "$OUT/perf.data" -- sleep 30 >"$OUT/perf-record.log" 2>&1 &
perfpid=$!
wait $stmt
sleep 0.2
kill -INT $perfpid 2>/dev/null
wait $perfpid
say "statement done"
PERF report -i "$OUT/perf.data" --tid="$pid" --no-children --sort sym --stdio -g none 2>/dev/null |
	grep -E "^ +[0-9]" | head -60 >"$OUT/perf-main.txt"
PERF report -i "$OUT/perf.data" --no-children --sort pid,sym --stdio -g none 2>/dev/null |
	grep -E "^ +[0-9]" | head -80 >"$OUT/perf-all.txt"
# every thread's share, and the parallel workers' symbols together
PERF report -i "$OUT/perf.data" --no-children --sort pid --stdio -g none 2>/dev/null |
	grep -E "^ +[0-9]" | head -40 >"$OUT/perf-threads.txt"
if [ -n "${PERF_ALL:-}" ]; then
	PERF report -i "$OUT/perf.data" --no-children --comm postgres --sort dso,sym --stdio -g none 2>/dev/null |
		grep -E "^ +[0-9]" | head -80 >"$OUT/perf-postgres.txt"
fi
# the backend's three hottest functions of gpusort or PostgreSQL, line by line
for f in $(awk '$2 == "[.]" {print $3}' "$OUT/perf-main.txt" | grep -v '^0x' | head -3) ${PERF_ANNOTATE:-}; do
	echo "== $f"
	PERF annotate -i "$OUT/perf.data" --stdio -s "$f" 2>/dev/null |
		grep -E "^ +[0-9]+\.[0-9]+ +:" | sort -rn | head -25
done >"$OUT/perf-annotate.txt"
rm -f "$OUT/perf.data"
grep -o "final merge and write.*" "$OUT/stmt.txt" | sed 's/\[.*\]//'
head -40 "$OUT/perf-main.txt"
say "done"
