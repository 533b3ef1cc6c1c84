--
-- keys_text_encodings: text in LATIN1 and SQL_ASCII databases (bytes above 0x7F
-- that are not UTF-8), under the C collation and, in LATIN1, ICU
--
SET client_min_messages = warning;
DROP DATABASE IF EXISTS gs_latin1;
DROP DATABASE IF EXISTS gs_ascii;
RESET client_min_messages;
CREATE DATABASE gs_latin1 TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
CREATE DATABASE gs_ascii TEMPLATE template0 ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C';

\c gs_latin1
SET client_encoding = 'UTF8';
CREATE EXTENSION gpusort;
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';
CREATE TABLE gs_l1 AS
SELECT g AS id,
	   (ARRAY['a', 'A', 'é', 'e', 'z', 'Ä', 'ä', 'ß', 'ss', 'ÿ', 'Z', '', 'ab', 'æ', 'ø', 'å'])[1 + g % 16]
	   || CASE WHEN g % 3 = 0 THEN 'x' ELSE '' END AS s
FROM generate_series(1, 2000) g;
ANALYZE gs_l1;
SELECT s, count(*) FROM gs_l1 WHERE id <= 48 GROUP BY s ORDER BY s DESC LIMIT 100000;
EXPLAIN (COSTS OFF) SELECT s, id FROM gs_l1 ORDER BY s, id;
SELECT md5(string_agg(s || id, ',')) = (SELECT md5(string_agg(s || id, ',' ORDER BY s, id)) FROM gs_l1) AS c_same
FROM (SELECT s, id FROM gs_l1 ORDER BY s, id) x;
SELECT md5(string_agg(s || id, ',')) = (SELECT md5(string_agg(s || id, ',' ORDER BY s DESC, id)) FROM gs_l1) AS c_desc_same
FROM (SELECT s, id FROM gs_l1 ORDER BY s DESC, id) x;
SELECT md5(string_agg(s || id, ',')) = (SELECT md5(string_agg(s || id, ',' ORDER BY s COLLATE "und-x-icu", id)) FROM gs_l1) AS icu_same
FROM (SELECT s, id FROM gs_l1 ORDER BY s COLLATE "und-x-icu", id) x;

\c gs_ascii
CREATE EXTENSION gpusort;
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';
CREATE TABLE gs_sa AS
SELECT g AS id, chr(32 + (g * 37) % 95) || chr(128 + (g * 11) % 128) || chr(32 + g % 95) AS s
FROM generate_series(1, 3000) g;
ANALYZE gs_sa;
EXPLAIN (COSTS OFF) SELECT s, id FROM gs_sa ORDER BY s DESC, id;
SELECT md5(string_agg(s || id, ',')) = (SELECT md5(string_agg(s || id, ',' ORDER BY s, id)) FROM gs_sa) AS bytes_same
FROM (SELECT s, id FROM gs_sa ORDER BY s, id) x;
SELECT md5(string_agg(s || id, ',')) = (SELECT md5(string_agg(s || id, ',' ORDER BY s DESC, id)) FROM gs_sa) AS bytes_desc_same
FROM (SELECT s, id FROM gs_sa ORDER BY s DESC, id) x;
SELECT convert_to(s, 'SQL_ASCII') AS bytes FROM gs_sa WHERE id <= 6 ORDER BY s, id;

\c contrib_regression
DROP DATABASE gs_latin1;
DROP DATABASE gs_ascii;
