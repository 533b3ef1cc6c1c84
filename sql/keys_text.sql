--
-- keys_text: text, varchar, bpchar, name under the C, POSIX, "C.utf8", ICU and
-- libc collations; empty, long (toasted, compressed), non-ASCII strings;
-- strings that differ only past the key width
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

-- the collations used below exist in this cluster
SELECT collname, collprovider FROM pg_collation
WHERE collname IN ('C', 'POSIX', 'C.utf8', 'und-x-icu')
GROUP BY collname, collprovider ORDER BY collname COLLATE "C";

CREATE TABLE gs_text (id int PRIMARY KEY, t text COLLATE "C");
INSERT INTO gs_text VALUES
	(1, ''), (2, ' '), (3, 'a'), (4, 'A'), (5, 'ab'), (6, 'a b'), (7, 'b'),
	(8, 'é'), (9, 'e' || U&'\0301'), (10, 'e'), (11, 'z'), (12, 'Z'),
	(13, '日本'), (14, '日'), (15, U&'\+01F600'), (16, 'ß'), (17, 'ss'),
	(18, 'Ä'), (19, 'ä'), (20, 'a' || U&'\00AD' || 'b'), (21, NULL),
	(22, 'a' || chr(1)), (23, 'a' || chr(127)), (24, 'a10'), (25, 'a9'),
	(26, 'ﬃ'), (27, 'ffi'), (28, 'Ω'), (29, '-'), (30, '_'), (31, NULL),
	(32, 'abc'), (33, 'ABC'), (34, 'abc '), (35, 'Abc'), (36, 'ä' || 'b');
-- lengths around every key width, with one common prefix
INSERT INTO gs_text
SELECT 100 + l * 2 + v, repeat('p', l) || CASE v WHEN 0 THEN '' ELSE 'q' END
FROM generate_series(0, 40) l, generate_series(0, 1) v;

SELECT id, t FROM gs_text WHERE id < 100 ORDER BY t, id;
SELECT id, t FROM gs_text WHERE id < 100 ORDER BY t DESC NULLS LAST, id;
SELECT id, length(t) FROM gs_text WHERE id >= 100 ORDER BY t DESC, id;
EXPLAIN (COSTS OFF) SELECT id, t FROM gs_text ORDER BY t, id;

-- the same strings under other collations
SELECT id, t FROM gs_text WHERE id < 100 ORDER BY t COLLATE "und-x-icu", id;
EXPLAIN (COSTS OFF) SELECT id, t FROM gs_text ORDER BY t COLLATE "und-x-icu", id;
SELECT id, t FROM gs_text WHERE id < 100 ORDER BY t COLLATE "C.utf8", id;
SELECT id, t FROM gs_text WHERE id < 100 ORDER BY t COLLATE "POSIX" DESC, id;

-- random strings: ASCII letters of both cases, punctuation, accents, CJK,
-- emoji; lengths 0..60; many duplicates; long common prefixes
SELECT setseed(0.4);
CREATE FUNCTION gs_rand_str(n int, alphabet text) RETURNS text
LANGUAGE sql VOLATILE AS $$
	SELECT coalesce(string_agg(substr(alphabet, 1 + (random() * (length(alphabet) - 1))::int, 1), ''), '')
	FROM generate_series(1, n)
$$;
INSERT INTO gs_text
SELECT 1000 + g,
	   CASE g % 8
		   WHEN 0 THEN gs_rand_str((random() * 60)::int, 'abcABC xyz-_.,0123')
		   WHEN 1 THEN gs_rand_str((random() * 12)::int, 'aeiouéèêëÄÖÜäöüßçñ日本語中文😀Ωω')
		   WHEN 2 THEN 'common prefix that is longer than any key: ' || gs_rand_str((random() * 5)::int, 'abAB')
		   WHEN 3 THEN gs_rand_str((random() * 3)::int, 'aA')
		   WHEN 4 THEN CASE WHEN random() < 0.1 THEN NULL ELSE '' END
		   WHEN 5 THEN repeat('x', (random() * 40)::int)
		   WHEN 6 THEN gs_rand_str(1, 'abcdefABCDEF')
		   ELSE md5(g::text) END
FROM generate_series(1, 4000) g;
-- long values: compressed in line (repetitive), and toasted out of line
-- (incompressible, > 10 kB); some share a 10 kB prefix
INSERT INTO gs_text
SELECT 100000 + g,
	   CASE g % 3
		   WHEN 0 THEN repeat('long ', 3000) || g
		   WHEN 1 THEN (SELECT string_agg(md5((g * 1000 + i)::text), '') FROM generate_series(1, 400) i)
		   ELSE (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) i) || (g % 7)
	   END
FROM generate_series(1, 60) g;
ANALYZE gs_text;
-- some values really are stored compressed and some out of line
SELECT count(*) FILTER (WHERE pg_column_size(t) < length(t) / 10) > 0 AS compressed,
	   count(*) FILTER (WHERE pg_column_size(t) > 10000) > 0 AS long_uncompressed
FROM gs_text WHERE id > 100000;
SELECT (SELECT reltoastrelid FROM pg_class WHERE relname = 'gs_text') <> 0 AS has_toast,
	   pg_relation_size((SELECT reltoastrelid FROM pg_class WHERE relname = 'gs_text')) > 0 AS toast_used;

-- every collation, every direction (libc collations other than C: see
-- 04b_libc)
CREATE COLLATION gs_icu_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE COLLATION gs_icu_num (provider = icu, locale = 'und-u-kn');
CREATE COLLATION gs_icu_de (provider = icu, locale = 'de-DE');
-- ICU collations whose sort keys call strings equal that PostgreSQL then
-- orders by their bytes (level 1 strength, ignorable punctuation)
CREATE COLLATION gs_icu_l1 (provider = icu, locale = 'und-u-ks-level1');
CREATE COLLATION gs_icu_shift (provider = icu, locale = 'und-u-ka-shifted');
CREATE COLLATION gs_icu_upper (provider = icu, locale = 'und-u-kf-upper');
CREATE COLLATION gs_icu_sv (provider = icu, locale = 'sv-SE');
CREATE COLLATION gs_icu_ja (provider = icu, locale = 'ja-JP');
SELECT c AS collation, d.*
FROM unnest(ARRAY['"C"', '"POSIX"', '"C.utf8"', '"und-x-icu"', 'gs_icu_num',
				  'gs_icu_de', 'gs_icu_l1', 'gs_icu_shift', 'gs_icu_upper',
				  'gs_icu_sv', 'gs_icu_ja']) c,
	 gs_check_dirs('gs_text', 't COLLATE ' || c) d;
-- a nondeterministic collation: 'a' = 'A', so compare what the collation sees
SELECT * FROM gs_check('SELECT t, id FROM gs_text ORDER BY t COLLATE gs_icu_ci DESC, id');
SET enable_hashagg = off;
SELECT * FROM gs_check('SELECT count(*) FROM (SELECT DISTINCT t COLLATE gs_icu_ci FROM gs_text) s');
RESET enable_hashagg;

-- key columns only
SELECT * FROM gs_check('SELECT t FROM gs_text ORDER BY t');
SELECT * FROM gs_check('SELECT t FROM gs_text ORDER BY t COLLATE "und-x-icu" DESC');
SELECT * FROM gs_check('SELECT t FROM gs_text ORDER BY t COLLATE gs_icu_l1');
SELECT * FROM gs_check('SELECT t FROM gs_text ORDER BY t COLLATE gs_icu_shift DESC');
SELECT * FROM gs_check('SELECT t IS NULL, t FROM gs_text ORDER BY t IS NULL, t COLLATE "C.utf8" DESC');

-- the database's default collation (C or not, depending on the cluster):
-- only the answer is shown
CREATE TABLE gs_dflt AS SELECT id, t::text COLLATE "default" AS t FROM gs_text;
SELECT rows, same FROM gs_check('SELECT t, id FROM gs_dflt ORDER BY t, id');
SELECT rows, same FROM gs_check('SELECT t, id FROM gs_dflt ORDER BY t DESC NULLS LAST, id');

-- every key width with C and ICU
DO $$
DECLARE
	w int;
	c text;
	r record;
BEGIN
	FOREACH w IN ARRAY ARRAY[4, 8, 16, 24, 32]
	LOOP
		PERFORM set_config('gpusort.max_key_bytes', w::text, false);
		FOREACH c IN ARRAY ARRAY['"C"', '"und-x-icu"']
		LOOP
			FOR r IN SELECT * FROM gs_check_dirs('gs_text', 't COLLATE ' || c)
			LOOP
				IF NOT r.same OR r.gpusort = 0 THEN
					RAISE NOTICE 'max_key_bytes % collation % %: same % gpusort %',
						w, c, r.dir, r.same, r.gpusort;
				END IF;
			END LOOP;
		END LOOP;
	END LOOP;
	RAISE NOTICE 'key widths done';
END
$$;
RESET gpusort.max_key_bytes;

-- varchar, bpchar, name.  bpchar ignores trailing spaces: 'a' = 'a  ', and
-- both sort after 'a' || tab even though a tab is below a space
CREATE TABLE gs_chars (id int PRIMARY KEY, v varchar(80) COLLATE "C",
					   c char(6) COLLATE "C", cu bpchar COLLATE "C", nm name);
INSERT INTO gs_chars VALUES
	(1, 'a', 'a', 'a', 'a'), (2, 'a ', 'a ', 'a ', 'a '), (3, 'a' || chr(9), 'a' || chr(9), 'a' || chr(9), 'a' || chr(9)),
	(4, '', '', '', ''), (5, ' ', ' ', ' ', ' '), (6, 'a' || chr(1), 'a' || chr(1), 'a' || chr(1), 'a' || chr(1)),
	(7, NULL, NULL, NULL, NULL), (8, 'b', 'b', 'b  ', 'b'), (9, 'A', 'A', 'A', 'A'),
	(10, 'é', 'é', 'é', 'é'), (11, 'ab', 'ab', 'ab', 'ab'), (12, 'a  b', 'a  b', 'a  b', 'a  b'),
	(13, repeat('n', 63), 'nnnnnn', repeat('n', 63), repeat('n', 63)),
	(14, repeat('n', 62) || 'm', 'nnnnnm', repeat('n', 62) || 'm  ', repeat('n', 62) || 'm');
SELECT id, '[' || c || ']' AS shown FROM gs_chars ORDER BY c, id;
SELECT id, '[' || cu::text || ']' AS shown FROM gs_chars ORDER BY cu DESC, id;
SELECT id, nm FROM gs_chars ORDER BY nm, id;
SELECT id, v FROM gs_chars ORDER BY v NULLS FIRST, id;
SELECT '[' || cu::text || ']' AS shown, count(*) FROM gs_chars GROUP BY cu ORDER BY cu;
INSERT INTO gs_chars
SELECT 100 + g, x, x, x || repeat(' ', g % 3), x
FROM (SELECT g, CASE WHEN g % 10 = 0 THEN NULL
				   ELSE gs_rand_str((random() * 6)::int, 'ab ' || chr(9)) END AS x
	  FROM generate_series(1, 3000) g) s;
ANALYZE gs_chars;
SELECT * FROM gs_check_cols('gs_chars', ARRAY['v', 'c', 'cu', 'nm', 'c COLLATE "und-x-icu"']);
SET enable_hashagg = off;
SELECT * FROM gs_check('SELECT count(*), cu::text FROM gs_chars GROUP BY cu ORDER BY cu');
RESET enable_hashagg;
-- rows of 40 kB to 1.6 MB, formed in the query (never TOASTed): the first
-- ones are larger than the arena's first blocks
SELECT * FROM gs_check($$SELECT g, length(t), md5(t)
	FROM (SELECT g, repeat(chr(65 + g % 7), 40000 * (1 + (g * 7) % 40)) || g AS t
		  FROM generate_series(1, 80) g) s
	ORDER BY t, g$$);
SET work_mem = '64kB';
SELECT * FROM gs_check($$SELECT g, length(t), md5(t)
	FROM (SELECT g, repeat(chr(65 + g % 7), 40000 * (1 + (g * 7) % 40)) || g AS t
		  FROM generate_series(1, 80) g) s
	ORDER BY t DESC, g$$);
RESET work_mem;
