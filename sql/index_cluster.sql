--
-- CLUSTER's sort of the table through gpusort
--
-- Two tables made the same way (same physical layout: updates, deletes,
-- a dropped column, TOASTed values) are clustered, one by gpusort, one by
-- PostgreSQL: on a unique key the new heaps must be equal, tuple for tuple
-- and ctid for ctid.  The costs below make PostgreSQL's planner prefer
-- its sort to an index scan (plan_cluster_use_sort).
--
LOAD 'gpusort';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
\set SHOW_CONTEXT never
SET gpusort.log_index_builds = on;
SET max_parallel_maintenance_workers = 2;

CREATE FUNCTION gsc_make(name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TABLE %I (id int, k int8, t text, d int, big text) WITH (autovacuum_enabled = off)', name);
	EXECUTE format('INSERT INTO %I SELECT i, (i::int8 * 2654435761) %% 1000003, md5(i::text), i,
		CASE WHEN i %% 1000 = 0 THEN repeat(md5(i::text), 300) END
		FROM generate_series(1, 60000) AS i', name);
	EXECUTE format('ALTER TABLE %I DROP COLUMN d', name);
	EXECUTE format('UPDATE %I SET t = t || ''u'' WHERE id %% 7 = 0', name);
	EXECUTE format('UPDATE %I SET k = k + 1000003 WHERE id %% 11 = 0', name);
	EXECUTE format('DELETE FROM %I WHERE id %% 13 = 0', name);
	EXECUTE format('CREATE UNIQUE INDEX %I ON %I (k)', name || '_k', name);
	EXECUTE format('CREATE INDEX %I ON %I (t COLLATE "C", id)', name || '_t', name);
	EXECUTE format('CREATE INDEX %I ON %I ((k %% 1000), id DESC)', name || '_e', name);
	EXECUTE format('ANALYZE %I', name);
END $$;

-- every tuple with its ctid, in ctid order
CREATE FUNCTION gsc_heap(tab regclass) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	h text;
BEGIN
	EXECUTE format('SELECT md5(string_agg(ctid::text || '':'' || id || '':'' || k || '':'' || t || '':'' || coalesce(md5(big), ''-''), '','' ORDER BY ctid)) FROM %s', tab)
		INTO h;
	RETURN h;
END $$;

SELECT gsc_make('gsc1'), gsc_make('gsc2');
SET random_page_cost = 1000000;
SET effective_cache_size = '8kB';

-- in runs on disk (1MB), a unique int8 key
SET maintenance_work_mem = '1MB';
SET client_min_messages = log;
CLUSTER gsc1 USING gsc1_k;
SET gpusort.enabled = off;
CLUSTER gsc2 USING gsc2_k;
SET gpusort.enabled = on;
RESET client_min_messages;
SELECT gsc_heap('gsc1') = gsc_heap('gsc2') AS same_heap,
	   pg_relation_size('gsc1') = pg_relation_size('gsc2') AS same_size,
	   (SELECT count(*) FROM gsc1) AS n;
SELECT bt_index_parent_check('gsc1_k', true, true),
	   bt_index_parent_check('gsc1_t', true, true);

-- in memory, a text key that needs comparators, unique with id
SET maintenance_work_mem = '64MB';
SET client_min_messages = log;
CLUSTER gsc1 USING gsc1_t;
SET gpusort.enabled = off;
CLUSTER gsc2 USING gsc2_t;
SET gpusort.enabled = on;
RESET client_min_messages;
SELECT gsc_heap('gsc1') = gsc_heap('gsc2') AS same_heap;

-- an expression index
SET client_min_messages = log;
CLUSTER gsc1 USING gsc1_e;
SET gpusort.enabled = off;
CLUSTER gsc2 USING gsc2_e;
SET gpusort.enabled = on;
RESET client_min_messages;
SELECT gsc_heap('gsc1') = gsc_heap('gsc2') AS same_heap;

-- parallel workers scan with the leader: the same heaps, in runs on disk
-- and in memory
ALTER TABLE gsc1 SET (parallel_workers = 2);
SET maintenance_work_mem = '1MB';
SET client_min_messages = log;
CLUSTER gsc1 USING gsc1_k;
SET gpusort.enabled = off;
CLUSTER gsc2 USING gsc2_k;
SET gpusort.enabled = on;
RESET client_min_messages;
SELECT gsc_heap('gsc1') = gsc_heap('gsc2') AS same_heap,
	   (SELECT reltuples FROM pg_class WHERE relname = 'gsc1') =
	   (SELECT reltuples FROM pg_class WHERE relname = 'gsc2') AS same_reltuples;
SET maintenance_work_mem = '64MB';
SET client_min_messages = log;
CLUSTER gsc1 USING gsc1_e;
SET gpusort.enabled = off;
CLUSTER gsc2 USING gsc2_e;
SET gpusort.enabled = on;
RESET client_min_messages;
SELECT gsc_heap('gsc1') = gsc_heap('gsc2') AS same_heap;
SELECT bt_index_parent_check('gsc1_k', true, true),
	   bt_index_parent_check('gsc1_e', true, true);
ALTER TABLE gsc1 RESET (parallel_workers);

-- PostgreSQL's planner chooses the index scan: gpusort sorts instead
-- (sql/index_cluster_scan.sql compares the heaps), unless ANALYZE found
-- the heap in index order already
RESET random_page_cost;
RESET effective_cache_size;
SET client_min_messages = log;
CLUSTER gsc1 USING gsc1_k;
ANALYZE gsc1;
CLUSTER gsc1 USING gsc1_k;
RESET client_min_messages;

-- a cancel during the table's sort: no new heap, no file left
SET maintenance_work_mem = '1MB';
SET random_page_cost = 1000000;
SET effective_cache_size = '8kB';
CREATE FUNCTION gsc_slow(i int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF i = 50000 AND current_setting('gsc.sleep', true) = 'on' THEN
		PERFORM pg_sleep(5);
	END IF;
	RETURN i;
END $$;
CREATE INDEX gsc1_slow ON gsc1 (gsc_slow(id));
SELECT gsc_heap('gsc1') AS before \gset
SET gsc.sleep = on;
SET statement_timeout = '1s';
CLUSTER gsc1 USING gsc1_slow;
RESET statement_timeout;
RESET gsc.sleep;
SELECT count(*) FROM pg_ls_tmpdir() WHERE name LIKE '%.gpusort.%';
SELECT gsc_heap('gsc1') = :'before' AS unchanged;
-- the same with parallel workers (one of them may be the one asleep)
ALTER FUNCTION gsc_slow(int) PARALLEL SAFE;
ALTER TABLE gsc1 SET (parallel_workers = 2);
SET gsc.sleep = on;
SET statement_timeout = '1s';
CLUSTER gsc1 USING gsc1_slow;
RESET statement_timeout;
RESET gsc.sleep;
SELECT count(*) FROM pg_ls_tmpdir() WHERE name LIKE '%.gpusort.%';
SELECT gsc_heap('gsc1') = :'before' AS unchanged;
-- and the next one works
SET client_min_messages = log;
CLUSTER gsc1 USING gsc1_slow;
RESET client_min_messages;
SELECT (SELECT array_agg(id ORDER BY ctid) FROM gsc1) =
	   (SELECT array_agg(id ORDER BY id) FROM gsc1) AS in_order;

DROP TABLE gsc1, gsc2;
DROP FUNCTION gsc_make(text);
DROP FUNCTION gsc_heap(regclass);
DROP FUNCTION gsc_slow(int);
