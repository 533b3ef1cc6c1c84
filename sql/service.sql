--
-- service: the gpusort service (one background worker owns the GPUs).
-- On a machine without a GPU the service runs without a device; the
-- superuser-only setting gpusort.service_fault makes it serve this session
-- anyway ("fake": it sorts with its CPU engine), fail requests with a
-- device error, exit in the middle of one ("crash") or hold them until
-- canceled ("delay").  Every answer is compared with PostgreSQL's.
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

-- one service process, named in pg_stat_activity, in a known state
SELECT count(*) AS services FROM pg_stat_activity
WHERE backend_type = 'gpusort service';
SELECT state IN ('running', 'no device') AS state_ok, pid IS NOT NULL AS has_pid,
	   slices > 0 AS has_slices, memory_bytes = slices * 1048576::bigint AS sized
FROM gpusort_service;

-- the GpuSort lines of EXPLAIN ANALYZE that say which engine ran and why
CREATE FUNCTION svc_explain(q text) RETURNS SETOF text
LANGUAGE plpgsql AS $fn$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q
	LOOP
		IF l ~ 'GpuSort Engine' THEN
			RETURN NEXT 'engine: ' || substring(l from 'GpuSort Engine: (\S+)');
		ELSIF l ~ 'GpuSort Fallback' THEN
			RETURN NEXT 'fallback: ' || substring(l from 'GpuSort Fallback: (.*)$');
		END IF;
	END LOOP;
END
$fn$;

-- wait (bounded) until no slice is in use and no request runs
CREATE FUNCTION gs_service_idle() RETURNS boolean
LANGUAGE plpgsql AS $fn$
BEGIN
	FOR i IN 1..300 LOOP
		IF (SELECT slices_in_use = 0 AND running = 0 AND queue_length = 0
			FROM gpusort_service) THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN false;
END
$fn$;

-- wait (bounded) until a service other than old_pid runs
CREATE FUNCTION gs_service_restarted(old_pid int) RETURNS boolean
LANGUAGE plpgsql AS $fn$
BEGIN
	FOR i IN 1..300 LOOP
		IF (SELECT pid IS NOT NULL AND pid <> old_pid AND state <> 'stopped'
			FROM gpusort_service) THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN false;
END
$fn$;

-- wait (bounded) until n requests run in the service
CREATE FUNCTION gs_service_running(n int) RETURNS boolean
LANGUAGE plpgsql AS $fn$
BEGIN
	FOR i IN 1..300 LOOP
		IF (SELECT running >= n FROM gpusort_service) THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN false;
END
$fn$;

CREATE TABLE svc_t AS
SELECT g AS id, (g * 7919) % 100003 AS k, md5(g::text) AS s,
	   (g % 97)::float8 AS f, now()::date - (g % 1000) AS d
FROM generate_series(1, 60000) g;
ANALYZE svc_t;

-- only a superuser may inject faults
CREATE ROLE gs_svc_user;
SET ROLE gs_svc_user;
SET gpusort.service_fault = fake;
RESET ROLE;
DROP ROLE gs_svc_user;

-- every sort through the fake service gives PostgreSQL's answer
SET gpusort.engine = gpu;
SET gpusort.service_fault = fake;
CREATE TEMP TABLE svc_before AS SELECT sorts_served FROM gpusort_service;
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY k, id');
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY s DESC');
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY f, d DESC, id');
SELECT rows, same FROM gs_check('SELECT k, count(*) FROM svc_t GROUP BY k ORDER BY k');
SELECT rows, same FROM gs_check('SELECT id, sum(k) OVER (ORDER BY d, id) FROM svc_t ORDER BY id');
SET work_mem = '64MB';
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY s COLLATE "C", id');
SET work_mem = '4MB';
-- many chunks, two in flight at once
SET gpusort.gpu_memory_limit = '256kB';
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY k DESC, id');
RESET gpusort.gpu_memory_limit;
SELECT (SELECT sorts_served FROM gpusort_service) > sorts_served AS served_by_service
FROM svc_before;
SELECT gs_service_idle() AS idle;

-- this backend sorted "on the GPU", yet never loaded the CUDA engine
-- library: only the service does
SELECT position('libgpusort_cuda' IN pg_read_file('/proc/self/maps')) = 0
	AS backend_without_cuda;

-- a device error: the answer is still PostgreSQL's, EXPLAIN says why
SET gpusort.service_fault = device_error;
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY k, id');
SELECT DISTINCT * FROM svc_explain('SELECT * FROM svc_t ORDER BY k, id');
-- ... and poisons neither the service nor later sorts
SET gpusort.service_fault = fake;
TRUNCATE svc_before;
INSERT INTO svc_before SELECT sorts_served FROM gpusort_service;
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY s, id');
SELECT (SELECT sorts_served FROM gpusort_service) > sorts_served AS served_again
FROM svc_before;
SELECT gs_service_idle() AS idle;

-- a request canceled while the service holds it gives its slices back
SET gpusort.service_fault = delay;
SET statement_timeout = '300ms';
SELECT * FROM svc_t ORDER BY k OFFSET 100000;
RESET statement_timeout;
SELECT gs_service_idle() AS idle;

-- the service exits in the middle of a request: the backend sorts on the
-- CPU engine, gets PostgreSQL's answer, and postmaster starts a new service
CREATE TEMP TABLE svc_pid AS SELECT pid FROM gpusort_service;
SET gpusort.service_fault = crash;
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY k, id');
SELECT gs_service_restarted(pid) AS restarted FROM svc_pid;
SELECT gs_service_idle() AS idle;
SET gpusort.service_fault = fake;
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY d, id');

-- other sessions: psql in the background, on this test's database
SELECT setting AS bindir FROM pg_config WHERE name = 'BINDIR' \gset
\setenv GS_PSQL :bindir/psql
\setenv PGDATABASE :DBNAME
CREATE TABLE svc_out (who text, digest text);

-- a backend terminated while the service holds its request: its slices
-- come back
\! "$GS_PSQL" -X -q -c "SET application_name = 'gs_victim'" -c "SET gpusort.engine = gpu" -c "SET gpusort.min_rows = 0" -c "SET gpusort.service_fault = delay" -c "SET work_mem = '64MB'" -c "SELECT * FROM svc_t ORDER BY k OFFSET 100000" >/dev/null 2>&1 &
SELECT gs_service_running(1) AS victim_running;
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS terminated
FROM (SELECT pid FROM pg_stat_activity WHERE application_name = 'gs_victim'
	  OFFSET 0) v;
SELECT gs_service_idle() AS idle;

-- the service terminated while a request waits: that backend sorts on the
-- CPU engine and gets PostgreSQL's answer
\! "$GS_PSQL" -X -q -c "SET application_name = 'gs_waiter'" -c "SET gpusort.engine = gpu" -c "SET gpusort.min_rows = 0" -c "SET gpusort.service_fault = delay" -c "SET work_mem = '64MB'" -c "INSERT INTO svc_out SELECT 'waiter', gs_digest('SELECT id, k FROM svc_t ORDER BY k, id')" >/dev/null 2>&1 &
SELECT gs_service_running(1) AS waiter_running;
TRUNCATE svc_pid;
INSERT INTO svc_pid SELECT pid FROM gpusort_service;
SELECT pg_terminate_backend(pid) AS service_terminated FROM svc_pid;
DO $$
BEGIN
	FOR i IN 1..300 LOOP
		EXIT WHEN EXISTS (SELECT FROM svc_out WHERE who = 'waiter');
		PERFORM pg_sleep(0.1);
	END LOOP;
END
$$;
SET gpusort.enabled = off;
SELECT digest = gs_digest('SELECT id, k FROM svc_t ORDER BY k, id') AS waiter_right
FROM svc_out WHERE who = 'waiter';
RESET gpusort.enabled;
SELECT gs_service_restarted(pid) AS restarted FROM svc_pid;
SELECT gs_service_idle() AS idle;

-- a session without the fault on a machine without a device never asks
-- the service; where there is one, the service sorts
SET gpusort.service_fault = none;
SET gpusort.engine = auto;
SELECT rows, same FROM gs_check('SELECT * FROM svc_t ORDER BY k, id');

-- 16 sessions at once through the service (pgbench, each query failing
-- with a division by zero if its rows came out of order): no error, and
-- every slice back afterwards
SELECT sorts_served AS served_before FROM gpusort_service \gset
\! f=$(mktemp) && echo "SELECT CASE WHEN count(*) FILTER (WHERE k < pk) > 0 THEN 1 / (count(*) - count(*)) END FROM (SELECT k, lag(k) OVER () AS pk FROM (SELECT k FROM svc_t ORDER BY k) s) t;" >"$f" && PGOPTIONS="-c gpusort.service_fault=fake -c gpusort.engine=gpu -c gpusort.min_rows=0 -c work_mem=64MB" "$(dirname "$GS_PSQL")/pgbench" -n -c 16 -j 4 -t 5 -f "$f" >"$f.log" 2>&1; echo "pgbench: exit status $?, $(grep -c -E 'ERROR|abort' "$f.log") errors, $(sed -n 's/^number of transactions actually processed: //p' "$f.log") transactions"; rm -f "$f" "$f.log"
SELECT sorts_served > :served_before AS served FROM gpusort_service;
SELECT gs_service_idle() AS idle;

DROP TABLE svc_out;
DROP TABLE svc_t;
DROP FUNCTION gs_service_idle();
DROP FUNCTION gs_service_restarted(int);
DROP FUNCTION gs_service_running(int);
DROP FUNCTION svc_explain(text);
