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

SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsx (id)', 'gsx_id');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (a)', 'gsx_a');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (b)', 'gsx_b');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (c COLLATE "C")', 'gsx_c');
-- keys longer than the encoded part: comparators break the ties
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (lng COLLATE "C", id)', 'gsx_lng');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (a DESC, b NULLS FIRST)', 'gsx_ab');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (b DESC NULLS LAST, c COLLATE "C" DESC)', 'gsx_bc');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (a) INCLUDE (c, id)', 'gsx_a_inc');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsx (id) INCLUDE (b)', 'gsx_id_inc');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx ((a %% 100), (lower(c) COLLATE "C"))', 'gsx_expr');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (b) WHERE a < 2000', 'gsx_part');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (a) WITH (deduplicate_items = off)', 'gsx_nodedup');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsx (b, id)', 'gsx_ubid');
-- with parallel workers scanning the heap
SET max_parallel_maintenance_workers = 2;
SET min_parallel_table_scan_size = 0;
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (c COLLATE "C", b DESC)', 'gsx_par');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsx (id DESC)', 'gsx_upar');
RESET min_parallel_table_scan_size;
SET max_parallel_maintenance_workers = 0;
SELECT gsx_temp_files();

-- equal key columns in many runs, their heap TIDs out of scan order (a HOT
-- chain's entry takes its root's TID, lower than TIDs scanned before it on
-- its page, so runs overlap in TIDs); the text column needs comparators,
-- which reorder rows within runs of equal key words: each row must keep
-- its own TID in its run's keys, or the merge breaks ties between runs
-- with another row's and a posting list comes out of TID order (amcheck:
-- "posting list contains misplaced TID"; parallel participants' runs
-- overlap the same way)
CREATE TABLE gsx_hot (id int, a int, c text, pad text)
	WITH (autovacuum_enabled = off, fillfactor = 70);
INSERT INTO gsx_hot
SELECT i, (i::int8 * 7919) % 40,
	   CASE WHEN i % 40 = 0 THEN NULL ELSE md5((i % 2000)::text) END, 'p'
FROM generate_series(1, 120000) AS i;
CREATE INDEX gsx_hot_a ON gsx_hot (a);
UPDATE gsx_hot SET a = a + 1 WHERE id % 17 = 0;
DELETE FROM gsx_hot WHERE id % 11 = 0;
UPDATE gsx_hot SET pad = pad || 'h' WHERE md5((id * 3)::text) < '6';
UPDATE gsx_hot SET pad = pad || 'h' WHERE md5((id * 4)::text) < '6';
SELECT * FROM gs_build('CREATE INDEX %I ON gsx_hot (c COLLATE "C", a)', 'gsx_hot_ca');
DROP TABLE gsx_hot;

-- queries through the indexes equal sequential scans
SELECT gs_same('SELECT id FROM gsx WHERE id BETWEEN 100 AND 20000 ORDER BY id DESC');
SELECT gs_same('SELECT a, b FROM gsx ORDER BY a DESC, b NULLS FIRST');
SELECT gs_same('SELECT b, c FROM gsx ORDER BY b DESC NULLS LAST, c COLLATE "C" DESC');
SELECT gs_same('SELECT lng, id FROM gsx WHERE lng COLLATE "C" < ''common-prefix-common-prefix-common-prefix-3'' ORDER BY lng COLLATE "C", id');
SELECT gs_same('SELECT a, c, id FROM gsx WHERE a = 4321 ORDER BY a');
SELECT gs_same('SELECT a % 100, lower(c) COLLATE "C" FROM gsx ORDER BY 1, 2');
SELECT gs_same('SELECT b FROM gsx WHERE a < 2000 ORDER BY b');

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

-- the final merge on threads: when the keys alone order the rows, and
-- there are enough runs left for it (2MB leaves four to six here), groups
-- of runs are merged by threads and the backend merges the groups
SET maintenance_work_mem = '2MB';
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsx (id)', 'gsx_t_id');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (a DESC, b NULLS FIRST)', 'gsx_t_ab');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (b) INCLUDE (c)', 'gsx_t_b');
-- and text longer than its part of the key (lossy keys): the threads order
-- equal keys by the values' bytes, then the TID (every lng shares its
-- first 42 bytes, so every comparison needs them; NULLs and DESC too)
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (lng COLLATE "C")', 'gsx_t_lng');
SELECT * FROM gs_build('CREATE INDEX %I ON gsx ((nullif(lng, repeat(''common-prefix-'', 3) || md5(''7'')) COLLATE "C") DESC NULLS LAST)', 'gsx_t_lngd');
\set VERBOSITY default
SET client_min_messages = log;
CREATE UNIQUE INDEX gsxv_bad ON gsxv (id);
CREATE UNIQUE INDEX gsxv_bad ON gsxv (lng COLLATE "C");
RESET client_min_messages;
\set VERBOSITY terse
SELECT to_regclass('gsxv_bad') IS NULL AS no_index, gsx_temp_files();
SET maintenance_work_mem = '1MB';

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
SET temp_file_limit = '1MB';
SELECT gs_error_unquoted('CREATE INDEX gsx_err ON gsx (a)');
RESET temp_file_limit;
SELECT to_regclass('gsx_err') IS NULL AS no_index, gsx_temp_files();
SELECT * FROM gs_build('CREATE INDEX %I ON gsx (a, id)', 'gsx_after');

-- runs hold an index tuple and its length word, the key derived again
-- from the tuple as the runs are read (index_rows.c): every kind whose key
-- derives, with NULLs, NaN, -0 and infinities, and those that keep their
-- keys: interval, and text values compressed in the index tuple
CREATE TABLE gsxd (id int, f8 float8, f4 float4, n numeric, u uuid,
	d date, bo bool, iv interval, i2 int2, t text COLLATE "C")
	WITH (autovacuum_enabled = off);
INSERT INTO gsxd
SELECT i,
	   CASE i % 9 WHEN 0 THEN 'NaN'::float8 WHEN 1 THEN '-0' WHEN 2 THEN 'Infinity'
		WHEN 3 THEN '-Infinity' WHEN 4 THEN NULL ELSE ((i * 31) % 997)::float8 / 7 - 70 END,
	   (ARRAY['NaN', '-0', '0', 'Infinity', NULL, '1.5', '-2.25'])[1 + i % 7]::float4,
	   CASE WHEN i % 97 = 0 THEN 'NaN'::numeric WHEN i % 101 = 0 THEN NULL
		WHEN i % 103 = 0 THEN '-Infinity'::numeric
		ELSE ((i * 7919) % 100003 - 50000)::numeric / 37 END,
	   CASE WHEN i % 83 = 0 THEN NULL ELSE md5((i % 1000)::text)::uuid END,
	   CASE WHEN i % 61 = 0 THEN 'infinity'::date WHEN i % 71 = 0 THEN NULL
		ELSE '2000-01-01'::date + (i * 13) % 20000 - 10000 END,
	   CASE WHEN i % 3 = 0 THEN NULL ELSE i % 2 = 0 END,
	   CASE WHEN i % 89 = 0 THEN NULL ELSE ((i * 17) % 5000) * interval '1 hour' END,
	   CASE WHEN i % 50 = 0 THEN NULL WHEN i % 7 = 0 THEN -32768 ELSE (i * 37) % 1000 END,
	   CASE WHEN i % 43 = 0 THEN NULL WHEN i % 41 = 0 THEN ''
		WHEN i % 37 = 0 THEN repeat(md5((i % 300)::text), 40)
		ELSE md5((i % 5000)::text) END
FROM generate_series(1, 60000) AS i;
SELECT * FROM gs_build('CREATE INDEX %I ON gsxd (f8)', 'gsxd_f8');
SELECT * FROM gs_build('CREATE INDEX %I ON gsxd (f4 DESC, n NULLS FIRST)', 'gsxd_f4n');
SELECT * FROM gs_build('CREATE INDEX %I ON gsxd (u, d DESC, bo)', 'gsxd_udb');
SELECT * FROM gs_build('CREATE INDEX %I ON gsxd (iv, i2)', 'gsxd_iv');
SELECT * FROM gs_build('CREATE INDEX %I ON gsxd (i2 DESC NULLS LAST) INCLUDE (t)', 'gsxd_i2');
SELECT * FROM gs_build('CREATE INDEX %I ON gsxd (t)', 'gsxd_t');
-- (the same where the final merge could go on threads: the rows whose
-- values are compressed keep their keys in the runs, so it does not)
SET maintenance_work_mem = '2MB';
SELECT * FROM gs_build('CREATE INDEX %I ON gsxd (t)', 'gsxd_t2');
SET maintenance_work_mem = '1MB';
SELECT * FROM gs_build('CREATE INDEX %I ON gsxd (t DESC, id)', 'gsxd_tid');
SELECT gsx_temp_files();
DROP TABLE gsxd;

DROP TABLE gsx, gsxv;
DROP FUNCTION gsx_temp_files();
DROP FUNCTION gsx_boom(int);
DROP FUNCTION gsx_slow(int);
