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
CREATE EXTENSION IF NOT EXISTS pageinspect;
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

-- CLUSTER gsc1 with gpusort (its LOG lines show), gsc2 with PostgreSQL, by
-- the index named suffix; are the heaps, their pages and reltuples equal?
CREATE FUNCTION gsc_cluster(suffix text, OUT same_heap boolean,
							OUT pages_differ int, OUT same_reltuples boolean)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('client_min_messages', 'log', true);
	EXECUTE format('CLUSTER gsc1 USING %I', 'gsc1_' || suffix);
	PERFORM set_config('client_min_messages', 'notice', true);
	PERFORM set_config('gpusort.enabled', 'off', true);
	EXECUTE format('CLUSTER gsc2 USING %I', 'gsc2_' || suffix);
	PERFORM set_config('gpusort.enabled', 'on', true);
	same_heap := gsc_heap('gsc1') = gsc_heap('gsc2');
	pages_differ := gs_pages_differ('gsc1', 'gsc2');
	same_reltuples := (SELECT reltuples FROM pg_class WHERE relname = 'gsc1') =
		(SELECT reltuples FROM pg_class WHERE relname = 'gsc2');
END $$;

SELECT gsc_make('gsc1'), gsc_make('gsc2');
SET random_page_cost = 1000000;
SET effective_cache_size = '8kB';

-- in runs on disk (1MB), a unique int8 key
SET maintenance_work_mem = '1MB';
SELECT * FROM gsc_cluster('k');
SELECT count(*) AS n FROM gsc1;
SELECT bt_index_parent_check('gsc1_k', true, true),
	   bt_index_parent_check('gsc1_t', true, true);

-- in memory, a text key that needs comparators, unique with id
SET maintenance_work_mem = '64MB';
SELECT * FROM gsc_cluster('t');

-- an expression index
SELECT * FROM gsc_cluster('e');

-- text longer than its part of the key, in runs on disk: the merge's
-- threads order equal keys (20 bytes in common) by the values, and each
-- row's heap tuple comes along
CREATE INDEX gsc1_l ON gsc1 (((repeat('p', 20) || t) COLLATE "C"));
CREATE INDEX gsc2_l ON gsc2 (((repeat('p', 20) || t) COLLATE "C"));
SET maintenance_work_mem = '1MB';
SELECT * FROM gsc_cluster('l');
SET maintenance_work_mem = '64MB';

-- parallel workers scan with the leader: the same heaps, in runs on disk
-- and in memory
ALTER TABLE gsc1 SET (parallel_workers = 2);
SET maintenance_work_mem = '1MB';
SELECT * FROM gsc_cluster('k');
SELECT * FROM gsc_cluster('l');
DROP INDEX gsc1_l, gsc2_l;
SET maintenance_work_mem = '64MB';
SELECT * FROM gsc_cluster('e');
SELECT bt_index_parent_check('gsc1_k', true, true),
	   bt_index_parent_check('gsc1_e', true, true);
ALTER TABLE gsc1 RESET (parallel_workers);

-- no dropped column: gpusort copies the tuples PostgreSQL's reform would
-- give back unchanged, and reforms the others: rows from before a column
-- was added (fewer attributes), rows with a short value stored while its
-- column was PLAIN (a 4-byte header reform shortens); NULLs, and with text
-- columns compressed values (varchar(40) leaves the table without a TOAST
-- table, whose name would show in the DEBUG1 lines)
CREATE FUNCTION gsc_make2(name text, typ text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TABLE %I (id int, k int8, p %s, t %s) WITH (autovacuum_enabled = off)', name, typ, typ);
	EXECUTE format('ALTER TABLE %I ALTER COLUMN p SET STORAGE PLAIN', name);
	EXECUTE format('INSERT INTO %I SELECT i, (i::int8 * 2654435761) %% 1000003,
		CASE WHEN i %% 3 = 0 THEN md5(i::text) END,
		CASE WHEN i %% 500 = 0 AND %L = ''text'' THEN repeat(md5(i::text), 300)
			 WHEN i %% 5 <> 0 THEN md5(i::text) END
		FROM generate_series(1, 10000) AS i', name, typ);
	EXECUTE format('ALTER TABLE %I ADD COLUMN d int DEFAULT 7', name);
	EXECUTE format('INSERT INTO %I SELECT i, (i::int8 * 2654435761) %% 1000003,
		CASE WHEN i %% 3 = 0 THEN md5(i::text) END, md5(i::text), i
		FROM generate_series(10001, 20000) AS i', name);
END $$;
-- COPY forms its rows with the table's own descriptor: p keeps 4-byte
-- headers while PLAIN (an INSERT's projection packs them)
CREATE FUNCTION gsc_make2_end(name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('ALTER TABLE %I ALTER COLUMN p SET STORAGE EXTENDED', name);
	EXECUTE format('INSERT INTO %I SELECT i, (i::int8 * 2654435761) %% 1000003,
		CASE WHEN i %% 3 = 0 THEN md5(i::text) END, md5(i::text), i
		FROM generate_series(20001, 40000) AS i', name);
	EXECUTE format('UPDATE %I SET t = substr(t, 2) || ''u'' WHERE id %% 7 = 0', name);
	EXECUTE format('DELETE FROM %I WHERE id %% 13 = 0', name);
	EXECUTE format('CREATE UNIQUE INDEX %I ON %I (k)', name || '_k', name);
	EXECUTE format('ANALYZE %I', name);
END $$;
SELECT gsc_make2('gsc3', 'varchar(40)'), gsc_make2('gsc4', 'varchar(40)'),
	   gsc_make2('gsc5', 'text'), gsc_make2('gsc6', 'text');
COPY gsc3 FROM stdin;
40001	17	short	t1	1
40002	-5	a	\N	2
40003	99999999	\N	t3	3
40004	123456	abcdefghijklmnopqrstuvwxyz	t4	4
\.
COPY gsc4 FROM stdin;
40001	17	short	t1	1
40002	-5	a	\N	2
40003	99999999	\N	t3	3
40004	123456	abcdefghijklmnopqrstuvwxyz	t4	4
\.
COPY gsc5 FROM stdin;
40001	17	short	t1	1
40002	-5	a	\N	2
40003	99999999	\N	t3	3
40004	123456	abcdefghijklmnopqrstuvwxyz	t4	4
\.
COPY gsc6 FROM stdin;
40001	17	short	t1	1
40002	-5	a	\N	2
40003	99999999	\N	t3	3
40004	123456	abcdefghijklmnopqrstuvwxyz	t4	4
\.
SELECT gsc_make2_end('gsc3'), gsc_make2_end('gsc4'),
	   gsc_make2_end('gsc5'), gsc_make2_end('gsc6');
SELECT gs_quiet();
SET client_min_messages = debug1;
CLUSTER gsc3 USING gsc3_k;
SET client_min_messages = log;
CLUSTER gsc5 USING gsc5_k;
RESET client_min_messages;
SET gpusort.enabled = off;
SELECT gs_quiet();
CLUSTER gsc4 USING gsc4_k;
CLUSTER gsc6 USING gsc6_k;
SET gpusort.enabled = on;
SELECT gs_pages_differ('gsc3', 'gsc4') AS pages_differ,
	   (SELECT count(*) FROM gsc3) AS n,
	   gs_pages_differ('gsc5', 'gsc6') AS pages_differ_text;
DROP TABLE gsc3, gsc4, gsc5, gsc6;
DROP FUNCTION gsc_make2(text, text);
DROP FUNCTION gsc_make2_end(text);

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
DROP FUNCTION gsc_cluster(text);
DROP FUNCTION gsc_slow(int);
