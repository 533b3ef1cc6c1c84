#!/usr/bin/env bash
# CLUSTER with parallel workers scanning the table, in four sessions at
# once: each clusters a table of its own with gpusort (workers planned by
# the table's parallel_workers; 1MB of maintenance_work_mem, so every
# participant writes runs, and 64MB, in memory) and a table made the same
# way, in the same transaction, with PostgreSQL; the new heaps must be the
# same line pointer for line pointer and tuple for tuple.  (Only inserted
# rows, and the xmin hint bits left out: the other sessions' transactions
# move the horizon between the two CLUSTERs, which decides whether a row is
# frozen, or a deleted one kept; sql/index_cluster*.sql compare updated and
# deleted rows, one session alone.)  Sessions that
# find no free worker scan alone, with the same result.  Then a CLUSTER
# whose index expression fails on one row, in whichever participant reads
# it: the error is PostgreSQL's, the heap unchanged; and in the end no
# worker and no temporary file is left.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SESSIONS=4

gs_psql <<'SQL' || exit 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pageinspect;
CREATE OR REPLACE FUNCTION gs_cp_heap(tab regclass) RETURNS text
LANGUAGE sql AS $$
	SELECT md5(string_agg(concat_ws(':', p, lp, lp_flags, lp_len, t_ctid, t_infomask2,
									t_infomask & ~768, t_hoff, t_bits, t_data), ',' ORDER BY p, lp))
	FROM generate_series(0, pg_relation_size(tab) / 8192 - 1) AS p,
		 heap_page_items(get_raw_page(tab::text, p::int))
$$;
-- where two heaps differ: the rows' order, their data, their tuple headers
CREATE OR REPLACE FUNCTION gs_cp_diff(a regclass, b regclass) RETURNS text
LANGUAGE sql AS $$
	WITH ia AS (SELECT p, lp, t_ctid, t_infomask, t_infomask2, t_hoff, t_bits, t_data
				FROM generate_series(0, pg_relation_size(a) / 8192 - 1) AS p,
					 heap_page_items(get_raw_page(a::text, p::int))),
		 ib AS (SELECT p, lp, t_ctid, t_infomask, t_infomask2, t_hoff, t_bits, t_data
				FROM generate_series(0, pg_relation_size(b) / 8192 - 1) AS p,
					 heap_page_items(get_raw_page(b::text, p::int)))
	SELECT format('%s of %s line pointers differ: data %s, infomask %s (bits %s), infomask2 %s, ctid %s',
				  count(*) FILTER (WHERE row(ia.*) IS DISTINCT FROM row(ib.*)), count(*),
				  count(*) FILTER (WHERE ia.t_data IS DISTINCT FROM ib.t_data),
				  count(*) FILTER (WHERE ia.t_infomask IS DISTINCT FROM ib.t_infomask),
				  string_agg(DISTINCT (ia.t_infomask # ib.t_infomask)::bit(16)::text, ' '),
				  count(*) FILTER (WHERE ia.t_infomask2 IS DISTINCT FROM ib.t_infomask2),
				  count(*) FILTER (WHERE ia.t_ctid IS DISTINCT FROM ib.t_ctid))
	FROM ia FULL JOIN ib USING (p, lp)
$$;
-- fails on row 7000 when gs_cp.fail is on (an index expression)
CREATE OR REPLACE FUNCTION gs_cp_key(i int, k int8) RETURNS int8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
	IF i = 7000 AND current_setting('gs_cp.fail', true) = 'on' THEN
		RAISE EXCEPTION 'gs_cp_key failed on row %', i;
	END IF;
	RETURN k;
END $$;
SQL

# session $1: its two tables, then both CLUSTERs at $2 of memory, twice
session()
{
	local a=gs_cp$1a b=gs_cp$1b mem round
	gs_psql <<SQL || return 1
SET client_min_messages = warning;
DROP TABLE IF EXISTS $a, $b;
BEGIN;
CREATE TABLE $a (id int, k int8, t text, pad text) WITH (autovacuum_enabled = off, parallel_workers = 2);
CREATE TABLE $b (id int, k int8, t text, pad text) WITH (autovacuum_enabled = off);
INSERT INTO $a SELECT i, (i::int8 * 2654435761) % 100003, md5(i::text), 'p' FROM generate_series(1, 40000) AS i;
INSERT INTO $b SELECT i, (i::int8 * 2654435761) % 100003, md5(i::text), 'p' FROM generate_series(1, 40000) AS i;
CREATE UNIQUE INDEX ${a}_k ON $a (k);
CREATE UNIQUE INDEX ${b}_k ON $b (k);
COMMIT;
SQL
	for round in 1 2; do
		for mem in 1MB 64MB; do
			gs_psql -c "SET maintenance_work_mem = '$mem'" \
				-c 'SET max_parallel_maintenance_workers = 2' \
				-c 'SET random_page_cost = 1000000' -c "SET effective_cache_size = '8kB'" \
				-c 'SET gpusort.log_index_builds = on' -c 'SET client_min_messages = log' \
				-c "CLUSTER $a USING ${a}_k" 2>&1 |
				grep -o "table \"$a\" sorted by [a-z]*" || return 1
			gs_psql -c "SET maintenance_work_mem = '$mem'" -c 'SET gpusort.enabled = off' \
				-c 'SET random_page_cost = 1000000' -c "SET effective_cache_size = '8kB'" \
				-c "CLUSTER $b USING ${b}_k" || return 1
			gs_psql -c "SELECT CASE WHEN gs_cp_heap('$a') = gs_cp_heap('$b') THEN 'same heap' ELSE 'heaps differ: ' || gs_cp_diff('$a', '$b') END" || return 1
		done
	done
	gs_psql -c "DROP TABLE $a, $b"
}

dir=$(mktemp -d /tmp/gs-cp.XXXXXX)
for s in $(seq 1 $SESSIONS); do
	session "$s" >"$dir/$s" 2>&1 &
done
wait
for s in $(seq 1 $SESSIONS); do
	want=$(for i in 1 2 3 4; do printf 'table "gs_cp%sa" sorted by gpusort\nsame heap\n' "$s"; done)
	gs_expect "session $s: four parallel CLUSTERs, the heaps PostgreSQL writes" "$(cat "$dir/$s")" "$want"
done
rm -rf "$dir"

# an error in the scan, raised by whichever participant reads the row
res=$(gs_psql <<'SQL' 2>&1
SET client_min_messages = warning;
DROP TABLE IF EXISTS gs_cpe;
CREATE TABLE gs_cpe (id int, k int8) WITH (autovacuum_enabled = off, parallel_workers = 2);
INSERT INTO gs_cpe SELECT i, (i::int8 * 2654435761) % 100003 FROM generate_series(1, 20000) AS i;
CREATE INDEX gs_cpe_e ON gs_cpe (gs_cp_key(id, k));
SELECT md5(string_agg(ctid::text || id, ',' ORDER BY ctid)) AS before FROM gs_cpe \gset
SET max_parallel_maintenance_workers = 2;
SET maintenance_work_mem = '1MB';
SET random_page_cost = 1000000;
SET effective_cache_size = '8kB';
SET gs_cp.fail = on;
\set ON_ERROR_STOP 0
CLUSTER gs_cpe USING gs_cpe_e;
\set ON_ERROR_STOP 1
RESET gs_cp.fail;
SELECT md5(string_agg(ctid::text || id, ',' ORDER BY ctid)) = :'before' AS unchanged FROM gs_cpe;
CLUSTER gs_cpe USING gs_cpe_e;
SELECT count(*) FILTER (WHERE ctid > prev) = count(*) - 1 AS in_order
FROM (SELECT ctid, lag(ctid) OVER (ORDER BY gs_cp_key(id, k), ctid) AS prev FROM gs_cpe) s;
DROP TABLE gs_cpe;
SQL
)
gs_expect "an index expression failing in the scan" \
	"$(grep -v '^CONTEXT\|^PL/pgSQL\|^parallel worker' <<<"$res")" \
"ERROR:  gs_cp_key failed on row 7000
t
t"

# nothing left behind
sleep 0.5
gs_expect "no parallel worker left" \
	"$(gs_psql -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'")" "0"
gs_expect "no temporary file left" \
	"$(gs_psql -c "SELECT count(*) FROM pg_ls_tmpdir() WHERE name LIKE '%.gpusort.%'")" "0"

gs_psql -c 'DROP FUNCTION gs_cp_heap(regclass), gs_cp_diff(regclass, regclass), gs_cp_key(int, int8)' || exit 1
gs_done
