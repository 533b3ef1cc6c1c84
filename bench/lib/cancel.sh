#!/usr/bin/env bash
# How late a statement_timeout stops a large ORDER BY, gpusort against
# PostgreSQL's own sort.
#
#   bench/run.sh --preset cancel [options]
#
# For each timeout T, the time from the statement's start until the cancel
# was caught (a PL/pgSQL handler for query_canceled reads clock_timestamp()),
# minus T.  Timeouts spread over the whole query land in every phase (load,
# sort, merge, rows going out); a T past the query's end prints "done".  JIT
# is off on both sides (its compilation at the start is PostgreSQL's and
# cannot be canceled either).
#
# Against the server of the libpq environment (PGHOST, PGPORT, ...), which
# must preload gpusort, on a table with an int8 column k (docs/benchmarks.md
# has the SQL of g50); psql from $PG_CONFIG --bindir.  Prints a Markdown
# table: a row per configuration and sort, a column per timeout (ms late),
# and the worst.
#
# Options (each also read from the environment variable in brackets):
#   --table T          the table (TABLE; default g50)
#   --timeouts LIST    the timeouts in ms (TIMEOUTS; default 50,100,200,300,
#                      500,700,1000,1300,1600,2000,2500)
#   --configs LIST     (CONFIGS; default serial-mem,par-mem,serial-64mb,
#                      par-64mb): serial-*: no parallel workers; par-*:
#                      --workers of them; *-mem: work_mem 16GB; *-64mb:
#                      work_mem 64MB
#   --workers N        workers of par-* (WORKERS; default 8)
#   --sides LIST       (SIDES; default PostgreSQL,gpusort)
#   --set NAME=VALUE   a setting for both sides (repeatable; EXTRA: more SET
#                      statements)
# E.g.: bench/run.sh --preset cancel --table g5 --workers 2

set -euo pipefail

table=${TABLE:-g50}
timeouts=${TIMEOUTS:-50 100 200 300 500 700 1000 1300 1600 2000 2500}
configs=${CONFIGS:-serial-mem par-mem serial-64mb par-64mb}
workers=${WORKERS:-8}
sides=${SIDES:-PostgreSQL gpusort}
extra=${EXTRA:-}

while [ $# -gt 0 ]; do
	case "$1" in
		--table) table=$2; shift 2 ;;
		--timeouts) timeouts=$2; shift 2 ;;
		--configs) configs=$2; shift 2 ;;
		--workers) workers=$2; shift 2 ;;
		--sides) sides=$2; shift 2 ;;
		--set) extra+=" SET ${2%%=*} = '${2#*=}';"; shift 2 ;;
		-h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
		*) echo "bench/run.sh --preset cancel: unknown option $1" >&2; exit 2 ;;
	esac
done
timeouts=${timeouts//,/ }
configs=${configs//,/ }
sides=${sides//,/ }
case "$workers" in ''|*[!0-9]*) echo "--workers must be a number" >&2; exit 2 ;; esac

PG_CONFIG=${PG_CONFIG:-pg_config}
PSQL=$("$PG_CONFIG" --bindir)/psql
[ -x "$PSQL" ] || { echo "psql not found beside $PG_CONFIG" >&2; exit 1; }

rows=$("$PSQL" -X -qAt -c "SELECT count(*) FROM $table")
Q="SELECT * FROM $table ORDER BY k OFFSET $rows"

"$PSQL" -X -q -v ON_ERROR_STOP=1 <<'SQL'
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

# the settings of configuration $1
settings()
{
	local w=0 m=16GB
	case $1 in par-*) w=$workers ;; esac
	case $1 in *-64mb) m=64MB ;; esac
	echo "SET jit = off; SET max_parallel_workers_per_gather = $w; SET max_parallel_workers = $w; SET work_mem = '$m'; $extra"
}

echo "| config | sort | $(for t in $timeouts; do printf '%s ms | ' "$t"; done)worst |"
echo "| --- | --- |$(for t in $timeouts; do printf ' ---: |'; done) ---: |"
for c in $configs; do
	for side in $sides; do
		on="SET gpusort.enabled = on"
		[ "$side" = PostgreSQL ] && on="SET gpusort.enabled = off"
		line="| $c | $side |"
		worst=0
		for t in $timeouts; do
			# a cancel that lands outside the handler is an error: its
			# message is the cell
			r=$("$PSQL" -X -qAt -c "$(settings "$c"); $on" -c "SET statement_timeout = $t" \
				-c "SELECT round((gs_bench_cancel_ms('$Q') - $t)::numeric)" 2>&1 | tail -n 1) || true
			if [ -z "$r" ]; then
				r='done'
			elif [[ $r =~ ^-?[0-9]+$ ]]; then
				if [ "$r" -gt "$worst" ]; then worst=$r; fi
			fi
			line+=" $r |"
		done
		echo "$line $worst |"
	done
done
"$PSQL" -X -qc "DROP FUNCTION gs_bench_cancel_ms(text)"
