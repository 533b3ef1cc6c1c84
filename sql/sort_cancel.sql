--
-- sort_cancel: statement_timeout during a large sort cancels it promptly,
-- and the backend is fine afterwards
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

-- 200k rows whose leading key is all-equal and whose second key is text
-- under an ICU collation, all sharing a 2 kB prefix: the key holds only the
-- prefix, so the whole input is one run of equal keys that must be
-- tie-broken with the collation's comparator (seconds on any machine)
CREATE TABLE gs_slow AS
SELECT g AS id, 1 AS one,
	   (repeat('tie-break ', 200) || md5(g::text)) COLLATE "C" AS t
FROM generate_series(1, 200000) g;
ANALYZE gs_slow;
EXPLAIN (COSTS OFF) SELECT id FROM gs_slow ORDER BY one, t COLLATE "und-x-icu" DESC;

SET work_mem = '1GB';
CREATE TEMP TABLE gs_t0 AS SELECT clock_timestamp() AS t0;
SET statement_timeout = '1s';
SELECT id FROM gs_slow ORDER BY one, t COLLATE "und-x-icu" DESC OFFSET 300000;
RESET statement_timeout;
SELECT clock_timestamp() - t0 < interval '5 s' AS cancelled_promptly FROM gs_t0;

-- a big radix sort (5M rows), far over work_mem
SET work_mem = '64MB';
SET statement_timeout = '200ms';
SELECT g FROM generate_series(1, 5000000) g ORDER BY (g::int8 * 7919) % 5000011 OFFSET 5000000;
RESET statement_timeout;

-- a spilled sort (runs on disk) cancelled: its temporary files are removed
SET work_mem = '64kB';
SET statement_timeout = '500ms';
SELECT id FROM gs_slow ORDER BY t DESC OFFSET 300000;
RESET statement_timeout;
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

-- the final merge of a spilled sort on threads (exact keys): a cancel
-- while rows are taken slowly, an error above the sort, and a cursor closed
-- half-way all stop the threads and remove the temporary file
SET work_mem = '1MB';
SET statement_timeout = '500ms';
SELECT g, pg_sleep(0.001) FROM (SELECT g FROM generate_series(1, 300000) g ORDER BY (g::int8 * 7919) % 300007) s;
RESET statement_timeout;
SELECT 1 / (g - 150000) FROM (SELECT g FROM generate_series(1, 300000) g ORDER BY (g::int8 * 7919) % 300007 OFFSET 0) s;
BEGIN;
DECLARE gs_mc CURSOR FOR SELECT g FROM generate_series(1, 300000) g ORDER BY (g::int8 * 7919) % 300007;
FETCH 3 FROM gs_mc;
CLOSE gs_mc;
COMMIT;
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

-- the next queries work
SET work_mem = '4MB';
SELECT * FROM gs_check('SELECT id FROM gs_slow WHERE id <= 1000 ORDER BY one, t DESC, id');
SELECT id FROM gs_slow WHERE id <= 1000 ORDER BY t DESC, id LIMIT 3;

-- chunks sorted in the background (a tiny GPU budget makes many) while the
-- input goes on: a cancel, and an error in the input, stop them cleanly
SET work_mem = '1GB';
SET gpusort.gpu_memory_limit = '1MB';
SET statement_timeout = '300ms';
SELECT g FROM generate_series(1, 5000000) g ORDER BY (g::int8 * 7919) % 5000011 OFFSET 5000000;
RESET statement_timeout;
SELECT g FROM generate_series(1, 3000000) g ORDER BY 1 / (2500000 - g), g OFFSET 3000000;
SELECT * FROM gs_check('SELECT g FROM generate_series(1, 300000) g ORDER BY (g::int8 * 7919) % 300007, g');
RESET gpusort.gpu_memory_limit;
