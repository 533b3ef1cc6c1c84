#!/usr/bin/env bash
# Crash recovery of indexes built by gpusort.
#
#   test/index/crash.sh
#
# In a throwaway cluster that preloads gpusort: checkpoint, build indexes with
# gpusort (checked through its DEBUG1 message), crash the server (immediate
# shutdown), delete the indexes' files, and restart.  Recovery must rebuild
# them from WAL alone (gpusort WAL-logs every page as PostgreSQL's build does);
# then amcheck must pass and queries through the indexes must return what a
# sequential scan returns.  Prints "ok" and exits 0 on success.
#
# GS_TEST_LIBDIR: see lib.sh.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
gs_reexec_in_cluster "$0" "$@"
major=$GS_PG_MAJOR

q >/dev/null <<'SQL'
CREATE EXTENSION amcheck;
CREATE TABLE crash (k int8, t text, v int4);
INSERT INTO crash
SELECT (i * 7919) % 200003, md5(i::text), i % 1000
FROM generate_series(1, 200000) AS i;
CHECKPOINT;
SQL

built=$(q 2>&1 <<'SQL'
SET max_parallel_maintenance_workers = 0;
SET client_min_messages = debug1;
CREATE INDEX crash_k ON crash (k);
CREATE INDEX crash_t ON crash (t COLLATE "C");
CREATE UNIQUE INDEX crash_kv ON crash (k, v DESC) INCLUDE (t);
SQL
)
n=$(grep -c 'built by gpusort' <<<"$built" || true)
[ "$n" = 3 ] || fail "expected 3 indexes built by gpusort, got $n: $built"

datadir=$(q -c 'SHOW data_directory')
files=$(q -c "SELECT string_agg(pg_relation_filepath(c), ' ')
			  FROM unnest('{crash_k,crash_t,crash_kv}'::regclass[]) AS c")

pg_ctlcluster "$major" regress stop -m immediate
for f in $files; do
	[ -f "$datadir/$f" ] || fail "no file $datadir/$f"
	rm -f "$datadir/$f"
done
pg_ctlcluster "$major" regress start

q >/dev/null <<'SQL' || fail "amcheck or queries after recovery"
SELECT bt_index_parent_check(c, true, true)
FROM unnest('{crash_k,crash_t,crash_kv}'::regclass[]) AS c;
CREATE FUNCTION same(q text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE h1 text; h2 text;
BEGIN
	SET LOCAL enable_seqscan = off;
	SET LOCAL enable_bitmapscan = off;
	EXECUTE format('SELECT md5(string_agg(x::text, '','')) FROM (%s) x', q) INTO h1;
	SET LOCAL enable_seqscan = on;
	SET LOCAL enable_indexscan = off;
	SET LOCAL enable_indexonlyscan = off;
	SET LOCAL gpusort.enabled = off;
	EXECUTE format('SELECT md5(string_agg(x::text, '','')) FROM (%s) x', q) INTO h2;
	IF h1 IS NULL OR h1 <> h2 THEN
		RAISE EXCEPTION 'results differ for %', q;
	END IF;
END $$;
SELECT same('SELECT k FROM crash ORDER BY k');
SELECT same('SELECT t FROM crash WHERE t > ''8'' ORDER BY t COLLATE "C" DESC');
SELECT same('SELECT k, v, t FROM crash WHERE k < 5000 ORDER BY k, v DESC');
SQL
echo ok
