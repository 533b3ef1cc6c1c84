#!/usr/bin/env bash
# CREATE INDEX while another session holds an old snapshot, so that the heap
# keeps recently dead row versions and HOT chains whose old versions still
# count: gpusort's heap scan (src/index_scan.c) must leave those pages to
# PostgreSQL's scan and read the others itself, and the index must equal
# PostgreSQL's build of the same table page by page (LSN and checksum
# aside), and pass amcheck with every heap tuple found in it.  Serial and
# with two workers; then once more after the snapshot is gone.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

gs_psql <<'SQL' || exit 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pageinspect;
CREATE EXTENSION IF NOT EXISTS amcheck;
DROP TABLE IF EXISTS gs_ios;
CREATE TABLE gs_ios (id int, k int, pad text)
	WITH (autovacuum_enabled = off, fillfactor = 70, parallel_workers = 2);
INSERT INTO gs_ios SELECT i, (i * 7919) % 997, md5(i::text) FROM generate_series(1, 60000) AS i;
VACUUM (FREEZE) gs_ios;
SQL

# a second session holds a snapshot from before the changes
coproc HOLD { psql -X -q -At; }
# (no lock on the table: DROP INDEX takes an exclusive one)
echo "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 'ready';" >&"${HOLD[1]}"
read -r line <&"${HOLD[0]}"
[ "$line" = ready ] || { echo "no snapshot: $line"; exit 1; }

# HOT updates (pad is not indexed), key updates and deletes, on part of the
# table only: the rest stays all-visible
gs_psql <<'SQL' || exit 1
UPDATE gs_ios SET pad = pad || 'h' WHERE id <= 20000 AND id % 3 = 0;
UPDATE gs_ios SET k = k + 1 WHERE id > 40000 AND id % 7 = 0;
DELETE FROM gs_ios WHERE id BETWEEN 20001 AND 40000 AND id % 11 = 0;
SQL

# build with gpusort (workers $1), then PostgreSQL's build; the DEBUG1 line
# of the scan (how many pages it left to PostgreSQL's: more than 0), and
# whether the two indexes are the same
build_both()
{
	local out
	out=$(gs_psql -c "SET max_parallel_maintenance_workers = $1" \
		-c 'SET client_min_messages = debug1' \
		-c 'DROP INDEX IF EXISTS gs_ios_k, gs_ios_k_pg' \
		-c 'CREATE INDEX gs_ios_k ON gs_ios (k)' 2>&1) || { echo "$out"; exit 1; }
	grep -o 'left [0-9]* to' <<<"$out" | head -1 | grep -qv 'left 0 to' &&
		echo "some pages left to PostgreSQL's scan"
	grep -o 'index "gs_ios_k" built by gpusort' <<<"$out"
	gs_psql -c "SET max_parallel_maintenance_workers = $1" \
		-c 'SET gpusort.index_build = off' \
		-c 'CREATE INDEX gs_ios_k_pg ON gs_ios (k)' || exit 1
	gs_psql <<'SQL'
SELECT 'amcheck passed' FROM (SELECT bt_index_parent_check('gs_ios_k', true, true)) c;
SELECT CASE WHEN pg_relation_size('gs_ios_k') = pg_relation_size('gs_ios_k_pg')
	AND NOT EXISTS (SELECT 1 FROM generate_series(0, pg_relation_size('gs_ios_k') / 8192 - 1) b
					WHERE substr(get_raw_page('gs_ios_k', b::int), 11) <>
						  substr(get_raw_page('gs_ios_k_pg', b::int), 11))
	THEN 'same pages' ELSE 'pages differ' END;
SQL
}

want="some pages left to PostgreSQL's scan
index \"gs_ios_k\" built by gpusort
amcheck passed
same pages"
gs_expect "old snapshot held, serial" "$(build_both 0)" "$want"
gs_expect "old snapshot held, two workers" "$(build_both 2 | grep -v "^some pages")" \
	"$(grep -v "^some pages" <<<"$want")"

echo "COMMIT;" >&"${HOLD[1]}"
exec {HOLD[1]}>&-
wait "$HOLD_PID" 2>/dev/null

# no snapshot: the old versions are dead, still PostgreSQL's to skip
gs_expect "snapshot gone, serial" "$(build_both 0)" "$want"

gs_psql -c 'DROP TABLE gs_ios' || exit 1
gs_done
