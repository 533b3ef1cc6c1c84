#!/usr/bin/env bash
# Parallel btree builds, gpusort against PostgreSQL, with gpusort's DEBUG2
# time split: CREATE INDEX on ROWS random int8 rows of an unlogged table at
# maintenance_work_mem 64MB and 1GB, with WORKERS parallel maintenance
# workers (and serially, unless SERIAL=no).  Runs against the server the
# PG* variables name (psql on PATH), e.g. on the development machine:
#
#   source /work/wt/pgenv.sh N; ROWS=10000000 WORKERS=2 bench/index-parallel.sh
#
# Each case runs PostgreSQL (gpusort.enabled off), then gpusort, RUNS times
# alternating; prints every time (ms, psql's \timing) and gpusort's split.
set -uo pipefail
ROWS=${ROWS:-10000000}
WORKERS=${WORKERS:-2}
RUNS=${RUNS:-2}
MEMS=${MEMS:-"64MB 1GB"}
SERIAL=${SERIAL:-yes}
PSQL=${PSQL:-psql}
T=bip_$ROWS

$PSQL -q <<SQL
SET max_parallel_workers_per_gather = 0;
SELECT setseed(0.42);
CREATE UNLOGGED TABLE IF NOT EXISTS $T AS
	SELECT (random() * 9.2e18 - 4.6e18)::int8 AS k FROM generate_series(1, $ROWS);
VACUUM ANALYZE $T;
ALTER TABLE $T SET (parallel_workers = $WORKERS);
SQL

one()
{
	local mwm=$1 w=$2 on=$3
	$PSQL -q -X 2>&1 <<SQL | grep -E "Time:|gpusort index|ERROR" | sed "s/^/  mwm=$mwm workers=$w gpusort=$on /"
SET maintenance_work_mem = '$mwm';
SET max_parallel_maintenance_workers = $w;
SET gpusort.enabled = $on;
SET client_min_messages = debug2;
DROP INDEX IF EXISTS ${T}_k;
\timing on
CREATE INDEX ${T}_k ON $T (k);
\timing off
SET client_min_messages = notice;
DROP INDEX ${T}_k;
SQL
}

for mwm in $MEMS; do
	for w in $([ "$SERIAL" = yes ] && echo 0) $WORKERS; do
		for r in $(seq 1 "$RUNS"); do
			one "$mwm" "$w" off
			one "$mwm" "$w" on
		done
	done
done
