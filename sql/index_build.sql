--
-- btree index builds through gpusort (CREATE INDEX, REINDEX)
--
-- Every index gpusort builds is checked with amcheck and compared page by
-- page with PostgreSQL's own build of the same index (gpusort.index_build
-- off); queries through the indexes must return what a sequential scan and
-- PostgreSQL's sort return.  gpusort.log_index_builds reports who built
-- each index ("index ... built by gpusort"), seen with client_min_messages
-- at log.
--
LOAD 'gpusort';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
RESET client_min_messages;
\set SHOW_CONTEXT never
SET max_parallel_maintenance_workers = 0;
SET gpusort.index_build = on;
SET gpusort.log_index_builds = on;

CREATE TABLE gsi (
	id int4,
	a int4,
	b int8,
	c text,
	lng text,
	d float8,
	n numeric,
	ts timestamptz,
	u uuid,
	ip inet
) WITH (autovacuum_enabled = off);
INSERT INTO gsi
SELECT i,
	   (i * 7919) % 5003,
	   CASE WHEN i % 97 = 0 THEN NULL
		ELSE (i::int8 * 2654435761) % 1000003 - 500000 END,
	   'k' || lpad(((i * 31) % 10007)::text, 6, '0') || repeat('x', i % 7),
	   repeat('common-prefix-', 3) || md5((i % 9000)::text),
	   CASE i % 1000 WHEN 0 THEN 'NaN' WHEN 1 THEN '-0' WHEN 2 THEN '0'
		WHEN 3 THEN 'Infinity' WHEN 4 THEN '-Infinity' WHEN 5 THEN NULL
		ELSE round(sin(i)::numeric, 3) END,
	   CASE WHEN i % 3 = 0 THEN ((i % 500)::numeric / 4)::numeric(10, 3)
		ELSE (i % 500)::numeric / 4 END,
	   '2020-01-01 00:00+00'::timestamptz + i * interval '37 minutes',
	   md5(i::text)::uuid,
	   ('10.' || (i % 256) || '.' || (i / 256 % 256) || '.1')::inet
FROM generate_series(1, 30000) AS i;
-- HOT chains and dead tuples before the build
UPDATE gsi SET ip = '192.168.0.1' WHERE id % 100 = 0;
DELETE FROM gsi WHERE id % 1000 = 999;

-- single column, one per key kind
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsi (id)', 'gsi_id');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (a)', 'gsi_a');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (b)', 'gsi_b');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (c COLLATE "C")', 'gsi_c');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (lng COLLATE "C")', 'gsi_lng');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (c COLLATE "und-x-icu")', 'gsi_icu');
-- wide keys: a tree of three levels
SELECT * FROM gs_build('CREATE INDEX %I ON gsi ((lng || lng || lng || id) COLLATE "C")', 'gsi_wide');
SELECT level FROM bt_metap('gsi_wide');
-- values made by an expression (4-byte headers, shortened in the index
-- tuple where they are short enough, kept where not, compressed past
-- 510 bytes)
SELECT * FROM gs_build('CREATE INDEX %I ON gsi ((c || id) COLLATE "C")', 'gsi_cat');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi ((repeat(c, 1 + id %% 40)) COLLATE "C" DESC)', 'gsi_rep');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (d)', 'gsi_d');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (n)', 'gsi_n');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (ts)', 'gsi_ts');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (u)', 'gsi_u');
-- every other type the key encoder handles, with NULLs and edge values
CREATE TABLE gsty (
	i2 int2, o oid, bo bool, dt date, tm time, tsp timestamp, iv interval,
	f4 float4, bp char(6), vc varchar(20), nm name
);
INSERT INTO gsty
SELECT (i % 65536 - 32768)::int2,
	   (i * 2654435761 % 4294967296)::bigint::oid,
	   i % 3 = 0,
	   CASE WHEN i % 500 = 0 THEN 'infinity'::date
		WHEN i % 500 = 1 THEN '-infinity'::date
		ELSE '2000-01-01'::date + (i % 20000 - 10000) END,
	   '00:00'::time + i * interval '17 seconds',
	   CASE WHEN i % 700 = 0 THEN 'infinity'::timestamp
		ELSE '1999-12-31 23:59:59.5'::timestamp + (i % 9000) * interval '1 hour 3 us' END,
	   (i % 400 - 200) * interval '1 day 3 hours' + (i % 7) * interval '1 month',
	   CASE i % 900 WHEN 0 THEN 'NaN' WHEN 1 THEN '-0' WHEN 2 THEN '-Infinity'
		ELSE (i % 1000 - 500) / 7.0 END,
	   substr(md5(i::text), 1, 1 + i % 6),
	   CASE WHEN i % 50 = 0 THEN NULL ELSE substr(md5(i::text), 1, i % 20) END,
	   md5((i % 3000)::text)
FROM generate_series(1, 12000) AS i;
SELECT c, g.*
FROM unnest('{i2,o,bo,dt,tm,tsp,iv,f4,bp,vc,nm}'::text[]) AS c,
	 LATERAL gs_build(format('CREATE INDEX %%I ON gsty (%s)', c), 'gsty_' || c) AS g;
SELECT * FROM gs_build('CREATE INDEX %I ON gsty (bo DESC, iv, f4 DESC NULLS LAST, vc COLLATE "C")', 'gsty_mix');
SELECT gs_same('SELECT bo, iv, f4 + 0, vc FROM gsty ORDER BY bo DESC, iv, f4 DESC NULLS LAST, vc COLLATE "C"');

-- multi-column, DESC, NULLS FIRST / LAST
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (a, b)', 'gsi_ab');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (a DESC, b NULLS FIRST)', 'gsi_ab2');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (b DESC NULLS LAST, c COLLATE "C" DESC)', 'gsi_bc');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (d DESC, n, a)', 'gsi_dna');
-- a second column the key encoder does not handle: comparator tie-break
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (a, ip)', 'gsi_aip');
-- INCLUDE, expressions, partial
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (a) INCLUDE (c, u)', 'gsi_a_inc');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsi (id) INCLUDE (b)', 'gsi_id_inc');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi ((a %% 100), (lower(c) COLLATE "C"))', 'gsi_expr');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (b) WHERE a < 1000', 'gsi_part');
-- fillfactor and deduplication settings
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (a) WITH (fillfactor = 50)', 'gsi_ff50');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (id) WITH (fillfactor = 100)', 'gsi_ff100');
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (a) WITH (deduplicate_items = off)', 'gsi_nodedup');
-- beyond maintenance_work_mem gpusort sorts in runs on disk: known from
-- the estimate before the scan, or found during it (a partial index); see
-- index_external for these builds
SET maintenance_work_mem = '1MB';
SET client_min_messages = log;
CREATE INDEX gsi_mwm1 ON gsi (b);
CREATE INDEX gsi_mwm2 ON gsi (b) WHERE a < 4000;
CREATE INDEX gsi_mwm3 ON gsi (b) WHERE a < 200;
RESET client_min_messages;
RESET maintenance_work_mem;
SELECT bt_index_parent_check('gsi_mwm1', true, true),
	   bt_index_parent_check('gsi_mwm2', true, true),
	   bt_index_parent_check('gsi_mwm3', true, true);
DROP INDEX gsi_mwm1, gsi_mwm2, gsi_mwm3;
-- the narrowest keys: 4 bytes of int8 or text, the rest by comparators
SET gpusort.max_key_bytes = 4;
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (b, a)', 'gsi_k4b');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsi (c COLLATE "C", id)', 'gsi_k4c');
RESET gpusort.max_key_bytes;
-- a build PostgreSQL would run with parallel workers
SET max_parallel_maintenance_workers = 2;
SET min_parallel_table_scan_size = 0;
SELECT * FROM gs_build('CREATE INDEX %I ON gsi (ts DESC, u)', 'gsi_par');
RESET min_parallel_table_scan_size;
SET max_parallel_maintenance_workers = 0;
-- unique with NULLs (distinct), and NULLS NOT DISTINCT without duplicates
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsi (b, id)', 'gsi_ubid');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsi (b) WHERE id %% 97 <> 0 AND id < 100', 'gsi_upart');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsi (b) NULLS NOT DISTINCT WHERE id < 150', 'gsi_unnd');

-- unique violations: gpusort raises PostgreSQL's error, here and natively
-- (one duplicated key per index, so that both report the same one)
CREATE TABLE gsv (k int, t text, x int8);
INSERT INTO gsv SELECT i, repeat('long-common-prefix-', 2) || i, i
FROM generate_series(1, 5000) AS i;
INSERT INTO gsv VALUES (4321, 'z', NULL), (-1, 'long-common-prefix-long-common-prefix-1234', NULL);
\set VERBOSITY default
SET client_min_messages = log;
CREATE UNIQUE INDEX gsv_bad ON gsv (k);
CREATE UNIQUE INDEX gsv_bad ON gsv (t COLLATE "C");
CREATE UNIQUE INDEX gsv_bad ON gsv (x) NULLS NOT DISTINCT;
CREATE UNIQUE INDEX gsv_ok ON gsv (x);
SET gpusort.index_build = off;
CREATE UNIQUE INDEX gsv_bad ON gsv (k);
CREATE UNIQUE INDEX gsv_bad ON gsv (t COLLATE "C");
CREATE UNIQUE INDEX gsv_bad ON gsv (x) NULLS NOT DISTINCT;
SET gpusort.index_build = on;
RESET client_min_messages;
-- every field of the error: SQLSTATE, message, detail, schema, table,
-- constraint
CREATE FUNCTION gs_error(ddl text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text; det text; sch text; tab text; con text;
BEGIN
	EXECUTE ddl;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, sch = SCHEMA_NAME, tab = TABLE_NAME,
		con = CONSTRAINT_NAME;
	RETURN concat_ws(' | ', st, msg, det, sch, tab, con);
END $$;
SELECT gs_error('CREATE UNIQUE INDEX gsv_bad ON gsv (t COLLATE "C")') AS gpusort;
SET gpusort.index_build = off;
SELECT gs_error('CREATE UNIQUE INDEX gsv_bad ON gsv (t COLLATE "C")') AS postgresql;
SET gpusort.index_build = on;
\set VERBOSITY terse
SELECT to_regclass('gsv_bad') IS NULL AS no_index_left,
	   bt_index_parent_check('gsv_ok', true, true);

-- queries through the indexes equal sequential scans
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM gsi WHERE id BETWEEN 100 AND 200 ORDER BY id DESC;
EXPLAIN (COSTS OFF) SELECT a, b FROM gsi WHERE a = 42 ORDER BY a, b;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT gs_same('SELECT id FROM gsi ORDER BY id');
SELECT gs_same('SELECT id FROM gsi WHERE id BETWEEN 100 AND 2000 ORDER BY id DESC');
SELECT gs_same('SELECT a FROM gsi WHERE a > 4000 ORDER BY a');
SELECT gs_same('SELECT a, b FROM gsi WHERE a BETWEEN 10 AND 500 ORDER BY a, b');
SELECT gs_same('SELECT a, b FROM gsi ORDER BY a DESC, b NULLS FIRST');
SELECT gs_same('SELECT a, b FROM gsi ORDER BY a, b DESC NULLS LAST');
SELECT gs_same('SELECT b FROM gsi WHERE b IS NULL OR b < -400000 ORDER BY b NULLS FIRST');
SELECT gs_same('SELECT b, c FROM gsi ORDER BY b DESC NULLS LAST, c COLLATE "C" DESC');
SELECT gs_same('SELECT c FROM gsi WHERE c COLLATE "C" >= ''k005'' ORDER BY c COLLATE "C"');
SELECT gs_same('SELECT lng FROM gsi WHERE lng COLLATE "C" < ''common-prefix-common-prefix-common-prefix-3'' ORDER BY lng COLLATE "C" DESC');
SELECT gs_same('SELECT d + 0 FROM gsi ORDER BY d');
SELECT gs_same('SELECT d + 0, round(n, 3), a FROM gsi ORDER BY d DESC, n, a');
SELECT gs_same('SELECT round(n, 3) FROM gsi WHERE n BETWEEN 10 AND 20 ORDER BY n');
SELECT gs_same('SELECT ts FROM gsi WHERE ts > ''2021-01-01'' ORDER BY ts DESC');
SELECT gs_same('SELECT u FROM gsi ORDER BY u');
SELECT gs_same('SELECT c FROM gsi WHERE c > ''k003'' ORDER BY c COLLATE "und-x-icu"');
SELECT gs_same('SELECT a, ip FROM gsi WHERE a < 50 ORDER BY a, ip');
SELECT gs_same('SELECT a, c, u FROM gsi WHERE a = 4321 ORDER BY a');
SELECT gs_same('SELECT a % 100, lower(c) COLLATE "C" FROM gsi ORDER BY 1, 2');
SELECT gs_same('SELECT b FROM gsi WHERE a < 1000 ORDER BY b');

-- writes after the build keep every index healthy
INSERT INTO gsi (id, a, b, c, lng, d, n, ts, u, ip)
SELECT i, i % 5003, i, 'new' || i, 'x' || i, i / 3.0, i, now(), NULL, NULL
FROM generate_series(30001, 36000) AS i;
UPDATE gsi SET a = a + 1, c = c || 'u' WHERE id % 10 = 3;
DELETE FROM gsi WHERE id % 7 = 0;
VACUUM gsi;
INSERT INTO gsi (id, a, b) SELECT i, 77, -i FROM generate_series(40001, 41000) AS i;
SELECT c.relname, bt_index_parent_check(c.oid, true, true)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'gsi'::regclass
ORDER BY 1;
SELECT gs_same('SELECT a, b FROM gsi WHERE a BETWEEN 70 AND 80 ORDER BY a, b');
SELECT gs_same('SELECT c FROM gsi ORDER BY c COLLATE "C"');

-- REINDEX INDEX and REINDEX TABLE
-- (gsr has no varlena column, hence no TOAST index to report)
CREATE TABLE gsr (k int8 PRIMARY KEY, v uuid);
INSERT INTO gsr SELECT i, md5(i::text)::uuid FROM generate_series(1, 5000) AS i;
CREATE INDEX gsr_v ON gsr (v DESC);
SET client_min_messages = log;
REINDEX INDEX gsi_lng;
REINDEX TABLE gsr;
RESET client_min_messages;
SELECT bt_index_parent_check('gsi_lng', true, true),
	   bt_index_parent_check('gsr_pkey', true, true),
	   bt_index_parent_check('gsr_v', true, true);
SELECT gs_same('SELECT lng FROM gsi ORDER BY lng COLLATE "C"');
SELECT gs_same('SELECT v FROM gsr ORDER BY v DESC');

-- ALTER TABLE: constraints, and indexes rebuilt by ALTER COLUMN TYPE
-- (no varlena column: no TOAST index to report)
CREATE TABLE gsa (k int4, v float8);
INSERT INTO gsa SELECT i, i % 1000 FROM generate_series(1, 5000) AS i;
SET client_min_messages = log;
ALTER TABLE gsa ADD PRIMARY KEY (k);
ALTER TABLE gsa ADD CONSTRAINT gsa_kv UNIQUE (v, k);
ALTER TABLE gsa ALTER COLUMN k TYPE int8;
RESET client_min_messages;
SELECT bt_index_parent_check('gsa_pkey', true, true),
	   bt_index_parent_check('gsa_kv', true, true);
SELECT gs_same('SELECT k FROM gsa ORDER BY k DESC');

-- degenerate data: one row, one key for all rows (posting lists split at
-- their size limit), all NULL
CREATE TABLE gsd (one int, same int, nul int8);
INSERT INTO gsd SELECT NULL, 7, NULL FROM generate_series(1, 20000);
UPDATE gsd SET one = 1 WHERE ctid = '(0,1)';
SELECT * FROM gs_build('CREATE INDEX %I ON gsd (one) WHERE one IS NOT NULL', 'gsd_one');
SELECT * FROM gs_build('CREATE INDEX %I ON gsd (same)', 'gsd_same');
SELECT * FROM gs_build('CREATE INDEX %I ON gsd (nul DESC NULLS LAST, same)', 'gsd_nul');
SELECT * FROM gs_build('CREATE UNIQUE INDEX %I ON gsd (nul)', 'gsd_unul');
SELECT gs_error('CREATE UNIQUE INDEX gsd_bad ON gsd (nul) NULLS NOT DISTINCT');

-- an empty table, an unlogged table, a temporary table, a partitioned table
CREATE TABLE gse (k int);
SELECT * FROM gs_build('CREATE INDEX %I ON gse (k)', 'gse_k');
CREATE UNLOGGED TABLE gsu (k int);
INSERT INTO gsu SELECT i % 300 FROM generate_series(1, 3000) AS i;
SELECT * FROM gs_build('CREATE INDEX %I ON gsu (k)', 'gsu_k');
CREATE TEMP TABLE gst AS SELECT i % 500 AS k, md5(i::text) AS v
FROM generate_series(1, 4000) AS i;
SELECT * FROM gs_build('CREATE INDEX %I ON gst (k, v COLLATE "C")', 'gst_kv');
CREATE TABLE gsp (k int, v int) PARTITION BY RANGE (k);
CREATE TABLE gsp1 PARTITION OF gsp FOR VALUES FROM (0) TO (1000);
CREATE TABLE gsp2 PARTITION OF gsp FOR VALUES FROM (1000) TO (2000);
INSERT INTO gsp SELECT i % 2000, i FROM generate_series(1, 4000) AS i;
SET client_min_messages = log;
CREATE INDEX gsp_k ON gsp (k, v);
RESET client_min_messages;
SELECT bt_index_parent_check('gsp1_k_v_idx', true, true),
	   bt_index_parent_check('gsp2_k_v_idx', true, true);

-- built by PostgreSQL: gpusort off, other access methods, a leading column
-- the key encoder does not handle, CONCURRENTLY without parallel
-- maintenance workers (see index_rebuild), system catalogs
SET client_min_messages = log;
SET gpusort.index_build = off;
CREATE INDEX gsi_off1 ON gsi (a);
RESET gpusort.index_build;
SET gpusort.enabled = off;
CREATE INDEX gsi_off2 ON gsi (a);
RESET gpusort.enabled;
CREATE INDEX gsi_hash ON gsi USING hash (a);
CREATE INDEX gsi_ip ON gsi (ip);
CREATE INDEX CONCURRENTLY gsi_conc ON gsi (a);
REINDEX INDEX pg_am_name_index;
RESET client_min_messages;
SELECT bt_index_parent_check('gsi_ip', true, true),
	   bt_index_parent_check('gsi_conc', true, true);

DROP TABLE gsi, gsty, gsv, gsr, gsa, gsd, gse, gsu, gst, gsp;
DROP FUNCTION gs_error(text);
