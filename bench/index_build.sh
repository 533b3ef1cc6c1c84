#!/usr/bin/env bash
# CREATE INDEX benchmark: gpusort against PostgreSQL's own build.
#
#   bench/index_build.sh [ROWS]           (default 50000000)
#
# Runs against the server the libpq environment points at (PGHOST, PGPORT,
# ...), which must preload gpusort.  Loads a table of ROWS rows
#   i8 int8 (random), i4 int4 (random), t text (md5, built with COLLATE "C")
# and builds, for each index shape, with gpusort (serially, and with PARALLEL
# workers scanning the heap), with PostgreSQL serially, and with PostgreSQL
# and PARALLEL parallel maintenance workers (default 8);
# every build drops its index first.  Each gpusort build is checked to have
# been made by gpusort (its DEBUG1 message).  Prints a Markdown table.
#
# Environment: MWM (maintenance_work_mem for all builds, default 8GB: gpusort
# keeps the whole build in memory and leaves larger builds to PostgreSQL),
# PARALLEL (default 8), KEEP=1 keeps the table (default: dropped).
set -euo pipefail

rows=${1:-50000000}
mwm=${MWM:-8GB}
par=${PARALLEL:-8}

q() { psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }

echo "loading $rows rows ..." >&2
q <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS gs_ibench;
CREATE UNLOGGED TABLE gs_ibench (i8 int8, i4 int4, t text)
	WITH (autovacuum_enabled = off);
INSERT INTO gs_ibench
SELECT (random() * 9e18)::int8, (random() * 4e9 - 2e9)::int4, md5(i::text)
FROM generate_series(1, $rows) AS i;
ALTER TABLE gs_ibench SET LOGGED;
VACUUM (ANALYZE, FREEZE) gs_ibench;
CHECKPOINT;
SQL

# build COLUMNS MODE: prints the seconds it took
build()
{
	local cols=$1 mode=$2 set out t0 t1
	case $mode in
		gpusort) set="SET gpusort.index_build = on; SET max_parallel_maintenance_workers = 0;" ;;
		gpusort-par) set="SET gpusort.index_build = on; SET max_parallel_maintenance_workers = $par;" ;;
		serial) set="SET gpusort.index_build = off; SET max_parallel_maintenance_workers = 0;" ;;
		parallel) set="SET gpusort.index_build = off; SET max_parallel_maintenance_workers = $par;" ;;
	esac
	q -c "SET client_min_messages = warning" \
		-c "DROP INDEX IF EXISTS gs_ibench_idx" -c "CHECKPOINT" >/dev/null
	t0=$(date +%s.%N)
	out=$(q 2>&1 <<SQL
SET maintenance_work_mem = '$mwm';
$set
SET client_min_messages = debug1;
CREATE INDEX gs_ibench_idx ON gs_ibench ($cols);
SQL
)
	t1=$(date +%s.%N)
	if [ "${mode%-par}" = gpusort ] && ! grep -q 'built by gpusort' <<<"$out"; then
		echo "warning: gpusort did not build ($cols): $(grep -o 'built by PostgreSQL.*' <<<"$out")" >&2
	fi
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

echo "| index | gpusort (s) | gpusort, $par scan workers (s) | PostgreSQL serial (s) | PostgreSQL $par workers (s) |"
echo "| --- | ---: | ---: | ---: | ---: |"
for cols in 'i8' 't COLLATE "C"' 'i4, i8'; do
	g=$(build "$cols" gpusort)
	gp=$(build "$cols" gpusort-par)
	s=$(build "$cols" serial)
	p=$(build "$cols" parallel)
	printf '| (%s) | %.1f | %.1f | %.1f | %.1f |\n' "$cols" "$g" "$gp" "$s" "$p"
done
[ "${KEEP:-0}" = 1 ] || q -c "DROP TABLE gs_ibench"
