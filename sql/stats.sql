--
-- stats: what a DBA sees of gpusort.  EXPLAIN names every Sort gpusort
-- leaves to PostgreSQL with its reason; the gpusort_stats and
-- gpusort_stats_reasons views count sorts by engine, fallbacks, declined
-- Sorts, index builds and CLUSTERs; pg_monitor reads them and
-- gpusort_service; gpusort_stats_reset() starts over.  The counters are the
-- server's: the counts below are exact because this is the only session
-- running queries, every plan is serial, and the engine is set.  (A libc
-- collation other than C is tested in stats_libc.)
--
LOAD 'gpusort';
SET work_mem = '4MB';
SET max_parallel_workers_per_gather = 0;
SET gpusort.min_rows = 1000;
SET gpusort.topn_limit = 100;
SET gpusort.engine = cpu;
CREATE TABLE gs_st AS
SELECT i, (i * 7919) % 5000 AS k, ('{"a": ' || i || '}')::jsonb AS j,
	   md5(i::text) AS s
FROM generate_series(1, 5000) i;
ANALYZE gs_st;
CREATE COLLATION gs_st_ci (provider = icu, locale = 'und-u-ks-level2',
						   deterministic = false);

-- each reason a Sort stays PostgreSQL's, one line after the plan
EXPLAIN (COSTS OFF) SELECT * FROM gs_st WHERE i <= 10 ORDER BY k;
EXPLAIN (COSTS OFF) SELECT * FROM gs_st ORDER BY k, i LIMIT 10;
-- (a volatile count: run-time, with no InitPlan, whose EXPLAIN differs by version)
EXPLAIN (COSTS OFF) SELECT * FROM gs_st ORDER BY k LIMIT (random() * 0 + 10)::int;
EXPLAIN (COSTS OFF) SELECT * FROM gs_st ORDER BY j, i;
EXPLAIN (COSTS OFF) SELECT * FROM gs_st ORDER BY s COLLATE gs_st_ci;
EXPLAIN (COSTS OFF) SELECT * FROM gs_st ORDER BY s USING ~<~;
-- a Sort taken says nothing; nor does any with gpusort off
EXPLAIN (COSTS OFF) SELECT * FROM gs_st ORDER BY k;
SET gpusort.enabled = off;
EXPLAIN (COSTS OFF) SELECT * FROM gs_st ORDER BY j;
RESET gpusort.enabled;
-- two Sorts, one taken and one declined, and the other formats
EXPLAIN (COSTS OFF)
SELECT a.k FROM (SELECT k FROM gs_st ORDER BY k OFFSET 1) a
UNION ALL
SELECT b.k FROM (SELECT k, j FROM gs_st ORDER BY j OFFSET 1) b;
-- (the plan's own properties differ by version, e.g. "Disabled" from 18
-- on: only the element after the plan is shown)
CREATE FUNCTION gs_st_explain(fmt text, q text) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
	r text;
BEGIN
	EXECUTE format('EXPLAIN (COSTS OFF, FORMAT %s) %s', fmt, q) INTO r;
	IF fmt = 'JSON' THEN
		RETURN jsonb_pretty((r::jsonb) -> 1);
	END IF;
	RETURN substr(r, strpos(r, '- GpuSort Declined:'));
END
$fn$;
SELECT gs_st_explain('JSON', 'SELECT * FROM gs_st ORDER BY s COLLATE gs_st_ci');
SELECT gs_st_explain('YAML', 'SELECT * FROM gs_st ORDER BY k, i LIMIT 10');
DROP FUNCTION gs_st_explain(text, text);

-- counters: start from zero
SELECT gpusort_stats_reset();
SELECT sorts_gpu + sorts_cpu + fallbacks + declined + index_builds + clusters AS total,
	   stats_reset > now() - interval '1 hour' AS reset_recently
FROM gpusort_stats;
-- two sorts on the CPU engine, 5000 rows each
SELECT k FROM gs_st ORDER BY k OFFSET 4999;
SELECT k, i FROM gs_st ORDER BY k, i OFFSET 4999;
-- declined: min_rows, top_n, key_type, key_collation, key_operator, each once
SELECT i FROM gs_st WHERE i <= 10 ORDER BY k OFFSET 9;
SELECT i FROM gs_st ORDER BY k, i LIMIT 1;
SELECT i FROM gs_st ORDER BY j, i OFFSET 4999;
SELECT i FROM gs_st ORDER BY s COLLATE gs_st_ci, i OFFSET 4999;
SELECT i FROM gs_st ORDER BY s USING ~<~ OFFSET 4999;
-- EXPLAIN without ANALYZE runs nothing and counts nothing
EXPLAIN (COSTS OFF) SELECT * FROM gs_st ORDER BY j;
-- through the service as if it had a device: one GPU sort, then one whose
-- device fails it, sorted again on the CPU engine (a fallback)
SET gpusort.engine = gpu;
SET gpusort.service_fault = fake;
SELECT k FROM gs_st ORDER BY k OFFSET 4999;
SET gpusort.service_fault = device_error;
SELECT k FROM gs_st ORDER BY k OFFSET 4999;
RESET gpusort.service_fault;
SET gpusort.engine = cpu;
-- btree builds and a CLUSTER taken (CLUSTER builds gs_st_k again), a
-- btree build declined (a jsonb key)
CREATE INDEX gs_st_k ON gs_st (k);
CLUSTER gs_st USING gs_st_k;
CREATE INDEX gs_st_j ON gs_st (j);
SELECT sorts_gpu, sorts_cpu, rows_gpu, rows_cpu, key_bytes_sorted, fallbacks, declined, index_builds, index_builds_declined, clusters,
	   clusters_declined
FROM gpusort_stats;
SELECT * FROM gpusort_stats_reasons WHERE count > 0;

-- pg_monitor reads both views and gpusort_service; others read none
CREATE ROLE gs_st_monitor IN ROLE pg_monitor;
CREATE ROLE gs_st_plain;
SET ROLE gs_st_monitor;
SELECT sorts_cpu > 0 AS counted FROM gpusort_stats;
SELECT count(*) AS reasons FROM gpusort_stats_reasons;
SELECT pid IS NOT NULL AS has_pid FROM gpusort_service;
SELECT gpusort_stats_reset();
RESET ROLE;
SET ROLE gs_st_plain;
SELECT * FROM gpusort_stats;
SELECT * FROM gpusort_stats_reasons;
SELECT * FROM gpusort_service;
SELECT * FROM gpusort_stats();
RESET ROLE;
DROP ROLE gs_st_monitor;
DROP ROLE gs_st_plain;

-- reset: back to zero
SELECT gpusort_stats_reset();
SELECT sorts_gpu, sorts_cpu, rows_gpu, rows_cpu, key_bytes_sorted, fallbacks,
	   declined, index_builds, index_builds_declined, clusters, clusters_declined
FROM gpusort_stats;
SELECT sum(count) AS reasons FROM gpusort_stats_reasons;

DROP TABLE gs_st;
DROP COLLATION gs_st_ci;
