--
-- sort_plans: GpuSort inside larger plans: merge joins (mark/restore with
-- many duplicates on both sides), window functions, GroupAggregate,
-- DISTINCT, UNION, set-returning inputs, Append / MergeAppend children,
-- sub plans and init plans, CTEs, INSERT ... SELECT ... ORDER BY
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';
SET gpusort.topn_limit = 0;

-- Where PostgreSQL's own plans differ between versions (16 sorts the input
-- of count(DISTINCT ...) below the Agg; 17 plans UNION as a Merge Append of
-- sorted inputs, 18 INTERSECT and EXCEPT too), the check is that every Sort of PostgreSQL's plan became
-- a GpuSort, rather than how many there are.
CREATE FUNCTION gs_check_replaced(q text,
								  OUT rows bigint, OUT same boolean,
								  OUT replaced boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
	saved text := current_setting('gpusort.enabled');
	c record;
	off_plan record;
BEGIN
	c := gs_check(q);
	PERFORM set_config('gpusort.enabled', 'off', false);
	off_plan := gs_plan(q);
	PERFORM set_config('gpusort.enabled', saved, false);
	rows := c.rows;
	same := c.same;
	replaced := c.sort = 0 AND c.gpusort = off_plan.sort;
END
$fn$;

CREATE TABLE gs_l AS
SELECT g AS id, g % 37 AS k, (g % 5)::text COLLATE "C" AS s, g * 3 AS v
FROM generate_series(1, 3000) g;
CREATE TABLE gs_r AS
SELECT g AS id, g % 41 AS k, (g % 7)::text COLLATE "C" AS s, -g AS w
FROM generate_series(1, 2000) g;
ANALYZE gs_l, gs_r;

-- merge joins; inner side with duplicates needs mark/restore
SET enable_hashjoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT count(*), sum(l.v + r.w) FROM gs_l l JOIN gs_r r ON l.k = r.k;
SELECT count(*), sum(l.v + r.w) FROM gs_l l JOIN gs_r r ON l.k = r.k;
SELECT * FROM gs_check('SELECT count(*), sum(l.v * r.w), min(l.id * 10000 + r.id) FROM gs_l l JOIN gs_r r ON l.k = r.k');
SELECT * FROM gs_check('SELECT l.id, r.id FROM gs_l l JOIN gs_r r ON l.k = r.k AND l.s = r.s ORDER BY l.id, r.id');
SELECT * FROM gs_check('SELECT count(*), sum(coalesce(l.v, 0) + coalesce(r.w, 0)) FROM gs_l l FULL JOIN gs_r r ON l.k = r.k + 30');
SELECT * FROM gs_check('SELECT count(*), count(r.id) FROM gs_l l LEFT JOIN gs_r r ON l.s = r.s AND l.k < 3');
SELECT * FROM gs_check('SELECT count(*) FROM gs_l l WHERE EXISTS (SELECT 1 FROM gs_r r WHERE r.k = l.k AND r.s = l.s)');
SELECT * FROM gs_check('SELECT count(*) FROM gs_l l WHERE NOT EXISTS (SELECT 1 FROM gs_r r WHERE r.k = l.k + 10)');
-- three-way merge join, text key
SELECT * FROM gs_check('SELECT count(*), sum(a.v) FROM gs_l a JOIN gs_r b ON a.s = b.s JOIN gs_l c ON c.k = b.k AND c.id < 100');
EXPLAIN (COSTS OFF) SELECT count(*) FROM gs_l a JOIN gs_r b ON a.s = b.s JOIN gs_l c ON c.k = b.k AND c.id < 100;
-- the printed answer of a merge join with duplicates
SELECT l.k, count(*), sum(l.id), sum(r.id) FROM gs_l l JOIN gs_r r ON l.k = r.k WHERE l.id < 200 AND r.id < 200 GROUP BY l.k ORDER BY l.k LIMIT 8;
RESET enable_hashjoin;
RESET enable_nestloop;

-- window functions (one sort per window ordering)
SELECT * FROM gs_check('SELECT id, row_number() OVER (PARTITION BY k ORDER BY v DESC) FROM gs_l ORDER BY id');
SELECT * FROM gs_check('SELECT id, rank() OVER (ORDER BY s), sum(v) OVER (PARTITION BY s ORDER BY k, id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW), lag(id) OVER (ORDER BY k DESC, id) FROM gs_l ORDER BY id');
SELECT * FROM gs_check('SELECT k, s, dense_rank() OVER (PARTITION BY s ORDER BY k) FROM gs_l ORDER BY 1, 2, 3');
SELECT * FROM gs_explain('SELECT id, row_number() OVER (PARTITION BY k ORDER BY v DESC) FROM gs_l ORDER BY id');
SELECT id, k, v, row_number() OVER (PARTITION BY k ORDER BY v DESC) FROM gs_l WHERE k < 2 AND id < 300 ORDER BY id;

-- GroupAggregate, DISTINCT, DISTINCT ON, UNION, INTERSECT, EXCEPT
SET enable_hashagg = off;
SELECT * FROM gs_explain('SELECT k, count(*) FROM gs_l GROUP BY k');
SELECT * FROM gs_check('SELECT k, count(*), sum(v) FROM gs_l GROUP BY k');
SELECT * FROM gs_check('SELECT s, k, count(*), string_agg(id::text, '','' ORDER BY id) FROM gs_l GROUP BY s, k');
SELECT * FROM gs_check('SELECT k, s FROM gs_l GROUP BY ROLLUP (k, s)');
SELECT * FROM gs_check('SELECT DISTINCT k, s FROM gs_l');
SELECT * FROM gs_check('SELECT DISTINCT ON (s) s, v, id FROM gs_l ORDER BY s, v DESC');
SELECT * FROM gs_check_replaced('SELECT count(DISTINCT k) FROM gs_l');
SELECT * FROM gs_check_replaced('SELECT k, s FROM gs_l UNION SELECT k, s FROM gs_r');
SELECT * FROM gs_check_replaced('SELECT k FROM gs_l INTERSECT SELECT k FROM gs_r');
SELECT * FROM gs_check_replaced('SELECT s FROM gs_r EXCEPT SELECT s FROM gs_l');
SELECT k, s FROM gs_l WHERE k < 3 UNION SELECT k, s FROM gs_r WHERE k < 2;
SELECT DISTINCT s FROM gs_r;
RESET enable_hashagg;

-- set-returning inputs
SELECT * FROM gs_check('SELECT g FROM generate_series(1, 10000) g ORDER BY g % 97, g DESC');
SELECT * FROM gs_check('SELECT x, o FROM unnest(ARRAY[3, 1, NULL, 2, 1, 3]) WITH ORDINALITY u(x, o) ORDER BY x DESC, o');
SELECT * FROM gs_check('SELECT generate_series(1, k) AS g, id FROM gs_l WHERE id < 100 ORDER BY 1, 2');
SELECT * FROM gs_check('SELECT key, value FROM jsonb_each_text(''{"b": 2, "a": 1, "c": 0}'') ORDER BY value');
SELECT x FROM unnest(ARRAY[3, 1, NULL, 2, 1, 3]) u(x) ORDER BY x NULLS FIRST;
SELECT g % 3 AS m, g FROM generate_series(1, 9) g ORDER BY g % 3 DESC, g;

-- UNION ALL branches with their own sorts; a partitioned table (MergeAppend
-- over one sort per partition)
SELECT * FROM gs_check('SELECT * FROM (SELECT k, id FROM gs_l ORDER BY k, id LIMIT 10) a UNION ALL SELECT * FROM (SELECT k, id FROM gs_r ORDER BY k DESC, id LIMIT 10) b');
CREATE TABLE gs_part (id int, k int, t text COLLATE "C") PARTITION BY RANGE (id);
CREATE TABLE gs_part_1 PARTITION OF gs_part FOR VALUES FROM (0) TO (1000);
CREATE TABLE gs_part_2 PARTITION OF gs_part FOR VALUES FROM (1000) TO (2000);
CREATE TABLE gs_part_3 PARTITION OF gs_part FOR VALUES FROM (2000) TO (3000);
INSERT INTO gs_part SELECT g, (g * 31) % 101, md5(g::text) FROM generate_series(0, 2999) g;
ANALYZE gs_part;
EXPLAIN (COSTS OFF) SELECT * FROM gs_part ORDER BY id DESC LIMIT 5;
SELECT * FROM gs_part ORDER BY id DESC LIMIT 5;
SELECT * FROM gs_check('SELECT * FROM gs_part ORDER BY id DESC LIMIT 2500');
SELECT * FROM gs_check('SELECT * FROM gs_part ORDER BY k, t');
SET enable_partitionwise_aggregate = on;
SET enable_hashagg = off;
EXPLAIN (COSTS OFF) SELECT k, count(*), max(t) FROM gs_part GROUP BY k ORDER BY k;
SELECT * FROM gs_check('SELECT k, count(*), max(t) FROM gs_part GROUP BY k ORDER BY k');
SELECT * FROM gs_check('SELECT id / 10, count(*), max(t) FROM gs_part GROUP BY id / 10 ORDER BY 1');
RESET enable_hashagg;
RESET enable_partitionwise_aggregate;
-- one partition is index-ordered, the others are sorted: Merge Append
CREATE INDEX ON gs_part_1 (k);
EXPLAIN (COSTS OFF) SELECT * FROM gs_part ORDER BY k LIMIT 50;
SELECT * FROM gs_check('SELECT k FROM gs_part ORDER BY k LIMIT 50');
SELECT * FROM gs_check('SELECT k, t FROM gs_part ORDER BY k, t LIMIT 2000');

-- init plans and sub plans with sorts inside; a CTE
SELECT * FROM gs_check('SELECT id FROM gs_l WHERE k = (SELECT k FROM gs_r ORDER BY w LIMIT 1) ORDER BY id');
SELECT * FROM gs_check('SELECT id, ARRAY(SELECT r.id FROM gs_r r WHERE r.k = l.k ORDER BY r.w, r.id) FROM gs_l l WHERE l.id < 60 ORDER BY id');
SELECT * FROM gs_check('WITH c AS MATERIALIZED (SELECT k, id FROM gs_l ORDER BY k DESC, id) SELECT * FROM c WHERE k > 30');
SELECT * FROM gs_check('SELECT id FROM gs_l WHERE id IN (SELECT id FROM gs_r ORDER BY w LIMIT 50) ORDER BY 1');
SELECT id, ARRAY(SELECT r.id FROM gs_r r WHERE r.k = l.k ORDER BY r.w DESC LIMIT 4) FROM gs_l l WHERE l.id < 6 ORDER BY id;

-- rows land in the heap in the sorted order
CREATE TABLE gs_ins (id int, k int);
INSERT INTO gs_ins SELECT id, k FROM gs_l ORDER BY k DESC, id;
SELECT bool_and(ok) AS heap_order_ok FROM (
	SELECT (k, -id) <= (lag(k) OVER w, -lag(id) OVER w) OR lag(k) OVER w IS NULL AS ok
	FROM gs_ins WINDOW w AS (ORDER BY ctid)) s;
CREATE TABLE gs_ctas AS SELECT s, id FROM gs_l ORDER BY s, id DESC;
SELECT (SELECT string_agg(s || ':' || id, ',' ORDER BY ctid) FROM gs_ctas) =
	   (SELECT string_agg(s || ':' || id, ',' ORDER BY s, id DESC) FROM gs_l) AS ctas_order_ok;

-- sorts under MERGE, UPDATE ... FROM and DELETE ... USING (merge joins):
-- the same statements on two copies, with gpusort on and off
CREATE TABLE gs_dml_on AS SELECT id, k, v FROM gs_l;
CREATE TABLE gs_dml_off AS SELECT id, k, v FROM gs_l;
SET enable_hashjoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF)
MERGE INTO gs_dml_on d USING (SELECT k, max(w) AS w FROM gs_r GROUP BY k) r ON d.k = r.k
WHEN MATCHED AND d.id % 2 = 0 THEN UPDATE SET v = d.v + r.w
WHEN MATCHED THEN DELETE;
MERGE INTO gs_dml_on d USING (SELECT k, max(w) AS w FROM gs_r GROUP BY k) r ON d.k = r.k
WHEN MATCHED AND d.id % 2 = 0 THEN UPDATE SET v = d.v + r.w
WHEN MATCHED THEN DELETE;
UPDATE gs_dml_on d SET v = d.v * 2 FROM gs_r r WHERE d.k = r.k + 30 AND r.id < 3;
DELETE FROM gs_dml_on d USING gs_r r WHERE d.k = r.k - 5 AND r.id = 1;
SET gpusort.enabled = off;
MERGE INTO gs_dml_off d USING (SELECT k, max(w) AS w FROM gs_r GROUP BY k) r ON d.k = r.k
WHEN MATCHED AND d.id % 2 = 0 THEN UPDATE SET v = d.v + r.w
WHEN MATCHED THEN DELETE;
UPDATE gs_dml_off d SET v = d.v * 2 FROM gs_r r WHERE d.k = r.k + 30 AND r.id < 3;
DELETE FROM gs_dml_off d USING gs_r r WHERE d.k = r.k - 5 AND r.id = 1;
RESET gpusort.enabled;
RESET enable_hashjoin;
RESET enable_nestloop;
SELECT (SELECT count(*) FROM gs_dml_on) AS rows_left,
	   gs_digest('SELECT * FROM gs_dml_on ORDER BY id') = gs_digest('SELECT * FROM gs_dml_off ORDER BY id') AS same;

-- an init plan attached to the sort itself, and one inside its key
SELECT * FROM gs_explain('SELECT k, (SELECT max(v) FROM gs_l) AS m FROM gs_r WHERE id < 5 ORDER BY k, id');
SELECT k, (SELECT max(v) FROM gs_l) AS m FROM gs_r WHERE id < 5 ORDER BY k, id;
SELECT k, id FROM gs_r WHERE id < 8 ORDER BY abs(k - (SELECT 5)), id;
-- COPY and a materialized view
COPY (SELECT k, id FROM gs_r WHERE id < 6 ORDER BY k DESC, id) TO STDOUT;
CREATE MATERIALIZED VIEW gs_mv AS SELECT k, id FROM gs_r ORDER BY k DESC, id;
REFRESH MATERIALIZED VIEW gs_mv;
SELECT (SELECT string_agg(k || ':' || id, ',' ORDER BY ctid) FROM gs_mv) =
	   (SELECT string_agg(k || ':' || id, ',' ORDER BY k DESC, id) FROM gs_r) AS mv_order_ok;

-- whole-row references, system columns, FOR UPDATE above a sort
SELECT * FROM gs_check('SELECT l, l.k FROM gs_l l ORDER BY l.k DESC, l.id');
SELECT * FROM gs_check('SELECT tableoid AS part, id FROM gs_part ORDER BY tableoid DESC, id');
SELECT * FROM gs_check('SELECT tableoid::regclass AS part, id FROM gs_part ORDER BY tableoid DESC, id');
SELECT l::text FROM gs_l l WHERE id < 5 ORDER BY l.s DESC, l.id;
SELECT id, k FROM gs_l WHERE id < 40 ORDER BY k DESC, id LIMIT 4 FOR UPDATE;

-- forty sort keys
SELECT * FROM gs_check('SELECT id FROM gs_l ORDER BY k % 2, k % 3, k % 4, k % 5, k % 6, k % 7, k % 8, k % 9, k % 10, k % 11, k % 12, k % 13, k % 14, k % 15, k % 16, k % 17, k % 18, k % 19, k % 20, k % 21, k % 22, k % 23, k % 24, k % 25, k % 26, k % 27, k % 28, k % 29, k % 30, k % 31, k % 32, k % 33, k % 34, k % 35, k % 36, s DESC, v % 7, v % 11 DESC, v % 13, id');

-- EXPLAIN ANALYZE of a GpuSort that never runs, and in other formats
SELECT * FROM gs_explain('SELECT (SELECT count(*) FROM (SELECT k FROM gs_r ORDER BY k, id LIMIT 1000) s WHERE s.k = o.k) FROM gs_l o WHERE o.id < 0',
						'ANALYZE, TIMING OFF, SUMMARY OFF');
CREATE FUNCTION gs_explain_json(q text) RETURNS json LANGUAGE plpgsql AS $fn$
DECLARE
	j json;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q INTO j;
	RETURN j;
END
$fn$;
SELECT j->0->'Plan'->>'Node Type' AS node, j->0->'Plan'->>'Custom Plan Provider' AS provider,
	   j->0->'Plan'->'Sort Key' AS sort_key, (j->0->'Plan'->>'Actual Rows')::numeric::bigint AS actual_rows
FROM gs_explain_json('SELECT * FROM gs_r ORDER BY s DESC, k') j;
CREATE FUNCTION gs_explain_lines(q text, fmt text) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
	n bigint := 0;
	l text;
BEGIN
	FOR l IN EXECUTE format('EXPLAIN (ANALYZE, VERBOSE, FORMAT %s) %s', fmt, q) LOOP
		n := n + 1;
	END LOOP;
	RETURN n;
END
$fn$;
SELECT gs_explain_lines('SELECT * FROM gs_r ORDER BY s DESC, k', 'xml') > 0 AS xml_ok,
	   gs_explain_lines('SELECT * FROM gs_r ORDER BY s DESC, k', 'yaml') > 0 AS yaml_ok;

RESET gpusort.topn_limit;
