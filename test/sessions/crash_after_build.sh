#!/usr/bin/env bash
# A crash (immediate shutdown) right after out-of-core btree builds by
# gpusort (maintenance_work_mem = 1MB: runs on disk, merged into the page
# writer), CREATE INDEX and REINDEX: after recovery each index passes
# amcheck (bt_index_parent_check), equals PostgreSQL's build of the same
# index page by page (but LSN, checksum and the free space between the line
# pointers and the items: recovery restores pages from WAL images that
# leave it out, zeroed, where a fresh build may leave old bytes), and
# answers as a sequential scan does.  While the server is down the index
# files are removed: recovery must write them again from the WAL that
# gpusort wrote for them (the test starts with a checkpoint, so that
# recovery replays all of it).  Restarts the server (see lib.sh).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

gs_psql <<'SQL' || exit 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
DROP TABLE IF EXISTS gs_crash;
CREATE TABLE gs_crash (id int, a int8, c text) WITH (autovacuum_enabled = off);
INSERT INTO gs_crash SELECT i, (i::int8 * 2654435761) % 1000003, md5((i % 5000)::text)
FROM generate_series(1, 100000) AS i;
DELETE FROM gs_crash WHERE id % 17 = 0;
CHECKPOINT;
SQL

# the builds, each committed; the server dies right after the last one
out=$(gs_psql 2>&1 <<'SQL'
SET max_parallel_maintenance_workers = 0;
SET maintenance_work_mem = '1MB';
SET gpusort.log_index_builds = on;
SET client_min_messages = log;
CREATE INDEX gs_crash_a ON gs_crash (a);
CREATE UNIQUE INDEX gs_crash_id ON gs_crash (id DESC);
CREATE INDEX gs_crash_c ON gs_crash (c COLLATE "C", a);
REINDEX INDEX gs_crash_id;
SQL
) || { echo "$out"; exit 1; }
gs_expect "built by gpusort in runs on disk" \
	"$(grep -c 'built by gpusort (sorted in runs on disk)' <<<"$out")" 4
files=$(gs_psql -c "SELECT string_agg(pg_relation_filepath(i), ' ') FROM unnest('{gs_crash_a,gs_crash_id,gs_crash_c}'::regclass[]) AS i") || exit 1
# shellcheck disable=SC2086
gs_crash_restart rm -f $files || exit 1

for idx in gs_crash_a gs_crash_id gs_crash_c; do
	res=$(gs_psql <<SQL 2>&1
SET gpusort.index_build = off;
SELECT bt_index_parent_check('$idx', true, true);
SELECT regexp_replace(pg_get_indexdef('$idx'::regclass), ' INDEX \S+ ON ', ' INDEX ${idx}_pg ON ') \gexec
SELECT CASE WHEN pg_relation_size('$idx') <> pg_relation_size('${idx}_pg') THEN 'size differs'
	ELSE (SELECT count(*) FROM generate_series(0, pg_relation_size('$idx') / 8192 - 1) AS b,
			LATERAL (SELECT get_raw_page('$idx', b) AS p1, get_raw_page('${idx}_pg', b) AS p2) r,
			LATERAL page_header(r.p1) h
		  WHERE substr(p1, 11, h.lower - 10) || substr(p1, h.upper + 1) <>
				substr(p2, 11, h.lower - 10) || substr(p2, h.upper + 1))::text || ' pages differ'
	END;
DROP INDEX ${idx}_pg;
SQL
)
	gs_expect "$idx after recovery: amcheck, pages" "$res" "
0 pages differ"
done

res=$(gs_psql <<'SQL'
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT md5(string_agg(a::text, ',' ORDER BY a)) FROM (SELECT a FROM gs_crash WHERE a < 300000 ORDER BY a) s;
SELECT md5(string_agg(id::text, ',')) FROM (SELECT id FROM gs_crash ORDER BY id DESC) s;
RESET enable_seqscan;
RESET enable_bitmapscan;
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SET gpusort.enabled = off;
SELECT md5(string_agg(a::text, ',' ORDER BY a)) FROM (SELECT a FROM gs_crash WHERE a < 300000 ORDER BY a) s;
SELECT md5(string_agg(id::text, ',')) FROM (SELECT id FROM gs_crash ORDER BY id DESC) s;
SQL
)
gs_expect "queries through the indexes equal the sequential scan's" \
	"$(sed -n 1,2p <<<"$res")" "$(sed -n 3,4p <<<"$res")"

gs_psql -c 'DROP TABLE gs_crash' || exit 1
gs_done
