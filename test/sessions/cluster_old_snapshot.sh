#!/usr/bin/env bash
# CLUSTER while another session holds an old snapshot, so that the heap
# keeps recently dead row versions, where PostgreSQL's planner chose to
# follow the index: the new heap (every row version on every page, visible
# or not: pageinspect) and CLUSTER VERBOSE's counts must equal PostgreSQL's
# index scan copy of a table made the same way.  With HOT chains keeping
# old versions gpusort leaves the copy to PostgreSQL (and says so); with
# other updates and deletes it sorts.  Then the same once the snapshot is
# gone (every old version dead).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# both tables in one transaction per step: same xids in both heaps
setup()
{
	gs_psql <<SQL || exit 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pageinspect;
DROP TABLE IF EXISTS gs_os1, gs_os2;
BEGIN;
CREATE TABLE gs_os1 (id int, k int, pad text) WITH (autovacuum_enabled = off, fillfactor = $1);
CREATE TABLE gs_os2 (id int, k int, pad text) WITH (autovacuum_enabled = off, fillfactor = $1);
INSERT INTO gs_os1 SELECT i, (i * 7919) % 97, md5(i::text) FROM generate_series(1, 20000) AS i;
INSERT INTO gs_os2 SELECT i, (i * 7919) % 97, md5(i::text) FROM generate_series(1, 20000) AS i;
CREATE INDEX gs_os1_k ON gs_os1 (k);
CREATE INDEX gs_os2_k ON gs_os2 (k);
COMMIT;
SQL
}

# the changes, the same in both tables; $1: the share of rows given a
# HOT update (pad is not indexed), as the first hex digit of an md5
change()
{
	gs_psql <<SQL || exit 1
BEGIN;
UPDATE gs_os1 SET pad = pad || 'h' WHERE md5(id::text) < '$1';
UPDATE gs_os2 SET pad = pad || 'h' WHERE md5(id::text) < '$1';
UPDATE gs_os1 SET k = k + 1 WHERE id % 7 = 0;
UPDATE gs_os2 SET k = k + 1 WHERE id % 7 = 0;
DELETE FROM gs_os1 WHERE id % 11 = 0;
DELETE FROM gs_os2 WHERE id % 11 = 0;
COMMIT;
SQL
}

# CLUSTER VERBOSE both (gpusort on, then off); prints gpusort's log line,
# whether the VERBOSE lines are equal (without the removable count when $1
# is "nonremovable"), whether the heaps are
cluster_both()
{
	local on off strip=''
	[ "${1:-}" = nonremovable ] && strip='s/found [0-9]* removable, //'
	on=$(gs_psql -c 'SET gpusort.log_index_builds = on' \
		-c 'SET max_parallel_maintenance_workers = 0' \
		-c 'SET client_min_messages = log' \
		-c 'CLUSTER VERBOSE gs_os1 USING gs_os1_k' 2>&1) || { echo "$on"; exit 1; }
	off=$(gs_psql -c 'SET gpusort.enabled = off' \
		-c 'SET client_min_messages = info' \
		-c 'CLUSTER VERBOSE gs_os2 USING gs_os2_k' 2>&1) || { echo "$off"; exit 1; }
	grep -o 'table "gs_os1" sorted by .*' <<<"$on"
	# INFO lines without the CPU/time DETAIL, table names made equal
	if [ "$(grep '^INFO' <<<"$on" | sed -e 's/gs_os1/gs_osN/g' -e "$strip")" = \
		 "$(grep '^INFO' <<<"$off" | sed -e 's/gs_os2/gs_osN/g' -e "$strip")" ]; then
		echo "same counts"
	else
		echo "counts differ:"; grep '^INFO' <<<"$on"; grep '^INFO' <<<"$off"
	fi
	gs_psql <<'SQL'
SELECT CASE WHEN a.h = b.h AND a.r = b.r THEN 'same heap' ELSE 'heaps differ' END
FROM (SELECT md5(string_agg(concat_ws(':', p, lp, lp_flags, t_xmin, t_xmax, t_ctid, t_infomask2, t_data), ',' ORDER BY p, lp)) AS h,
			 (SELECT reltuples FROM pg_class WHERE relname = 'gs_os1') AS r
	  FROM generate_series(0, pg_relation_size('gs_os1') / 8192 - 1) AS p,
		   heap_page_items(get_raw_page('gs_os1', p::int))) a,
	 (SELECT md5(string_agg(concat_ws(':', p, lp, lp_flags, t_xmin, t_xmax, t_ctid, t_infomask2, t_data), ',' ORDER BY p, lp)) AS h,
			 (SELECT reltuples FROM pg_class WHERE relname = 'gs_os2') AS r
	  FROM generate_series(0, pg_relation_size('gs_os2') / 8192 - 1) AS p,
		   heap_page_items(get_raw_page('gs_os2', p::int))) b;
SQL
}

# a second session holds a snapshot from before the changes
hold_snapshot()
{
	coproc HOLD { psql -X -q -At; }
	echo "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 'ready';" >&"${HOLD[1]}"
	read -r line <&"${HOLD[0]}"
	[ "$line" = ready ] || { echo "no snapshot: $line"; exit 1; }
}
release_snapshot()
{
	echo "COMMIT;" >&"${HOLD[1]}"
	exec {HOLD[1]}>&-
	wait "$HOLD_PID" 2>/dev/null
}

# HOT chains keep old versions: PostgreSQL copies
setup 70
hold_snapshot
change 5
res=$(cluster_both)
release_snapshot
gs_expect "HOT chains with recently dead versions" "$res" \
"table \"gs_os1\" sorted by PostgreSQL: a HOT chain keeps more than one row version
same counts
same heap"

# updates of the key only (no HOT chains), deletes: gpusort sorts
setup 70
hold_snapshot
change 0
res=$(cluster_both)
release_snapshot
gs_expect "recently dead versions, no HOT chains" "$res" \
"table \"gs_os1\" sorted by gpusort instead of PostgreSQL's index scan
same counts
same heap"

# no snapshot: the old versions are dead.  The removable counts differ:
# gpusort's is PostgreSQL's sort path's (every dead version in the heap),
# PostgreSQL's index scan counts only those it still reaches (it prunes the
# pages it visits)
setup 70
change 5
res=$(cluster_both nonremovable)
gs_expect "dead versions" "$res" \
"table \"gs_os1\" sorted by gpusort instead of PostgreSQL's index scan
same counts
same heap"

# and gpusort's removable count is PostgreSQL's sort path's
setup 70
change 5
n1=$(gs_psql -c 'SET client_min_messages = info' -c 'CLUSTER VERBOSE gs_os1 USING gs_os1_k' 2>&1 |
	grep -o 'found [0-9]* removable, [0-9]* nonremovable')
n2=$(gs_psql -c 'SET gpusort.enabled = off' -c 'SET random_page_cost = 1000000' \
	-c "SET effective_cache_size = '8kB'" -c 'SET client_min_messages = info' \
	-c 'CLUSTER VERBOSE gs_os2 USING gs_os2_k' 2>&1 |
	grep -o 'found [0-9]* removable, [0-9]* nonremovable')
gs_expect "dead versions: counts as PostgreSQL's sort path's" "$n1" "$n2"

gs_psql -c 'DROP TABLE gs_os1, gs_os2' || exit 1
gs_done
