--
-- CLUSTER where PostgreSQL's planner chose to follow the index
--
-- gpusort sorts the table instead (a sequential scan and a sort beat one
-- random heap read per tuple), unless ANALYZE found the heap in index
-- order already.  The new heap must be the one the index scan writes,
-- tuple for tuple and ctid for ctid, also among equal keys: a btree
-- returns them in heap TID order, and a HOT chain's tuple at its root's
-- TID.  Each case clusters two tables made the same way (duplicates,
-- NULLs, HOT and other updates, deletes), one with gpusort, one without.
-- The tables are small, so PostgreSQL's planner prefers the index scan;
-- "(instead of PostgreSQL's index scan)" in the log shows that it did.
--
LOAD 'gpusort';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
RESET client_min_messages;
\set SHOW_CONTEXT never
SET gpusort.log_index_builds = on;
SET max_parallel_maintenance_workers = 0;
SET maintenance_work_mem = '64MB';
SET effective_cache_size = '4GB';
SET random_page_cost = 4;
SET seq_page_cost = 1;

CREATE FUNCTION gscs_make(name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TABLE %I (id int, a int, b int8, c text, pad text)
		WITH (autovacuum_enabled = off, fillfactor = 70)', name);
	EXECUTE format('INSERT INTO %I SELECT i, (i * 7919) %% 40,
		CASE WHEN i %% 50 = 0 THEN NULL ELSE (i::int8 * 2654435761) %% 1009 END,
		CASE WHEN i %% 40 = 0 THEN NULL ELSE md5((i %% 2000)::text) END, ''p''
		FROM generate_series(1, 30000) AS i', name);
	-- the indexes first: they reach every dead tuple, as after a real load
	EXECUTE format('CREATE INDEX %I ON %I (a)', name || '_a', name);
	EXECUTE format('CREATE INDEX %I ON %I (b DESC NULLS LAST)', name || '_bd', name);
	EXECUTE format('CREATE INDEX %I ON %I (b NULLS FIRST, a DESC)', name || '_ba', name);
	EXECUTE format('CREATE INDEX %I ON %I (c COLLATE "C", a)', name || '_c', name);
	EXECUTE format('CREATE INDEX %I ON %I ((a %% 7), upper(c) COLLATE "C" DESC)', name || '_e', name);
	EXECUTE format('CREATE UNIQUE INDEX %I ON %I (id)', name || '_id', name);
	-- other updates, deletes
	EXECUTE format('UPDATE %I SET a = a + 1 WHERE id %% 17 = 0', name);
	EXECUTE format('DELETE FROM %I WHERE id %% 11 = 0', name);
END $$;

-- HOT chains (pad is not indexed) in both tables, among equal keys on the
-- same page, whose live tuples the index finds at their roots' TIDs
CREATE FUNCTION gscs_touch(m int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE gscs1 SET pad = pad || 'h' WHERE md5((id * m)::text) < '6';
	UPDATE gscs2 SET pad = pad || 'h' WHERE md5((id * m)::text) < '6';
END $$;

-- every tuple with its ctid, in ctid order
CREATE FUNCTION gscs_heap(tab regclass) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	h text;
BEGIN
	EXECUTE format('SELECT count(*) || '' '' || md5(string_agg(concat_ws('':'', ctid, id, a, b, c, pad), '','' ORDER BY ctid)) FROM %s', tab)
		INTO h;
	RETURN h;
END $$;

-- CLUSTER gscs1 with gpusort, gscs2 without, by the index named suffix
CREATE FUNCTION gscs_cluster(suffix text,
							 OUT same_heap boolean, OUT same_reltuples boolean,
							 OUT pages_differ int)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM gs_quiet();
	EXECUTE format('CLUSTER gscs1 USING %I', 'gscs1_' || suffix);
	PERFORM set_config('gpusort.enabled', 'off', true);
	PERFORM gs_quiet();
	EXECUTE format('CLUSTER gscs2 USING %I', 'gscs2_' || suffix);
	PERFORM set_config('gpusort.enabled', 'on', true);
	same_heap := gscs_heap('gscs1') = gscs_heap('gscs2');
	same_reltuples := (SELECT reltuples FROM pg_class WHERE relname = 'gscs1') =
		(SELECT reltuples FROM pg_class WHERE relname = 'gscs2');
	pages_differ := gs_pages_differ('gscs1', 'gscs2');
END $$;

SELECT gscs_make('gscs1'), gscs_make('gscs2');
SELECT gscs_touch(3), gscs_touch(6);
SELECT gscs_heap('gscs1') = gscs_heap('gscs2') AS same_before;

-- many equal keys, HOT chains among them
SET client_min_messages = log;
SELECT * FROM gscs_cluster('a');
-- int8 with NULLs, DESC NULLS LAST
SELECT gscs_touch(4);
SELECT * FROM gscs_cluster('bd');
-- NULLS FIRST, then a second column DESC
SELECT gscs_touch(4);
SELECT * FROM gscs_cluster('ba');
-- text that needs comparators, NULLs
SELECT gscs_touch(4);
SELECT * FROM gscs_cluster('c');
-- an expression index
SELECT gscs_touch(4);
SELECT * FROM gscs_cluster('e');
-- in runs on disk
SET maintenance_work_mem = '1MB';
SELECT gscs_touch(5);
SELECT * FROM gscs_cluster('a');
SET maintenance_work_mem = '64MB';
RESET client_min_messages;
SELECT bt_index_parent_check('gscs1_a', true, true),
	   bt_index_parent_check('gscs1_e', true, true),
	   bt_index_parent_check('gscs1_id', true, true);
-- the answer through the index, and the table's order, are PostgreSQL's
SELECT count(*), sum(id::int8 * a) FROM gscs1 WHERE a BETWEEN 10 AND 20;
SELECT (SELECT array_agg(id ORDER BY ctid) FROM gscs1) =
	   (SELECT array_agg(id ORDER BY ctid) FROM gscs2) AS same_order;

-- the heap in index order already: ANALYZE finds correlation 1, and
-- PostgreSQL's index scan stays (also once more rows were updated since)
ANALYZE gscs1;
SELECT correlation FROM pg_stats WHERE tablename = 'gscs1' AND attname = 'a';
UPDATE gscs1 SET pad = pad || 'j' WHERE id % 5 = 0;
UPDATE gscs2 SET pad = pad || 'j' WHERE id % 5 = 0;
SET client_min_messages = log;
SELECT * FROM gscs_cluster('a');
RESET client_min_messages;

-- parallel workers scan with the leader (the table's parallel_workers
-- plans them at any size): the same heaps, in memory and in runs on disk
ALTER TABLE gscs1 SET (parallel_workers = 2);
SET max_parallel_maintenance_workers = 2;
SET client_min_messages = log;
SELECT gscs_touch(8);
SELECT * FROM gscs_cluster('ba');
SELECT gscs_touch(8);
SELECT * FROM gscs_cluster('c');
SET maintenance_work_mem = '1MB';
SELECT gscs_touch(9);
SELECT * FROM gscs_cluster('bd');
SET maintenance_work_mem = '64MB';
RESET client_min_messages;
SELECT bt_index_parent_check('gscs1_bd', true, true);

-- updated in CLUSTER's own transaction: the old versions of HOT chains
-- are kept too (their deleter is in progress), and PostgreSQL's index scan
-- returns all of a chain at its one index entry; gpusort leaves the copy
-- to it
CREATE FUNCTION gscs_touch_cluster(suffix text,
								   OUT same_heap boolean, OUT same_reltuples boolean,
								   OUT pages_differ int)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM gscs_touch(7);
	SELECT * INTO same_heap, same_reltuples, pages_differ FROM gscs_cluster(suffix);
END $$;
SET client_min_messages = log;
SELECT * FROM gscs_touch_cluster('c');
-- the same with parallel workers: a participant gives up, all do (the
-- table has grown: cheaper random reads keep the index scan PostgreSQL's
-- choice)
SET random_page_cost = 1;
SELECT * FROM gscs_touch_cluster('ba');
SET random_page_cost = 4;
SET max_parallel_maintenance_workers = 0;
RESET client_min_messages;
DROP FUNCTION gscs_touch_cluster(text);

DROP TABLE gscs1, gscs2;
DROP FUNCTION gscs_make(text);
DROP FUNCTION gscs_heap(regclass);
DROP FUNCTION gscs_cluster(text);
DROP FUNCTION gscs_touch(int);
