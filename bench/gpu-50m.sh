#!/usr/bin/env bash
# The 50M-row cases on the GPU machine: in-memory ORDER BY int8 (the design's
# reference: PostgreSQL 21.3 s, scan alone 5.1 s), the same with work_mem =
# 64MB (both sides sort externally), with a GPU memory budget far smaller
# than the keys (chunked), ORDER BY text, and CREATE INDEX against
# PostgreSQL serial and with 8 parallel maintenance workers.
#
#   run  command="bash bench/gpu-50m.sh"  carry=[".gpu"]
#
# Reuses the server of an earlier bench/gpu-run.sh on a warm machine, or
# starts one and builds gpusort itself.  Cases run in order of importance and
# none starts after DEADLINE seconds (default 470).  Every timed query is
# whole-query wall time from psql; each case alternates PostgreSQL and
# gpusort, and the table reports medians.  Results: $OUT/gpu50m.md and
# $OUT/gpu50m.csv.
#
# The "parallel 8" cases (issue 16) let both sides use up to 8 parallel
# workers (max_parallel_workers_per_gather = 8, the table's parallel_workers
# = 8): PostgreSQL's Gather Merge against gpusort's parallel load.  For each
# the gpusort side's time split -- load per participant (leader and
# workers), handing the workers' rows over (collect), sort, the rest
# (gathering, emitting, a final merge) -- goes to $OUT/split.md, with the
# serial load (max_parallel_workers_per_gather = 0) beside it.  A parallel load
# keeps the whole input in shared memory: when /dev/shm has less room than
# that, the server is restarted with dynamic_shared_memory_type = mmap.
#
# Environment: ROWS (default 50000000), RUNS (default 3), DEADLINE,
# SKIP_INDEX=1 (leave out the CREATE INDEX cases), ONLY (a bash regex: only
# the cases whose name matches).

set -uo pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/gpu50m-out}
ROWS=${ROWS:-50000000}
RUNS=${RUNS:-3}
DEADLINE=${DEADLINE:-470}
mkdir -p "$OUT"
CSV=$OUT/gpu50m.csv
MD=$OUT/gpu50m.md
LOG=$OUT/gpu50m.log
exec 3>&1 >>"$LOG" 2>&1

say() { echo "[$(($(date +%s) - T0))s] $*" | tee /dev/fd/3; }
left() { echo $((DEADLINE - ($(date +%s) - T0))); }

# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs -c shared_buffers=32GB 3>&-
# shellcheck disable=SC1091
source bench/gpu-env.sh
gs_bench_gpusort 32GB
pgsql -Atc "SELECT name || '=' || value FROM gpusort_info()" | tr '\n' ' ' | sed 's/^/gpusort_info: /' | tee /dev/fd/3
echo

say "data: $ROWS rows (int8 uniform, int4, md5 text)"
pgsql -q <<SQL
SET max_parallel_workers_per_gather = 0;
SELECT setseed(0.42);
CREATE UNLOGGED TABLE IF NOT EXISTS g50 AS
	SELECT (random() * 9.2e18 - 4.6e18)::int8 AS k, g::int4 AS id,
		   md5(g::text) COLLATE "C" AS t
	FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE g50;
SQL
say "data ready"

# time one query (ms) under the given settings
timed()
{
	local sets=$1 q=$2 s e
	s=$(date +%s%N)
	pgsql -q -c "SET max_parallel_workers_per_gather = 0; $sets" -c "$q" >/dev/null || { echo "ERR"; return; }
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

echo "case,rows,postgres_ms,gpusort_ms,speedup,runs,note" >"$CSV"
# does ONLY (if set) select the case named $1?
wanted() { [ -z "${ONLY:-}" ] || [[ $1 =~ $ONLY ]]; }
# case NAME RUNS COMMON_SETS QUERY [NOTE]: alternate off/on, medians
bench_case()
{
	local name=$1 runs=$2 sets=$3 q=$4 note=${5:-} i pg=() gs=() p g
	if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then
		return
	fi
	if [ "$(left)" -le 0 ]; then
		say "skip $name: deadline"
		return
	fi
	say "case $name"
	for ((i = 0; i < runs; i++)); do
		p=$(timed "$sets; SET gpusort.enabled = off" "$q")
		g=$(timed "$sets; SET gpusort.enabled = on" "$q")
		pg+=("$p")
		gs+=("$g")
		say "  run $i: postgres $p ms, gpusort $g ms"
	done
	p=$(median "${pg[@]}")
	g=$(median "${gs[@]}")
	echo "$name,$ROWS,$p,$g,$(awk -v a="$p" -v b="$g" 'BEGIN {printf "%.2f", a / b}'),$runs,$note" >>"$CSV"
}

# what a GpuSort did, for the record
[ -n "${ONLY:-}" ] ||
pgsql -c "SET work_mem = '16GB'; SET max_parallel_workers_per_gather = 0" \
	-c "EXPLAIN (ANALYZE) SELECT * FROM g50 ORDER BY k OFFSET $ROWS" >"$OUT/explain-inmem.txt" 2>&1

bench_case "scan only (floor)" 1 "SET work_mem = '16GB'" "SELECT * FROM g50 OFFSET $ROWS" "both sides read the table only"
bench_case "ORDER BY int8 - in memory" "$RUNS" "SET work_mem = '16GB'" "SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
# ---- issue 16: parallel load, 8 workers on both sides ----
PAR="SET max_parallel_workers_per_gather = 8; SET max_parallel_workers = 8; SET gpusort.parallel_load_mem = '64GB'"
SPLIT=$OUT/split.md
# one EXPLAIN (ANALYZE, TIMING OFF) of the gpusort side; its time split
split_case()
{
	local name=$1 sets=$2 q=$3 f
	wanted "$name" || return 0
	[ "$(left)" -gt 0 ] || return 0
	f=$OUT/explain-$(echo "$name" | tr -c 'a-zA-Z0-9\n' '-').txt
	pgsql -c "$sets" -c "EXPLAIN (ANALYZE, TIMING OFF) $q" >"$f" 2>&1
	awk -v name="$name" '
		/GpuSort Time:/ {
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^load=/) { split($i, a, "="); load = a[2] }
				if ($i ~ /^waited=/ && !w) { split($i, a, "="); wait = a[2]; w = 1 }
				if ($i ~ /^tie-break=/) { split($i, a, "="); tb = a[2] }
				if ($i ~ /^spill=/) { split($i, a, "="); sp = a[2] }
				if ($i ~ /^merge=/) { split($i, a, "="); mg = a[2] }
				if ($i ~ /^sort=/) { split($i, a, "="); so = a[2] }
			}
		}
		/Workers Launched:/ { launched = $NF }
		/Leader Load:/ { sub(/.*Leader Load: /, ""); loads = loads " leader " $0 ";" }
		/Worker [0-9]+ Load:/ { n = $2; sub(/.*Load: /, ""); loads = loads " w" n " " $0 ";" }
		/Collect Time:/ { collect = $3 }
		/Rows Copied In Order:/ { for (i = 1; i <= NF; i++) if ($i == "in") copy = $(i + 1) }
		/Serial Load:/ { sub(/.*Serial Load: /, ""); serial = $0 }
		/Execution Time:/ { exec = $3 }
		END {
			rest = exec - load - wait - tb - sp - copy
			printf "| %s | %s | %.0f | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f |%s%s |\n", name, (launched == "" ? 0 : launched), load, (loads == "" ? "-" : loads), (collect == "" ? "-" : collect), so, tb, sp + mg, copy, rest, (serial == "" ? "" : " serial: " serial), ""
		}' "$f" >>"$SPLIT"
}
pgsql -q -c "ALTER TABLE g50 SET (parallel_workers = 8)"
# room in /dev/shm for a whole input (about 100 bytes a row), else DSM in files
need_kb=$((ROWS / 10 * 13 / 1024 * 10))
shm_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
restart=()
if [ -n "$shm_kb" ] && [ "$shm_kb" -lt "$need_kb" ]; then
	say "/dev/shm has ${shm_kb} kB free, a parallel load needs about ${need_kb} kB: dynamic_shared_memory_type = mmap"
	restart+=(-c dynamic_shared_memory_type=mmap)
fi
# 8 parallel workers need 8 free background worker slots (the logical
# replication launcher takes one of the default 8)
if [ "$(pgsql -Atc 'SHOW max_worker_processes')" -lt 12 ]; then
	say "max_worker_processes = 16, so that 8 parallel workers can start"
	restart+=(-c max_worker_processes=16)
fi
if [ ${#restart[@]} -gt 0 ]; then
	pg_restart -c shared_buffers=32GB -c shared_preload_libraries=gpusort "${restart[@]}" 3>&- || exit 1
fi
{
	echo "gpusort side's time split (ms), EXPLAIN (ANALYZE, TIMING OFF); copy = rows copied into sorted order; rest = execution - load - sort wait - tie-break - spill - copy: gathering, emitting and a final merge"
	echo
	echo "| case | workers | load | per participant (rows, load) | collect | sort (engine) | tie-break | spill + merge | copy | rest |"
	echo "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
} >"$SPLIT"
for c in "ORDER BY int8 - in memory|SET work_mem = '16GB'|SELECT * FROM g50 ORDER BY k OFFSET $ROWS" \
	"ORDER BY text (C) - in memory|SET work_mem = '16GB'|SELECT * FROM g50 ORDER BY t OFFSET $ROWS" \
	"ORDER BY int8 - work_mem 64MB|SET work_mem = '64MB'|SELECT * FROM g50 ORDER BY k OFFSET $ROWS"; do
	IFS='|' read -r cname csets cq <<<"$c"
	split_case "parallel 8: $cname" "$PAR; $csets" "$cq"
	split_case "parallel 8: $cname - no workers" "$csets; SET max_parallel_workers_per_gather = 0" "$cq"
	bench_case "parallel 8: $cname" 2 "$PAR; $csets" "$cq" "both sides may use 8 workers"
done

[ "${SKIP_INDEX:-0}" = 1 ] ||
bench_case "CREATE INDEX int8 - serial" 1 "SET maintenance_work_mem = '16GB'; SET max_parallel_maintenance_workers = 0" \
	"CREATE INDEX g50_k ON g50 (k); DROP INDEX g50_k" "PostgreSQL serial vs gpusort"
[ "${SKIP_INDEX:-0}" = 1 ] ||
bench_case "CREATE INDEX int8 - 8 workers" 1 "SET maintenance_work_mem = '16GB'; SET max_parallel_maintenance_workers = 8; ALTER TABLE g50 SET (parallel_workers = 8)" \
	"CREATE INDEX g50_k ON g50 (k); DROP INDEX g50_k" "both may use 8 workers (gpusort: parallel scan only)"

# TIMING OFF: the sort's own phase times without the per-row cost of
# timing every node
wanted "ORDER BY int8 - work_mem 64MB (external)" &&
for t in 4 8; do
	pgsql -c "SET work_mem = '64MB'; SET max_parallel_workers_per_gather = 0; SET gpusort.cpu_threads = $t" \
		-c "EXPLAIN (ANALYZE, TIMING OFF) SELECT * FROM g50 ORDER BY k OFFSET $ROWS" >"$OUT/explain-external-$t.txt" 2>&1
done
[ -f "$OUT/explain-external-4.txt" ] && cp "$OUT/explain-external-4.txt" "$OUT/explain-external.txt"
bench_case "ORDER BY int8 - work_mem 64MB (external)" 2 "SET work_mem = '64MB'" "SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
bench_case "ORDER BY int8 - work_mem 64MB (external) - cpu_threads 8" 2 "SET work_mem = '64MB'; SET gpusort.cpu_threads = 8" \
	"SELECT * FROM g50 ORDER BY k OFFSET $ROWS" "gpusort.cpu_threads = 8 (default 4)"
wanted "ORDER BY int8 - work_mem 64MB + GPU budget 4MB (external; chunked batches)" &&
	pgsql -c "SET work_mem = '64MB'; SET gpusort.gpu_memory_limit = '4MB'; SET max_parallel_workers_per_gather = 0" \
		-c "EXPLAIN (ANALYZE, TIMING OFF) SELECT * FROM g50 ORDER BY k OFFSET $ROWS" >"$OUT/explain-external-budget.txt" 2>&1
bench_case "ORDER BY int8 - work_mem 64MB + GPU budget 4MB (external; chunked batches)" 2 \
	"SET work_mem = '64MB'; SET gpusort.gpu_memory_limit = '4MB'" "SELECT * FROM g50 ORDER BY k OFFSET $ROWS" \
	"each 32MB batch cut into GPU chunks of 4MB of keys"
wanted "ORDER BY int8 - GPU budget 64MB (chunked)" &&
	pgsql -c "SET work_mem = '16GB'; SET gpusort.gpu_memory_limit = '64MB'; SET max_parallel_workers_per_gather = 0" \
		-c "EXPLAIN (ANALYZE, TIMING OFF) SELECT * FROM g50 ORDER BY k OFFSET $ROWS" >"$OUT/explain-chunked.txt" 2>&1
bench_case "ORDER BY int8 - GPU budget 64MB (chunked)" 2 "SET work_mem = '16GB'; SET gpusort.gpu_memory_limit = '64MB'" \
	"SELECT * FROM g50 ORDER BY k OFFSET $ROWS" "keys 600 MB > budget"
bench_case "ORDER BY text (C) - in memory" 2 "SET work_mem = '16GB'" "SELECT * FROM g50 ORDER BY t OFFSET $ROWS"

{
	echo "gpusort 50M-row cases, $(date -u +%FT%TZ), commit ${GS_COMMIT:-$(cat .gpu/commit 2>/dev/null)}; GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null); $(nproc) CPUs; whole-query wall ms from psql, medians"
	echo
	echo "| case | rows | PostgreSQL ms | gpusort ms | speedup | runs | note |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
	tail -n +2 "$CSV" | while IFS=, read -r c r p g s n note; do
		echo "| $c | $r | $p | $g | ${s}× | $n | $note |"
	done
} >"$MD"
cat "$MD" >&3
[ -f "$SPLIT" ] && { echo; cat "$SPLIT"; } >&3
for f in explain-inmem explain-external-4 explain-external-8 explain-external-budget explain-chunked; do
	[ -f "$OUT/$f.txt" ] || continue
	echo "--- $f" >&3
	grep -E "GpuSort|Sort Method|Execution" "$OUT/$f.txt" >&3
done
