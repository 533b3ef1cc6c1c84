#!/usr/bin/env bash
# btree builds on the GPU machine, gpusort against PostgreSQL in one run:
# CREATE INDEX on 50M int8 rows at maintenance_work_mem 64MB (the default:
# both sides sort in runs on disk) and 1GB, serial and with 8 parallel
# maintenance workers; REINDEX TABLE of a table with three btree indexes;
# CLUSTER of a 50M-row table with one index (gpusort sorts the table,
# also where PostgreSQL's planner chose to follow the index, unless ANALYZE
# found the heap in index order already, and rebuilds the index; the log
# says which).
#
#   run  command="bash bench/gpu-index.sh"  carry=[".gpu"]
#
# Reuses the server of an earlier bench/gpu-run.sh or bench/gpu-50m.sh on a
# warm machine, or starts one and builds gpusort itself.  Cases run in order
# of importance and none starts after DEADLINE seconds (default 480), so the
# whole fits one 10-minute command.  Every timing is whole-statement wall
# time from psql; each case runs PostgreSQL (gpusort.enabled off) and then
# gpusort.  Results: $OUT/gpuindex.md and $OUT/gpuindex.csv; gpusort's
# DEBUG2 time split of each build (scan, each worker's rows, runs and
# merge, the leader's final merge and page writing) in $OUT/splits.txt.
#
# Environment: ROWS (default 50000000), CLUSTER_ROWS (default ROWS),
# DEADLINE, ONLY (a bash regex: only the cases whose name matches).

set -uo pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/gpuindex-out}
ROWS=${ROWS:-50000000}
CLUSTER_ROWS=${CLUSTER_ROWS:-$ROWS}
DEADLINE=${DEADLINE:-480}
mkdir -p "$OUT"
CSV=$OUT/gpuindex.csv
MD=$OUT/gpuindex.md
LOG=$OUT/gpuindex.log
exec 3>&1 >>"$LOG" 2>&1

say() { echo "[$(($(date +%s) - T0))s] $*" | tee /dev/fd/3; }
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
wanted() { [ -z "${ONLY:-}" ] || [[ $1 =~ $ONLY ]]; }

# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs -c shared_buffers=32GB 3>&-
# shellcheck disable=SC1091
source bench/gpu-env.sh
gs_bench_gpusort 32GB
pgsql -Atc "SELECT name || '=' || value FROM gpusort_info()" | tr '\n' ' ' | sed 's/^/gpusort_info: /' | tee /dev/fd/3
echo

say "data: $ROWS rows (int8 uniform, int4)"
pgsql -q <<SQL
SET max_parallel_workers_per_gather = 0;
SELECT setseed(0.42);
CREATE UNLOGGED TABLE IF NOT EXISTS gi50 AS
	SELECT (random() * 9.2e18 - 4.6e18)::int8 AS k, g::int4 AS id
	FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE gi50;
ALTER TABLE gi50 SET (parallel_workers = 8);
SQL
say "data ready"

# time one statement list (ms); the gpusort log line goes to the log file
timed()
{
	local sets=$1 q=$2 s e
	s=$(date +%s%N)
	pgsql -q -c "SET client_min_messages = debug2; SET gpusort.log_index_builds = on; $sets" -c "$q" || { echo "ERR"; return; }
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
}

echo "case,rows,postgres_ms,gpusort_ms,speedup,note" >"$CSV"
record()
{
	echo "$1,$2,$3,$4,$(awk -v a="$3" -v b="$4" 'BEGIN {printf "%.2f", a / b}'),$5" >>"$CSV"
}

# case NAME SETS PREPARE STATEMENT [NOTE]: PREPARE (untimed) then
# STATEMENT, PostgreSQL first, then gpusort
bench_case()
{
	local name=$1 sets=$2 prep=$3 q=$4 note=${5:-} p g
	wanted "$name" || return
	if [ "$(left)" -le 0 ]; then
		say "skip $name: deadline"
		return
	fi
	say "case $name"
	# from standard input: one transaction per statement (VACUUM)
	[ -n "$prep" ] && pgsql -q <<<"$prep" >/dev/null
	p=$(timed "$sets; SET gpusort.enabled = off" "$q" | tail -n 1)
	[ -n "$prep" ] && pgsql -q <<<"$prep" >/dev/null
	g=$(timed "$sets; SET gpusort.enabled = on" "$q" | tail -n 1)
	say "  postgres $p ms, gpusort $g ms"
	# gpusort's time split of its last build (DEBUG2)
	grep -a "gpusort index \"" "$LOG" | tail -n 1 | sed "s/^/  split: /" | tee -a "$OUT/splits.txt" >&3
	record "$name" "$ROWS" "$p" "$g" "$note"
}

DROPK="DROP INDEX IF EXISTS gi50_k"
for mwm in 64MB 1GB; do
	bench_case "CREATE INDEX int8 - serial - maintenance_work_mem $mwm" \
		"SET maintenance_work_mem = '$mwm'; SET max_parallel_maintenance_workers = 0" \
		"$DROPK" "CREATE INDEX gi50_k ON gi50 (k)"
	bench_case "CREATE INDEX int8 - 8 workers - maintenance_work_mem $mwm" \
		"SET maintenance_work_mem = '$mwm'; SET max_parallel_maintenance_workers = 8" \
		"$DROPK" "CREATE INDEX gi50_k ON gi50 (k)" "gpusort: workers write their own runs"
done
pgsql -q -c "$DROPK"

# REINDEX TABLE: three btree indexes (built once, by gpusort, untimed)
if wanted "REINDEX TABLE" && [ "$(left)" -gt 0 ]; then
	say "indexes for REINDEX TABLE"
	pgsql -q -c "SET maintenance_work_mem = '1GB'" \
		-c "CREATE INDEX IF NOT EXISTS gi50_r1 ON gi50 (k)" \
		-c "CREATE INDEX IF NOT EXISTS gi50_r2 ON gi50 (id)" \
		-c "CREATE INDEX IF NOT EXISTS gi50_r3 ON gi50 (id, k)"
	bench_case "REINDEX TABLE - three indexes - maintenance_work_mem 1GB" \
		"SET maintenance_work_mem = '1GB'" "" "REINDEX TABLE gi50" "default max_parallel_maintenance_workers (2)"
	pgsql -q -c "DROP INDEX IF EXISTS gi50_r1, gi50_r2, gi50_r3"
fi

# CLUSTER: a fresh copy in the table's original order before each run
if wanted "CLUSTER" && [ "$(left)" -gt 0 ]; then
	PREP="DROP TABLE IF EXISTS gc50; CREATE UNLOGGED TABLE gc50 AS SELECT * FROM gi50 LIMIT $CLUSTER_ROWS; SET maintenance_work_mem = '1GB'; CREATE INDEX gc50_k ON gc50 (k); VACUUM ANALYZE gc50"
	bench_case "CLUSTER - one index - maintenance_work_mem 1GB" \
		"SET maintenance_work_mem = '1GB'" "$PREP" "CLUSTER gc50 USING gc50_k" \
		"who sorted the table: see the log lines below"
	bench_case "CLUSTER - one index - sort preferred by costs - maintenance_work_mem 1GB" \
		"SET maintenance_work_mem = '1GB'; SET random_page_cost = 1000000; SET effective_cache_size = '8kB'" \
		"$PREP" "CLUSTER gc50 USING gc50_k" "both sides sort the table"
	pgsql -q -c "DROP TABLE IF EXISTS gc50"
fi

{
	echo "gpusort index builds, $(date -u +%FT%TZ), commit ${GS_COMMIT:-$(cat .gpu/commit 2>/dev/null)}; GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null); $(nproc) CPUs; whole-statement wall ms from psql, one run each"
	echo
	echo "| case | rows | PostgreSQL ms | gpusort ms | speedup | note |"
	echo "| --- | ---: | ---: | ---: | ---: | --- |"
	tail -n +2 "$CSV" | while IFS=, read -r c r p g s note; do
		echo "| $c | $r | $p | $g | ${s}× | $note |"
	done
} >"$MD"
cat "$MD" >&3
echo "--- who built each index" >&3
grep -E "built by|sorted by" "$LOG" | sort | uniq -c >&3
