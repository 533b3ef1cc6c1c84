--
-- stats_libc: a leading text key under a libc collation other than C
-- ("en_US") stays PostgreSQL's Sort; EXPLAIN says so and what to use
-- instead, and gpusort_stats_reasons counts it.  A machine without the
-- en_US locale skips the file (expected/21b_stats_libc_1.out).
--
LOAD 'gpusort';
SET work_mem = '4MB';
SET max_parallel_workers_per_gather = 0;
SET gpusort.min_rows = 0;
SELECT NOT EXISTS (SELECT 1 FROM pg_collation
				   WHERE collname = 'en_US' AND collencoding IN (-1, 6)) AS skip_test \gset
\if :skip_test
\quit
\endif

CREATE TABLE gs_stl AS SELECT i, md5(i::text) AS s FROM generate_series(1, 100) i;
ANALYZE gs_stl;
EXPLAIN (COSTS OFF) SELECT * FROM gs_stl ORDER BY s COLLATE "en_US";
-- under C the same key is taken
EXPLAIN (COSTS OFF) SELECT * FROM gs_stl ORDER BY s COLLATE "C";
SELECT gpusort_stats_reset();
SELECT i FROM gs_stl ORDER BY s COLLATE "en_US" OFFSET 99;
SELECT count FROM gpusort_stats_reasons WHERE reason = 'key_collation';
DROP TABLE gs_stl;
