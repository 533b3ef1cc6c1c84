#!/usr/bin/env bash
# Recently dead tuples in a unique index build.
#
#   test/index/dead.sh
#
# While another session holds an old snapshot, rows are deleted and their
# keys inserted again, so the heap has recently dead and live tuples with
# equal keys.  A unique index must then build (btbuild keeps the recently
# dead tuples out of the uniqueness check but indexes them), and gpusort's
# build must equal PostgreSQL's page for page and pass amcheck.  Runs in a
# throwaway cluster; prints "ok" and exits 0 on success.
#
# GS_TEST_LIBDIR: see lib.sh.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
gs_reexec_in_cluster "$0" "$@"

q >/dev/null <<'SQL'
CREATE EXTENSION amcheck;
CREATE EXTENSION pageinspect;
CREATE TABLE d (k int4, v text) WITH (autovacuum_enabled = off);
INSERT INTO d SELECT i, md5(i::text) FROM generate_series(1, 50000) AS i;
SQL

# an old snapshot, held until we are done
psql -X -q -c "BEGIN ISOLATION LEVEL REPEATABLE READ;
			   SELECT count(*) FROM d;
			   SELECT pg_sleep(120);" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 1 100); do
	n=$(q -c "SELECT count(*) FROM pg_stat_activity
			  WHERE query LIKE '%pg_sleep(120)%' AND backend_xmin IS NOT NULL
				AND pid <> pg_backend_pid()")
	[ "$n" = 1 ] && break
	sleep 0.1
done
[ "$n" = 1 ] || fail "snapshot holder did not start"

out=$(q 2>&1 <<'SQL'
DELETE FROM d WHERE k % 10 = 0;
INSERT INTO d SELECT k, 'again' FROM generate_series(10, 50000, 10) AS k;
UPDATE d SET v = v || 'u' WHERE k % 10 = 5;
SET max_parallel_maintenance_workers = 0;
SET client_min_messages = debug1;
CREATE UNIQUE INDEX d_k ON d (k);
-- the same through parallel workers' heap scans
SET client_min_messages = debug2;
SET max_parallel_maintenance_workers = 2;
SET min_parallel_table_scan_size = 0;
CREATE UNIQUE INDEX d_kv ON d (k) INCLUDE (v);
SET max_parallel_maintenance_workers = 0;
RESET client_min_messages;
SET gpusort.index_build = off;
CREATE UNIQUE INDEX d_k_pg ON d (k);
CREATE UNIQUE INDEX d_kv_pg ON d (k) INCLUDE (v);
SQL
) || fail "builds: $out"
n=$(grep -c 'built by gpusort' <<<"$out" || true)
[ "$n" = 2 ] || fail "expected 2 indexes built by gpusort, got $n: $out"
grep -Eq 'gpusort index "d_kv": .*with [1-9][0-9]* workers' <<<"$out" ||
	fail "d_kv was not scanned by parallel workers: $out"

res=$(q <<'SQL'
SELECT bt_index_parent_check('d_k', true, true),
	   bt_index_parent_check('d_kv', true, true);
SELECT i, pg_relation_size(i) = pg_relation_size(i || '_pg'),
	   (SELECT count(*) FROM generate_series(0, pg_relation_size(i) / 8192 - 1) AS b
		WHERE substr(get_raw_page(i, b), 11) <>
			  substr(get_raw_page(i || '_pg', b), 11))
FROM unnest('{d_k,d_kv}'::text[]) AS i;
-- leaf items, less the high keys of all leaf pages but the rightmost
SELECT 'index tuples', sum(live_items) - count(*) + 1
FROM generate_series(1, pg_relation_size('d_k') / 8192 - 1) AS b,
	 bt_page_stats('d_k', b::int)
WHERE type = 'l';
SQL
)
kill "$holder" 2>/dev/null || true
grep -qx 'd_k|t|0' <<<"$res" || fail "d_k differs from PostgreSQL's build: $res"
grep -qx 'd_kv|t|0' <<<"$res" || fail "d_kv differs from PostgreSQL's build: $res"
# 50000 live tuples, and the 5000 deleted and 5000 updated ones the old
# snapshot still sees
grep -qx 'index tuples|60000' <<<"$res" || fail "expected 60000 index tuples: $res"
echo ok
