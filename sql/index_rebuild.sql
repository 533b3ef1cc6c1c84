--
-- btree rebuilds taken over through the planner hook: CREATE INDEX and
-- REINDEX CONCURRENTLY, REINDEX SCHEMA, CLUSTER, VACUUM FULL, TRUNCATE
--
-- Each statement's LOG lines say who built each index; every rebuilt index
-- is checked with amcheck and compared page by page with PostgreSQL's
-- build of the same definition on the same heap.  maintenance_work_mem is
-- 1MB, so the larger builds are sorted in runs on disk.
--
LOAD 'gpusort';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
DROP SCHEMA IF EXISTS gsrb CASCADE;
RESET client_min_messages;
\set SHOW_CONTEXT never
SET max_parallel_maintenance_workers = 2;
SET maintenance_work_mem = '1MB';
SET gpusort.index_build = on;
SET gpusort.log_index_builds = on;

-- every index of a table, checked
CREATE FUNCTION gsrb_check_all(tab regclass)
RETURNS TABLE (index_name text, differ int)
LANGUAGE sql AS $$
	SELECT c.relname::text, gs_index_differ(c.oid)
	FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	WHERE i.indrelid = tab
	ORDER BY 1
$$;

CREATE SCHEMA gsrb;
SET search_path = gsrb, public;
-- no varlena column: no TOAST index (PostgreSQL's) in the logs
CREATE TABLE gsrb.t (id int4 PRIMARY KEY, a int4, b int8, u uuid)
WITH (autovacuum_enabled = off);
INSERT INTO gsrb.t
SELECT i, (i * 7919) % 5003,
	   CASE WHEN i % 97 = 0 THEN NULL ELSE (i::int8 * 2654435761) % 1000003 END,
	   md5(i::text)::uuid
FROM generate_series(1, 60000) AS i;
DELETE FROM gsrb.t WHERE id % 100 = 7;
CREATE INDEX t_ab ON gsrb.t (a DESC, b NULLS FIRST);
CREATE TABLE gsrb.s (k int8, v int4);
INSERT INTO gsrb.s SELECT i % 5000, i FROM generate_series(1, 20000) AS i;
CREATE INDEX s_kv ON gsrb.s (k, v);

SET client_min_messages = log;
CREATE INDEX CONCURRENTLY t_u ON gsrb.t (u) INCLUDE (a);
CREATE UNIQUE INDEX CONCURRENTLY t_bid ON gsrb.t (b, id);
RESET client_min_messages;
SELECT gs_index_differ('gsrb.t_u') AS t_u, gs_index_differ('gsrb.t_bid') AS t_bid;

SET client_min_messages = log;
REINDEX INDEX CONCURRENTLY gsrb.t_u;
REINDEX TABLE CONCURRENTLY gsrb.s;
RESET client_min_messages;
SELECT gs_index_differ('gsrb.t_u') AS t_u, gs_index_differ('gsrb.s_kv') AS s_kv;

-- (one table per schema: REINDEX SCHEMA takes tables in pg_class's
-- physical order, which earlier tests decide)
CREATE SCHEMA gsrb2;
ALTER TABLE gsrb.s SET SCHEMA gsrb2;
SELECT gs_quiet();
SET client_min_messages = log;
REINDEX SCHEMA gsrb;
REINDEX SCHEMA gsrb2;
RESET client_min_messages;
ALTER TABLE gsrb2.s SET SCHEMA gsrb;
DROP SCHEMA gsrb2;
SELECT * FROM gsrb_check_all('gsrb.t');
SELECT * FROM gsrb_check_all('gsrb.s');

-- CLUSTER and VACUUM FULL rewrite the heap, then rebuild every index
UPDATE gsrb.t SET a = a + 1 WHERE id % 10 = 3;
SELECT gs_quiet();
SET client_min_messages = log;
CLUSTER gsrb.t USING t_ab;
RESET client_min_messages;
SELECT * FROM gsrb_check_all('gsrb.t');
DELETE FROM gsrb.t WHERE id % 10 = 5;
SELECT gs_quiet();
SET client_min_messages = log;
VACUUM FULL gsrb.t;
RESET client_min_messages;
SELECT * FROM gsrb_check_all('gsrb.t');

-- queries through the rebuilt indexes
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*), sum(id) FROM (SELECT id FROM gsrb.t WHERE a < 100 ORDER BY a DESC, b NULLS FIRST) x;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT count(*), sum(id) FROM gsrb.t WHERE a < 100;

-- TRUNCATE builds the (empty) indexes anew
SET client_min_messages = log;
TRUNCATE gsrb.s;
RESET client_min_messages;
INSERT INTO gsrb.s VALUES (1, 1), (1, 2);
SELECT bt_index_parent_check('gsrb.s_kv', true, true);

-- without parallel maintenance workers the hook does not fire: PostgreSQL
-- rebuilds these, and the log says why
SET max_parallel_maintenance_workers = 0;
SET client_min_messages = log;
VACUUM FULL gsrb.s;
REINDEX TABLE CONCURRENTLY gsrb.s;
RESET client_min_messages;
SELECT bt_index_parent_check('gsrb.s_kv', true, true);
SET max_parallel_maintenance_workers = 2;

-- a duplicate found by a concurrent unique build: PostgreSQL's error (the
-- invalid index it leaves is PostgreSQL's behavior too)
INSERT INTO gsrb.t (id, a, b) VALUES (-1, 0, 12345), (-2, 0, 12345);
\set VERBOSITY default
CREATE UNIQUE INDEX CONCURRENTLY t_bad ON gsrb.t (b);
DROP INDEX gsrb.t_bad;
SET gpusort.index_build = off;
CREATE UNIQUE INDEX CONCURRENTLY t_bad ON gsrb.t (b);
\set VERBOSITY terse
DROP INDEX gsrb.t_bad;
RESET gpusort.index_build;
SELECT count(*) FROM pg_ls_tmpdir() WHERE name LIKE '%.gpusort.%';

RESET search_path;
DROP SCHEMA gsrb CASCADE;
DROP FUNCTION gsrb_check_all(regclass);
