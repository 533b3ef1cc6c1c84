#!/usr/bin/env bash
# GPU machine, one call: where the time after a statement_timeout goes, for
# a parallel in-memory ORDER BY of 50M rows (g50 of bench/gpu-env.sh, 8
# loading workers): a system-wide perf profile of the window from just
# before the timeout until the statement has returned, by process and
# function, and pg_stat_activity samples of the leader and its workers in
# the same window.  perf comes as bench/gpu-perf.sh says.
#   run  command="OUT=$OUT bash bench/gpu-cancel-perf.sh"  carry=[".gpu"]
# Env: TIMEOUTS (ms, default "700"), EXTRA (more settings).  Results:
# $OUT/cancel-T.txt: the statement's time, the samples, the profile.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-cancel-perf}
ROWS=${ROWS:-50000000}
mkdir -p "$OUT"
mkdir -p /opt/perf && tar xJf .gpu/perf.tar.xz -C /opt
PERF() { LD_LIBRARY_PATH=/opt/perf/lib /opt/perf/perf "$@"; }
# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs >/dev/null 2>&1
# shellcheck disable=SC1091
source bench/gpu-env.sh
gs_bench_setup >/dev/null 2>&1
rm -f "$OUT"/*.log
SET="SET jit = off; SET max_parallel_workers_per_gather = 8; SET max_parallel_workers = 8; SET gpusort.parallel_load_mem = '64GB'; SET work_mem = '16GB'; ${EXTRA:-}"
Q="SELECT * FROM g50 ORDER BY k OFFSET $ROWS"
pgsql -qAt -c "$SET" -c "$Q" >/dev/null
for T in ${TIMEOUTS:-700}; do
	f=$OUT/cancel-$T.txt
	(pgsql -qAt -c "$SET; SET application_name = 'victim'" -c "SET statement_timeout = $T" \
		-c "\\timing on" -c "$Q" >"$OUT/victim.txt" 2>&1 &)
	sleep "$(awk -v t="$T" 'BEGIN {print t / 1000 - 0.05}')"
	PERF record -a -F 1999 -o "$OUT/perf.data" -- sleep 0.8 >/dev/null 2>&1 &
	perfpid=$!
	for _ in $(seq 1 15); do
		pgsql -qAt -c "WITH v AS (SELECT pid, query_start FROM pg_stat_activity
				WHERE application_name = 'victim' AND state = 'active'
				ORDER BY query_start DESC LIMIT 1)
			SELECT round(extract(epoch FROM clock_timestamp() - v.query_start)::numeric, 2),
				   string_agg(CASE WHEN a.pid = v.pid THEN 'L' ELSE 'W' END || a.pid || ':' ||
							  coalesce(a.wait_event_type, '-') || '/' || coalesce(a.wait_event, '-'),
							  ' ' ORDER BY a.pid)
			FROM v JOIN pg_stat_activity a ON a.pid = v.pid OR a.leader_pid = v.pid
			GROUP BY v.query_start"
		sleep 0.02
	done >"$OUT/samples.txt"
	wait $perfpid
	sleep 0.5
	{
		echo "== T=$T"
		cat "$OUT/victim.txt" "$OUT/samples.txt"
		echo "== profile by process (postgres only)"
		PERF report -i "$OUT/perf.data" --comm postgres --no-children --sort pid --stdio 2>/dev/null |
			grep -E "^ +[0-9]" | head -20
		echo "== profile by process and function"
		PERF report -i "$OUT/perf.data" --comm postgres --no-children --sort pid,sym --stdio 2>/dev/null |
			grep -E "^ +[0-9]" | head -70
	} >"$f"
	rm -f "$OUT/perf.data" "$OUT/victim.txt" "$OUT/samples.txt"
	cat "$f"
done
