#!/usr/bin/env bash
# An external sort loaded in parallel, on any server (psql's PG* settings):
# ORDER BY int8 over ROWS rows (int8 uniform, int4, md5 text, as g50 of
# bench/gpu-50m.sh) with work_mem WORK_MEM and WORKERS parallel workers on
# both sides (PostgreSQL: Gather Merge over sorts in its workers; gpusort:
# every participant writes sorted runs, the leader merges them).
#
#   source /work/wt/pgenv.sh N; bash bench/parallel-runs.sh
#
# (on the GPU machine after a bench/gpu-50m.sh run, whose server it reuses:
# source .gpu/pg-up.sh .gpu/debs first; psql is taken from $PGBIN when set)
#
# Prints each run's whole-query time (psql, alternating PostgreSQL and
# gpusort), the medians and their ratio, then gpusort's EXPLAIN (ANALYZE,
# TIMING OFF) with the time split (load per participant, runs, merge).
# Environment: ROWS (default 5000000), RUNS (default 5), WORKERS (default
# 2), WORK_MEM (default 64MB), TABLE (default g5; made if missing).

set -euo pipefail
psql() { if [ -n "${PGBIN:-}" ]; then "$PGBIN/psql" -X "$@"; else command psql -X "$@"; fi; }
ROWS=${ROWS:-5000000}
RUNS=${RUNS:-5}
WORKERS=${WORKERS:-2}
WORK_MEM=${WORK_MEM:-64MB}
TABLE=${TABLE:-g5}

if [ "$(psql -Atc "SELECT count(*) FROM pg_class WHERE relname = '$TABLE'")" = 0 ]; then
	psql -q <<SQL
SELECT setseed(0.42);
CREATE UNLOGGED TABLE $TABLE AS
	SELECT (random() * 9.2e18 - 4.6e18)::int8 AS k, g::int4 AS id,
		   md5(g::text) COLLATE "C" AS t
	FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE $TABLE;
SQL
fi
psql -qc "ALTER TABLE $TABLE SET (parallel_workers = $WORKERS)"
n=$(psql -Atc "SELECT count(*) FROM $TABLE")
SETS="SET max_parallel_workers_per_gather = $WORKERS; SET work_mem = '$WORK_MEM'; SET jit = off"
Q="SELECT * FROM $TABLE ORDER BY k OFFSET $n"

timed()
{
	local s e
	s=$(date +%s%N)
	psql -q -c "$SETS; SET gpusort.enabled = $1" -c "$Q" >/dev/null
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

echo "$n rows, work_mem $WORK_MEM, $WORKERS workers: $Q"
pg=()
gs=()
for ((i = 0; i < RUNS; i++)); do
	p=$(timed off)
	g=$(timed on)
	pg+=("$p")
	gs+=("$g")
	echo "run $i: postgres $p ms, gpusort $g ms"
done
p=$(median "${pg[@]}")
g=$(median "${gs[@]}")
echo "median: postgres $p ms, gpusort $g ms, $(awk -v a="$p" -v b="$g" 'BEGIN {printf "%.2f", a / b}')x"
psql -c "$SETS" -c "EXPLAIN (ANALYZE, TIMING OFF) $Q"
