#!/usr/bin/env bash
# How late a statement_timeout stops a large ORDER BY, gpusort against
# PostgreSQL's own sort: for each timeout T, the time from the statement's
# start until the cancel was caught (a PL/pgSQL handler for query_canceled
# reads clock_timestamp()), minus T.  Timeouts spread over the whole query
# land in every phase (load, sort, merge, rows going out); a T past the
# query's end prints "done".  JIT is off on both sides (its compilation at
# the start is PostgreSQL's and cannot be canceled either).
#
# Against the server of the libpq environment, on a table with an int8
# column k (default g50), e.g.:
#   TABLE=g5 WORKERS=2 bash bench/cancel.sh
# Env: TABLE, SIDES (default "PostgreSQL gpusort"), TIMEOUTS (ms, default "50 100 200 300 500 700 1000 1300 1600
# 2000 2500"), CONFIGS (default "serial-mem par-mem serial-64mb par-64mb"),
# WORKERS (for par-*, default 8), EXTRA (more settings, for both sides).
# Prints a markdown table.
set -uo pipefail
TABLE=${TABLE:-g50}
TIMEOUTS=${TIMEOUTS:-50 100 200 300 500 700 1000 1300 1600 2000 2500}
CONFIGS=${CONFIGS:-serial-mem par-mem serial-64mb par-64mb}
WORKERS=${WORKERS:-8}
SIDES=${SIDES:-PostgreSQL gpusort}
ROWS=$(psql -X -qAt -c "SELECT count(*) FROM $TABLE") || exit 1
Q="SELECT * FROM $TABLE ORDER BY k OFFSET $ROWS"

psql -X -q <<'SQL' || exit 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpusort;
CREATE OR REPLACE FUNCTION gs_bench_cancel_ms(q text) RETURNS float8
LANGUAGE plpgsql AS $fn$
BEGIN
	EXECUTE q;
	RETURN NULL;
EXCEPTION WHEN query_canceled THEN
	RETURN extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000;
END
$fn$;
SQL

settings()
{
	local w=0 m=16GB
	case $1 in par-*) w=$WORKERS ;; esac
	case $1 in *-64mb) m=64MB ;; esac
	echo "SET jit = off; SET max_parallel_workers_per_gather = $w; SET max_parallel_workers = $w; SET work_mem = '$m'; ${EXTRA:-}"
}

echo "| config | sort | $(for t in $TIMEOUTS; do printf '%s ms | ' "$t"; done)worst |"
echo "| --- | --- |$(for t in $TIMEOUTS; do printf ' ---: |'; done) ---: |"
for c in $CONFIGS; do
	for side in $SIDES; do
		extra="SET gpusort.enabled = on"
		[ $side = PostgreSQL ] && extra="SET gpusort.enabled = off"
		line="| $c | $side |"
		worst=0
		for t in $TIMEOUTS; do
			r=$(psql -X -qAt -c "$(settings "$c"); $extra" -c "SET statement_timeout = $t" \
				-c "SELECT round((gs_bench_cancel_ms('$Q') - $t)::numeric)" 2>&1 | tail -1)
			if [ -z "$r" ]; then
				r=done
			elif [[ $r =~ ^-?[0-9]+$ ]]; then
				[ "$r" -gt "$worst" ] && worst=$r
			fi
			line+=" $r |"
		done
		echo "$line $worst |"
	done
done
psql -X -qc "DROP FUNCTION gs_bench_cancel_ms(text)"
