/* gpusort--0.2.sql */

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
