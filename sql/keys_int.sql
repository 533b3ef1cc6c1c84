--
-- keys_int: int2, int4, int8, oid, bool, and domains over them
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE TABLE gs_int (
	id int PRIMARY KEY,
	i2 int2,
	i4 int4,
	i8 int8,
	o oid,
	b bool
);
-- the edges, printed below
INSERT INTO gs_int VALUES
	(1, -32768, -2147483648, -9223372036854775808, 0, false),
	(2, 32767, 2147483647, 9223372036854775807, 4294967295, true),
	(3, 0, 0, 0, 2147483648, NULL),
	(4, -1, -1, -1, 2147483647, true),
	(5, 1, 1, 1, 1, false),
	(6, NULL, NULL, NULL, NULL, NULL),
	(7, -32767, -2147483647, -9223372036854775807, 4294967294, true),
	(8, 256, 65536, 4294967296, 256, false),
	(9, -256, -65536, -4294967296, 65536, true),
	(10, 255, 16777216, 72057594037927936, 16777216, false),
	(11, NULL, NULL, NULL, NULL, NULL),
	(12, 0, 0, 0, 0, false);

SELECT id, i2 FROM gs_int ORDER BY i2, id;
SELECT id, i4 FROM gs_int ORDER BY i4 DESC, id;
SELECT id, i8 FROM gs_int ORDER BY i8 NULLS FIRST, id;
SELECT id, o FROM gs_int ORDER BY o DESC NULLS LAST, id;
SELECT id, b FROM gs_int ORDER BY b, id DESC;
EXPLAIN (COSTS OFF) SELECT id, i8 FROM gs_int ORDER BY i8 NULLS FIRST, id;

-- many more rows: random values over the whole range and over a small range
-- (many duplicates), plus bit patterns near byte boundaries
SELECT setseed(0.1);
INSERT INTO gs_int
SELECT 100 + g,
	   CASE WHEN g % 50 = 0 THEN NULL ELSE (random() * 65535 - 32768)::int2 END,
	   CASE WHEN g % 3 = 0 THEN (random() * 20 - 10)::int4
			ELSE (random() * 4294967295 - 2147483648)::int4 END,
	   CASE WHEN g % 3 = 0 THEN (random() * 20 - 10)::int8
			WHEN g % 3 = 1 THEN (random() * 1e9)::int8 * (random() * 1e9)::int8 - 500000000000000000
			ELSE ((random() - 0.5) * 1.8e19)::int8 END,
	   CASE WHEN g % 7 = 0 THEN NULL ELSE (random() * 4294967295)::int8::oid END,
	   CASE WHEN g % 5 = 0 THEN NULL ELSE random() < 0.5 END
FROM generate_series(1, 5000) g;
INSERT INTO gs_int
SELECT 10000 + g, NULL, (1 << (g % 31)) * (CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END),
	   (1::int8 << (g % 63)) * (CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END) + (g % 3 - 1),
	   ((1::int8 << (g % 32)) - 1)::oid, NULL
FROM generate_series(1, 200) g;
ANALYZE gs_int;

SELECT * FROM gs_check_dirs('gs_int', 'i2');
SELECT * FROM gs_check_dirs('gs_int', 'i4');
SELECT * FROM gs_check_dirs('gs_int', 'i8');
SELECT * FROM gs_check_dirs('gs_int', 'o');
SELECT * FROM gs_check_dirs('gs_int', 'b');

-- key columns only (no unique tie-breaker: duplicates are indistinguishable)
SELECT * FROM gs_check('SELECT i4 FROM gs_int ORDER BY i4');
SELECT * FROM gs_check('SELECT i8 FROM gs_int ORDER BY i8 DESC');
SELECT * FROM gs_check('SELECT b, i2 FROM gs_int ORDER BY b NULLS FIRST, i2 DESC');
SELECT * FROM gs_check('SELECT o, i8, i4 FROM gs_int ORDER BY o, i8 DESC, i4');

-- expressions as keys, and a key not in the output
SELECT * FROM gs_check('SELECT id FROM gs_int ORDER BY i4 % 7, i8 / 3 DESC, id');
SELECT * FROM gs_check('SELECT id, -i2::int4 AS m FROM gs_int ORDER BY -i2::int4, id');

-- every key width: the id tie-breaker is cut off at small widths
DO $$
DECLARE
	w int;
	c text;
	r record;
BEGIN
	FOREACH w IN ARRAY ARRAY[4, 8, 16, 24, 32]
	LOOP
		PERFORM set_config('gpusort.max_key_bytes', w::text, false);
		FOREACH c IN ARRAY ARRAY['i2', 'i4', 'i8', 'o', 'b']
		LOOP
			FOR r IN SELECT * FROM gs_check_dirs('gs_int', c)
			LOOP
				IF NOT r.same OR r.gpusort = 0 THEN
					RAISE NOTICE 'max_key_bytes % column % %: same % gpusort %',
						w, c, r.dir, r.same, r.gpusort;
				END IF;
			END LOOP;
		END LOOP;
	END LOOP;
	RAISE NOTICE 'key widths done';
END
$$;
RESET gpusort.max_key_bytes;

-- domains over the supported types
CREATE DOMAIN gs_posint AS int8 CHECK (VALUE > -10000000000);
CREATE TABLE gs_dom (id int, d gs_posint);
INSERT INTO gs_dom SELECT g, (g * 7919) % 1013 - 500 FROM generate_series(1, 2000) g;
SELECT * FROM gs_check('SELECT d, id FROM gs_dom ORDER BY d DESC, id');
SELECT d FROM gs_dom ORDER BY d LIMIT 5;
