--
-- load_page_scan: a sort's plain table scan read page by page by gpusort
-- (src/sort_heapread.c), against PostgreSQL's scan and sort: the rows
-- its snapshot sees, the statistics and EXPLAIN ANALYZE counts it keeps,
-- serially, with loading workers and through a cursor.  The snapshot seen
-- by other sessions is test/t/003_snapshots.pl's.
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE TABLE gs_ps (id int, k int8, dropme int, t text)
	WITH (autovacuum_enabled = off, fillfactor = 90);
INSERT INTO gs_ps
SELECT g, CASE WHEN g % 97 = 0 THEN NULL ELSE (g * 7919) % 10007 - 5000 END,
	   g, CASE WHEN g % 500 = 0 THEN repeat(md5(g::text), 300)
			   WHEN g % 41 = 0 THEN NULL ELSE md5(g::text) END
FROM generate_series(1, 30000) g;
-- the first pages all-visible, the rest not
VACUUM (FREEZE) gs_ps;
-- deleted rows, updated rows (new versions on the same page or elsewhere),
-- a dropped column and one added later with a default (rows stored before
-- lack it), rows of an aborted subtransaction
DELETE FROM gs_ps WHERE id % 7 = 0 AND id > 5000;
UPDATE gs_ps SET k = -k WHERE id % 11 = 0 AND id > 5000;
UPDATE gs_ps SET t = t || 'x' WHERE id % 13 = 0 AND id > 5000;
ALTER TABLE gs_ps DROP COLUMN dropme;
ALTER TABLE gs_ps ADD COLUMN extra int DEFAULT 42;
INSERT INTO gs_ps SELECT g, g % 17, 'late', g FROM generate_series(30001, 31000) g;
BEGIN;
SAVEPOINT s;
INSERT INTO gs_ps SELECT g, 0, 'aborted', 0 FROM generate_series(40001, 41000) g;
ROLLBACK TO s;
COMMIT;
ANALYZE gs_ps;

-- serially: the GpuSort reads the scan's pages itself
SET max_parallel_workers_per_gather = 0;
EXPLAIN (COSTS OFF) SELECT * FROM gs_ps ORDER BY k, id;
SELECT * FROM gs_check('SELECT * FROM gs_ps ORDER BY k, id');
SELECT * FROM gs_check('SELECT * FROM gs_ps ORDER BY t DESC, id');
-- a projection that picks columns is read from the pages too: some
-- columns, in another order, one twice, the one added later, NULLs and
-- compressed values among them; and a window function's input
SELECT * FROM gs_check('SELECT id, extra FROM gs_ps ORDER BY extra, id');
SELECT * FROM gs_check('SELECT t, k, id FROM gs_ps ORDER BY t DESC NULLS LAST, id');
SELECT * FROM gs_check('SELECT k, id, k FROM gs_ps ORDER BY k NULLS FIRST, id');
SELECT * FROM gs_check('SELECT id, row_number() OVER (ORDER BY k, id) FROM gs_ps');
-- picked columns at offsets known once: fixed-width columns before them,
-- a dropped one among them, one added later (rows stored before lack it),
-- NULLs, a fixed-width type passed by reference
CREATE TABLE gs_pf (a int4, b int8, c int2, u uuid, d float8)
	WITH (autovacuum_enabled = off);
INSERT INTO gs_pf
SELECT g, (g * 7919) % 10007, g, md5(g::text)::uuid,
	   CASE WHEN g % 53 = 0 THEN NULL ELSE g / 7.0 END
FROM generate_series(1, 20000) g;
ALTER TABLE gs_pf DROP COLUMN c;
ALTER TABLE gs_pf ADD COLUMN e int4 DEFAULT 5;
INSERT INTO gs_pf SELECT g, g % 101, md5(g::text)::uuid, g, g
FROM generate_series(20001, 22000) g;
ANALYZE gs_pf;
SELECT * FROM gs_check('SELECT d, a, u FROM gs_pf ORDER BY d NULLS FIRST, a');
SELECT * FROM gs_check('SELECT e, b, a FROM gs_pf ORDER BY e DESC, b, a');
SELECT * FROM gs_check('SELECT u, b FROM gs_pf ORDER BY u');
-- a varlena last among the picked columns, every column before it
-- fixed-width: rows formed from its bytes, a text key in C order made
-- where the text lies.  Values with short headers; with 4-byte ones,
-- stored while the column's storage was plain (the row shortens them, as
-- PostgreSQL forms it); longer than a short header holds; compressed
-- (the key from the deformed row); external; empty; NULLs; and rows
-- stored before the column was added (formed from the slot)
CREATE TABLE gs_pv (id int8, n int4, dropme int2)
	WITH (autovacuum_enabled = off);
INSERT INTO gs_pv SELECT g, g % 7, 1 FROM generate_series(1, 300) g;
ALTER TABLE gs_pv ADD COLUMN t text COLLATE "C" DEFAULT 'before';
ALTER TABLE gs_pv ALTER COLUMN t SET STORAGE PLAIN;
INSERT INTO gs_pv SELECT g, g % 7, 2, 'p' || md5(g::text)
FROM generate_series(301, 3000) g;
COPY gs_pv FROM stdin;
9101	1	3	c
9102	2	3	
9103	3	3	qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq
9104	4	3	rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr
9105	5	3	ssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssss
9106	6	3	cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc
\.
INSERT INTO gs_pv SELECT g, g % 7, 4, NULL FROM generate_series(3001, 3100) g;
ALTER TABLE gs_pv ALTER COLUMN t SET STORAGE EXTENDED;
INSERT INTO gs_pv
SELECT g, g % 7, 5, CASE g % 4 WHEN 0 THEN 's' || g
						   WHEN 1 THEN lpad(g::text, 300, 'l')
						   WHEN 2 THEN repeat(md5(g::text), 100) || g
						   ELSE md5(g::text) END
FROM generate_series(3101, 9000) g;
INSERT INTO gs_pv VALUES (9001, 0, 6, '');
ALTER TABLE gs_pv ALTER COLUMN t SET STORAGE EXTERNAL;
INSERT INTO gs_pv
SELECT g, g % 7, 7, (SELECT string_agg(md5((g * 100 + i)::text), '')
				  FROM generate_series(1, 80) i)
FROM generate_series(9002, 9050) g;
-- (a row stored after a column is dropped holds a NULL there)
ALTER TABLE gs_pv DROP COLUMN dropme;
ANALYZE gs_pv;
-- (an external value's size is that of its data, without a header)
SELECT count(*) FILTER (WHERE pg_column_size(t) < octet_length(t)) AS compressed,
	   count(*) FILTER (WHERE octet_length(t) > 2000 AND
							  pg_column_size(t) = octet_length(t)) AS external,
	   count(*) FILTER (WHERE pg_column_size(t) = octet_length(t) + 4) AS long_header
FROM gs_pv;
SELECT * FROM gs_check('SELECT t FROM gs_pv ORDER BY t');
SELECT * FROM gs_check('SELECT t FROM gs_pv ORDER BY t DESC NULLS LAST');
SELECT * FROM gs_check('SELECT n, id, t FROM gs_pv ORDER BY id DESC');
SELECT * FROM gs_check('SELECT id, t FROM gs_pv WHERE true ORDER BY id');
-- picked columns after varlenas: their places found for each tuple by
-- walking the values before them (short, long, compressed and external
-- ones, NULLs), a varlena last or not among the picked ones
CREATE TABLE gs_pm (id int8, a text, b text, n int4, k int8,
					c text COLLATE "C") WITH (autovacuum_enabled = off);
INSERT INTO gs_pm
SELECT g, CASE g % 5 WHEN 0 THEN repeat(md5(g::text), 90)
					 WHEN 1 THEN NULL ELSE md5(g::text) || g END,
	   CASE g % 3 WHEN 0 THEN lpad('', g % 200, 'b') ELSE 'x' || g END,
	   g % 1000,
	   (g * 7919) % 10007,
	   CASE g % 7 WHEN 0 THEN lpad(g::text, 150, 'c') ELSE 'c' || g END
FROM generate_series(1, 8000) g;
ALTER TABLE gs_pm ALTER COLUMN b SET STORAGE EXTERNAL;
INSERT INTO gs_pm
SELECT g, 'a', (SELECT string_agg(md5((g * 100 + i)::text), '')
				FROM generate_series(1, 80) i),
	   g % 1000, g % 101, 'c' || g
FROM generate_series(8001, 8040) g;
ANALYZE gs_pm;
SELECT * FROM gs_check('SELECT k, id FROM gs_pm ORDER BY k, id');
SELECT * FROM gs_check('SELECT id, n, k, c FROM gs_pm ORDER BY k DESC, id');
SELECT * FROM gs_check('SELECT n, c FROM gs_pm ORDER BY c');
SELECT * FROM gs_check('SELECT b, k, id FROM gs_pm ORDER BY k, id');
-- whole rows of one such column, ties alike
CREATE TABLE gs_pw (t text COLLATE "C") WITH (autovacuum_enabled = off);
ALTER TABLE gs_pw ALTER COLUMN t SET STORAGE PLAIN;
INSERT INTO gs_pw SELECT t FROM gs_pv WHERE octet_length(t) < 100;
ALTER TABLE gs_pw ALTER COLUMN t SET STORAGE EXTENDED;
INSERT INTO gs_pw SELECT t FROM gs_pv;
SELECT * FROM gs_check('SELECT * FROM gs_pw ORDER BY t NULLS FIRST');
-- a filter or an expression in the scan: the scan node runs
SELECT * FROM gs_check('SELECT * FROM gs_ps WHERE id % 3 = 0 ORDER BY k, id');
SELECT * FROM gs_check('SELECT id, k + 1 AS k1 FROM gs_ps ORDER BY k1, id');
SELECT * FROM gs_check('SELECT k, tableoid, id FROM gs_ps ORDER BY k, id');
-- the transaction's own changes, not yet committed
BEGIN;
DELETE FROM gs_ps WHERE id % 5 = 0;
INSERT INTO gs_ps SELECT g, -g, 'mine', 1 FROM generate_series(50001, 50500) g;
UPDATE gs_ps SET k = 7 WHERE id % 19 = 0;
SELECT * FROM gs_check('SELECT * FROM gs_ps ORDER BY k, id');
ROLLBACK;
-- serializable: the same rows (the scan's predicate lock is taken as usual)
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT * FROM gs_check('SELECT * FROM gs_ps ORDER BY k DESC NULLS LAST, id');
COMMIT;

-- a cursor (no parallel mode): read forward, backward and again
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT id, k FROM gs_ps ORDER BY k, id;
FETCH 3 FROM c;
FETCH LAST FROM c;
FETCH BACKWARD 2 FROM c;
FETCH ABSOLUTE 10000 FROM c;
COMMIT;

-- the scan's row count in EXPLAIN ANALYZE and the table's statistics are
-- those of PostgreSQL's scan
SELECT * FROM gs_explain_analyze('SELECT * FROM gs_ps ORDER BY k, id');
CREATE FUNCTION gs_scan_rows(q text) RETURNS numeric
LANGUAGE plpgsql AS $fn$
DECLARE
	j jsonb;
	n jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ' || q INTO j;
	n := jsonb_path_query_first(j, 'strict $.**? (@."Node Type" == "Seq Scan")');
	RETURN round((n->>'Actual Rows')::numeric * (n->>'Actual Loops')::numeric);
END
$fn$;
SELECT gs_scan_rows('SELECT * FROM gs_ps ORDER BY k, id') AS scan_rows,
	   (SELECT count(*) FROM gs_ps) AS visible_rows;
CREATE FUNCTION gs_tup_read(q text) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
	before bigint;
	after bigint;
BEGIN
	before := pg_stat_get_xact_tuples_returned('gs_ps'::regclass);
	EXECUTE q;
	after := pg_stat_get_xact_tuples_returned('gs_ps'::regclass);
	RETURN after - before;
END
$fn$;
SELECT gs_tup_read('SELECT * FROM gs_ps ORDER BY k, id') AS gpusort_rows_read;
SET gpusort.enabled = off;
SELECT gs_tup_read('SELECT * FROM gs_ps ORDER BY k, id') AS postgres_rows_read;
RESET gpusort.enabled;

-- with loading workers: in memory, and writing runs
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET work_mem = '64MB';
EXPLAIN (COSTS OFF) SELECT * FROM gs_ps ORDER BY k, id;
SELECT * FROM gs_check('SELECT * FROM gs_ps ORDER BY k, id');
SELECT * FROM gs_check('SELECT * FROM gs_ps ORDER BY t, id');
SELECT * FROM gs_explain_analyze('SELECT * FROM gs_ps ORDER BY k, id');
-- each participant's rows are counted (the average per loop is rounded)
SELECT abs(gs_scan_rows('SELECT * FROM gs_ps ORDER BY k, id') -
		   (SELECT count(*) FROM gs_ps)) <= 3 AS scan_rows_counted;
SET work_mem = '256kB';
SELECT * FROM gs_check('SELECT * FROM gs_ps ORDER BY k DESC, id');
SELECT * FROM gs_check('SELECT * FROM gs_ps ORDER BY t NULLS FIRST, id');
SELECT * FROM gs_check('SELECT t, id, extra FROM gs_ps ORDER BY t, id');
SELECT * FROM gs_check('SELECT extra, id FROM gs_ps ORDER BY extra DESC, id');
SELECT * FROM gs_check('SELECT d, a, u FROM gs_pf ORDER BY d DESC, a');
SELECT * FROM gs_check('SELECT e, b, a FROM gs_pf ORDER BY e, b DESC, a');
SELECT * FROM gs_check('SELECT t FROM gs_pv ORDER BY t');
SELECT * FROM gs_check('SELECT n, id, t FROM gs_pv ORDER BY id DESC');
SELECT * FROM gs_check('SELECT id, n, k, c FROM gs_pm ORDER BY k, id');
-- a filter or an expression in the workers' scan: every row through the
-- scan node, writing runs and in memory
SELECT * FROM gs_check('SELECT * FROM gs_ps WHERE id % 3 <> 0 ORDER BY k DESC, id');
SET work_mem = '64MB';
SELECT * FROM gs_check('SELECT id, k + 1 AS k1, t FROM gs_ps ORDER BY k1, id');
SELECT * FROM gs_check('SELECT k, t, id FROM gs_ps ORDER BY k DESC, id');
-- (the workers read every row: the leader takes none)
SET parallel_leader_participation = off;
SELECT * FROM gs_check('SELECT t FROM gs_pv ORDER BY t DESC');
SELECT * FROM gs_check('SELECT n, id, t FROM gs_pv ORDER BY id');
SELECT * FROM gs_check('SELECT k, id FROM gs_pm ORDER BY k DESC, id');
SELECT * FROM gs_check('SELECT n, c FROM gs_pm ORDER BY c DESC');
RESET parallel_leader_participation;
SELECT gs_workers_left() AS workers_left;
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

DROP FUNCTION gs_tup_read(text);
DROP FUNCTION gs_scan_rows(text);
DROP TABLE gs_ps, gs_pf, gs_pv, gs_pw, gs_pm;
