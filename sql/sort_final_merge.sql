-- sort_final_merge: the final merge of a spilled sort with exact keys runs on
-- threads: stream threads merge groups of runs and a cascade thread merges
-- the streams into the one stream the backend returns.  Ties between the
-- streams (equal first key words, equal whole keys) must come out as
-- PostgreSQL's own sort orders them; every query's order is fully
-- determined (the ORDER BY covers what is selected, or equal rows are
-- identical).
CREATE TABLE gs_fm AS
	SELECT g AS id, (g * 7919) % 1009 AS a, ((g * 31) % 97)::int8 AS b,
		   (g % 13)::int4 AS c, md5(g::text) AS t
	FROM generate_series(1, 120000) g;
ALTER TABLE gs_fm SET (parallel_workers = 2);
ANALYZE gs_fm;

-- the final merge's thread count, and its runs, from EXPLAIN ANALYZE
CREATE FUNCTION gs_fm_threads(q text, OUT runs int, OUT merge_threads int)
LANGUAGE plpgsql AS $fn$
DECLARE
	j jsonb;
BEGIN
	j := gs_gpusort_node(q);
	runs := (j->>'GpuSort Runs')::int;
	merge_threads := (j->>'GpuSort Merge Threads')::int;
END
$fn$;

SET work_mem = '64kB';
SET max_parallel_workers_per_gather = 0;
SELECT runs > 4 AS many_runs, merge_threads FROM gs_fm_threads('SELECT a, b, id FROM gs_fm ORDER BY a, b, id');
-- a 24-byte key whose first word ties across streams all the time
SELECT * FROM gs_check('SELECT a, b, id FROM gs_fm ORDER BY a, b, id');
SELECT * FROM gs_check('SELECT a, b, id FROM gs_fm ORDER BY a DESC, b, id DESC');
-- 16 bytes: equal whole keys (identical rows) in every stream
SELECT * FROM gs_check('SELECT a, b FROM gs_fm ORDER BY a, b');
-- a 4-byte key with 13 values
SELECT * FROM gs_check('SELECT c FROM gs_fm ORDER BY c DESC');
-- rows wider than the keys
SELECT * FROM gs_check('SELECT * FROM gs_fm ORDER BY b, id');
-- two streams, and three (an odd tree)
SET gpusort.cpu_threads = 2;
SELECT merge_threads FROM gs_fm_threads('SELECT a, id FROM gs_fm ORDER BY a, id');
SELECT * FROM gs_check('SELECT a, id FROM gs_fm ORDER BY a, id');
SET gpusort.cpu_threads = 3;
SELECT merge_threads FROM gs_fm_threads('SELECT a, id FROM gs_fm ORDER BY a DESC, id');
SELECT * FROM gs_check('SELECT a, id FROM gs_fm ORDER BY a DESC, id');
RESET gpusort.cpu_threads;
-- a stream publishes its last block just as the merging thread finds it
-- with none ready (both threads pause there): no row is passed over
SET gpusort.sort_fault = 'slow_cascade';
SELECT * FROM gs_check('SELECT a, id FROM gs_fm ORDER BY a, id');
SET gpusort.cpu_threads = 2;
SELECT * FROM gs_check('SELECT a, b, id FROM gs_fm ORDER BY a DESC, b, id');
RESET gpusort.cpu_threads;
RESET gpusort.sort_fault;

-- the final merge reads the file mapped, through read buffers of 512
-- bytes: at 256kB one merge takes every run (32 kB buffers would take 8 at
-- a time)
CREATE FUNCTION gs_fm_passes(q text, OUT over_8_runs bool, OUT merge_passes int)
LANGUAGE plpgsql AS $fn$
DECLARE
	j jsonb;
BEGIN
	j := gs_gpusort_node(q);
	over_8_runs := (j->>'GpuSort Runs')::int > 8;
	merge_passes := (j->>'GpuSort Merge Passes')::int;
END
$fn$;
SET work_mem = '256kB';
SELECT * FROM gs_fm_passes('SELECT a, b, id FROM gs_fm ORDER BY a, b, id');
SELECT * FROM gs_check('SELECT a, b, id FROM gs_fm ORDER BY a, b, id');
SELECT * FROM gs_check('SELECT * FROM gs_fm ORDER BY b DESC, a, id');
-- rows longer than those buffers (a row must fit its run's buffer)
CREATE TABLE gs_fm_wide AS
	SELECT id, a, b,
		   CASE WHEN id % 50 = 0
				THEN (SELECT string_agg(md5(id::text || x), '')
					  FROM generate_series(1, 40) x)
				ELSE t END AS t
	FROM gs_fm;
SELECT max(pg_column_size(t)) > 1024 AS rows_over_1kB FROM gs_fm_wide;
ANALYZE gs_fm_wide;
SELECT * FROM gs_check('SELECT id, a, b, t FROM gs_fm_wide ORDER BY b, a, id');
SELECT * FROM gs_check('SELECT id, length(t) FROM (SELECT * FROM gs_fm_wide ORDER BY a DESC, id) s');
DROP TABLE gs_fm_wide;
SET work_mem = '64kB';

-- one text column in C order whose values are longer than the key (lossy
-- keys): the threads order equal keys by the values' bytes, then lengths
-- ('...-1' < '...-10'); with NULLs, DESC and duplicates
CREATE TABLE gs_fm_long AS
	SELECT id, CASE WHEN id % 61 = 0 THEN NULL
			ELSE repeat('a-shared-prefix-', 3) || (id % 5000)::text
			END COLLATE "C" AS t
	FROM gs_fm;
ANALYZE gs_fm_long;
SELECT runs > 4 AS many_runs, merge_threads FROM gs_fm_threads('SELECT t FROM gs_fm_long ORDER BY t');
SELECT * FROM gs_check('SELECT t FROM gs_fm_long ORDER BY t');
SELECT * FROM gs_check('SELECT t FROM gs_fm_long ORDER BY t DESC NULLS LAST');
SELECT * FROM gs_check('SELECT t, length(t) FROM gs_fm_long ORDER BY t NULLS FIRST');
-- a compressed value keeps its key in the run, and the backend merges
INSERT INTO gs_fm_long SELECT 0, repeat('a-shared-prefix-', 400);
SELECT pg_column_compression(t) IS NOT NULL AS compressed FROM gs_fm_long WHERE id = 0;
SELECT merge_threads FROM gs_fm_threads('SELECT t FROM gs_fm_long ORDER BY t');
SELECT * FROM gs_check('SELECT t FROM gs_fm_long ORDER BY t');
DELETE FROM gs_fm_long WHERE id = 0;

-- the runs of a parallel load, merged the same way
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SELECT * FROM gs_check('SELECT a, b, id FROM gs_fm ORDER BY a, b, id');
SELECT * FROM gs_check('SELECT * FROM gs_fm ORDER BY c, a DESC, id');
SELECT * FROM gs_check('SELECT count(*), sum(id) FROM (SELECT id FROM gs_fm ORDER BY b, id OFFSET 100) s');
SELECT * FROM gs_check('SELECT t FROM gs_fm_long ORDER BY t DESC');
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- a cursor: part of the rows, then closed; a scrollable one, read backward
BEGIN;
DECLARE gs_fm_c CURSOR FOR SELECT a, b, id FROM gs_fm ORDER BY a, b, id;
FETCH 3 FROM gs_fm_c;
MOVE 60000 IN gs_fm_c;
FETCH 2 FROM gs_fm_c;
CLOSE gs_fm_c;
DECLARE gs_fm_s SCROLL CURSOR FOR SELECT a, b, id FROM gs_fm ORDER BY a DESC, b DESC, id DESC;
MOVE LAST IN gs_fm_s;
FETCH BACKWARD 3 FROM gs_fm_s;
FETCH ABSOLUTE 2 FROM gs_fm_s;
CLOSE gs_fm_s;
COMMIT;
SET work_mem = '4MB';
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();
DROP TABLE gs_fm, gs_fm_long;
DROP FUNCTION gs_fm_threads(text);
