#!/usr/bin/env bash
# Errors and cancels in parallel gpusort work, repeated under CPU load: a
# parallel btree build (CREATE INDEX), a parallel CLUSTER and a sort whose
# input parallel workers load (ORDER BY under Gather), each in memory and
# in runs on disk, with and without the leader scanning.  An index
# expression (or a filter) raises an error for rows from a given one on,
# in a worker or in the leader only (it compares its pid with the
# leader's), and statement_timeout cancels the statement at several points
# (and while a worker sleeps in the scan).
#
# Issue 30: a worker's error unwound its stack while helper threads still
# read state that lived there; under load the worker sometimes died of a
# segfault and the postmaster restarted every session (crash recovery).
# One try crashed about once in ten, so each case runs many times, in
# fresh sessions, while two busy loops keep the CPUs loaded.
#
# Checked: each statement fails with its own error (or the timeout), a
# parallel worker's error comes through the leader, no session loses its
# connection; afterwards the server never restarted (an unlogged table
# keeps its row, a session opened at the start is still there, the
# postmaster's start time, which only a full restart changes, and, where
# its log can be read, no "terminated by signal" line since the start),
# no temporary file, no parallel worker and no shared memory segment of
# this server is left (gs_shm_segments), the failed index does not exist,
# the failed CLUSTERs left the heap as it was (or, where a CLUSTER beat its
# timeout, as CLUSTER writes it: the same rows in the index's order); and
# the same build, CLUSTER and sort then give PostgreSQL's answer.  A crash ends the cases early: the test fails, it does not hang.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# statements per error case (GS_PE_REPS to change), and rounds of the
# four timeouts per cancel case (GS_PE_CANCEL_REPS); the case that crashed
# most (a worker's error in an in-memory build) runs five times as often.
# About 90 s on two CPUs.
REPS=${GS_PE_REPS:-5}
CANCEL_REPS=${GS_PE_CANCEL_REPS:-2}
PER_SESSION=5
ROWS=120000
BUSY=()
HOLD_PID=

cleanup()
{
	local p
	for p in "${BUSY[@]}"; do
		kill "$p" 2>/dev/null
	done
	[ -n "${HOLD_PID:-}" ] && kill "$HOLD_PID" 2>/dev/null
}
trap cleanup EXIT

gs_psql <<SQL || exit 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pageinspect;
DROP TABLE IF EXISTS gs_pe, gs_pe_c, gs_pe_alive;
-- emptied by crash recovery
CREATE UNLOGGED TABLE gs_pe_alive (x int);
INSERT INTO gs_pe_alive VALUES (1);
CHECKPOINT;
-- the key: raises an error (or sleeps) when gs_pe.who asks for it, in the
-- participant it names (the leader: gs_pe.leader is its pid; a worker:
-- any other), for the rows from gs_pe.row on
CREATE OR REPLACE FUNCTION gs_pe_key(i int) RETURNS int
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS \$\$
DECLARE
	who text := current_setting('gs_pe.who', true);
BEGIN
	IF coalesce(who, '') = '' OR i < current_setting('gs_pe.row')::int THEN
		RETURN i;
	END IF;
	IF who = 'leader' AND pg_backend_pid() = current_setting('gs_pe.leader')::int OR
	   who = 'worker' AND pg_backend_pid() <> current_setting('gs_pe.leader')::int THEN
		IF current_setting('gs_pe.what', true) = 'sleep' THEN
			PERFORM pg_sleep(5);
		ELSE
			RAISE EXCEPTION 'gs_pe_key failed on row %', i;
		END IF;
	END IF;
	RETURN i;
END \$\$;
-- HOT chains and dead tuples, as in sql/index_parallel.sql
CREATE TABLE gs_pe (id int4, a int4, b int8, c text)
	WITH (autovacuum_enabled = off, parallel_workers = 2);
INSERT INTO gs_pe
SELECT i, (i * 7919) % 5003,
	   CASE WHEN i % 89 = 0 THEN NULL ELSE (i::int8 * 2654435761) % 1000003 - 500000 END,
	   'k' || lpad(((i * 31) % 10007)::text, 6, '0') || repeat('y', i % 5)
FROM generate_series(1, $ROWS) AS i;
UPDATE gs_pe SET c = c || 'u' WHERE id % 100 = 0;
DELETE FROM gs_pe WHERE id % 1000 = 999;
CREATE TABLE gs_pe_c WITH (autovacuum_enabled = off, parallel_workers = 2)
	AS SELECT * FROM gs_pe;
UPDATE gs_pe_c SET c = c || 'u' WHERE id % 7 = 0;
DELETE FROM gs_pe_c WHERE id % 13 = 0;
-- a unique key in another order than the heap's (120011 is prime)
CREATE UNIQUE INDEX gs_pe_ck ON gs_pe_c ((gs_pe_key(id) * 7919 % 120011));
VACUUM ANALYZE gs_pe;
VACUUM ANALYZE gs_pe_c;
SQL

# ---- the server as it was at the start ----
start_time=$(gs_psql -c 'SELECT pg_postmaster_start_time()') || exit 1
gs_shm_snapshot || exit 1
# its log: the logging collector's file, else the postmaster's stderr when
# that is a file; "terminated by signal" lines written since now
datadir=$(gs_psql -c 'SHOW data_directory')
log=$(gs_psql -c 'SELECT pg_current_logfile()')
if [ -n "$log" ]; then
	case "$log" in /*) ;; *) log=$datadir/$log ;; esac
else
	log=$(readlink "/proc/$GS_PM_PID/fd/2" 2>/dev/null)
fi
if [ -n "$log" ] && [ -f "$log" ] && [ -r "$log" ]; then
	log_size=$(stat -c %s "$log")
else
	echo "(the server's log can't be read: its lines are not checked)"
	log=
fi
# a session that stays open from now to the end
coproc HOLD { psql -X -q -At 2>&1; }
echo "SELECT pid || ' ' || backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid();" >&"${HOLD[1]}"
read -r -t 10 hold <&"${HOLD[0]}"
[ -n "$hold" ] || { echo "no session held: $hold"; exit 1; }
hold_pid=${hold%% *}
hold_start=${hold#* }

# ---- the statements ----
PARALLEL="SET max_parallel_maintenance_workers = 2;
SET max_parallel_workers_per_gather = 2;
SET min_parallel_table_scan_size = 0;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET gpusort.min_rows = 0;
SET gpusort.index_build = on;
SET random_page_cost = 1000000;
SET effective_cache_size = '8kB';"
MEM="SET maintenance_work_mem = '64MB';
SET work_mem = '1GB';"
RUNS="SET maintenance_work_mem = '1MB';
SET work_mem = '1MB';"
INDEX="CREATE INDEX gs_pe_err ON gs_pe (gs_pe_key(id));"
CLUSTER="CLUSTER gs_pe_c USING gs_pe_ck;"
SORT_Q="SELECT id, b FROM gs_pe WHERE gs_pe_key(id) IS NOT NULL ORDER BY b, id"
SORT="$SORT_Q OFFSET $ROWS;"

# the sorts must load in parallel, in shared memory and in runs
for m in MEM RUNS; do
	plan=$(gs_psql -c "$PARALLEL" -c "${!m}" -c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $SORT") || exit 1
	if [ $m = MEM ]; then want='Shared Memory'; else want='Disk:'; fi
	gs_expect "the sort's load is parallel, in $m" \
		"$(grep -c 'Workers Launched: 2' <<<"$plan") $(grep -c "$want" <<<"$plan")" "1 1"
done

# the heap as it is (its rows where they are), the rows it holds, and
# whether they lie in the order of gs_pe_ck, as a CLUSTER leaves them
heap="SELECT md5(string_agg(ctid::text || ':' || id, ',' ORDER BY ctid)) FROM gs_pe_c"
heap_rows="SELECT md5(string_agg(id::text, ',' ORDER BY id)) FROM gs_pe_c"
heap_clustered="SELECT (SELECT md5(string_agg(id::text, ',' ORDER BY ctid)) FROM gs_pe_c) =
	(SELECT md5(string_agg(id::text, ',' ORDER BY gs_pe_key(id) * 7919 % 120011)) FROM gs_pe_c)"
heap_before=$(gs_psql -c "$heap") || exit 1
rows_before=$(gs_psql -c "$heap_rows") || exit 1

BUSY_STARTED=0
LOST=0

# up to PER_SESSION statements a session; prints every session's output
sessions()
{
	local setup=$1 stmt=$2 n=$3 k rc
	while [ "$n" -gt 0 ]; do
		k=$(( n < PER_SESSION ? n : PER_SESSION ))
		n=$(( n - k ))
		{
			echo "SELECT set_config('gs_pe.leader', pg_backend_pid()::text, false) IS NULL;"
			echo "$PARALLEL"
			echo "$setup"
			for _ in $(seq 1 "$k"); do
				echo "$stmt"
			done
		} | psql -X -q -At -v ON_ERROR_STOP=0 2>&1
		rc=${PIPESTATUS[1]}
		[ "$rc" -eq 0 ] || { echo "psql exited $rc"; return 1; }
	done
}

lost_pattern='connection to server was lost|server closed the connection|terminated abnormally|crash of another server process|recovery mode|not yet accepting|psql exited'

# error_case NAME STATEMENT SETUP REPS WHO [SOME]: each statement fails
# with gs_pe_key's error, through a parallel worker when WHO is one.  With
# SOME, a statement may also succeed: a worker with the leader scanning
# too may find the scan over when it starts (late, under load: in one run
# none of five did); every error must still be the worker's.
error_case()
{
	local name=$1 stmt=$2 setup=$3 reps=$4 who=$5 some=${6:-} out ctx errs
	[ "$LOST" = 1 ] && return
	out=$(sessions "$setup
SET gs_pe.who = '$who';
SET gs_pe.what = 'error';" "$stmt" "$reps")
	if grep -qE "$lost_pattern" <<<"$out"; then
		LOST=1
		gs_expect "$name: no session lost its connection" \
			"$(grep -E "$lost_pattern" <<<"$out" | sort -u | tr '\n' ' ')" ""
		return
	fi
	# a worker's error comes with "parallel worker" in its context
	ctx=$(grep -c '^parallel worker$' <<<"$out")
	errs=$(grep -c '^ERROR:  gs_pe_key failed on row [0-9]*$' <<<"$out")
	[ "$who" = leader ] && ctx=$((errs - ctx))
	if [ -n "$some" ]; then
		gs_expect "$name, $reps times: the error ($errs times), from the $who" \
			"$ctx from the $who, $(grep -c '^ERROR' <<<"$out") in all" \
			"$errs from the $who, $errs in all"
	else
		gs_expect "$name, $reps times: the error, from the $who" \
			"$errs errors, $ctx from the $who, $(grep -c '^ERROR' <<<"$out") in all" \
			"$reps errors, $reps from the $who, $reps in all"
	fi
}

# cancel_case NAME STATEMENT SETUP [WHO]: statement_timeout at several
# points, CANCEL_REPS rounds (two a session); the statement is
# canceled, or it ends (an index made is dropped)
cancel_case()
{
	local name=$1 stmt=$2 setup=$3 who=${4:-} out ms block=
	[ "$LOST" = 1 ] && return
	for ms in 20 60 150 400; do
		block+="SET statement_timeout = $ms;
$stmt
RESET statement_timeout;
DROP INDEX IF EXISTS gs_pe_err;
"
	done
	out=$(PER_SESSION=2 sessions "$setup
SET client_min_messages = warning;
SET gs_pe.who = '$who';
SET gs_pe.what = 'sleep';
SET gs_pe.row = 30000;" "$block" "$CANCEL_REPS")
	if grep -qE "$lost_pattern" <<<"$out"; then
		LOST=1
		gs_expect "$name: no session lost its connection" \
			"$(grep -E "$lost_pattern" <<<"$out" | sort -u | tr '\n' ' ')" ""
		return
	fi
	gs_expect "$name, canceled $(grep -c '^ERROR:  canceling statement due to statement timeout$' <<<"$out") times of $((4 * CANCEL_REPS)): no other error" \
		"$(grep '^ERROR' <<<"$out" | grep -v 'canceling statement due to statement timeout' | sort | uniq -c)" ""
}

# the busy loops: both CPUs (or more) taken while the cases run
for _ in $(seq 1 "$(( $(nproc) < 2 ? 2 : $(nproc) ))"); do
	sh -c 'while :; do :; done' &
	BUSY+=($!)
done
t0=$SECONDS

for m in MEM RUNS; do
	for lp in off on; do
		setup="${!m}
SET parallel_leader_participation = $lp;"
		tag="($m, leader participation $lp)"
		# with the leader scanning too, a participant must read a row from
		# gs_pe.row on: the row is an early one
		row=60000 irow=100000
		[ $lp = on ] && row=10000 irow=10000
		# the crash of issue 30: a worker's error in an in-memory build
		reps=$REPS
		[ $m = MEM ] && [ $lp = off ] && reps=$((5 * REPS))
		some=
		[ $lp = on ] && some=some
		error_case "CREATE INDEX $tag, an error in a worker" "$INDEX" "$setup
SET gs_pe.row = $irow;" "$reps" worker $some
		error_case "CLUSTER $tag, an error in a worker" "$CLUSTER" "$setup
SET gs_pe.row = $row;" "$REPS" worker $some
		error_case "sort $tag, an error in a worker" "$SORT" "$setup
SET gs_pe.row = $row;" "$REPS" worker $some
		if [ $lp = on ]; then
			error_case "CREATE INDEX $tag, an error in the leader" "$INDEX" "$setup
SET gs_pe.row = $row;" "$REPS" leader
			error_case "CLUSTER $tag, an error in the leader" "$CLUSTER" "$setup
SET gs_pe.row = $row;" "$REPS" leader
			error_case "sort $tag, an error in the leader" "$SORT" "$setup
SET gs_pe.row = $row;" "$REPS" leader
		fi
	done
	setup="${!m}"
	cancel_case "CREATE INDEX ($m): statement_timeout" "$INDEX" "$setup"
	cancel_case "CLUSTER ($m): statement_timeout" "$CLUSTER" "$setup"
	cancel_case "sort ($m): statement_timeout" "$SORT" "$setup"
	cancel_case "CREATE INDEX ($m): statement_timeout, a worker asleep" "$INDEX" "$setup" worker
done
echo "(cases: $((SECONDS - t0)) s under load)"
for p in "${BUSY[@]}"; do
	kill "$p" 2>/dev/null
done
BUSY=()

# ---- afterwards ----
# a crash: wait for the end of recovery (bounded), then check
for _ in $(seq 1 120); do
	gs_psql -c 'SELECT 1' >/dev/null 2>&1 && break
	sleep 0.5
done
echo "SELECT 'still here';" >&"${HOLD[1]}" 2>/dev/null
read -r -t 10 line <&"${HOLD[0]}" 2>/dev/null
gs_expect "the session opened at the start is still connected" "${line:-}" "still here"
gs_expect "the same session, seen by another" \
	"$(gs_psql -c "SELECT count(*) FROM pg_stat_activity WHERE pid = $hold_pid AND backend_start = '$hold_start'" 2>&1)" "1"
gs_expect "the unlogged table kept its row (no crash recovery)" \
	"$(gs_psql -c 'SELECT count(*) FROM gs_pe_alive' 2>&1)" "1"
gs_expect "the postmaster did not restart" \
	"$(gs_psql -c 'SELECT pg_postmaster_start_time()' 2>&1)" "$start_time"
if [ -n "$log" ]; then
	gs_expect "the server's log has no process terminated by a signal" \
		"$(tail -c +"$((log_size + 1))" "$log" | grep -E 'terminated by signal|terminated by exception|was terminated' | head -n 3)" ""
fi
gs_expect "no parallel worker left" \
	"$(gs_psql -c "DO \$\$ BEGIN FOR i IN 1 .. 100 LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'parallel worker');
		PERFORM pg_sleep(0.05); END LOOP; END \$\$" \
		-c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'" 2>&1)" "0"
gs_expect "no temporary file left" "$(gs_psql -c 'SELECT count(*) FROM pg_ls_tmpdir()' 2>&1)" "0"
sleep 0.3
gs_expect "no shared memory segment of this server left" "$(gs_shm_segments)" "0"

# the failed statements changed nothing, and the same ones give
# PostgreSQL's answer now
res=$(gs_psql 2>&1 <<SQL
$PARALLEL
$MEM
SELECT to_regclass('gs_pe_err') IS NULL AS no_index;
SELECT (($heap) = '$heap_before' OR ($heap_clustered)) AND
	($heap_rows) = '$rows_before' AS heap_unchanged_or_clustered;
SET parallel_leader_participation = off;
SET gpusort.log_index_builds = on;
SET client_min_messages = log;
$INDEX
RESET client_min_messages;
SET gpusort.index_build = off;
CREATE INDEX gs_pe_pg ON gs_pe (gs_pe_key(id));
SELECT CASE WHEN pg_relation_size('gs_pe_err') <> pg_relation_size('gs_pe_pg') THEN 'size differs'
	ELSE (SELECT count(*) FROM generate_series(0, pg_relation_size('gs_pe_err') / 8192 - 1) AS b,
			LATERAL (SELECT get_raw_page('gs_pe_err', b) AS p1, get_raw_page('gs_pe_pg', b) AS p2) r,
			LATERAL page_header(r.p1) h
		  WHERE substr(p1, 11, h.lower - 10) || substr(p1, h.upper + 1) <>
				substr(p2, 11, h.lower - 10) || substr(p2, h.upper + 1))::text || ' pages differ'
	END;
DROP INDEX gs_pe_err, gs_pe_pg;
SET gpusort.index_build = on;
SET maintenance_work_mem = '1MB';
SET client_min_messages = log;
$CLUSTER
RESET client_min_messages;
SET gpusort.enabled = off;
SELECT ($heap_clustered) AND ($heap_rows) = '$rows_before' AS clustered;
SET gpusort.enabled = on;
SET parallel_leader_participation = on;
SELECT md5(string_agg(id || '/' || b, ',')) FROM ($SORT_Q) s \gset gs_
SET gpusort.enabled = off;
SELECT md5(string_agg(id || '/' || b, ',')) = :'gs_md5' AS same_sort FROM ($SORT_Q) s;
SQL
)
gs_expect "afterwards: no index left, heap unchanged; index, CLUSTER, sort as PostgreSQL's" \
	"$(sed -E 's/^(LOG:  (index|table) "[a-z_]*" (built|sorted) by gpusort)( \([^)]*\))?( with [0-9]+ parallel workers?)?.*$/\1\5/' <<<"$res" | grep -v '^LOG:  index "gs_pe_ck"')" \
"t
t
LOG:  index \"gs_pe_err\" built by gpusort
0 pages differ
LOG:  table \"gs_pe_c\" sorted by gpusort with 2 parallel workers
t
t"

echo "\\q" >&"${HOLD[1]}" 2>/dev/null
wait "$HOLD_PID" 2>/dev/null
HOLD_PID=
gs_psql -c "DROP TABLE gs_pe, gs_pe_c, gs_pe_alive; DROP FUNCTION gs_pe_key(int)" >/dev/null
gs_done
