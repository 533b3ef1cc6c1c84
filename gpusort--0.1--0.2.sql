/* gpusort--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gpusort UPDATE TO '0.2'" to load this file. \quit

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
