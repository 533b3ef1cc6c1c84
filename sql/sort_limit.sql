--
-- sort_limit: ORDER BY with LIMIT / OFFSET / FETCH ... WITH TIES; top-N sorts
-- that stay PostgreSQL's (gpusort.topn_limit) and those that do not
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE TABLE gs_lim AS
SELECT g AS id, (g * 7919) % 5003 AS k, (g % 10)::text COLLATE "C" AS t
FROM generate_series(1, 20000) g;
ANALYZE gs_lim;

-- a small constant LIMIT keeps PostgreSQL's top-N sort
EXPLAIN (COSTS OFF) SELECT * FROM gs_lim ORDER BY k, id LIMIT 10;
SELECT * FROM gs_lim ORDER BY k, id LIMIT 10;

-- with topn_limit = 0 every bounded sort is a GpuSort
SET gpusort.topn_limit = 0;
EXPLAIN (COSTS OFF) SELECT * FROM gs_lim ORDER BY k, id LIMIT 10;
SELECT * FROM gs_lim ORDER BY k, id LIMIT 10;
SELECT * FROM gs_lim ORDER BY k DESC, id LIMIT 5 OFFSET 100;
SELECT * FROM gs_lim ORDER BY t, k, id OFFSET 19995;
SELECT k FROM gs_lim ORDER BY k FETCH FIRST 3 ROWS WITH TIES;
SELECT t FROM gs_lim ORDER BY t DESC OFFSET 1998 FETCH FIRST 1 ROW WITH TIES;
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id LIMIT 1');
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id LIMIT 0');
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id LIMIT ALL');
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY t DESC, k, id LIMIT 1000 OFFSET 123');
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id OFFSET 19999');
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id OFFSET 50000');
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id LIMIT 50000');
SELECT * FROM gs_check('SELECT k FROM gs_lim ORDER BY k DESC FETCH FIRST 2 ROWS WITH TIES');
SELECT * FROM gs_check('SELECT t FROM gs_lim ORDER BY t FETCH FIRST 10 ROWS WITH TIES');
-- a LIMIT that is not a constant, and one given by a parameter
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id LIMIT (SELECT 7) OFFSET (SELECT 3)');
PREPARE gs_lim_q(int, int) AS SELECT * FROM gs_lim ORDER BY k DESC, id LIMIT $1 OFFSET $2;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE gs_lim_q(3, 2);
EXECUTE gs_lim_q(3, 2);
EXECUTE gs_lim_q(2, 0);
EXECUTE gs_lim_q(2, 19998);
RESET plan_cache_mode;
DEALLOCATE gs_lim_q;
RESET gpusort.topn_limit;

-- above topn_limit the sort is a GpuSort again
SET gpusort.topn_limit = 100;
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id LIMIT 100');
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id LIMIT 101');
SELECT * FROM gs_check('SELECT * FROM gs_lim ORDER BY k, id LIMIT 50 OFFSET 60');
RESET gpusort.topn_limit;

-- WITH TIES asks its child for every row (no top-N bound reaches the sort),
-- so even a small FETCH FIRST ... WITH TIES is a GpuSort
SET gpusort.topn_limit = 100;
EXPLAIN (COSTS OFF) SELECT k FROM gs_lim ORDER BY k FETCH FIRST 3 ROWS WITH TIES;
SELECT * FROM gs_check('SELECT k FROM gs_lim ORDER BY k FETCH FIRST 3 ROWS WITH TIES');
RESET gpusort.topn_limit;
