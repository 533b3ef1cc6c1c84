--
-- parallel btree builds: the workers scan the heap and keep their rows in
-- shared memory (gathered by the leader for one sort) or, when their share
-- of maintenance_work_mem is full, sort and write runs themselves, which
-- the leader merges into the page writer
--
-- Each index is checked with amcheck and compared page by page with
-- PostgreSQL's own (parallel) build.  With parallel_leader_participation
-- off, every row reaches the index through the workers.  The log line says
-- "(sorted in runs on disk)" when the build ended with a merge.
--
LOAD 'gpusort';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
RESET client_min_messages;
\set SHOW_CONTEXT never
SET gpusort.index_build = on;
SET gpusort.log_index_builds = on;
SET max_parallel_maintenance_workers = 2;
SET min_parallel_table_scan_size = 0;
SET maintenance_work_mem = '64MB';

-- temporary files and directories (the workers' file sets), and parallel
-- workers, left behind: none once a build is over
CREATE FUNCTION gsp_leftovers(OUT files bigint, OUT workers bigint)
LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM pg_ls_tmpdir()), gs_workers_left()
$$;

CREATE TABLE gsp (
	id int4,
	a int4,
	b int8,
	c text
) WITH (autovacuum_enabled = off, parallel_workers = 2);
INSERT INTO gsp
SELECT i,
	   (i * 7919) % 5003,
	   CASE WHEN i % 89 = 0 THEN NULL
		ELSE (i::int8 * 2654435761) % 1000003 - 500000 END,
	   'k' || lpad(((i * 31) % 10007)::text, 6, '0') || repeat('y', i % 5)
FROM generate_series(1, 120000) AS i;
-- HOT chains and dead tuples before the builds
UPDATE gsp SET c = c || 'u' WHERE id % 100 = 0;
DELETE FROM gsp WHERE id % 1000 = 999;

-- in memory: the leader gathers the workers' rows for one sort
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (a)', 'gsp_a');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsp (id)', 'gsp_id');
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (b DESC NULLS LAST, c COLLATE "C")', 'gsp_bc');
-- fixed-width keys with padding and NULLs: their bytes tell the page
-- writer where key columns change, for its deduplication
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (a, b)', 'gsp_ab');
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (b DESC, a)', 'gsp_ba');
SET parallel_leader_participation = off;
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (c COLLATE "C", a DESC)', 'gsp_ca');
SELECT * FROM gs_build('CREATE INDEX %I ON gsp ((a %% 100), b) INCLUDE (id)', 'gsp_expr');
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (b) WHERE a < 1000', 'gsp_part');
RESET parallel_leader_participation;

-- on disk: every participant writes runs; many runs, merge passes
SET maintenance_work_mem = '1MB';
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (a)', 'gsp_a1');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsp (id DESC)', 'gsp_id1');
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (c COLLATE "C", b NULLS FIRST)', 'gsp_cb1');
-- text longer than its part of the key, the final merge on threads
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (((repeat(''shared-prefix-'', 2) || c) COLLATE "C"))', 'gsp_long1');
SET parallel_leader_participation = off;
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (b, a)', 'gsp_ba1');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsp (b, id) WHERE b IS NOT NULL', 'gsp_ubid1');
RESET parallel_leader_participation;
SELECT * FROM gsp_leftovers();
-- four workers: five runs (one per participant, all in the leader's file),
-- merged on threads into the page writer when the keys are exact
ALTER TABLE gsp SET (parallel_workers = 4);
SET max_parallel_maintenance_workers = 4;
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (a, id)', 'gsp_a4');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsp (id DESC)', 'gsp_id4');
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (c COLLATE "C")', 'gsp_c4');
ALTER TABLE gsp SET (parallel_workers = 2);
SET max_parallel_maintenance_workers = 2;
SELECT * FROM gsp_leftovers();

-- a table without parallel_workers: PostgreSQL plans workers from its size
-- and gives each participant 32MB (one worker at 64MB, two at 96MB);
-- gpusort's participants need 16MB, as each only cuts its rows into runs
-- (two workers at 64MB, four at 96MB), never more than
-- max_parallel_maintenance_workers, never where PostgreSQL planned none
CREATE TABLE gspn WITH (autovacuum_enabled = off) AS SELECT * FROM gsp;
SET maintenance_work_mem = '64MB';
SELECT * FROM gs_build('CREATE INDEX %I ON gspn (a, id)', 'gspn_a');
SET max_parallel_maintenance_workers = 4;
SELECT * FROM gs_build('CREATE INDEX %I ON gspn (b, id)', 'gspn_b');
SET maintenance_work_mem = '96MB';
SELECT * FROM gs_build('CREATE INDEX %I ON gspn (c COLLATE "C", id)', 'gspn_c');
SET max_parallel_maintenance_workers = 1;
SELECT * FROM gs_build('CREATE INDEX %I ON gspn (id)', 'gspn_id');
SET max_parallel_maintenance_workers = 2;
SET maintenance_work_mem = '48MB';
SELECT * FROM gs_build('CREATE INDEX %I ON gspn (a)', 'gspn_a48');
SET maintenance_work_mem = '1MB';
SELECT * FROM gsp_leftovers();

-- queries through the indexes equal sequential scans
SELECT gs_same('SELECT id FROM gsp WHERE id BETWEEN 100 AND 20000 ORDER BY id DESC');
SELECT gs_same('SELECT b, a FROM gsp WHERE b > 0 ORDER BY b, a');
SELECT gs_same('SELECT c, b FROM gsp ORDER BY c COLLATE "C", b NULLS FIRST');

-- unique violations, with PostgreSQL's error: duplicates next to each
-- other (one participant's rows) and far apart (in two workers' runs)
CREATE TABLE gspv WITH (parallel_workers = 2) AS
SELECT id, a FROM gsp WHERE id <> 77;
INSERT INTO gspv SELECT 77, -1 FROM generate_series(1, 2);
CREATE TABLE gspw WITH (parallel_workers = 2) AS SELECT id, a FROM gsp;
INSERT INTO gspw VALUES (5, -2);
\set VERBOSITY default
SET client_min_messages = log;
SET parallel_leader_participation = off;
CREATE UNIQUE INDEX gspv_bad ON gspv (id);
CREATE UNIQUE INDEX gspw_bad ON gspw (id);
SET maintenance_work_mem = '64MB';
CREATE UNIQUE INDEX gspv_bad ON gspv (id);
CREATE UNIQUE INDEX gspw_bad ON gspw (id);
SET gpusort.index_build = off;
CREATE UNIQUE INDEX gspv_bad ON gspv (id);
CREATE UNIQUE INDEX gspw_bad ON gspw (id);
SET gpusort.index_build = on;
RESET parallel_leader_participation;
-- NULLs are distinct, unless NULLS NOT DISTINCT
INSERT INTO gspv VALUES (NULL, 1), (NULL, 2);
DELETE FROM gspv WHERE id = 77 AND ctid = (SELECT max(ctid) FROM gspv WHERE id = 77);
SET client_min_messages = notice;
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gspv (id)', 'gspv_ok');
SET client_min_messages = log;
CREATE UNIQUE INDEX gspv_bad ON gspv (id) NULLS NOT DISTINCT;
RESET client_min_messages;
\set VERBOSITY terse
SELECT to_regclass('gspv_bad') IS NULL AND to_regclass('gspw_bad') IS NULL
	AS no_index, * FROM gsp_leftovers();

-- an error and a cancel in the workers' scans, in memory and after runs:
-- the error comes up, no index, no file and no worker left
CREATE FUNCTION gsp_boom(i int) RETURNS int
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
	IF i = 100000 THEN
		RAISE EXCEPTION 'boom at %', i;
	END IF;
	RETURN i;
END $$;
CREATE FUNCTION gsp_slow(i int) RETURNS int
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
	IF i = 100000 THEN
		PERFORM pg_sleep(5);
	END IF;
	RETURN i;
END $$;
SET parallel_leader_participation = off;
CREATE INDEX gsp_err ON gsp (gsp_boom(id));
SELECT to_regclass('gsp_err') IS NULL AS no_index, * FROM gsp_leftovers();
SET maintenance_work_mem = '1MB';
CREATE INDEX gsp_err ON gsp (gsp_boom(id));
SELECT to_regclass('gsp_err') IS NULL AS no_index, * FROM gsp_leftovers();
SET statement_timeout = '1s';
CREATE INDEX gsp_err ON gsp (gsp_slow(id));
RESET statement_timeout;
SELECT to_regclass('gsp_err') IS NULL AS no_index, * FROM gsp_leftovers();
-- the workers' runs count against temp_file_limit: PostgreSQL's error
SET temp_file_limit = '1MB';
SELECT gs_error_unquoted('CREATE INDEX gsp_err ON gsp (a, b)');
RESET temp_file_limit;
SELECT to_regclass('gsp_err') IS NULL AS no_index, * FROM gsp_leftovers();
RESET parallel_leader_participation;

-- no worker to be had: the leader builds alone, with all the memory
SET max_parallel_workers = 0;
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (a, id)', 'gsp_serial');
RESET max_parallel_workers;
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (id, a)', 'gsp_after');
-- the merge's streams hand over their last blocks late (a fault): every
-- row reaches the index
SET gpusort.sort_fault = 'slow_cascade';
SELECT * FROM gs_build('CREATE INDEX %I ON gsp (a, id)', 'gsp_slow');
RESET gpusort.sort_fault;

DROP TABLE gsp, gspv, gspw;
DROP FUNCTION gsp_leftovers();
DROP FUNCTION gsp_boom(int);
DROP FUNCTION gsp_slow(int);
