--
-- lifecycle: gpusort takes sorts, index builds and CLUSTER only in a
-- database where the extension exists (DROP EXTENSION stops it, CREATE
-- EXTENSION brings it back, in the same session); settings that are
-- superuser-only or hidden; gpusort.cuda_library checked when set; a server
-- without an NVIDIA GPU keeps a small service pool and says "cpu (no GPU)"
-- on EXPLAIN's engine line.  (Without preloading, and across sessions:
-- test/t/004_restarts.pl.)
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

-- a database of its own, so that dropping the extension there leaves the
-- suite's alone
SET client_min_messages = warning;
DROP DATABASE IF EXISTS gs_life;
RESET client_min_messages;
CREATE DATABASE gs_life;
\c gs_life
SET gpusort.min_rows = 0;
SET gpusort.log_index_builds = on;
SET max_parallel_maintenance_workers = 2;
CREATE TABLE lt AS SELECT g AS id, (g * 7919) % 100003 AS k FROM generate_series(1, 30000) g;
ANALYZE lt;
-- not created here yet: PostgreSQL's sort, index build and CLUSTER
EXPLAIN (COSTS OFF) SELECT * FROM lt ORDER BY k;
SET client_min_messages = log;
CREATE INDEX lt_k ON lt (k);
CLUSTER lt USING lt_k;
RESET client_min_messages;
DROP INDEX lt_k;
-- created: gpusort's
CREATE EXTENSION gpusort;
EXPLAIN (COSTS OFF) SELECT * FROM lt ORDER BY k;
PREPARE lq AS SELECT * FROM lt ORDER BY k DESC;
EXPLAIN (COSTS OFF) EXECUTE lq;
SET client_min_messages = log;
CREATE INDEX lt_k ON lt (k);
CLUSTER lt USING lt_k;
RESET client_min_messages;
DROP INDEX lt_k;
-- dropped: PostgreSQL's again, the prepared statement too
DROP EXTENSION gpusort;
EXPLAIN (COSTS OFF) SELECT * FROM lt ORDER BY k;
EXPLAIN (COSTS OFF) EXECUTE lq;
SET client_min_messages = log;
CREATE INDEX lt_k ON lt (k);
CLUSTER lt USING lt_k;
RESET client_min_messages;
DROP INDEX lt_k;
-- created again, and dropped in a transaction that rolls back: still there
CREATE EXTENSION gpusort;
BEGIN;
DROP EXTENSION gpusort;
EXPLAIN (COSTS OFF) SELECT * FROM lt ORDER BY k;
ROLLBACK;
EXPLAIN (COSTS OFF) SELECT * FROM lt ORDER BY k;
EXPLAIN (COSTS OFF) EXECUTE lq;
\c contrib_regression
DROP DATABASE gs_life;
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

-- settings that size a query's threads and GPU memory, and the fault
-- injection settings, are superuser-only; the latter are not listed
CREATE ROLE gs_life_user;
SET ROLE gs_life_user;
SET gpusort.cpu_threads = 64;
SET gpusort.gpu_memory_limit = '64GB';
SET gpusort.sort_fault = none;
SET gpusort.index_fault = none;
-- (its error's text differs by version: only its code is checked)
DO $$
BEGIN
	PERFORM current_setting('gpusort.service_fault');
	RAISE NOTICE 'gpusort.service_fault can be read';
EXCEPTION WHEN insufficient_privilege THEN
	RAISE NOTICE 'gpusort.service_fault: permission denied';
END
$$;
-- these stay any role's
SET gpusort.engine = cpu;
SET gpusort.parallel_load = off;
SET gpusort.enabled = off;
RESET ROLE;
RESET gpusort.engine;
RESET gpusort.parallel_load;
RESET gpusort.enabled;
DROP ROLE gs_life_user;
SELECT name, context FROM pg_settings
WHERE name IN ('gpusort.cpu_threads', 'gpusort.gpu_memory_limit',
			   'gpusort.cuda_library', 'gpusort.parallel_load')
ORDER BY name;
SELECT count(*) AS fault_settings_listed FROM pg_settings WHERE name LIKE 'gpusort.%fault';
-- a superuser still sets them
SET gpusort.cpu_threads = 2;
SHOW gpusort.cpu_threads;
RESET gpusort.cpu_threads;

-- gpusort.cuda_library: checked when set, in postgresql.conf only
SET gpusort.cuda_library = '/nonexistent/libfoo.so';
ALTER SYSTEM SET gpusort.cuda_library = '/nonexistent/libfoo.so';
ALTER SYSTEM SET gpusort.cuda_library = '';
ALTER SYSTEM SET gpusort.cuda_library = '/';
ALTER SYSTEM SET gpusort.cuda_library = '/etc/passwd';

-- no NVIDIA GPU here (no driver, or no CUDA engine library): the service's
-- pool is a few MB, not gpusort.service_memory, and a sort's engine line
-- says "cpu (no GPU)" with no fallback line under gpusort.engine = auto
-- (where there is a GPU both hold trivially)
SELECT (pg_stat_file('/dev/nvidiactl', true) IS NULL AND
		pg_stat_file('/proc/driver/nvidia/gpus', true) IS NULL AND
		pg_stat_file('/dev/dxg', true) IS NULL) OR
	   pg_stat_file((SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR') ||
					'/libgpusort_cuda.so', true) IS NULL AS no_gpu \gset
SELECT NOT :'no_gpu'::boolean OR size <= 32 * 1048576 AS pool_small_without_gpu
FROM pg_shmem_allocations WHERE name = 'gpusort service pool';
SELECT NOT :'no_gpu'::boolean OR memory_bytes <= 32 * 1048576 AS view_says_so FROM gpusort_service;
CREATE TABLE gs_life_t AS SELECT g AS id, (g * 7919) % 100003 AS k FROM generate_series(1, 30000) g;
ANALYZE gs_life_t;
SET gpusort.engine = auto;
SET gpusort.service_fault = none;
CREATE FUNCTION gs_life_engine(q text) RETURNS SETOF text
LANGUAGE plpgsql AS $fn$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q
	LOOP
		IF l ~ 'GpuSort (Engine|Fallback)' THEN
			RETURN NEXT substring(l from 'GpuSort (Engine: \S+ \([^)]*\)|Fallback: .*)');
		END IF;
	END LOOP;
END
$fn$;
SELECT NOT :'no_gpu'::boolean OR array_agg(l) = '{"Engine: cpu (no GPU)"}' AS engine_line
FROM gs_life_engine('SELECT * FROM gs_life_t ORDER BY k') l;
RESET gpusort.engine;
RESET gpusort.service_fault;
DROP FUNCTION gs_life_engine(text);
DROP TABLE gs_life_t;
