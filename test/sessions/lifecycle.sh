#!/usr/bin/env bash
# gpusort's life cycle, in a throwaway server of its own (initdb'ed here, on
# its own port and socket directory, run as the test server's operating
# system user) started twice:
#   1. without gpusort in shared_preload_libraries: CREATE EXTENSION warns
#      (with the hint to preload it), and loading the library in the middle
#      of a session (LOAD, a gpusort function) does not make the session's
#      sorts GpuSorts;
#   2. preloading gpusort with gpusort.service_memory = 0 (a GPU that can't
#      be used, on any machine): with gpusort.engine = gpu the "not
#      available" WARNING comes once a session, not once per query nor once
#      per parallel worker; and DROP EXTENSION in one session stops a second,
#      already open, session from replacing its sorts (and CREATE EXTENSION
#      brings them back), including a statement it had prepared.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bindir=$(pg_config --bindir 2>/dev/null)
[ -x "$bindir/initdb" ] || bindir=$(dirname "$(command -v psql)")
datadir=$(gs_psql -c 'SHOW data_directory') || exit 1
owner=$(stat -c %U "$datadir") || exit 1
dir=$(mktemp -d /tmp/gs-lifecycle.XXXXXX)
chown "$owner" "$dir"
port=$(( ${PGPORT:-5432} + 37 ))

as_owner()
{
	if [ "$(id -un)" = "$owner" ]; then
		"$@"
	else
		runuser -u "$owner" -- "$@"
	fi
}

cleanup()
{
	as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
	[ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT

start()
{
	as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses='' $*" start >/dev/null ||
		{ tail -n 20 "$dir/log"; exit 1; }
}

stop()
{
	as_owner "$bindir/pg_ctl" -D "$dir/data" -w -m fast stop >/dev/null || exit 1
}

q()
{
	PGHOST=$dir PGPORT=$port PGUSER=$owner PGDATABASE=postgres gs_psql "$@"
}

as_owner "$bindir/initdb" -D "$dir/data" -A trust -U "$owner" --no-sync \
	--locale=C -E UTF8 >"$dir/initdb.log" 2>&1 ||
	{ cat "$dir/initdb.log"; exit 1; }

# ---- 1. not preloaded ----
start
out=$(q -c "CREATE EXTENSION gpusort" 2>&1)
gs_expect "CREATE EXTENSION without preloading warns" \
	"$(grep -c '^WARNING:  gpusort is not in shared_preload_libraries' <<<"$out")" 1
gs_expect "... with the hint to preload it" \
	"$(grep -c '^HINT:  Add gpusort to shared_preload_libraries and restart the server.' <<<"$out")" 1
q -c "CREATE TABLE t AS SELECT g AS id, (g * 7919) % 100003 AS k FROM generate_series(1, 50000) g" \
	-c "ANALYZE t" || exit 1
plan_sql="SET gpusort.min_rows = 0; EXPLAIN (COSTS OFF) SELECT * FROM t ORDER BY k"
gs_expect "no GpuSort before a load" \
	"$(q -c "$plan_sql" | grep -c GpuSort)" 0
gs_expect "no GpuSort after LOAD 'gpusort' in the session" \
	"$(q -c "LOAD 'gpusort'" -c "$plan_sql" | grep -c GpuSort)" 0
gs_expect "no GpuSort after a gpusort function loaded the library" \
	"$(q -c "SELECT count(*) FROM gpusort_info()" -c "$plan_sql" | grep -c GpuSort)" 0
gs_expect "no index built by gpusort either" \
	"$(q -c "SET client_min_messages = log" -c "SET gpusort.log_index_builds = on" \
		-c "LOAD 'gpusort'" -c "CREATE INDEX ti ON t (k)" -c "DROP INDEX ti" 2>&1 |
		grep -c 'built by gpusort')" 0
gs_expect "CREATE EXTENSION in a second database warns there too" \
	"$(q -c "CREATE DATABASE d2" && PGHOST=$dir PGPORT=$port PGUSER=$owner PGDATABASE=d2 \
		gs_psql -c "CREATE EXTENSION gpusort" 2>&1 | grep -c '^WARNING:  gpusort is not in shared_preload_libraries')" 1
stop

# ---- 2. preloaded, the GPU unusable (no service pool) ----
start "-c shared_preload_libraries=gpusort -c gpusort.service_memory=0"
gs_expect "preloaded: GpuSort" "$(q -c "$plan_sql" | grep -c 'Custom Scan (GpuSort)')" 1
gs_expect "preloaded: CREATE EXTENSION does not warn" \
	"$(q -c "DROP EXTENSION gpusort" -c "CREATE EXTENSION gpusort" 2>&1 | grep -c WARNING)" 0

# three sorts in one session, each with parallel workers loading the input
out=$(q 2>&1 <<'SQL'
SET gpusort.min_rows = 0;
SET gpusort.engine = gpu;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT count(*) FROM (SELECT * FROM t ORDER BY k) s;
SELECT count(*) FROM (SELECT * FROM t ORDER BY k DESC) s;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM t ORDER BY k, id;
SQL
)
gs_expect "GPU not available: one WARNING in a session of three sorts" \
	"$(grep -c '^WARNING:  gpusort GPU engine is not available' <<<"$out")" 1
gs_expect "... and EXPLAIN still says why" \
	"$(grep -c 'GpuSort Fallback: gpusort.service_memory is 0' <<<"$out")" 1
gs_expect "... the sorts had parallel workers" \
	"$(grep -c 'Workers Launched: [1-9]' <<<"$out")" 1

# DROP EXTENSION in another session: an open session stops replacing sorts
fifo=$dir/fifo
mkfifo "$fifo"
q -c "SET gpusort.min_rows = 0" -c "PREPARE p AS SELECT * FROM t ORDER BY k" \
	-c "EXPLAIN (COSTS OFF) EXECUTE p" -f - <"$fifo" >"$dir/s2.out" 2>&1 &
s2=$!
exec 7>"$fifo"
s2_plans()
{
	# EXPLAIN of a query and of the prepared statement, then a marker
	echo "EXPLAIN (COSTS OFF) SELECT * FROM t ORDER BY k DESC;" >&7
	echo "EXPLAIN (COSTS OFF) EXECUTE p;" >&7
	echo "SELECT 'mark $1';" >&7
	for _ in $(seq 1 300); do
		grep -q "^mark $1\$" "$dir/s2.out" && break
		sleep 0.1
	done
	sed -n "/^mark $(($1 - 1))\$/,/^mark $1\$/p" "$dir/s2.out" | grep -c 'Custom Scan (GpuSort)'
}
echo "SELECT 'mark 0';" >&7
gs_expect "session 2 with the extension: both sorts GpuSorts" "$(s2_plans 1)" 2
q -c "DROP EXTENSION gpusort" || exit 1
gs_expect "session 2 after session 1 dropped the extension: no GpuSort" "$(s2_plans 2)" 0
q -c "CREATE EXTENSION gpusort" || exit 1
gs_expect "session 2 after session 1 created it again: GpuSorts" "$(s2_plans 3)" 2
exec 7>&-
wait $s2
gs_done
