--
-- partitions: sorts over partitioned tables (16 hash partitions, 64 range
-- partitions, two levels), against PostgreSQL's own sort, and btree builds
-- of partitioned indexes: every partition's index built by gpusort
--
-- Plans are printed through gsp_plan(), which names every partition
-- "<table>_NN" (its scan's alias dropped, as PostgreSQL's versions name
-- aliases differently) and merges identical lines, with their count, in
-- the order of their first appearance: one line per partition would say
-- nothing more.
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
RESET client_min_messages;
\set SHOW_CONTEXT never

CREATE FUNCTION gsp_plan(q text) RETURNS TABLE (line text, n int)
LANGUAGE sql AS $fn$
	SELECT l, count(*)::int
	FROM (SELECT i,
				 regexp_replace(regexp_replace(e.l,
					 ' on (gsp_[a-z0-9]+?)(_\d+)+( [a-z0-9_]+)?$', ' on \1_NN'),
					 '\m[a-z_][a-z0-9_]*\.(?=[a-z_"])', '', 'g') AS l
		  FROM gs_explain(q) WITH ORDINALITY AS e(l, i)
		  -- (18 prints "Disabled: true" under a node that enable_* disfavours)
		  WHERE e.l !~ '^\s*(Disabled|Filter|Workers Planned):') s
	GROUP BY l
	ORDER BY min(i)
$fn$;

-- 16 hash partitions, with the edge values of every key kind: NULLs,
-- extreme int8, duplicates and all-equal groups, NaN, -0, +-Infinity,
-- empty and long text, text under "C" and under the default collation
CREATE TABLE gsp_h (id int8, i8 int8, f8 float8, tc text COLLATE "C",
					td text, grp int, same int)
	PARTITION BY HASH (id);
DO $$
BEGIN
	FOR r IN 0 .. 15 LOOP
		EXECUTE format('CREATE TABLE gsp_h_%s PARTITION OF gsp_h '
					   'FOR VALUES WITH (MODULUS 16, REMAINDER %s) '
					   'WITH (autovacuum_enabled = off)',
					   lpad(r::text, 2, '0'), r);
	END LOOP;
END
$$;
INSERT INTO gsp_h
SELECT g,
	   CASE WHEN g % 97 = 0 THEN NULL
			WHEN g % 101 = 0 THEN '-9223372036854775808'::int8
			WHEN g % 103 = 0 THEN '9223372036854775807'::int8
			ELSE (g * 7919) % 2003 - 1000 END,
	   CASE WHEN g % 89 = 0 THEN NULL
			WHEN g % 83 = 0 THEN 'NaN'::float8
			WHEN g % 79 = 0 THEN '-0'::float8
			WHEN g % 77 = 0 THEN '0'::float8
			WHEN g % 73 = 0 THEN 'Infinity'::float8
			WHEN g % 71 = 0 THEN '-Infinity'::float8
			ELSE ((g * 31) % 1000)::float8 / 7 - 70 END,
	   CASE WHEN g % 61 = 0 THEN NULL
			WHEN g % 59 = 0 THEN ''
			WHEN g % 53 = 0 THEN repeat('long-common-prefix-', 30) || (g % 7)
			ELSE md5((g % 3000)::text) END,
	   CASE WHEN g % 67 = 0 THEN NULL
			WHEN g % 43 = 0 THEN ''
			ELSE (ARRAY['apple', 'Apple', 'ápple', 'banana', 'Banana', 'b-c', 'bc'])[g % 7 + 1]
				 || (g % 40)::text END,
	   g % 5,
	   7
FROM generate_series(1, 12000) g;

-- a second table with the same partitioning, for joins
CREATE TABLE gsp_j (id int8, k int8, v text COLLATE "C") PARTITION BY HASH (id);
DO $$
BEGIN
	FOR r IN 0 .. 15 LOOP
		EXECUTE format('CREATE TABLE gsp_j_%s PARTITION OF gsp_j '
					   'FOR VALUES WITH (MODULUS 16, REMAINDER %s) '
					   'WITH (autovacuum_enabled = off)',
					   lpad(r::text, 2, '0'), r);
	END LOOP;
END
$$;
INSERT INTO gsp_j
SELECT g * 3,
	   CASE WHEN g % 37 = 0 THEN NULL ELSE (g * 31) % 2003 - 1000 END,
	   CASE WHEN g % 97 = 0 THEN '' WHEN g % 89 = 0 THEN NULL
			ELSE md5(g::text) END
FROM generate_series(-300, 5000) g;

-- 64 range partitions on r, the first and last open-ended (the extreme
-- int8 values land there)
CREATE TABLE gsp_r (r int8, id int8, f8 float8, tc text COLLATE "C", td text)
	PARTITION BY RANGE (r);
DO $$
BEGIN
	FOR p IN 0 .. 63 LOOP
		EXECUTE format('CREATE TABLE gsp_r_%s PARTITION OF gsp_r '
					   'FOR VALUES FROM (%s) TO (%s) '
					   'WITH (autovacuum_enabled = off)',
					   lpad(p::text, 2, '0'),
					   CASE WHEN p = 0 THEN 'MINVALUE' ELSE (p * 200 - 6400)::text END,
					   CASE WHEN p = 63 THEN 'MAXVALUE' ELSE (p * 200 - 6200)::text END);
	END LOOP;
END
$$;
INSERT INTO gsp_r
SELECT CASE WHEN id % 101 = 0 THEN '-9223372036854775808'::int8
			WHEN id % 103 = 0 THEN '9223372036854775807'::int8
			ELSE (id * 7919) % 12800 - 6400 END,
	   id, f8, tc, td
FROM gsp_h WHERE id <= 6400;

-- two levels: LIST on grp, two of the lists HASH on id again
CREATE TABLE gsp_m (id int8, grp int, i8 int8, f8 float8, tc text COLLATE "C")
	PARTITION BY LIST (grp);
CREATE TABLE gsp_m_0 PARTITION OF gsp_m FOR VALUES IN (0) PARTITION BY HASH (id);
CREATE TABLE gsp_m_0_0 PARTITION OF gsp_m_0 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE gsp_m_0_1 PARTITION OF gsp_m_0 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE gsp_m_1 PARTITION OF gsp_m FOR VALUES IN (1, 2) PARTITION BY HASH (id);
CREATE TABLE gsp_m_1_0 PARTITION OF gsp_m_1 FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE gsp_m_1_1 PARTITION OF gsp_m_1 FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE gsp_m_1_2 PARTITION OF gsp_m_1 FOR VALUES WITH (MODULUS 3, REMAINDER 2);
CREATE TABLE gsp_m_2 PARTITION OF gsp_m FOR VALUES IN (3, 4);
INSERT INTO gsp_m SELECT id, grp, i8, f8, tc FROM gsp_h WHERE id % 2 = 0;
ANALYZE gsp_h, gsp_j, gsp_r, gsp_m;

--
-- ORDER BY over the hash partitions: one GpuSort over the Append (and a
-- plain Sort there with gpusort off)
--
SELECT * FROM gsp_plan('SELECT * FROM gsp_h ORDER BY i8, id');
SET gpusort.enabled = off;
SELECT * FROM gsp_plan('SELECT * FROM gsp_h ORDER BY i8, id');
RESET gpusort.enabled;
SELECT * FROM gs_check_dirs('gsp_h', 'i8');
SELECT * FROM gs_check_dirs('gsp_h', 'f8');
SELECT * FROM gs_check_dirs('gsp_h', 'tc');
-- (a key under the default collation is gpusort's only where that is C-ordered:
-- only the answers are shown, as in keys_text)
SELECT dir, rows, same FROM gs_check_dirs('gsp_h', 'td');
SELECT * FROM gs_check('SELECT * FROM gsp_h ORDER BY same, id DESC');
SELECT * FROM gs_check('SELECT * FROM gsp_h ORDER BY grp DESC, f8 NULLS FIRST, tc DESC, id');
SELECT rows, same FROM gs_check('SELECT td, i8, id FROM gsp_h ORDER BY td DESC NULLS LAST, i8 NULLS FIRST, id');
SELECT rows, same FROM gs_check('SELECT tc, td, id FROM gsp_h WHERE grp = 3 ORDER BY tc COLLATE "default", td COLLATE "C" DESC, id');
SELECT * FROM gs_check('SELECT tc, td, id FROM gsp_h WHERE grp = 3 ORDER BY td COLLATE "C" DESC, tc, id');

-- a window function, a GroupAggregate, DISTINCT
SELECT * FROM gsp_plan('SELECT id, row_number() OVER (PARTITION BY grp ORDER BY f8 DESC, id) FROM gsp_h');
SELECT * FROM gs_check('SELECT id, grp, row_number() OVER (PARTITION BY grp ORDER BY f8 DESC, id), sum(i8) OVER (PARTITION BY grp ORDER BY f8 DESC, id) FROM gsp_h ORDER BY id');
SELECT rows, same FROM gs_check('SELECT id, rank() OVER (ORDER BY tc), lag(id) OVER (ORDER BY td DESC, id) FROM gsp_h ORDER BY id');
SET enable_hashagg = off;
SELECT * FROM gsp_plan('SELECT i8, count(*) FROM gsp_h GROUP BY i8');
SELECT * FROM gs_check('SELECT i8, count(*), min(id), max(tc), sum(f8::numeric) FROM gsp_h GROUP BY i8 ORDER BY i8 NULLS FIRST');
SELECT rows, same FROM gs_check('SELECT td, tc, count(*) FROM gsp_h GROUP BY td, tc ORDER BY td, tc');
SELECT * FROM gs_check('SELECT tc, grp, count(*), min(id), max(i8) FROM gsp_h GROUP BY tc, grp ORDER BY tc DESC, grp');
SELECT rows, same FROM gs_check('SELECT DISTINCT td FROM gsp_h ORDER BY td');
SELECT * FROM gs_check('SELECT DISTINCT tc FROM gsp_h ORDER BY tc NULLS FIRST');
-- (-0 = 0: which of the two DISTINCT keeps depends on the order of ties)
SELECT * FROM gs_check('SELECT DISTINCT f8 FROM gsp_h WHERE f8 IS DISTINCT FROM 0 ORDER BY f8 DESC');
SELECT * FROM gs_check('SELECT DISTINCT ON (f8) f8, id FROM gsp_h ORDER BY f8, id');
SELECT * FROM gs_check('SELECT DISTINCT ON (grp) grp, f8, id FROM gsp_h ORDER BY grp, f8, id');

-- partitionwise aggregate: a sort per partition under Partial
-- GroupAggregates, merged; grouped by the partition key, whole
-- aggregates per partition
SET enable_partitionwise_aggregate = on;
SELECT * FROM gsp_plan('SELECT id, count(*) FROM gsp_h GROUP BY id ORDER BY id DESC');
SELECT * FROM gs_check('SELECT i8, count(*), min(id), max(tc) FROM gsp_h GROUP BY i8 ORDER BY i8');
SELECT * FROM gs_check('SELECT id, count(*), max(td) FROM gsp_h GROUP BY id ORDER BY id DESC');
SELECT * FROM gs_check('SELECT tc, count(*) FROM gsp_h GROUP BY tc ORDER BY tc NULLS FIRST');
RESET enable_partitionwise_aggregate;
RESET enable_hashagg;

--
-- merge joins between two partitioned tables: one GpuSort over each
-- Append, or, partitionwise, one per partition on each side
--
SET enable_hashjoin = off;
SET enable_nestloop = off;
SELECT * FROM gsp_plan('SELECT h.id, h.i8, j.v FROM gsp_h h JOIN gsp_j j ON h.id = j.id');
SELECT * FROM gs_check('SELECT h.id, h.i8, j.v FROM gsp_h h JOIN gsp_j j ON h.id = j.id ORDER BY h.id');
SELECT * FROM gs_check('SELECT h.id, h.tc, j.k FROM gsp_h h LEFT JOIN gsp_j j ON h.id = j.id ORDER BY h.tc, h.id');
SELECT * FROM gs_check('SELECT h.id, j.id, h.i8 FROM gsp_h h JOIN gsp_j j ON h.i8 = j.k WHERE h.id % 7 = 0 ORDER BY h.id, j.id');
SELECT * FROM gs_check('SELECT h.id, j.id FROM (SELECT * FROM gsp_h WHERE grp = 0) h FULL JOIN gsp_j j ON h.tc = j.v ORDER BY h.id, j.id');
SET enable_partitionwise_join = on;
SELECT * FROM gsp_plan('SELECT h.id, h.i8, j.v FROM gsp_h h JOIN gsp_j j ON h.id = j.id');
SELECT * FROM gs_check('SELECT h.id, h.i8, j.v FROM gsp_h h JOIN gsp_j j ON h.id = j.id ORDER BY h.id');
SELECT * FROM gs_check('SELECT h.id, h.tc, j.k FROM gsp_h h LEFT JOIN gsp_j j ON h.id = j.id ORDER BY h.tc, h.id');
SELECT * FROM gs_check('SELECT j.id, h.f8 FROM gsp_h h RIGHT JOIN gsp_j j ON h.id = j.id ORDER BY h.f8 DESC, j.id');
RESET enable_partitionwise_join;
RESET enable_hashjoin;
RESET enable_nestloop;

--
-- ORDER BY ... LIMIT: a small bound is left to PostgreSQL's top-N sort; a
-- large one is a GpuSort
--
SELECT * FROM gs_check('SELECT * FROM gsp_h ORDER BY i8 DESC NULLS LAST, id LIMIT 10');
SELECT * FROM gs_check('SELECT * FROM gsp_h ORDER BY f8, id LIMIT 9000');
SELECT * FROM gs_check('SELECT * FROM gsp_h ORDER BY tc, id OFFSET 11990');

--
-- 64 range partitions sorted on their partition key: a GpuSort over the
-- Append; with a LIMIT, PostgreSQL's bounded sort
--
SELECT * FROM gsp_plan('SELECT * FROM gsp_r ORDER BY r, id');
SELECT * FROM gs_check('SELECT * FROM gsp_r ORDER BY r, id');
SELECT * FROM gs_check('SELECT * FROM gsp_r ORDER BY r DESC, id DESC');
SELECT * FROM gsp_plan('SELECT * FROM gsp_r ORDER BY r, id LIMIT 50');
SELECT * FROM gs_check('SELECT * FROM gsp_r ORDER BY r, id LIMIT 50');
SELECT * FROM gs_check('SELECT * FROM gsp_r WHERE r BETWEEN -1000 AND 1000 ORDER BY r, id');
SELECT * FROM gs_check('SELECT * FROM gsp_r ORDER BY tc DESC, f8, id');
SELECT rows, same FROM gs_check('SELECT r, id, row_number() OVER (PARTITION BY r / 1000 ORDER BY td, id) FROM gsp_r ORDER BY id');
SELECT * FROM gs_check('SELECT r, id, row_number() OVER (PARTITION BY r / 1000 ORDER BY f8, id) FROM gsp_r ORDER BY id');
SET enable_hashagg = off;
SET enable_partitionwise_aggregate = on;
SELECT * FROM gsp_plan('SELECT r, count(*) FROM gsp_r GROUP BY r ORDER BY r');
SELECT * FROM gs_check('SELECT r, count(*), min(tc) FROM gsp_r GROUP BY r ORDER BY r');
-- a LIMIT above the Merge Append stops at the GroupAggregates: the sorts
-- under them are not bounded
SELECT * FROM gs_check('SELECT r, count(*), min(tc) FROM gsp_r GROUP BY r ORDER BY r DESC LIMIT 20');
-- (-0 and 0 are one group, shown as its first row's: + 0 makes both 0)
SELECT * FROM gs_check('SELECT f8 + 0, count(*), max(id) FROM gsp_r GROUP BY f8 ORDER BY f8 NULLS FIRST');
RESET enable_partitionwise_aggregate;
RESET enable_hashagg;

-- two levels
SELECT * FROM gsp_plan('SELECT * FROM gsp_m ORDER BY f8, id');
SELECT * FROM gs_check('SELECT * FROM gsp_m ORDER BY f8, id');
SELECT * FROM gs_check('SELECT * FROM gsp_m ORDER BY tc DESC NULLS LAST, i8, id');
SELECT * FROM gs_check('SELECT id, dense_rank() OVER (PARTITION BY grp ORDER BY i8 NULLS FIRST) FROM gsp_m ORDER BY id');

--
-- parallel plans (parallel workers forced, whatever the tables' sizes): the
-- workers load the Parallel Append's rows into one GpuSort (GpuSortLoad)
--
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT * FROM gsp_plan('SELECT * FROM gsp_h ORDER BY i8, id');
SELECT * FROM gs_check('SELECT * FROM gsp_h ORDER BY i8, id');
SELECT rows, same FROM gs_check('SELECT * FROM gsp_h ORDER BY td DESC, f8, id');
SELECT * FROM gs_check('SELECT * FROM gsp_h ORDER BY tc DESC, f8, id');
SELECT * FROM gs_check('SELECT * FROM gsp_r ORDER BY r, id');
-- a window function over a partitioned table: the workers load the rows of
-- the partitions (a plain Append made a Parallel Append) into the GpuSort
-- (tuples made costly to pass through a Gather, so that PostgreSQL's plan
-- has none)
SET parallel_tuple_cost = 1000000;
SELECT * FROM gsp_plan('SELECT id, row_number() OVER (ORDER BY i8, id) FROM gsp_h');
SELECT * FROM gs_check('SELECT id, i8, row_number() OVER (ORDER BY i8, id) FROM gsp_h');
SELECT * FROM gs_check('SELECT id, tc, rank() OVER (ORDER BY tc DESC, id) FROM gsp_r');
SET parallel_tuple_cost = 0;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;

--
-- CREATE INDEX on a partitioned table: gpusort builds every partition's
-- index (one LOG line each, and the build counter), each equal to
-- PostgreSQL's build of the same index, page by page
--
SET max_parallel_maintenance_workers = 0;
SET gpusort.index_build = on;
SET gpusort.log_index_builds = on;
CREATE TEMP TABLE gsp_stats AS
SELECT index_builds, index_builds_declined FROM gpusort_stats;

CREATE FUNCTION gsp_index_checks(parent regclass,
								 OUT indexes bigint, OUT built_same bigint)
LANGUAGE sql AS $fn$
	SELECT count(*), count(*) FILTER (WHERE c.size_diff = 0 AND c.differ = 0)
	FROM pg_partition_tree(parent) t, LATERAL gs_index_check(t.relid) c
	WHERE t.isleaf
$fn$;

CREATE FUNCTION gsp_builds(OUT builds bigint, OUT declined bigint)
LANGUAGE sql AS $fn$
	SELECT s.index_builds - o.index_builds,
		   s.index_builds_declined - o.index_builds_declined
	FROM gpusort_stats s, gsp_stats o
$fn$;

SET client_min_messages = log;
CREATE INDEX gsp_h_i8 ON gsp_h (i8);
CREATE INDEX gsp_h_tc ON gsp_h (tc DESC NULLS LAST, id);
RESET client_min_messages;
SELECT * FROM gsp_builds();
SELECT * FROM gsp_index_checks('gsp_h_i8');
SELECT * FROM gsp_index_checks('gsp_h_tc');

-- 64 range partitions and two levels: counted rather than logged
UPDATE gsp_stats SET (index_builds, index_builds_declined) =
	(SELECT index_builds, index_builds_declined FROM gpusort_stats);
CREATE UNIQUE INDEX gsp_r_rid ON gsp_r (r, id);
CREATE INDEX gsp_r_td ON gsp_r (td COLLATE "C");
CREATE INDEX gsp_m_f8 ON gsp_m (f8 DESC, tc);
SELECT * FROM gsp_builds();
SELECT * FROM gsp_index_checks('gsp_r_rid');
SELECT * FROM gsp_index_checks('gsp_r_td');
SELECT * FROM gsp_index_checks('gsp_m_f8');

-- ATTACH PARTITION builds the partitioned indexes on the new partition
CREATE TABLE gsp_r_new (LIKE gsp_r);
INSERT INTO gsp_r_new SELECT * FROM gsp_r_37;
DROP TABLE gsp_r_37;
SET client_min_messages = log;
ALTER TABLE gsp_r ATTACH PARTITION gsp_r_new FOR VALUES FROM (1000) TO (1200);
RESET client_min_messages;
SELECT c.size_diff, c.differ
FROM pg_index i, LATERAL gs_index_check(i.indexrelid) c
WHERE i.indrelid = 'gsp_r_new'::regclass
ORDER BY i.indexrelid::regclass::text;

-- REINDEX of a partitioned index rebuilds each partition's index through
-- gpusort (taken inside index_build(), where parallel maintenance workers
-- must be allowed)
SET max_parallel_maintenance_workers = 2;
SET client_min_messages = log;
REINDEX INDEX gsp_h_i8;
RESET client_min_messages;
SET max_parallel_maintenance_workers = 0;
SELECT * FROM gsp_index_checks('gsp_h_i8');

-- with gpusort's builds off, PostgreSQL builds them: no LOG line, no count
SET gpusort.index_build = off;
UPDATE gsp_stats SET (index_builds, index_builds_declined) =
	(SELECT index_builds, index_builds_declined FROM gpusort_stats);
SET client_min_messages = log;
CREATE INDEX gsp_h_f8 ON gsp_h (f8);
RESET client_min_messages;
SELECT * FROM gsp_builds();
DROP INDEX gsp_h_f8;
SET gpusort.index_build = on;

-- the indexes answer as PostgreSQL's sort does
SELECT gs_same('SELECT i8 FROM gsp_h ORDER BY i8');
SELECT gs_same('SELECT r, id FROM gsp_r ORDER BY r, id');
SELECT gs_same('SELECT tc, id FROM gsp_h WHERE tc > ''a'' ORDER BY tc DESC NULLS LAST, id');

DROP TABLE gsp_h, gsp_j, gsp_r, gsp_m;
DROP FUNCTION gsp_plan(text), gsp_index_checks(regclass), gsp_builds();
