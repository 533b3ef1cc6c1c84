--
-- sort_in_workers: GpuSort in parallel workers under Gather Merge
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';
-- the sorts stay inside the workers (16_parallel_load tests the GpuSort that
-- replaces a Gather Merge and loads its input through workers)
SET gpusort.parallel_load = off;

CREATE TABLE gs_par AS
SELECT g AS id, (g * 7919) % 100003 AS k, md5(g::text) COLLATE "C" AS t,
	   ((g * 31) % 1000)::float8 / 7 AS f
FROM generate_series(1, 100000) g;
ANALYZE gs_par;

SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;

EXPLAIN (COSTS OFF) SELECT id, k FROM gs_par ORDER BY k, id;
SELECT * FROM gs_check('SELECT id, k FROM gs_par ORDER BY k, id');
SELECT * FROM gs_check('SELECT t, f FROM gs_par ORDER BY t DESC');
SELECT * FROM gs_check('SELECT f, id FROM gs_par ORDER BY f, id DESC');
SELECT * FROM gs_check('SELECT id, t FROM gs_par WHERE id % 3 = 0 ORDER BY t');
SET gpusort.topn_limit = 0;
SELECT * FROM gs_check('SELECT id, k FROM gs_par ORDER BY k DESC, id LIMIT 1000');
RESET gpusort.topn_limit;
SELECT id, k FROM gs_par ORDER BY k, id OFFSET 49998 LIMIT 4;
-- workers really ran the custom scan
-- (work_mem large enough that no process spills, however the rows are shared)
SET work_mem = '64MB';
SELECT * FROM gs_explain_analyze('SELECT id, k FROM gs_par ORDER BY k, id');
SET work_mem = '4MB';
-- parallel aggregate: sorts below Gather Merge feed a partial GroupAggregate
SET enable_hashagg = off;
SELECT * FROM gs_explain('SELECT f, count(*) FROM gs_par GROUP BY f');
SELECT * FROM gs_check('SELECT f, count(*), min(id) FROM gs_par GROUP BY f');
RESET enable_hashagg;
-- workers that spill to temporary files
SET work_mem = '64kB';
SELECT * FROM gs_check('SELECT id, k FROM gs_par ORDER BY k, id');
SELECT * FROM gs_check('SELECT t, id FROM gs_par WHERE id % 2 = 0 ORDER BY t');
SET work_mem = '4MB';
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();
-- Gather Merge rescanned from a sub plan: the workers sort again each time
SET gpusort.topn_limit = 0;
EXPLAIN (COSTS OFF)
SELECT o.g, (SELECT max(k) FROM (SELECT k FROM gs_par ORDER BY k DESC, id LIMIT 1000) s WHERE s.k % 7 = o.g) FROM generate_series(1, 4) o(g);
SELECT * FROM gs_check('SELECT o.g, (SELECT max(k) FROM (SELECT k FROM gs_par ORDER BY k DESC, id LIMIT 1000) s WHERE s.k % 7 = o.g) FROM generate_series(1, 4) o(g)');
SET work_mem = '64kB';
SELECT * FROM gs_check('SELECT o.g, (SELECT min(t) FROM (SELECT t FROM gs_par ORDER BY t DESC LIMIT 30000) s WHERE s.t > to_hex(o.g) COLLATE "C") FROM generate_series(1, 3) o(g)');
SET work_mem = '4MB';
RESET gpusort.topn_limit;
-- without the leader
SET parallel_leader_participation = off;
SELECT * FROM gs_check('SELECT id, k FROM gs_par ORDER BY k, id');
RESET parallel_leader_participation;
-- a parallel merge join
SET enable_hashjoin = off;
SET enable_nestloop = off;
SELECT * FROM gs_check('SELECT count(*), sum(a.id - b.id) FROM gs_par a JOIN gs_par b ON a.k % 1000 = b.id');
RESET enable_hashjoin;
RESET enable_nestloop;

RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
