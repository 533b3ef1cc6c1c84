--
-- load_parallel: a GpuSort whose input parallel workers read, copy and
-- encode into shared memory (GpuSortLoad), against PostgreSQL's own sort
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

-- parallel loading forced, whatever the table's size
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;

CREATE TABLE gs_pl AS
SELECT g AS id,
	   CASE WHEN g % 97 = 0 THEN NULL
			WHEN g % 101 = 0 THEN (-9223372036854775808)::int8
			WHEN g % 103 = 0 THEN 9223372036854775807
			ELSE ((g * 7919) % 20011 - 10000)::int8 END AS i8,
	   CASE WHEN g % 89 = 0 THEN NULL
			WHEN g % 83 = 0 THEN 'NaN'::float8
			WHEN g % 79 = 0 THEN '-0'::float8
			WHEN g % 73 = 0 THEN 'Infinity'::float8
			WHEN g % 71 = 0 THEN '-Infinity'::float8
			ELSE ((g * 31) % 1000)::float8 / 7 - 70 END AS f8,
	   CASE WHEN g % 61 = 0 THEN NULL
			ELSE md5((g % 5000)::text) END COLLATE "C" AS tc,
	   CASE WHEN g % 59 = 0 THEN NULL
			ELSE (ARRAY['apple', 'Apple', 'ápple', 'banana', 'Banana', ''])[g % 6 + 1]
				 || (g % 50)::text END COLLATE "und-x-icu" AS ti,
	   7 AS same,
	   g * 2 AS sorted
FROM generate_series(1, 60000) g;
ANALYZE gs_pl;

EXPLAIN (COSTS OFF) SELECT * FROM gs_pl ORDER BY i8, id;

-- every kind of key, each direction and NULLS placement
SELECT * FROM gs_check_dirs('gs_pl', 'i8');
SELECT * FROM gs_check_dirs('gs_pl', 'f8');
SELECT * FROM gs_check_dirs('gs_pl', 'tc');
SELECT * FROM gs_check_dirs('gs_pl', 'ti');
SELECT * FROM gs_check('SELECT * FROM gs_pl ORDER BY same, id DESC');
SELECT * FROM gs_check('SELECT id, sorted FROM gs_pl ORDER BY sorted');
SELECT * FROM gs_check('SELECT id, sorted FROM gs_pl ORDER BY sorted DESC');
SELECT * FROM gs_check('SELECT ti, f8, id FROM gs_pl ORDER BY ti DESC NULLS LAST, f8 NULLS FIRST, id');
SELECT * FROM gs_check('SELECT tc, i8, id FROM gs_pl WHERE id % 3 = 0 ORDER BY tc, i8 DESC, id');

-- the smallest memory settings: many chunks, runs spilled to disk
SET gpusort.gpu_memory_limit = '64kB';
SELECT * FROM gs_check('SELECT * FROM gs_pl ORDER BY i8, id');
SELECT * FROM gs_check('SELECT * FROM gs_pl ORDER BY ti, tc, id');
RESET gpusort.gpu_memory_limit;
SET work_mem = '64kB';
SELECT * FROM gs_check('SELECT * FROM gs_pl ORDER BY f8 DESC, id');
SELECT * FROM gs_check('SELECT * FROM gs_pl ORDER BY ti NULLS FIRST, id');
SET work_mem = '4MB';
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

-- EXPLAIN ANALYZE shows the workers and each one's load (numbers masked;
-- work_mem large enough that the sort never spills, however the rows are
-- shared)
SET work_mem = '64MB';
SELECT * FROM gs_explain_analyze('SELECT * FROM gs_pl ORDER BY i8, id');
CREATE FUNCTION gs_load_json(q text) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
	j jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO j;
	RETURN j->0->'Plan'->'Plans'->0;
END
$fn$;
SELECT j->>'Custom Plan Provider' AS node, (j->>'Workers Planned')::int AS planned,
	   (j->>'Workers Launched')::int > 0 AS launched,
	   jsonb_array_length(j->'Load Workers') = (j->>'Workers Launched')::int AS per_worker,
	   (j->>'Leader Rows')::int +
	   (SELECT sum((w->>'Rows')::int) FROM jsonb_array_elements(j->'Load Workers') w) AS rows,
	   (SELECT bool_and((w->>'Load Time')::float8 >= 0) FROM jsonb_array_elements(j->'Load Workers') w) AS times
FROM gs_load_json('SELECT * FROM gs_pl ORDER BY i8, id') j;
SET work_mem = '4MB';

-- what sits above the sort: LIMIT, window, merge join, a rescanned inner
-- side, an aggregate over a sub query
SET gpusort.topn_limit = 0;
SELECT * FROM gs_check('SELECT id, i8 FROM gs_pl ORDER BY i8 DESC, id LIMIT 500');
RESET gpusort.topn_limit;
SELECT * FROM gs_check('SELECT id, row_number() OVER (ORDER BY tc, id) FROM gs_pl');
SET enable_hashjoin = off;
SET enable_nestloop = off;
SELECT * FROM gs_check('SELECT a.id, b.id FROM gs_pl a JOIN gs_pl b ON a.i8 = b.i8 WHERE a.id % 50 = 0 ORDER BY a.id, b.id');
RESET enable_nestloop;
-- a merge full join (serial in PostgreSQL: sorts over Gathers) marks and
-- restores on its inner sort; both sorts are loaded by workers instead
EXPLAIN (COSTS OFF) SELECT a.id, b.id FROM (SELECT * FROM gs_pl WHERE id % 50 = 0) a FULL JOIN gs_pl b ON a.i8 = b.i8 ORDER BY a.id, b.id;
SELECT * FROM gs_check('SELECT a.id, b.id FROM (SELECT * FROM gs_pl WHERE id % 50 = 0) a FULL JOIN gs_pl b ON a.i8 = b.i8 ORDER BY a.id, b.id');
SET work_mem = '64kB';
SELECT * FROM gs_check('SELECT a.id, b.id FROM (SELECT * FROM gs_pl WHERE id % 50 = 0) a FULL JOIN gs_pl b ON a.i8 = b.i8 ORDER BY a.id, b.id');
SET work_mem = '4MB';
SET enable_mergejoin = off;
SET enable_material = off;
SELECT * FROM gs_check('SELECT o, s.id FROM generate_series(1, 2) o, (SELECT id, i8 FROM gs_pl ORDER BY i8, id OFFSET 0) s');
-- an input that fits work_mem but not the room /dev/shm has (a fault stands
-- in for a full /dev/shm): every participant sorts its share in runs
-- instead, and EXPLAIN says why
SET work_mem = '64MB';
SET gpusort.sort_fault = load_no_shm;
EXPLAIN (COSTS OFF) SELECT o, s.id FROM generate_series(1, 2) o, (SELECT id, i8 FROM gs_pl ORDER BY i8, id OFFSET 0) s;
SELECT j->>'Load' AS load, (j->>'Workers Launched')::int > 0 AS launched,
	   (j->>'Leader Runs')::int >= 0 AS runs
FROM gs_load_json('SELECT * FROM gs_pl ORDER BY i8, id') j;
SELECT * FROM gs_check('SELECT o, s.id FROM generate_series(1, 2) o, (SELECT id, i8 FROM gs_pl ORDER BY i8, id OFFSET 0) s');
SELECT * FROM gs_check('SELECT id, i8, f8 FROM gs_pl ORDER BY f8 DESC NULLS LAST, id');
-- the estimate far too low (a fault spends the load's budget at once): a
-- worker past the budget stops taking pages and the others read the rest;
-- a leader that took no share (parallel_leader_participation off) reads it
-- after them
SET gpusort.sort_fault = load_small_budget;
SET parallel_leader_participation = off;
SELECT j->>'Load' ~ '^[0-9]+ processes, in shared memory \([0-9]+ stopped at the estimate''s budget\)$' AS stopped,
	   (j->>'Leader Rows')::int > 0 AS leader_read_rest,
	   (j->>'Leader Rows')::int +
	   (SELECT sum((w->>'Rows')::int) FROM jsonb_array_elements(j->'Load Workers') w) AS rows
FROM gs_load_json('SELECT * FROM gs_pl ORDER BY i8, id') j;
SELECT * FROM gs_check('SELECT id, i8, tc FROM gs_pl ORDER BY tc, id');
RESET parallel_leader_participation;
SELECT * FROM gs_check('SELECT id, i8, tc FROM gs_pl ORDER BY i8 DESC, id');
SELECT * FROM gs_check('SELECT o, s.id FROM generate_series(1, 2) o, (SELECT id, i8 FROM gs_pl ORDER BY i8, id OFFSET 0) s');
RESET gpusort.sort_fault;
SET work_mem = '4MB';
RESET enable_mergejoin;
RESET enable_material;
RESET enable_hashjoin;
SET gpusort.topn_limit = 0;
SELECT * FROM gs_check('SELECT o, (SELECT id FROM (SELECT id, i8 FROM gs_pl ORDER BY i8 DESC, id OFFSET 0) s WHERE s.i8 < o * 1000 LIMIT 1) FROM generate_series(1, 3) o');
RESET gpusort.topn_limit;
SELECT * FROM gs_check('SELECT count(*), md5(string_agg(s::text, '','')) FROM (SELECT tc, id FROM gs_pl ORDER BY tc, id) s');

-- serial fallbacks: no workers allowed, a cursor, parallel-unsafe functions
SET max_parallel_workers_per_gather = 0;
EXPLAIN (COSTS OFF) SELECT * FROM gs_pl ORDER BY i8, id;
SELECT * FROM gs_check('SELECT * FROM gs_pl ORDER BY i8, id');
SET max_parallel_workers_per_gather = 2;
-- workers planned but none to be had: the leader loads alone
SET max_parallel_workers = 0;
SET work_mem = '64MB';
SELECT * FROM gs_explain_analyze('SELECT * FROM gs_pl ORDER BY tc, id');
SET work_mem = '4MB';
SELECT * FROM gs_check('SELECT * FROM gs_pl ORDER BY tc, id');
RESET max_parallel_workers;
-- the leader leaves the scan to the workers
SET parallel_leader_participation = off;
SELECT * FROM gs_check('SELECT * FROM gs_pl ORDER BY tc, id');
SELECT (j->>'Leader Rows')::int AS leader_rows,
	   (SELECT sum((w->>'Rows')::int) FROM jsonb_array_elements(j->'Load Workers') w) AS worker_rows
FROM gs_load_json('SELECT * FROM gs_pl ORDER BY i8, id') j;
RESET parallel_leader_participation;
EXPLAIN (COSTS OFF) DECLARE gs_c SCROLL CURSOR FOR SELECT * FROM gs_pl ORDER BY i8, id;
BEGIN;
DECLARE gs_c SCROLL CURSOR FOR SELECT id FROM gs_pl ORDER BY f8, id;
FETCH 3 FROM gs_c;
FETCH BACKWARD 2 FROM gs_c;
FETCH LAST FROM gs_c;
COMMIT;
SELECT id FROM gs_pl ORDER BY f8, id LIMIT 3;
CREATE FUNCTION gs_unsafe(int) RETURNS int LANGUAGE plpgsql PARALLEL UNSAFE
AS 'BEGIN RETURN $1; END';
CREATE FUNCTION gs_restricted(int) RETURNS int LANGUAGE plpgsql PARALLEL RESTRICTED
AS 'BEGIN RETURN $1; END';
EXPLAIN (COSTS OFF) SELECT gs_unsafe(id), i8 FROM gs_pl ORDER BY i8, id;
EXPLAIN (COSTS OFF) SELECT id, i8 FROM gs_pl WHERE gs_restricted(id) > 0 ORDER BY i8, id;
SELECT * FROM gs_check('SELECT gs_unsafe(id), i8 FROM gs_pl ORDER BY i8, id');
SELECT * FROM gs_check('SELECT id, i8 FROM gs_pl WHERE gs_restricted(id) > 0 ORDER BY i8, id');

-- cancel during a parallel load: the statement ends promptly, no worker is
-- left behind and the next parallel sort works
CREATE FUNCTION gs_slowly(int) RETURNS bool LANGUAGE plpgsql PARALLEL SAFE
AS $$BEGIN PERFORM pg_sleep(0.001); RETURN true; END$$;
EXPLAIN (COSTS OFF) SELECT id FROM gs_pl WHERE gs_slowly(id) ORDER BY i8, id OFFSET 100000;
CREATE TEMP TABLE gs_t0 AS SELECT clock_timestamp() AS t0;
SET statement_timeout = '300ms';
\set VERBOSITY terse
SELECT id FROM gs_pl WHERE gs_slowly(id) ORDER BY i8, id OFFSET 100000;
\set VERBOSITY default
RESET statement_timeout;
SELECT clock_timestamp() - t0 < interval '5 s' AS cancelled_promptly FROM gs_t0;
SELECT gs_workers_left() AS parallel_workers_left;
SELECT * FROM gs_check('SELECT * FROM gs_pl ORDER BY tc, id');

-- an error raised in a worker while it loads comes up in the leader; then
-- a spilled sort rescanned on the inner side of a nested loop
\set VERBOSITY terse
SELECT 1 / (id - 30000), id FROM gs_pl ORDER BY i8, id;
\set VERBOSITY default
SET work_mem = '64kB';
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SELECT * FROM gs_check('SELECT o, s.id FROM generate_series(1, 2) o, (SELECT id, i8 FROM gs_pl ORDER BY i8, id OFFSET 0) s');
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
SET work_mem = '4MB';
-- a large parallel load sorted in memory (1M rows and more): the rows are
-- copied into sorted order on threads and go out from the copies
CREATE TABLE gs_plbig AS
SELECT g AS id, ((g::int8 * 2654435761) % 1000003 - 500000) * 1000 + g % 7 AS k,
	   CASE WHEN g % 1001 = 0 THEN NULL ELSE md5((g % 400000)::text) END COLLATE "C" AS t
FROM generate_series(1, 1100000) g;
ANALYZE gs_plbig;
SET work_mem = '512MB';
SELECT * FROM gs_check('SELECT * FROM gs_plbig ORDER BY k, id');
SELECT * FROM gs_check('SELECT id, t FROM gs_plbig ORDER BY t DESC NULLS LAST, id');
CREATE FUNCTION gs_top_json(q text) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
	j jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO j;
	RETURN j->0->'Plan';
END
$fn$;
SELECT (j->>'GpuSort Rows Copied In Order')::int8 > 0 AS copied,
	   (j->'Plans'->0->>'Workers Launched')::int > 0 AS parallel
FROM gs_top_json('SELECT * FROM gs_plbig ORDER BY k, id') j;
-- the copy goes on while rows go out: a LIMIT ends the sort (and the
-- copy) early; an error above the sort, raised while the copy may still
-- run, and the same caught by a subtransaction, leave a working session
EXPLAIN (COSTS OFF) SELECT * FROM (SELECT id, k FROM gs_plbig ORDER BY k DESC, id OFFSET 0) s
WHERE 1 / (id - 1) > 0;
SET gpusort.topn_limit = 0;
SELECT * FROM gs_check('SELECT id, k FROM gs_plbig ORDER BY k, id LIMIT 5');
RESET gpusort.topn_limit;
SELECT * FROM gs_check('SELECT id, t FROM gs_plbig ORDER BY t, id OFFSET 1099990');
\set VERBOSITY terse
SELECT * FROM (SELECT id, k FROM gs_plbig ORDER BY k DESC, id OFFSET 0) s
WHERE 1 / (id - 1) > 0;
\set VERBOSITY default
CREATE FUNCTION gs_pl_caught() RETURNS text
LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM * FROM (SELECT id, k FROM gs_plbig ORDER BY k DESC, id OFFSET 0) s
	WHERE 1 / (id - 1) > 0;
	RETURN 'not raised';
EXCEPTION WHEN division_by_zero THEN
	RETURN 'caught';
END
$fn$;
SELECT gs_pl_caught();
SELECT gs_pl_caught();
SELECT * FROM gs_check('SELECT id, k FROM gs_plbig ORDER BY k DESC, id OFFSET 1099995');
-- read twice (a rescan rewinds the sort): the second pass reads the
-- copies, after the shared blocks were given back
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
SELECT * FROM gs_check('SELECT o, s.id, s.t FROM generate_series(1, 2) o, (SELECT id, t FROM gs_plbig ORDER BY t, id OFFSET 0) s');
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
SELECT gs_workers_left() AS parallel_workers_left;
DROP FUNCTION gs_pl_caught();
DROP TABLE gs_plbig;
SET work_mem = '4MB';
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

-- The workers JIT-compile their scan only when the scan's own cost passes
-- jit_above_cost.  With the threshold between the load's cost and the
-- statement's, and the leader leaving the scan to its workers, the
-- statement compiles no more functions than when no worker can be had and
-- the leader scans alone (the scan's filter and projection, which each
-- worker compiled before).  (Without JIT, both are 0.)
CREATE TABLE gs_pljit AS
SELECT g AS id, (g * 7919) % 100003 AS k FROM generate_series(1, 200000) g;
ANALYZE gs_pljit;
CREATE FUNCTION gs_pl_jit_functions(q text) RETURNS int
LANGUAGE plpgsql AS $fn$
DECLARE
	p jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO p;
	RETURN coalesce((p->0->'JIT'->>'Functions')::int, 0);
END
$fn$;
CREATE FUNCTION gs_pl_jit_workers(q text) RETURNS bool
LANGUAGE plpgsql AS $fn$
DECLARE
	p jsonb;
	top float8;
	load float8;
	with_workers int;
	leader_alone int;
BEGIN
	EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO p;
	top := (p->0->'Plan'->>'Total Cost')::float8;
	load := jsonb_path_query_first(p,
		'$.** ? (@."Custom Plan Provider" == "GpuSortLoad")."Total Cost"')::float8;
	IF load IS NULL OR load >= top THEN
		RAISE EXCEPTION 'no parallel load under a costlier statement: %', p;
	END IF;
	PERFORM set_config('jit', 'on', true);
	PERFORM set_config('jit_above_cost', ((load + top) / 2)::text, true);
	PERFORM set_config('jit_inline_above_cost', '-1', true);
	PERFORM set_config('jit_optimize_above_cost', '-1', true);
	PERFORM set_config('parallel_leader_participation', 'off', true);
	with_workers := gs_pl_jit_functions(q);
	PERFORM set_config('max_parallel_workers', '0', true);
	leader_alone := gs_pl_jit_functions(q);
	RETURN with_workers <= leader_alone;
END
$fn$;
BEGIN;
SELECT gs_pl_jit_workers('SELECT k + 1 FROM gs_pljit WHERE id % 7 <> 0 ORDER BY 1 OFFSET 200000')
	AS workers_compile_no_more;
COMMIT;
DROP FUNCTION gs_pl_jit_workers(text);
DROP FUNCTION gs_pl_jit_functions(text);
DROP TABLE gs_pljit;
