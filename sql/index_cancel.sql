--
-- A cancel in the middle of an out-of-core btree build and of CLUSTER's
-- sort: while a run is written in the background, during the merge of the
-- sorted runs, and during the writing of the btree pages
-- (maintenance_work_mem = 1MB: many runs on disk).  After the cancel there
-- is no index and no temporary file, the table is unchanged, and the next
-- build works and equals PostgreSQL's.
--
-- gpusort.index_fault makes the cancel pending at a fixed point, as if the
-- user had sent it then; the next CHECK_FOR_INTERRUPTS raises it, so each
-- case also shows that the loop there checks for interrupts.
--
LOAD 'gpusort';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
RESET client_min_messages;
\set SHOW_CONTEXT never
SET max_parallel_maintenance_workers = 0;
SET maintenance_work_mem = '1MB';
SET gpusort.index_build = on;
SET gpusort.log_index_builds = on;

-- temporary files now (none once a build is over)
CREATE FUNCTION gsk_temp_files() RETURNS bigint
LANGUAGE sql AS $$
	SELECT count(*) FROM pg_ls_tmpdir()
$$;

CREATE TABLE gsk (id int4, a int4, c text) WITH (autovacuum_enabled = off);
INSERT INTO gsk
SELECT i, (i * 7919) % 5003, 'k' || lpad(((i * 31) % 10007)::text, 6, '0')
FROM generate_series(1, 100000) AS i;
SELECT gsk_temp_files();

-- the merge
SET gpusort.index_fault = 'cancel_in_merge';
CREATE INDEX gsk_a ON gsk (a, c COLLATE "C");
RESET gpusort.index_fault;
SELECT to_regclass('gsk_a') AS no_index, gsk_temp_files();
SELECT * FROM gs_build('CREATE INDEX %I ON gsk (a, c COLLATE "C")', 'gsk_a');
SELECT gsk_temp_files();

-- the page writing
SET gpusort.index_fault = 'cancel_in_write';
CREATE UNIQUE INDEX gsk_id ON gsk (id DESC);
RESET gpusort.index_fault;
SELECT to_regclass('gsk_id') AS no_index, gsk_temp_files();
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsk (id DESC)', 'gsk_id');

-- a run sorted and written by threads while the scan goes on (records of
-- one size, and of several): the cancel comes from the scan's next check,
-- the threads are stopped and joined
SET gpusort.index_fault = 'cancel_in_run';
CREATE INDEX gsk_ai ON gsk (a);
CREATE INDEX gsk_c ON gsk (a) INCLUDE (c);
RESET gpusort.index_fault;
SELECT to_regclass('gsk_ai') AS no_index, to_regclass('gsk_c') AS no_index,
	   gsk_temp_files();
SELECT * FROM gs_build('CREATE INDEX %I ON gsk (a)', 'gsk_ai');
SELECT * FROM gs_build('CREATE INDEX %I ON gsk (a) INCLUDE (c)', 'gsk_c');
SELECT gsk_temp_files();
DROP INDEX gsk_ai, gsk_c;

-- a parallel build, whose workers log and write the pages once their scan
-- is over (96MB: PostgreSQL plans two workers only with 32MB each): a
-- cancel of the leader while pages pass to them, and an error in one of
-- them, which comes through the leader
ALTER TABLE gsk SET (parallel_workers = 2);
SET max_parallel_maintenance_workers = 2;
SET maintenance_work_mem = '96MB';
SET gpusort.index_fault = 'cancel_in_write';
CREATE INDEX gsk_w ON gsk (c COLLATE "C", a);
SET gpusort.index_fault = 'error_in_writer';
CREATE INDEX gsk_w ON gsk (c COLLATE "C", a);
RESET gpusort.index_fault;
SELECT to_regclass('gsk_w') AS no_index, gsk_temp_files();
SELECT * FROM gs_build('CREATE INDEX %I ON gsk (c COLLATE "C", a)', 'gsk_w');
DROP INDEX gsk_w;
ALTER TABLE gsk RESET (parallel_workers);
SET max_parallel_maintenance_workers = 0;
SET maintenance_work_mem = '1MB';

-- REINDEX: the old index stays, unchanged
SELECT md5(string_agg(get_raw_page('gsk_id', b)::text, '' ORDER BY b)) AS before
FROM generate_series(0, pg_relation_size('gsk_id') / 8192 - 1) AS b \gset
SET gpusort.index_fault = 'cancel_in_write';
REINDEX INDEX gsk_id;
SET gpusort.index_fault = 'cancel_in_merge';
REINDEX INDEX gsk_id;
RESET gpusort.index_fault;
SELECT md5(string_agg(get_raw_page('gsk_id', b)::text, '' ORDER BY b)) = :'before' AS unchanged,
	   gsk_temp_files()
FROM generate_series(0, pg_relation_size('gsk_id') / 8192 - 1) AS b;
SELECT bt_index_parent_check('gsk_id', true, true);

-- CLUSTER: its table sort merges runs (cancel there), its index rebuilds
-- write pages (cancel there); the heap stays as it was
SELECT md5(string_agg(concat_ws(':', ctid, id, a, c), ',' ORDER BY ctid)) AS heap_before
FROM gsk \gset
SET random_page_cost = 1000000;
SET effective_cache_size = '8kB';
SET max_parallel_maintenance_workers = 2;
SET gpusort.index_fault = 'cancel_in_merge';
CLUSTER gsk USING gsk_a;
SET gpusort.index_fault = 'cancel_in_write';
CLUSTER gsk USING gsk_a;
-- with parallel workers for the table's scan: the merge runs after they
-- ended, their rows still in shared memory and runs
ALTER TABLE gsk SET (parallel_workers = 2);
SET gpusort.index_fault = 'cancel_in_merge';
CLUSTER gsk USING gsk_a;
ALTER TABLE gsk RESET (parallel_workers);
RESET gpusort.index_fault;
-- (the files counted apart: from PostgreSQL 16 on, the ordered aggregate's
-- sort below is a plan node, whose own temporary file is open meanwhile)
SELECT md5(string_agg(concat_ws(':', ctid, id, a, c), ',' ORDER BY ctid)) = :'heap_before' AS unchanged
FROM gsk;
SELECT gsk_temp_files();
SET client_min_messages = log;
CLUSTER gsk USING gsk_a;
RESET client_min_messages;
SET max_parallel_maintenance_workers = 0;
SELECT bt_index_parent_check('gsk_a', true, true),
	   bt_index_parent_check('gsk_id', true, true);
SELECT gs_same('SELECT a, c COLLATE "C", id FROM gsk WHERE a < 100 ORDER BY a, c COLLATE "C", id');

DROP TABLE gsk;
DROP FUNCTION gsk_temp_files();
