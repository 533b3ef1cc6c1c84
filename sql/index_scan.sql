--
-- The heap scan of gpusort's btree builds (src/index_scan.c): pages whose
-- tuples are all plainly live are read by gpusort's own loop, every other
-- page by PostgreSQL's scan.  Each build below says (DEBUG1) how many
-- pages it read and how many went to PostgreSQL's scan, and its pages must
-- equal PostgreSQL's own build of the same index (gs_build), with amcheck's
-- heapallindexed check finding every heap tuple in it.
--
LOAD 'gpusort';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
RESET client_min_messages;
\set SHOW_CONTEXT never
SET max_parallel_maintenance_workers = 0;
SET gpusort.index_build = on;

-- 1. all-visible pages: every page through gpusort's loop
CREATE TABLE gss (id int4, k int8, t text, pad text)
	WITH (autovacuum_enabled = off, fillfactor = 90);
INSERT INTO gss
SELECT i, (i * 2654435761::int8) % 100003 - 50000,
	   CASE WHEN i % 50 = 0 THEN NULL ELSE 'v' || (i % 997) END,
	   repeat('p', i % 40)
FROM generate_series(1, 20000) i;
VACUUM (FREEZE) gss;
SELECT * FROM gs_build('CREATE INDEX %I ON gss (k)', 'gss_k', 'debug1');
SELECT * FROM gs_build('CREATE INDEX %I ON gss (t COLLATE "C", id)', 'gss_t', 'debug1');
-- INCLUDE columns and a NULL-heavy column come from the heap as well
SELECT * FROM gs_build('CREATE INDEX %I ON gss (id) INCLUDE (t, k)', 'gss_inc', 'debug1');

-- 2. HOT chains: the pages that hold one go to PostgreSQL's scan
UPDATE gss SET pad = pad || 'x' WHERE id % 500 = 0;
SELECT * FROM gs_build('CREATE INDEX %I ON gss (k)', 'gss_k2', 'debug1');
-- VACUUM leaves redirects behind: those pages stay PostgreSQL's
VACUUM gss;
SELECT * FROM gs_build('CREATE INDEX %I ON gss (k)', 'gss_k3', 'debug1');
-- dead tuples of a DELETE: PostgreSQL's scan leaves them out
DELETE FROM gss WHERE id BETWEEN 15001 AND 15400;
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gss (id)', 'gss_id', 'debug1');
SELECT * FROM gs_same('SELECT id FROM gss ORDER BY id');

-- 3. in one transaction: rows this transaction inserted are indexed as
-- live by the loop; rows it deleted go to PostgreSQL's scan
BEGIN;
CREATE TABLE gsx (id int4, k int8) WITH (autovacuum_enabled = off);
INSERT INTO gsx SELECT i, i % 701 FROM generate_series(1, 30000) i;
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (k)', 'gsx_k', 'debug1');
DELETE FROM gsx WHERE id > 29000;
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (k, id)', 'gsx_kid', 'debug1');
COMMIT;
-- committed, never vacuumed (no page all-visible): live rows are checked
-- one by one, the deleted ones' pages go to PostgreSQL's scan
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (id)', 'gsx_id', 'debug1');
SELECT * FROM gs_same('SELECT k, id FROM gsx ORDER BY k, id');

-- a table whose pages nearly all hold HOT chains: after 64 such pages the
-- rest of a serial scan goes to PostgreSQL's scan in one piece
CREATE TABLE gsh (id int4, k int8, pad text)
	WITH (autovacuum_enabled = off, fillfactor = 50);
INSERT INTO gsh SELECT i, i % 1009, 'p' FROM generate_series(1, 40000) i;
UPDATE gsh SET pad = 'q' WHERE id % 10 = 0;
SELECT * FROM gs_build('CREATE INDEX %I ON gsh (k)', 'gsh_k', 'debug1');
DROP TABLE gsh;

-- 4. keys stored out of line (TOAST): detoasted from the pinned page
CREATE TABLE gsl (id int4, s text) WITH (autovacuum_enabled = off);
ALTER TABLE gsl ALTER COLUMN s SET STORAGE EXTERNAL;
INSERT INTO gsl
SELECT i, lpad((i * 7919 % 3001)::text, 6, '0') || repeat(md5(i::text), 65)
FROM generate_series(1, 600) i;
VACUUM gsl;
SELECT count(*) > 0 AS toasted FROM pg_class c
WHERE c.oid = (SELECT reltoastrelid FROM pg_class WHERE relname = 'gsl')
  AND pg_relation_size(c.oid) > 0;
SELECT * FROM gs_build('CREATE INDEX %I ON gsl (s COLLATE "C")', 'gsl_s', 'debug1');

-- 5. what the loop never takes: expressions and predicates go to
-- PostgreSQL's scan whole
SELECT * FROM gs_build('CREATE INDEX %I ON gss ((k * 2))', 'gss_expr', 'debug1');
SELECT * FROM gs_build('CREATE INDEX %I ON gss (k) WHERE id > 7000', 'gss_part', 'debug1');


-- 6. parallel: the workers share the table's pages, each with the loop
-- (how many each takes varies, so the lines are not shown)
SET max_parallel_maintenance_workers = 2;
SET min_parallel_table_scan_size = 0;
SET parallel_setup_cost = 0;
ALTER TABLE gss SET (parallel_workers = 2);
SELECT * FROM gs_build('CREATE INDEX %I ON gss (k)', 'gss_kp');
SELECT * FROM gs_build('CREATE INDEX %I ON gss (t COLLATE "C", id)', 'gss_tp');
SELECT gs_workers_left();
RESET max_parallel_maintenance_workers;
RESET min_parallel_table_scan_size;
RESET parallel_setup_cost;

DROP TABLE gss, gsx, gsl;
