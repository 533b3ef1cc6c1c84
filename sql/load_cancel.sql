--
-- load_cancel: a cancel while a parallel in-memory sort waits for
-- its copy of the rows into sorted order to end (the copy's threads are
-- still at work, giving the workers' shared memory back), at the top
-- level and inside a subtransaction that catches it: the statement is
-- canceled, nothing is freed twice (this crashed the server once: the
-- abort stopped the copy's threads a second time), the same sort then
-- gives PostgreSQL's answer, and no worker is left
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '256MB';
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET gpusort.cpu_threads = 2;

-- more rows than the smallest sort that copies its rows (1M)
CREATE TABLE gs_pc AS
SELECT ((g::int8 * 7919) % 1100003) AS k, g AS id
FROM generate_series(1, 1100000) g;
ANALYZE gs_pc;
SELECT * FROM gs_explain('SELECT * FROM gs_pc ORDER BY k OFFSET 1100000');

SET gpusort.sort_fault = 'cancel_in_copy';
SELECT * FROM gs_pc ORDER BY k OFFSET 1100000;
DO $$
BEGIN
	PERFORM * FROM gs_pc ORDER BY k OFFSET 1100000;
	RAISE NOTICE 'not canceled';
EXCEPTION WHEN query_canceled THEN
	RAISE NOTICE 'canceled in a subtransaction';
END
$$;
-- twice in one transaction, the second after the first's rollback
BEGIN;
SAVEPOINT a;
SELECT * FROM gs_pc ORDER BY k OFFSET 1100000;
ROLLBACK TO a;
SELECT * FROM gs_pc ORDER BY k OFFSET 1100000;
ROLLBACK;
RESET gpusort.sort_fault;

SELECT * FROM gs_check('SELECT * FROM gs_pc ORDER BY k, id');
SELECT gs_workers_left() AS workers_left;
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();
DROP TABLE gs_pc;
