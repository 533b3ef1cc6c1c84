/* gpusort--0.2--0.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gpusort UPDATE TO '0.3'" to load this file. \quit

-- Statistics of what gpusort did since the server started or since
-- gpusort_stats_reset() (kept in shared memory: gpusort must be preloaded).
CREATE FUNCTION gpusort_stats(
	OUT sorts_gpu bigint,
	OUT sorts_cpu bigint,
	OUT rows_gpu bigint,
	OUT rows_cpu bigint,
	OUT key_bytes_sorted bigint,
	OUT fallbacks bigint,
	OUT declined bigint,
	OUT index_builds bigint,
	OUT index_builds_declined bigint,
	OUT clusters bigint,
	OUT clusters_declined bigint,
	OUT stats_reset timestamp with time zone)
RETURNS record
AS 'MODULE_PATHNAME', 'gpusort_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE VIEW gpusort_stats AS SELECT * FROM gpusort_stats();

-- The declined sorts and the fallbacks to the CPU engine, by reason.
CREATE FUNCTION gpusort_stats_reasons(
	OUT kind text,
	OUT reason text,
	OUT count bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'gpusort_stats_reasons'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE VIEW gpusort_stats_reasons AS SELECT * FROM gpusort_stats_reasons();

CREATE FUNCTION gpusort_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'gpusort_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- Monitoring: pg_monitor reads the views, as it reads pg_stat_*; only
-- superusers reset, unless they grant it.
REVOKE ALL ON FUNCTION gpusort_service_status() FROM PUBLIC;
REVOKE ALL ON FUNCTION gpusort_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION gpusort_stats_reasons() FROM PUBLIC;
REVOKE ALL ON FUNCTION gpusort_stats_reset() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gpusort_service_status() TO pg_monitor;
GRANT EXECUTE ON FUNCTION gpusort_stats() TO pg_monitor;
GRANT EXECUTE ON FUNCTION gpusort_stats_reasons() TO pg_monitor;
GRANT SELECT ON gpusort_service TO pg_monitor;
GRANT SELECT ON gpusort_stats TO pg_monitor;
GRANT SELECT ON gpusort_stats_reasons TO pg_monitor;
