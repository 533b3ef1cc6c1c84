--
-- keys_float: float4, float8 and numeric, with NaN (of both signs), ±Infinity,
-- -0, denormals and the extremes
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE TABLE gs_float (id int PRIMARY KEY, f4 float4, f8 float8, n numeric);
INSERT INTO gs_float VALUES
	(1, 'NaN', 'NaN', 'NaN'),
	(2, 'Infinity', 'Infinity', 'Infinity'),
	(3, '-Infinity', '-Infinity', '-Infinity'),
	(4, '0', '0', '0'),
	(5, '-0', '-0', '-0'),
	(6, '1e-45', '5e-324', '1e-60'),
	(7, '-1e-45', '-5e-324', '-1e-60'),
	(8, '3.4028235e38', '1.7976931348623157e308', '9.999e60'),
	(9, '-3.4028235e38', '-1.7976931348623157e308', '-9.999e60'),
	(10, '1.1754944e-38', '2.2250738585072014e-308', '0.00000000000000000001'),
	(11, NULL, NULL, NULL),
	(12, '1', '1', '1.0'),
	(13, '1', '1', '1.000'),
	(14, '-1', '-1', '-1'),
	(15, '1.0000001', '1.0000000000000002', '1.00000000000000000000000000000000000000001'),
	(16, '0.99999994', '0.9999999999999999', '0.99999999999999999999999999999999999999999'),
	(17, 'NaN', 'NaN', 'NaN'),
	(18, NULL, NULL, NULL),
	(19, '100', '100', '100'),
	(20, '-100', '-100', '-100');
-- NaN with the sign bit set: the result of Infinity - Infinity on most CPUs,
-- and -NaN; PostgreSQL orders every NaN above everything else
INSERT INTO gs_float VALUES
	(21, '-Infinity'::float4 + 'Infinity'::float4,
		 'Infinity'::float8 - 'Infinity'::float8, 'NaN'),
	(22, -('NaN'::float4), -('NaN'::float8), 'NaN'),
	(23, '0'::float4 * 'Infinity'::float4, '0'::float8 * 'Infinity'::float8, 'NaN');

SELECT id, f4 FROM gs_float ORDER BY f4, id;
SELECT id, f8 FROM gs_float ORDER BY f8 DESC, id;
SELECT id, n FROM gs_float ORDER BY n NULLS FIRST, id;
SELECT id, f8 FROM gs_float ORDER BY f8 DESC NULLS LAST, id DESC;
EXPLAIN (COSTS OFF) SELECT id, f8 FROM gs_float ORDER BY f8 DESC, id;

-- every NaN is one group, and -0 groups with 0
SET enable_hashagg = off;
SELECT f8 + 0 AS f8, count(*) FROM gs_float GROUP BY f8 ORDER BY f8;
SELECT f4 + 0 AS f4, count(*) FROM gs_float GROUP BY f4 ORDER BY f4 DESC;
SELECT trim_scale(n) AS n, count(*) FROM gs_float GROUP BY n ORDER BY n;
SELECT * FROM gs_explain('SELECT f8 + 0 AS f8, count(*) FROM gs_float GROUP BY f8 ORDER BY f8');
RESET enable_hashagg;

-- many rows
SELECT setseed(0.2);
INSERT INTO gs_float
SELECT 100 + g,
	   CASE WHEN abs(x) < 3e38 AND (abs(x) > 1e-37 OR x = 0) THEN x::float4 END,
	   x, x::numeric
FROM (SELECT g, CASE g % 6
					WHEN 0 THEN (random() - 0.5) * 1e6
					WHEN 1 THEN (random() - 0.5) * 1e-30
					WHEN 2 THEN round((random() - 0.5) * 20)
					WHEN 3 THEN (random() - 0.5) * 1e30
					WHEN 4 THEN exp((random() - 0.5) * 1400) * sign(random() - 0.5)
					ELSE random() END AS x
	  FROM generate_series(1, 5000) g) s;
-- numeric: many digits, values equal in a long prefix, big and tiny scales
INSERT INTO gs_float
SELECT 10000 + g, NULL, NULL,
	   CASE g % 5
		   WHEN 0 THEN ('123456789012345678901234567890.' || lpad(g::text, 30, '0'))::numeric
		   WHEN 1 THEN ('-123456789012345678901234567890.' || lpad(g::text, 30, '0'))::numeric
		   WHEN 2 THEN ('1e' || (g % 300 - 150))::numeric * (g % 7 - 3)
		   WHEN 3 THEN (g % 10)::numeric / 3
		   ELSE round((g % 100)::numeric / 7, g % 10) END
FROM generate_series(1, 2000) g;
INSERT INTO gs_float VALUES
	(20000, NULL, NULL, '9.999e131071'), (20001, NULL, NULL, '-9.999e131071'),
	(20002, NULL, NULL, '1e-16383'), (20003, NULL, NULL, '-1e-16383'),
	(20004, NULL, NULL, '1e131071'), (20005, NULL, NULL, '-1e131071');
ANALYZE gs_float;

SELECT * FROM gs_check_dirs('gs_float', 'f4');
SELECT * FROM gs_check_dirs('gs_float', 'f8');
SELECT * FROM gs_check_dirs('gs_float', 'n');
-- key only: equal values print differently (-0 and 0, 1.0 and 1.000), so
-- compare their values, not their text
SELECT * FROM gs_check('SELECT f8 = 0 AS z, f8 <> f8 AS nan FROM gs_float ORDER BY f8, id');
SELECT * FROM gs_check('SELECT round(n, 3) AS n FROM (SELECT n FROM gs_float WHERE n <> ''NaN'' ORDER BY n DESC) s');
SELECT * FROM gs_check('SELECT f4, f8, id FROM gs_float ORDER BY f4 DESC NULLS LAST, f8, id');
SELECT * FROM gs_check('SELECT id FROM gs_float WHERE abs(n) < 1e300 OR n = ''NaN'' ORDER BY round(n, 300)::float8, f8 DESC, n, id');

-- narrow keys: numeric and float8 truncated, then tie-broken
SET gpusort.max_key_bytes = 4;
SELECT * FROM gs_check_dirs('gs_float', 'f8');
SELECT * FROM gs_check_dirs('gs_float', 'n');
SET gpusort.max_key_bytes = 32;
SELECT * FROM gs_check_dirs('gs_float', 'n');
RESET gpusort.max_key_bytes;
