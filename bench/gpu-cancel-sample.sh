#!/usr/bin/env bash
# GPU machine, one call: what the leader of a parallel in-memory ORDER BY
# (50M rows of g50, 8 loading workers) and its workers are doing after a
# statement_timeout, from pg_stat_activity sampled every ~45 ms: state and
# wait event of each process (L: the leader, W: a worker).
#   run  command="OUT=$OUT bash bench/gpu-cancel-sample.sh"  carry=[".gpu"]
# Env: TIMEOUTS (ms, default "1000 2000").  Results: $OUT/samples-T.txt,
# $OUT/victim-T.txt (the statement's time as psql saw it).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-cancel-sample}
ROWS=${ROWS:-50000000}
mkdir -p "$OUT"
# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs >/dev/null 2>&1
# shellcheck disable=SC1091
source bench/gpu-env.sh
gs_bench_setup >/dev/null 2>&1
rm -f "$OUT"/*.log
SET="SET max_parallel_workers_per_gather = 8; SET max_parallel_workers = 8; SET gpusort.parallel_load_mem = '64GB'; SET work_mem = '16GB'"
Q="SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
pgsql -qAt -c "$SET" -c "$Q" >/dev/null
for T in ${TIMEOUTS:-1000 2000}; do
	(pgsql -qAt -c "$SET; SET application_name = 'victim'" -c "SET statement_timeout = $T" \
		-c "\\timing on" -c "$Q" >"$OUT/victim-$T.txt" 2>&1 &)
	sleep "$(awk -v t="$T" 'BEGIN {print t / 1000 - 0.1}')"
	for _ in $(seq 1 30); do
		pgsql -qAt -c "WITH v AS (SELECT pid, query_start FROM pg_stat_activity
				WHERE application_name = 'victim' AND state = 'active'
				ORDER BY query_start DESC LIMIT 1)
			SELECT round(extract(epoch FROM clock_timestamp() - v.query_start)::numeric, 2),
				   string_agg(CASE WHEN a.pid = v.pid THEN 'L' ELSE 'W' END || ':' ||
							  coalesce(a.wait_event_type, '-') || '/' || coalesce(a.wait_event, '-'),
							  ' ' ORDER BY a.pid)
			FROM v JOIN pg_stat_activity a ON a.pid = v.pid OR a.leader_pid = v.pid
			GROUP BY v.query_start"
		sleep 0.03
	done >"$OUT/samples-$T.txt"
	sleep 1
	echo "== T=$T"
	cat "$OUT/victim-$T.txt" "$OUT/samples-$T.txt"
done
