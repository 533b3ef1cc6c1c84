/* gpusort--0.3.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION gpusort" to load this file. \quit

-- What gpusort sees in this backend: build, CUDA library, device, engine.
CREATE FUNCTION gpusort_info(
	OUT name text,
	OUT value text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'gpusort_info'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- The normalized key gpusort would compute for one value, as big-endian
-- bytes: for any a, b of one type, a < b in the type's default order (under
-- the given direction and the argument's collation) implies key(a) <= key(b).
-- For testing and debugging.
CREATE FUNCTION gpusort_normalized_key(
	value anyelement,
	descending boolean DEFAULT false,
	nulls_first boolean DEFAULT false)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gpusort_normalized_key'
LANGUAGE C STABLE PARALLEL SAFE;
-- The gpusort service: one process that owns the GPUs for the whole server.
CREATE FUNCTION gpusort_service_status(
	OUT pid integer,
	OUT state text,
	OUT devices integer,
	OUT device_names text,
	OUT workers integer,
	OUT queue_length integer,
	OUT running integer,
	OUT sorts_served bigint,
	OUT sorts_failed bigint,
	OUT bytes_moved bigint,
	OUT slices integer,
	OUT slices_in_use integer,
	OUT memory_bytes bigint,
	OUT memory_used_bytes bigint,
	OUT device_sorts bigint[])
RETURNS record
AS 'MODULE_PATHNAME', 'gpusort_service_status'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE VIEW gpusort_service AS SELECT * FROM gpusort_service_status();

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
