#!/usr/bin/env bash
# A parallel in-memory sort's shared memory after cancels (src/shm_reap.c):
# the leader hands the workers' segments to a thread that frees their pages
# after the detach, at the sort's end and on an abort.  Sorts canceled at
# several points of the load (at top level and inside a PL/pgSQL exception
# block, a subtransaction's abort), and sorts that finish, must leave the
# backend holding no descriptor of a shared memory segment, no segment
# of this server more in /dev/shm than before (gs_shm_segments: another
# server's parallel queries don't count), and no parallel worker; and the
# backend's next sort must give PostgreSQL's answer.  Canceled external
# sorts must leave no descriptor of their run file and no file.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

gs_psql <<'SQL' || exit 1
SET client_min_messages = warning;
DROP TABLE IF EXISTS gs_lcs;
CREATE TABLE gs_lcs (id int, k int8, pad text)
	WITH (autovacuum_enabled = off, parallel_workers = 2);
INSERT INTO gs_lcs SELECT i, (i::int8 * 7919) % 1000003, md5(i::text)
	FROM generate_series(1, 600000) AS i;
VACUUM (FREEZE, ANALYZE) gs_lcs;
CREATE OR REPLACE FUNCTION gs_lcs_caught(q text) RETURNS text
LANGUAGE plpgsql AS $fn$
BEGIN
	EXECUTE q;
	RETURN 'finished';
EXCEPTION WHEN query_canceled THEN
	RETURN 'canceled';
END
$fn$;
SQL

parallel="SET gpusort.min_rows = 0;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;"
settings="$parallel
SET work_mem = '1GB';"
q="SELECT * FROM gs_lcs ORDER BY k, id OFFSET 600000"

# the sort must be a parallel in-memory load, or this tests nothing
plan=$(gs_psql -c "$settings" -c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $q")
gs_expect "the sort loads in parallel, in shared memory" \
	"$(grep -c 'Shared Memory' <<<"$plan")" "1"

gs_shm_snapshot || exit 1

# one session: its pid, then canceled and finished sorts, then its
# descriptors of /dev/shm files (counted by the shell, through \!)
out=$(psql -X -q -At -v ON_ERROR_STOP=0 2>&1 <<SQL
$settings
SELECT pg_backend_pid() AS pid \gset
\setenv GS_LCS_PID :pid
\! echo "fds-before \$(ls -l /proc/\$GS_LCS_PID/fd | grep -c /dev/shm/) of \$(ls /proc/\$GS_LCS_PID/fd | wc -l)"
SET statement_timeout = 30;
$q;
SET statement_timeout = 80;
$q;
SET statement_timeout = 200;
$q;
SET statement_timeout = 500;
$q;
RESET statement_timeout;
SELECT gs_lcs_caught('SET LOCAL statement_timeout = 60; $q');
SELECT gs_lcs_caught('SET LOCAL statement_timeout = 250; $q');
SELECT gs_lcs_caught('$q');
$q;
SELECT pg_sleep(0.5);
\! echo "fds-after \$(ls -l /proc/\$GS_LCS_PID/fd | grep -c /dev/shm/) of \$(ls /proc/\$GS_LCS_PID/fd | wc -l)"
SELECT 'workers ' || count(*) FROM pg_stat_activity WHERE leader_pid = :pid;
SQL
)
fds_before=$(grep -o 'fds-before [0-9]*' <<<"$out" | cut -d' ' -f2)
fds_after=$(grep -o 'fds-after [0-9]*' <<<"$out" | cut -d' ' -f2)
# the backend's descriptors could be read (its total, after "of", is not 0)
gs_expect "the session ran and its descriptors were read" \
	"$(grep -cE '^fds-(before|after) [0-9]+ of [1-9]' <<<"$out")" "2"
gs_expect "no descriptor of a shared memory segment is left open" "$fds_after" "$fds_before"
gs_expect "no parallel worker is left" "$(grep -c '^workers 0$' <<<"$out")" "1"
gs_expect "the sorts inside exception blocks came back" \
	"$(grep -cE '^(canceled|finished)$' <<<"$out")" "3"
gs_expect "no error other than the cancels" \
	"$(grep ERROR <<<"$out" | grep -vc 'canceling statement due to statement timeout')" "0"
sleep 0.5
gs_expect "no shared memory segment of this server is left in /dev/shm" "$(gs_shm_segments)" "0"

# the backend's next sorts give PostgreSQL's answer
digest="SELECT md5(string_agg(format('%s/%s', id, k), ',' ORDER BY ord))
	FROM (SELECT *, row_number() OVER () AS ord FROM ($q) s) o"
got=$(gs_psql <<SQL
$settings
SET statement_timeout = 100;
DO \$\$ BEGIN PERFORM gs_lcs_caught('SELECT count(*) FROM ($q) s'); END \$\$;
RESET statement_timeout;
${digest/OFFSET 600000/OFFSET 0};
SET gpusort.enabled = off;
${digest/OFFSET 600000/OFFSET 0};
SQL
)
gs_expect "a sort after a cancel gives PostgreSQL's rows" \
	"$(sort -u <<<"$got" | wc -l)" "1"

# external sorts (a run file, striped over several files): canceled ones,
# at top level and in exception blocks, must leave no descriptor of the
# files (closed on a thread, after their unlink: spill.c) and no file
ext="$parallel
SET work_mem = '1MB';"
plan=$(gs_psql -c "$ext" -c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $q")
gs_expect "the sort writes runs to a file" "$(grep -c 'Disk:' <<<"$plan")" "1"
out=$(psql -X -q -At -v ON_ERROR_STOP=0 2>&1 <<SQL
$ext
SELECT pg_backend_pid() AS pid \gset
\setenv GS_LCS_PID :pid
SET statement_timeout = 150;
$q;
SET statement_timeout = 400;
$q;
RESET statement_timeout;
SELECT gs_lcs_caught('SET LOCAL statement_timeout = 100; $q');
SELECT gs_lcs_caught('SET LOCAL statement_timeout = 300; $q');
SELECT pg_sleep(0.5);
\! echo "tmp-fds \$(ls -l /proc/\$GS_LCS_PID/fd | grep -c pgsql_tmp) of \$(ls /proc/\$GS_LCS_PID/fd | wc -l)"
SELECT 'tmp-files ' || count(*) FROM pg_ls_tmpdir() WHERE name LIKE '%gpusort%';
SQL
)
gs_expect "the external sorts' session ran" \
	"$(grep -cE '^tmp-fds [0-9]+ of [1-9]' <<<"$out")" "1"
gs_expect "no descriptor of a run file is left open" \
	"$(grep -o 'tmp-fds [0-9]*' <<<"$out" | cut -d' ' -f2)" "0"
gs_expect "no run file is left" "$(grep -c '^tmp-files 0$' <<<"$out")" "1"
gs_expect "no error in the external sorts other than the cancels" \
	"$(grep ERROR <<<"$out" | grep -vc 'canceling statement due to statement timeout')" "0"

gs_psql -c "DROP TABLE gs_lcs; DROP FUNCTION gs_lcs_caught(text)" >/dev/null
gs_done
