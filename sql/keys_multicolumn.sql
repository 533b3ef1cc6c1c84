--
-- keys_multicolumn: multi-column keys with mixed directions and NULL orders,
-- all-equal keys, presorted / reversed / sawtooth input, tiny inputs, wide
-- rows, keys wider than the key, expressions
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE TABLE gs_multi (
	id int PRIMARY KEY,
	a int4,
	b text COLLATE "C",
	c float8,
	d bool,
	e timestamp,
	f int8,
	pad text
);
SELECT setseed(0.5);
INSERT INTO gs_multi
SELECT g,
	   CASE WHEN g % 17 = 0 THEN NULL ELSE (random() * 6)::int END,
	   CASE WHEN g % 13 = 0 THEN NULL ELSE (ARRAY['x', 'y', 'xy', '', 'Y'])[1 + (random() * 4)::int] END,
	   CASE WHEN g % 11 = 0 THEN NULL ELSE round((random() * 4)::numeric, 1)::float8 END,
	   CASE WHEN g % 7 = 0 THEN NULL ELSE random() < 0.5 END,
	   '2020-01-01'::timestamp + (random() * 3)::int * interval '1 day',
	   (random() * 3)::int8 - 1,
	   repeat('.', (random() * 200)::int)
FROM generate_series(1, 3000) g;
ANALYZE gs_multi;

-- printed: a small slice, two columns in opposite directions
SELECT a, b, count(*) FROM gs_multi WHERE id <= 200
GROUP BY a, b ORDER BY a DESC NULLS LAST, b NULLS FIRST;
SELECT a, b, c, id FROM gs_multi WHERE id <= 40 ORDER BY a NULLS FIRST, b DESC, c, id;
EXPLAIN (COSTS OFF) SELECT a, b, c, id FROM gs_multi ORDER BY a NULLS FIRST, b DESC, c, id;

-- three key columns in every combination of direction and NULL order
-- (64 queries), then the id; the list of failures must be empty
CREATE TEMP TABLE gs_combo_results AS
SELECT q, (gs_check(q)).*
FROM (SELECT format('SELECT a, c, b, id FROM gs_multi ORDER BY a %s %s, c %s %s, b %s %s, id',
					d1, n1, d2, n2, d3, n3) AS q
	  FROM unnest(ARRAY['ASC', 'DESC']) d1, unnest(ARRAY['NULLS FIRST', 'NULLS LAST']) n1,
		   unnest(ARRAY['ASC', 'DESC']) d2, unnest(ARRAY['NULLS FIRST', 'NULLS LAST']) n2,
		   unnest(ARRAY['ASC', 'DESC']) d3, unnest(ARRAY['NULLS FIRST', 'NULLS LAST']) n3) s;
SELECT count(*) AS queries, bool_and(same) AS all_same, min(gpusort) AS min_gpusort,
	   max(sort) AS max_sort, min(rows) AS rows
FROM gs_combo_results;
SELECT q FROM gs_combo_results WHERE NOT same OR gpusort = 0;

-- the same with the key columns only (no tie-breaker)
SELECT * FROM gs_check('SELECT d, a, f FROM gs_multi ORDER BY d DESC, a NULLS FIRST, f DESC');
SELECT * FROM gs_check('SELECT e, f, d, a FROM gs_multi ORDER BY e, f DESC, d NULLS FIRST, a DESC NULLS LAST');
-- more columns than fit in 32 bytes: the rest is tie-broken
SELECT * FROM gs_check('SELECT id FROM gs_multi ORDER BY f, e DESC, c, a, d, b DESC, pad, id');
SELECT * FROM gs_check('SELECT f, e, c, a, d, b, length(pad) FROM gs_multi ORDER BY f, e DESC, c, a, d, b DESC, pad');
SET gpusort.max_key_bytes = 4;
SELECT * FROM gs_check('SELECT f, e, c, a, d, b, length(pad) FROM gs_multi ORDER BY f, e DESC, c, a, d, b DESC, pad');
RESET gpusort.max_key_bytes;
-- USING operators, and two text columns under different collations
SELECT * FROM gs_check('SELECT a, c, id FROM gs_multi ORDER BY a USING >, c USING <, id USING >');
SELECT * FROM gs_check('SELECT b, pad, id FROM gs_multi ORDER BY b COLLATE "und-x-icu" DESC, (pad || b) COLLATE "C", id');
SELECT * FROM gs_check('SELECT b, id FROM gs_multi ORDER BY b COLLATE "C", b COLLATE "und-x-icu" DESC, id');
-- keys that end in the middle of a column: 3 x 8 bytes, then text
SELECT * FROM gs_check('SELECT f, e, c, b, id FROM gs_multi ORDER BY f DESC, e, c DESC, b, id');
SELECT * FROM gs_check('SELECT f, c, b, id FROM gs_multi ORDER BY f, c, a, b DESC, id');
-- the same column twice, and a constant
SELECT * FROM gs_check('SELECT a, id FROM gs_multi ORDER BY a, a DESC, 1 + 1, id');

-- all keys equal
CREATE TABLE gs_equal AS
SELECT g AS id, 7 AS k, 'same'::text COLLATE "C" AS t, 1.5::float8 AS f FROM generate_series(1, 5000) g;
ANALYZE gs_equal;
SELECT * FROM gs_check('SELECT k, t, f FROM gs_equal ORDER BY k, t, f');
SELECT * FROM gs_check('SELECT id FROM gs_equal ORDER BY k DESC, t, f, id DESC');
SELECT * FROM gs_check('SELECT id FROM gs_equal ORDER BY t, id');
-- all NULL
SELECT * FROM gs_check('SELECT NULL::int AS n, id FROM gs_equal ORDER BY 1, id DESC');

-- presorted, reversed, sawtooth, organ pipe, few distinct values
CREATE TABLE gs_shapes AS
SELECT g AS id, g AS up, 10001 - g AS down, g % 100 AS saw,
	   CASE WHEN g <= 5000 THEN g ELSE 10001 - g END AS pipe,
	   (g % 3)::int8 * 1000000000000 AS few,
	   lpad(g::text, 8, '0') COLLATE "C" AS up_text
FROM generate_series(1, 10000) g;
ANALYZE gs_shapes;
SELECT * FROM gs_check_cols('gs_shapes', ARRAY['up', 'down', 'saw', 'pipe', 'few', 'up_text']);
SELECT * FROM gs_check('SELECT up FROM gs_shapes ORDER BY down');
SELECT * FROM gs_check('SELECT up_text FROM gs_shapes ORDER BY up_text DESC');

-- zero, one and two rows
SELECT * FROM gs_check('SELECT a FROM gs_multi WHERE false ORDER BY a');
SELECT a FROM gs_multi WHERE false ORDER BY a;
SELECT id, a FROM gs_multi WHERE id = 5 ORDER BY a;
SELECT id, b FROM gs_multi WHERE id IN (1, 2) ORDER BY b DESC, id;
SELECT x FROM (VALUES (2), (1)) v(x) ORDER BY x;

-- row estimates far off in both directions
CREATE FUNCTION gs_many(n int) RETURNS SETOF int LANGUAGE sql ROWS 1000000000 AS $$ SELECT generate_series(1, n) $$;
CREATE FUNCTION gs_few(n int) RETURNS SETOF int LANGUAGE sql ROWS 1 AS $$ SELECT generate_series(1, n) $$;
SELECT g FROM gs_many(10) g ORDER BY g DESC OFFSET 7;
SET work_mem = '64kB';
SELECT g FROM gs_many(10) g ORDER BY g DESC OFFSET 7;
SET work_mem = '4MB';
SELECT * FROM gs_check('SELECT g FROM gs_few(200000) g ORDER BY g % 1000 DESC, g');
SELECT * FROM gs_check('SELECT g FROM gs_many(100000) g ORDER BY g % 777, g DESC');

-- wide rows (tuples of ~5 kB), and keys hidden deep in the row
CREATE TABLE gs_wide (id int, big text, k int, t text COLLATE "C");
ALTER TABLE gs_wide ALTER COLUMN big SET STORAGE plain;
INSERT INTO gs_wide
SELECT g, repeat(md5(g::text), 150), (g * 7919) % 1000, md5((g % 50)::text)
FROM generate_series(1, 600) g;
ANALYZE gs_wide;
SELECT * FROM gs_check('SELECT * FROM gs_wide ORDER BY t, k DESC, id');
SELECT * FROM gs_check('SELECT big, k FROM gs_wide ORDER BY k, big');

-- expressions, resjunk keys, ORDER BY a column number
SELECT * FROM gs_check('SELECT id FROM gs_multi ORDER BY coalesce(a, -1) * 2 DESC, lower(b), id');
SELECT * FROM gs_check('SELECT b || ''!'' AS bb, id FROM gs_multi ORDER BY 1 DESC, 2');
SELECT * FROM gs_check('SELECT id FROM gs_multi ORDER BY e - interval ''1 hour'' * a, id');
