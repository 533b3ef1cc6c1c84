--
-- btree builds beyond maintenance_work_mem: sorted runs on disk, merge
-- passes, the final merge streamed into the page writer
--
-- With maintenance_work_mem = 1MB each build below writes many runs and
-- merges them in more than one pass (a merge takes at most 6 runs at this
-- setting).  Every index is checked with amcheck and compared page by page
-- with PostgreSQL's own build; "built by gpusort (sorted in runs on disk)"
-- shows which path a build took.
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

-- build with gpusort, check, build natively as <idx>_pg, compare pages
-- (size difference in pages, pages that differ)
CREATE FUNCTION gsx_build(ddl text, idx text, OUT size_diff int, OUT differ int)
LANGUAGE plpgsql AS $$
DECLARE
	pages int;
BEGIN
	PERFORM set_config('client_min_messages', 'log', true);
	EXECUTE format(ddl, idx);
	PERFORM set_config('client_min_messages', 'notice', true);
	PERFORM bt_index_parent_check(idx::regclass, true, true);
	PERFORM set_config('gpusort.index_build', 'off', true);
	EXECUTE format(ddl, idx || '_pg');
	PERFORM set_config('gpusort.index_build', 'on', true);
	pages := pg_relation_size(idx::regclass) / 8192;
	size_diff := pages - pg_relation_size((idx || '_pg')::regclass) / 8192;
	IF size_diff <> 0 THEN
		differ := -1;
	ELSE
		SELECT count(*) INTO differ
		FROM generate_series(0, pages - 1) AS b
		WHERE substr(get_raw_page(idx, b), 11) <>
			  substr(get_raw_page(idx || '_pg', b), 11);
	END IF;
	EXECUTE format('DROP INDEX %I', idx || '_pg');
END $$;

-- query q through indexes only, then by a sequential scan and
-- PostgreSQL's sort: the same rows in the same order?
CREATE FUNCTION gsx_same(q text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	h1 text;
	h2 text;
BEGIN
	PERFORM set_config('enable_seqscan', 'off', true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	EXECUTE format('SELECT md5(string_agg(x::text, E''\n'')) FROM (%s) x', q)
		INTO h1;
	PERFORM set_config('enable_seqscan', 'on', true);
	PERFORM set_config('enable_indexscan', 'off', true);
	PERFORM set_config('enable_indexonlyscan', 'off', true);
	PERFORM set_config('gpusort.enabled', 'off', true);
	EXECUTE format('SELECT md5(string_agg(x::text, E''\n'')) FROM (%s) x', q)
		INTO h2;
	PERFORM set_config('enable_indexscan', 'on', true);
	PERFORM set_config('enable_indexonlyscan', 'on', true);
	PERFORM set_config('enable_bitmapscan', 'on', true);
	PERFORM set_config('gpusort.enabled', 'on', true);
	RETURN h1 IS NOT NULL AND h1 = h2;
END $$;

-- gpusort's temporary files now (none once a build is over)
CREATE FUNCTION gsx_temp_files() RETURNS bigint
LANGUAGE sql AS $$
	SELECT count(*) FROM pg_ls_tmpdir() WHERE name LIKE '%.gpusort.%'
$$;

CREATE TABLE gsx (
	id int4,
	a int4,
	b int8,
	c text,
	lng text
) WITH (autovacuum_enabled = off);
INSERT INTO gsx
SELECT i,
	   (i * 7919) % 5003,
	   CASE WHEN i % 97 = 0 THEN NULL
		ELSE (i::int8 * 2654435761) % 1000003 - 500000 END,
	   'k' || lpad(((i * 31) % 10007)::text, 6, '0') || repeat('x', i % 7),
	   repeat('common-prefix-', 3) || md5((i % 9000)::text)
FROM generate_series(1, 150000) AS i;
-- HOT chains and dead tuples before the builds
UPDATE gsx SET c = c || 'u' WHERE id % 100 = 0;
DELETE FROM gsx WHERE id % 1000 = 999;

SELECT * FROM gsx_build('CREATE UNIQUE INDEX %I ON gsx (id)', 'gsx_id');
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (a)', 'gsx_a');
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (b)', 'gsx_b');
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (c COLLATE "C")', 'gsx_c');
-- keys longer than the encoded part: comparators break the ties
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (lng COLLATE "C", id)', 'gsx_lng');
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (a DESC, b NULLS FIRST)', 'gsx_ab');
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (b DESC NULLS LAST, c COLLATE "C" DESC)', 'gsx_bc');
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (a) INCLUDE (c, id)', 'gsx_a_inc');
SELECT * FROM gsx_build('CREATE UNIQUE INDEX %I ON gsx (id) INCLUDE (b)', 'gsx_id_inc');
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx ((a %% 100), (lower(c) COLLATE "C"))', 'gsx_expr');
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (b) WHERE a < 2000', 'gsx_part');
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (a) WITH (deduplicate_items = off)', 'gsx_nodedup');
SELECT * FROM gsx_build('CREATE UNIQUE INDEX %I ON gsx (b, id)', 'gsx_ubid');
-- with parallel workers scanning the heap
SET max_parallel_maintenance_workers = 2;
SET min_parallel_table_scan_size = 0;
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (c COLLATE "C", b DESC)', 'gsx_par');
SELECT * FROM gsx_build('CREATE UNIQUE INDEX %I ON gsx (id DESC)', 'gsx_upar');
RESET min_parallel_table_scan_size;
SET max_parallel_maintenance_workers = 0;
SELECT gsx_temp_files();

-- queries through the indexes equal sequential scans
SELECT gsx_same('SELECT id FROM gsx WHERE id BETWEEN 100 AND 20000 ORDER BY id DESC');
SELECT gsx_same('SELECT a, b FROM gsx ORDER BY a DESC, b NULLS FIRST');
SELECT gsx_same('SELECT b, c FROM gsx ORDER BY b DESC NULLS LAST, c COLLATE "C" DESC');
SELECT gsx_same('SELECT lng, id FROM gsx WHERE lng COLLATE "C" < ''common-prefix-common-prefix-common-prefix-3'' ORDER BY lng COLLATE "C", id');
SELECT gsx_same('SELECT a, c, id FROM gsx WHERE a = 4321 ORDER BY a');
SELECT gsx_same('SELECT a % 100, lower(c) COLLATE "C" FROM gsx ORDER BY 1, 2');
SELECT gsx_same('SELECT b FROM gsx WHERE a < 2000 ORDER BY b');

-- unique violations found by the final merge (the duplicates lie in
-- different runs): PostgreSQL's error; no index and no file left
-- (one duplicated key per index, so that both report the same one)
CREATE TABLE gsxv AS
SELECT id, repeat('common-prefix-', 3) || md5(id::text) AS lng FROM gsx;
INSERT INTO gsxv VALUES (77, 'z'), (-1, repeat('common-prefix-', 3) || md5('1234'));
\set VERBOSITY default
SET client_min_messages = log;
CREATE UNIQUE INDEX gsxv_bad ON gsxv (id);
CREATE UNIQUE INDEX gsxv_bad ON gsxv (lng COLLATE "C");
SET gpusort.index_build = off;
CREATE UNIQUE INDEX gsxv_bad ON gsxv (id);
CREATE UNIQUE INDEX gsxv_bad ON gsxv (lng COLLATE "C");
SET gpusort.index_build = on;
RESET client_min_messages;
\set VERBOSITY terse
SELECT to_regclass('gsxv_bad') IS NULL AS no_index, gsx_temp_files();

-- an error and a cancel in the middle of the heap scan, after runs were
-- written: no index, no file left, and the next build works
CREATE FUNCTION gsx_boom(i int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF i = 120000 THEN
		RAISE EXCEPTION 'boom at %', i;
	END IF;
	RETURN i;
END $$;
CREATE FUNCTION gsx_slow(i int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF i = 120000 THEN
		PERFORM pg_sleep(5);
	END IF;
	RETURN i;
END $$;
CREATE INDEX gsx_err ON gsx (gsx_boom(id));
SELECT to_regclass('gsx_err') IS NULL AS no_index, gsx_temp_files();
SET statement_timeout = '1s';
CREATE INDEX gsx_err ON gsx (gsx_slow(id));
RESET statement_timeout;
SELECT to_regclass('gsx_err') IS NULL AS no_index, gsx_temp_files();
-- the runs count against temp_file_limit, with PostgreSQL's error (shown
-- without quotes: 18 quotes the parameter's name)
CREATE FUNCTION gsx_error_unquoted(q text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || replace(SQLERRM, '"', '');
END $$;
SET temp_file_limit = '1MB';
SELECT gsx_error_unquoted('CREATE INDEX gsx_err ON gsx (a)');
RESET temp_file_limit;
SELECT to_regclass('gsx_err') IS NULL AS no_index, gsx_temp_files();
SELECT * FROM gsx_build('CREATE INDEX %I ON gsx (a, id)', 'gsx_after');

DROP TABLE gsx, gsxv;
DROP FUNCTION gsx_build(text, text);
DROP FUNCTION gsx_same(text);
DROP FUNCTION gsx_temp_files();
DROP FUNCTION gsx_boom(int);
DROP FUNCTION gsx_slow(int);
DROP FUNCTION gsx_error_unquoted(text);
