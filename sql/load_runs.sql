--
-- load_runs: a parallel load of an input larger than work_mem, where
-- every participant (workers and leader) sorts its rows in batches of
-- work_mem and writes them as runs, which the leader merges;
-- against PostgreSQL's own sort
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;

CREATE TABLE gs_pr AS
SELECT g AS id,
	   CASE WHEN g % 97 = 0 THEN NULL
			ELSE ((g * 7919) % 5003 - 2500)::int8 END AS k,
	   CASE WHEN g % 61 = 0 THEN NULL
			ELSE md5((g % 20000)::text) END COLLATE "C" AS tc,
	   CASE WHEN g % 59 = 0 THEN NULL
			ELSE (ARRAY['apple', 'Apple', 'ápple', 'banana', 'Banana', ''])[g % 6 + 1]
				 || (g % 50)::text END COLLATE "und-x-icu" AS ti,
	   -- longer than any key: ties of the encoded prefix need comparisons
	   repeat('x', 40) || to_char(g % 3000, 'FM00000') AS lt
FROM generate_series(1, 60000) g;
ALTER TABLE gs_pr SET (parallel_workers = 2);
ANALYZE gs_pr;

-- the load node's figures, and whether the workers wrote runs.  How a
-- parallel scan shares the rows out depends on when each worker starts: on
-- a busy machine the leader can take every block before a worker is up, so
-- here the workers alone load (the results are checked with the leader
-- loading too, by gs_check)
CREATE FUNCTION gs_runs(q text, OUT launched int, OUT workers_wrote_runs bool,
						OUT rows bigint, OUT runs_add_up bool,
						OUT merge_passes int)
LANGUAGE plpgsql SET parallel_leader_participation = off AS $fn$
DECLARE
	j jsonb;
	l jsonb;
BEGIN
	j := gs_gpusort_node(q);
	l := j->'Plans'->0;
	launched := (l->>'Workers Launched')::int;
	workers_wrote_runs := (l->>'Leader Runs')::int >= 0 AND
		(SELECT sum((w->>'Runs')::int) > 1
		 FROM jsonb_array_elements(l->'Load Workers') w);
	rows := (l->>'Leader Rows')::bigint +
		(SELECT sum((w->>'Rows')::bigint) FROM jsonb_array_elements(l->'Load Workers') w);
	runs_add_up := (j->>'GpuSort Runs')::int = (l->>'Leader Runs')::int +
		(SELECT sum((w->>'Runs')::int) FROM jsonb_array_elements(l->'Load Workers') w);
	merge_passes := (j->>'GpuSort Merge Passes')::int;
END
$fn$;

CREATE FUNCTION gs_pr_json(q text) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
	j jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO j;
	RETURN j;
END
$fn$;

SET work_mem = '64kB';
EXPLAIN (COSTS OFF) SELECT * FROM gs_pr ORDER BY k, id;
-- many runs each, which every worker merges down to its share of the
-- final merge
SELECT launched, workers_wrote_runs, rows, runs_add_up, merge_passes
FROM gs_runs('SELECT * FROM gs_pr ORDER BY k, id');
-- no worker free: the leader loads alone, in the parallel plan, and has
-- more runs than one merge takes: several passes
SET max_parallel_workers = 0;
SELECT (j->0->'Plan'->'Plans'->0->>'Workers Launched')::int AS launched,
	   (j->0->'Plan'->>'GpuSort Merge Passes')::int > 1 AS multi_pass
FROM (SELECT gs_pr_json('SELECT * FROM gs_pr ORDER BY k, id') j) s;
SELECT * FROM gs_check('SELECT * FROM gs_pr ORDER BY k, id');
RESET max_parallel_workers;
SELECT * FROM gs_explain_analyze('SELECT * FROM gs_pr ORDER BY k, id');

-- every kind of key, each direction and NULLS placement
SELECT * FROM gs_check_dirs('gs_pr', 'k');
SELECT * FROM gs_check_dirs('gs_pr', 'tc');
SELECT * FROM gs_check_dirs('gs_pr', 'ti');
SELECT * FROM gs_check_dirs('gs_pr', 'lt');
-- duplicates only, and several columns
SELECT * FROM gs_check('SELECT k, id FROM gs_pr ORDER BY k DESC NULLS FIRST, id');
SELECT * FROM gs_check('SELECT ti, lt, k, id FROM gs_pr ORDER BY ti DESC, lt, k NULLS FIRST, id');
SELECT * FROM gs_check('SELECT count(*), md5(string_agg(s::text, '','')) FROM (SELECT lt, ti, id FROM gs_pr ORDER BY lt, ti, id) s');
-- the runs of lossy keys hold the lossy mark: ties between runs are
-- decided by PostgreSQL's comparators
SELECT launched, workers_wrote_runs, rows FROM gs_runs('SELECT lt, id FROM gs_pr ORDER BY lt, id');

-- an estimate far too low (the planner takes 0.5% of the rows): the input
-- goes through shared memory, and the leader writes its runs as it takes
-- the workers' rows
SELECT (j->0->'Plan'->'Plans'->0) ? 'Shared Memory' AS through_shared_memory,
	   (j->0->'Plan'->>'GpuSort Runs')::int > 1 AS spilled
FROM (SELECT gs_pr_json('SELECT tc, k, id FROM gs_pr WHERE id % 3 = 0 ORDER BY tc, k DESC, id') j) s;
SELECT * FROM gs_check('SELECT tc, k, id FROM gs_pr WHERE id % 3 = 0 ORDER BY tc, k DESC, id');

-- a larger work_mem: fewer runs, a single final merge on threads
SET work_mem = '1MB';
SELECT launched, workers_wrote_runs, rows, runs_add_up FROM gs_runs('SELECT * FROM gs_pr ORDER BY k, id');
SELECT * FROM gs_check('SELECT * FROM gs_pr ORDER BY k, id');
SELECT * FROM gs_check('SELECT * FROM gs_pr ORDER BY tc DESC, id');
SET work_mem = '64kB';

-- LIMIT, a window, a merge join (mark and restore on its inner sort)
SET gpusort.topn_limit = 0;
SELECT * FROM gs_check('SELECT id, k FROM gs_pr ORDER BY k DESC, id LIMIT 700');
RESET gpusort.topn_limit;
SELECT * FROM gs_check('SELECT id, row_number() OVER (ORDER BY tc, id) FROM gs_pr');
SET enable_hashjoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT a.id, b.id FROM (SELECT * FROM gs_pr WHERE id % 50 = 0) a FULL JOIN gs_pr b ON a.k = b.k ORDER BY a.id, b.id;
SELECT * FROM gs_check('SELECT a.id, b.id FROM (SELECT * FROM gs_pr WHERE id % 50 = 0) a FULL JOIN gs_pr b ON a.k = b.k ORDER BY a.id, b.id');
RESET enable_nestloop;
-- rescans: the inner side of a nested loop, loaded (in parallel) again
SET enable_mergejoin = off;
SET enable_material = off;
SELECT * FROM gs_check('SELECT o, s.id FROM generate_series(1, 2) o, (SELECT id, k FROM gs_pr ORDER BY k, id OFFSET 0) s');
RESET enable_mergejoin;
RESET enable_material;
RESET enable_hashjoin;

-- an input larger than work_mem is loaded in parallel (a Gather Merge over
-- sorts in workers becomes the GpuSort alone) at any size
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
EXPLAIN (COSTS OFF) SELECT o, s.id FROM generate_series(1, 2) o, (SELECT id, k FROM gs_pr ORDER BY k, id OFFSET 0) s;
SELECT launched, workers_wrote_runs, rows FROM gs_runs('SELECT * FROM gs_pr ORDER BY tc, id');
SELECT * FROM gs_check('SELECT o, s.id FROM generate_series(1, 2) o, (SELECT id, k FROM gs_pr ORDER BY k, id OFFSET 0) s');
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;

-- a cursor runs serially (not in parallel mode); backward and absolute
-- fetches read the final merge materialised
BEGIN;
DECLARE gs_c SCROLL CURSOR FOR SELECT id, k FROM gs_pr ORDER BY k, id;
FETCH 3 FROM gs_c;
FETCH ABSOLUTE 40000 FROM gs_c;
FETCH BACKWARD 2 FROM gs_c;
FETCH LAST FROM gs_c;
COMMIT;
SELECT id, k FROM gs_pr ORDER BY k, id OFFSET 39997 LIMIT 3;

-- serial fallbacks: no worker to be had; the load is the leader's alone,
-- with all of work_mem
SET max_parallel_workers = 0;
SELECT * FROM gs_explain_analyze('SELECT * FROM gs_pr ORDER BY k, id');
SELECT * FROM gs_check('SELECT * FROM gs_pr ORDER BY tc, id');
RESET max_parallel_workers;
-- the leader leaves the scan to the workers
SET parallel_leader_participation = off;
SELECT * FROM gs_check('SELECT * FROM gs_pr ORDER BY ti, id');
RESET parallel_leader_participation;
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

-- temp_file_limit counts every participant's runs: PostgreSQL's error,
-- raised by whichever process crosses it, and no file left
SET temp_file_limit = '1MB';
SELECT gs_error_unquoted('SELECT * FROM gs_pr ORDER BY tc, id OFFSET 60000');
RESET temp_file_limit;
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

-- cancel while the participants write runs: the statement ends promptly,
-- no worker is left behind, no temporary file either
CREATE FUNCTION gs_pr_slowly(int) RETURNS bool LANGUAGE plpgsql PARALLEL SAFE
AS $$BEGIN PERFORM pg_sleep(0.0002); RETURN true; END$$;
CREATE TEMP TABLE gs_pr_t0 AS SELECT clock_timestamp() AS t0;
SET statement_timeout = '500ms';
\set VERBOSITY terse
SELECT id FROM gs_pr WHERE gs_pr_slowly(id) ORDER BY tc, id OFFSET 100000;
\set VERBOSITY default
RESET statement_timeout;
SELECT clock_timestamp() - t0 < interval '5 s' AS cancelled_promptly FROM gs_pr_t0;
SELECT gs_workers_left() AS parallel_workers_left;
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();
-- an error in a worker while it writes runs comes up in the leader
\set VERBOSITY terse
SELECT 1 / (id - 30000), id FROM gs_pr ORDER BY k, id;
\set VERBOSITY default
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();
SELECT * FROM gs_check('SELECT * FROM gs_pr ORDER BY k, id');

SET work_mem = '4MB';
DROP TABLE gs_pr;
