--
-- sort_workmem: inputs larger than work_mem (tiny work_mem): results, the
-- EXPLAIN ANALYZE note, and random access over spilled results (backward
-- scan, mark/restore, rescan)
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE TABLE gs_big AS
SELECT g AS id, (g * 7919) % 50021 AS k, md5(g::text) COLLATE "C" AS t,
	   CASE WHEN g % 100 = 0 THEN NULL ELSE ((g * 31) % 997)::float8 / 3 END AS f,
	   '2000-01-01'::timestamptz + g * interval '1 min' AS ts,
	   (g % 97)::numeric / 7 AS n, md5((g % 5)::text)::uuid AS u
FROM generate_series(1, 50000) g;
ANALYZE gs_big;

SET work_mem = '64kB';
SELECT * FROM gs_check('SELECT id, k FROM gs_big ORDER BY k, id');
SELECT * FROM gs_check('SELECT * FROM gs_big ORDER BY t DESC');
SELECT * FROM gs_check_cols('gs_big', ARRAY['k', 't', 'f', 'u']);
SELECT * FROM gs_check('SELECT f, n, u FROM gs_big ORDER BY f NULLS FIRST, n DESC, u');
SELECT id, k FROM gs_big ORDER BY k DESC, id LIMIT 3;
-- what EXPLAIN ANALYZE says (numbers masked)
SELECT * FROM gs_explain_analyze('SELECT id, k FROM gs_big ORDER BY k, id');

-- many runs and more than one merge pass really happen
CREATE FUNCTION gs_sort_counts(q text, OUT chunks int, OUT runs int, OUT passes int)
LANGUAGE plpgsql AS $fn$
DECLARE
	l text;
	m text[];
BEGIN
	chunks := 1;
	runs := 0;
	passes := 0;
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q
	LOOP
		m := regexp_match(l, 'Chunks: (\d+)\s+Runs: (\d+)\s+Merge Passes: (\d+)');
		IF m IS NOT NULL THEN
			chunks := m[1]::int;
			runs := m[2]::int;
			passes := m[3]::int;
		END IF;
	END LOOP;
END
$fn$;
SELECT runs > 10 AS many_runs, passes > 1 AS multi_pass
FROM gs_sort_counts('SELECT id, k FROM gs_big ORDER BY k, id');
SELECT runs > 10 AS many_runs, passes > 1 AS multi_pass
FROM gs_sort_counts('SELECT id, t FROM gs_big ORDER BY t');

-- backward scan over a spilled result
BEGIN;
DECLARE gs_bc SCROLL CURSOR FOR SELECT id, k FROM gs_big ORDER BY k, id;
FETCH LAST FROM gs_bc;
FETCH BACKWARD 3 FROM gs_bc;
FETCH ABSOLUTE 25000 FROM gs_bc;
FETCH RELATIVE -2 FROM gs_bc;
FETCH FIRST FROM gs_bc;
COMMIT;
SELECT * FROM gs_cursor_walk('SELECT id, k FROM gs_big ORDER BY k, id', 300, 0.6);
SELECT * FROM gs_cursor_walk('SELECT t FROM gs_big ORDER BY t DESC', 300, 0.7);

-- mark/restore over a spilled inner side with duplicates
SET enable_hashjoin = off;
SET enable_nestloop = off;
SET enable_material = off;
SELECT * FROM gs_check('SELECT count(*), sum(a.id), sum(b.id) FROM gs_big a JOIN gs_big b ON a.k % 500 = b.id % 500 WHERE a.id <= 2000');
EXPLAIN (COSTS OFF) SELECT count(*) FROM gs_big a JOIN gs_big b ON a.k % 500 = b.id % 500 WHERE a.id <= 2000;
SELECT * FROM gs_check('SELECT count(*), sum(a.id::int8 * b.id) FROM gs_big a JOIN gs_big b ON a.t = b.t AND a.k % 3 = b.k % 3 WHERE a.id % 7 = 0');
SELECT * FROM gs_check('SELECT count(*), sum(b.id) FROM gs_big a LEFT JOIN gs_big b ON a.u = b.u AND b.id % 50 = 0 WHERE a.id <= 300');
RESET enable_material;
RESET enable_hashjoin;
RESET enable_nestloop;

-- rescan of a spilled sort: a nested loop without parameters rewinds its
-- inner sort; a sub plan with a parameter sorts again
CREATE TABLE gs_few AS SELECT g AS o FROM generate_series(1, 4) g;
ANALYZE gs_few;
SET gpusort.topn_limit = 0;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
EXPLAIN (COSTS OFF)
SELECT f.o, s.id FROM gs_few f JOIN (SELECT k, id FROM gs_big ORDER BY t LIMIT 30000) s ON s.k % 1000 = f.o;
SELECT * FROM gs_check('SELECT f.o, s.id FROM gs_few f JOIN (SELECT k, id FROM gs_big ORDER BY t LIMIT 30000) s ON s.k % 1000 = f.o');
SELECT * FROM gs_check('SELECT f.o, s.id FROM gs_few f JOIN (SELECT k, id FROM gs_big ORDER BY k DESC, id LIMIT 40000) s ON s.id % 1000 = f.o');
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
SELECT * FROM gs_check('SELECT o, (SELECT count(*) FROM (SELECT k FROM gs_big ORDER BY k DESC, id LIMIT 30000) s WHERE s.k > o * 1000) FROM generate_series(1, 10) o');
SELECT * FROM gs_check('SELECT o, (SELECT max(id) FROM (SELECT id FROM gs_big WHERE id % 20 = o ORDER BY t LIMIT 10) s) FROM generate_series(0, 3) o');
RESET gpusort.topn_limit;

-- many chunks: a tiny GPU memory budget (also applies to the CPU engine),
-- with and without spilling
SET gpusort.gpu_memory_limit = '64kB';
SELECT * FROM gs_check('SELECT id, k FROM gs_big ORDER BY k, id');
SELECT * FROM gs_check_cols('gs_big', ARRAY['f', 'n']);
SET work_mem = '64MB';
SELECT * FROM gs_check('SELECT id, k FROM gs_big ORDER BY k DESC, id');
SELECT * FROM gs_check('SELECT t, id FROM gs_big ORDER BY t COLLATE "und-x-icu" DESC, id');
SELECT * FROM gs_explain_analyze('SELECT id, k FROM gs_big ORDER BY k, id');
SELECT chunks > 10 AS many_chunks, runs AS runs_on_disk
FROM gs_sort_counts('SELECT id, k FROM gs_big ORDER BY k, id');
BEGIN;
DECLARE gs_cc SCROLL CURSOR FOR SELECT id, k FROM gs_big ORDER BY k, id;
FETCH LAST FROM gs_cc;
FETCH ABSOLUTE 30000 FROM gs_cc;
FETCH BACKWARD 2 FROM gs_cc;
COMMIT;
SELECT * FROM gs_cursor_walk('SELECT t FROM gs_big ORDER BY t', 300, 0.8);
SET work_mem = '64kB';
-- many chunks and spilled runs at once
SELECT * FROM gs_cursor_walk('SELECT t, id FROM gs_big ORDER BY t COLLATE "und-x-icu" DESC, id', 300, 0.9);
SELECT * FROM gs_check('SELECT f, id FROM gs_big ORDER BY f NULLS FIRST, id DESC');
RESET gpusort.gpu_memory_limit;

-- other shapes, still spilled
SET enable_hashagg = off;
SELECT * FROM gs_check('SELECT k % 1000, count(*) FROM gs_big GROUP BY k % 1000');
SELECT * FROM gs_check('SELECT DISTINCT u, n FROM gs_big');
RESET enable_hashagg;
SELECT * FROM gs_check('SELECT id, rank() OVER (PARTITION BY u ORDER BY f DESC NULLS LAST) FROM gs_big ORDER BY id');

-- the smallest work_mem
SET work_mem = '64kB';
SET gpusort.max_key_bytes = 4;
SELECT * FROM gs_check('SELECT t, id FROM gs_big ORDER BY t, id');
RESET gpusort.max_key_bytes;
SET work_mem = '4MB';
-- just under and just over work_mem
SET work_mem = '1MB';
SELECT * FROM gs_check('SELECT id, k FROM gs_big WHERE id <= 10000 ORDER BY k, id');
SELECT * FROM gs_check('SELECT id, k FROM gs_big WHERE id <= 30000 ORDER BY k, id');
SET work_mem = '4MB';

-- single rows larger than work_mem (300 kB values, not compressible)
CREATE TABLE gs_huge (id int, t text COLLATE "C");
ALTER TABLE gs_huge ALTER COLUMN t SET STORAGE external;
INSERT INTO gs_huge
SELECT g, (SELECT string_agg(md5((g * 100000 + i)::text), '') FROM generate_series(1, 10000) i)
FROM generate_series(1, 12) g;
SET work_mem = '64kB';
SELECT * FROM gs_check('SELECT id, md5(t) FROM gs_huge ORDER BY t DESC');
SELECT * FROM gs_check('SELECT t, id FROM gs_huge ORDER BY t');
SELECT id, length(t) FROM gs_huge ORDER BY t LIMIT 100000;

-- a cursor held past its transaction over a spilled sort
BEGIN;
DECLARE gs_hc SCROLL CURSOR WITH HOLD FOR SELECT id, k FROM gs_big ORDER BY k DESC, id;
FETCH 2 FROM gs_hc;
COMMIT;
FETCH ABSOLUTE 40000 FROM gs_hc;
FETCH BACKWARD 1 FROM gs_hc;
CLOSE gs_hc;
SET work_mem = '4MB';

-- temp_file_limit: PostgreSQL's own error, and no temporary file is left
-- (the error is shown without quotes: 18 quotes the parameter's name)
SET work_mem = '64kB';
SET temp_file_limit = '1MB';
SELECT gs_error_unquoted('SELECT id FROM gs_big ORDER BY t OFFSET 50000');
SET gpusort.enabled = off;
SELECT gs_error_unquoted('SELECT id FROM gs_big ORDER BY t OFFSET 50000');
RESET gpusort.enabled;
RESET temp_file_limit;
SET work_mem = '4MB';
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

-- keys at the very top of the key space (int8's maximum encodes as all
-- ones, the word an exhausted run compares as) and many duplicates, in many
-- runs and chunks, both directions, with a tie-breaking second column
CREATE TABLE gs_edge AS
SELECT g AS id,
	   CASE g % 4 WHEN 0 THEN 9223372036854775807 WHEN 1 THEN -9223372036854775808
				  WHEN 2 THEN 9223372036854775806 ELSE (g * 7919) % 13 END::int8 AS k,
	   md5(g::text) COLLATE "C" AS t
FROM generate_series(1, 40000) g;
SET work_mem = '64kB';
SELECT * FROM gs_check('SELECT id, k FROM gs_edge ORDER BY k, id');
SELECT * FROM gs_check('SELECT id, k FROM gs_edge ORDER BY k DESC, t');
SELECT * FROM gs_check('SELECT k, t FROM gs_edge ORDER BY k NULLS FIRST, t DESC');
SET work_mem = '4MB';
SET gpusort.gpu_memory_limit = '64kB';
SELECT * FROM gs_check('SELECT id, k FROM gs_edge ORDER BY k, id');
SELECT * FROM gs_check('SELECT id, k FROM gs_edge ORDER BY k DESC, t');
RESET gpusort.gpu_memory_limit;

-- the final merge on threads (keys that alone decide the order, with no
-- row encoded lossily): one thread (merged in the backend instead), two and
-- three threads (runs split unevenly), equal keys spread over many runs and
-- threads; and whether the threads were used
SET work_mem = '64kB';
CREATE FUNCTION gs_merge_threads(q text) RETURNS boolean
LANGUAGE sql AS $fn$
	SELECT count(*) > 0 FROM gs_explain_analyze(q) l WHERE l ~ 'Merge Threads'
$fn$;
SET gpusort.cpu_threads = 1;
SELECT * FROM gs_check('SELECT k, id FROM gs_big ORDER BY k, id');
SELECT gs_merge_threads('SELECT k, id FROM gs_big ORDER BY k, id');
SET gpusort.cpu_threads = 2;
SELECT * FROM gs_check('SELECT k % 100 FROM gs_big ORDER BY 1 DESC');
SELECT gs_merge_threads('SELECT k % 100 FROM gs_big ORDER BY 1 DESC');
SET gpusort.cpu_threads = 3;
SELECT * FROM gs_check('SELECT k % 7, id FROM gs_big ORDER BY 1, 2 DESC');
RESET gpusort.cpu_threads;
SELECT * FROM gs_check('SELECT ts, id FROM gs_big ORDER BY ts DESC, id');
SELECT * FROM gs_check('SELECT t, id FROM gs_big ORDER BY t, id');
-- keys that may be encoded lossily (int8's extremes share a key with their
-- neighbours) are merged in the backend, with PostgreSQL's comparators
SELECT * FROM gs_check('SELECT k FROM gs_edge ORDER BY k');
SELECT gs_merge_threads('SELECT k FROM gs_edge ORDER BY k');
-- rows of up to 3.8 kB: a few to a stream block at this work_mem
SELECT * FROM gs_check($q$SELECT g, md5(x), length(x) FROM (SELECT g, repeat(md5(g::text), 1 + g % 120) AS x FROM generate_series(1, 3000) g) s ORDER BY g DESC$q$);
SELECT gs_merge_threads($q$SELECT g, x FROM (SELECT g, repeat(md5(g::text), 1 + g % 120) AS x FROM generate_series(1, 3000) g) s ORDER BY g DESC$q$);
-- and one of 38 kB among them, too large for a block: merged in the backend
SELECT * FROM gs_check($q$SELECT g, md5(x), length(x) FROM (SELECT g, repeat(md5(g::text), CASE WHEN g = 1500 THEN 1200 ELSE 1 + g % 120 END) AS x FROM generate_series(1, 3000) g) s ORDER BY g$q$);
SELECT gs_merge_threads($q$SELECT g, x FROM (SELECT g, repeat(md5(g::text), CASE WHEN g = 1500 THEN 1200 ELSE 1 + g % 120 END) AS x FROM generate_series(1, 3000) g) s ORDER BY g$q$);
SET work_mem = '4MB';
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

-- chunks of an in-memory sort merged on threads (exact keys, from 64k
-- rows): unique keys, many duplicates, both directions, two columns, an
-- odd thread count, and one thread (merged in the backend) for comparison
SET work_mem = '64MB';
SET gpusort.gpu_memory_limit = '256kB';
SELECT chunks > 10 AS many_chunks, runs AS runs
FROM gs_sort_counts('SELECT g FROM generate_series(1, 200000) g ORDER BY (g::int8 * 7919) % 200003');
SELECT * FROM gs_check('SELECT g FROM generate_series(1, 200000) g ORDER BY (g::int8 * 7919) % 200003');
SELECT * FROM gs_check('SELECT g % 1000 FROM generate_series(1, 200000) g ORDER BY 1 DESC');
SELECT * FROM gs_check('SELECT g % 7, g FROM generate_series(1, 200000) g ORDER BY 1, 2 DESC');
SET gpusort.cpu_threads = 3;
SELECT * FROM gs_check('SELECT (g * 31) % 5003 FROM generate_series(1, 200000) g ORDER BY 1');
SET gpusort.cpu_threads = 1;
SELECT * FROM gs_check('SELECT (g * 31) % 5003 FROM generate_series(1, 200000) g ORDER BY 1');
RESET gpusort.cpu_threads;
RESET gpusort.gpu_memory_limit;
SET work_mem = '4MB';

-- the same merge of a batch's chunks before it is written as a run (a GPU
-- budget smaller than a batch, batches of over 64k rows)
SET work_mem = '16MB';
SET gpusort.gpu_memory_limit = '512kB';
SELECT chunks > runs AS chunked_batches, runs > 2 AS many_runs
FROM gs_sort_counts('SELECT g FROM generate_series(1, 500000) g ORDER BY (g::int8 * 7919) % 500009');
SELECT * FROM gs_check('SELECT g FROM generate_series(1, 500000) g ORDER BY (g::int8 * 7919) % 500009');
SELECT * FROM gs_check('SELECT g % 1000, g FROM generate_series(1, 500000) g ORDER BY 1 DESC, 2');
RESET gpusort.gpu_memory_limit;
SET work_mem = '4MB';

-- keys left out of runs and derived again from the rows as they are read
-- (keys_derive.c): every kind that derives (fixed-width, numeric, C text,
-- bpchar, name) and those that keep their keys (interval), with NULLs,
-- NaN, -0, infinities, extreme integers, empty and long text (compressed
-- or out of line: those rows keep their keys), after a dropped column and
-- a column added with a default (heap rows without it keep their keys);
-- merged on threads and in the backend
CREATE TABLE gs_derive (id int, dropme text, i2 int2, i4 int4, i8 int8,
	f4 float4, f8 float8, d date, ts timestamp, b bool, u uuid,
	iv interval, n numeric, t text COLLATE "C", bp char(5) COLLATE "C",
	nm name);
ALTER TABLE gs_derive ALTER COLUMN t SET STORAGE EXTENDED;
INSERT INTO gs_derive
SELECT g, 'x',
	   CASE WHEN g % 50 = 0 THEN NULL WHEN g % 7 = 0 THEN -32768 WHEN g % 11 = 0 THEN 32767 ELSE (g * 37) % 1000 END,
	   CASE WHEN g % 53 = 0 THEN NULL WHEN g % 13 = 0 THEN -2147483648 ELSE (g * 7919) % 100003 - 50000 END,
	   CASE WHEN g % 59 = 0 THEN NULL WHEN g % 17 = 0 THEN -9223372036854775808
			WHEN g % 19 = 0 THEN 9223372036854775807 ELSE (g::int8 * 2654435761) % 1000000007 - 500000000 END,
	   (ARRAY['NaN', '-0', '0', 'Infinity', '-Infinity', NULL, '1.5', '-2.25'])[1 + g % 8]::float4,
	   CASE WHEN g % 9 = 0 THEN 'NaN'::float8 WHEN g % 9 = 1 THEN '-0'::float8
			WHEN g % 9 = 2 THEN 'Infinity' WHEN g % 9 = 3 THEN '-Infinity'
			WHEN g % 9 = 4 THEN NULL ELSE ((g * 31) % 997)::float8 / 7 - 70 END,
	   CASE WHEN g % 61 = 0 THEN 'infinity'::date WHEN g % 67 = 0 THEN '-infinity'::date
			WHEN g % 71 = 0 THEN NULL ELSE '2000-01-01'::date + (g * 13) % 20000 - 10000 END,
	   CASE WHEN g % 73 = 0 THEN 'infinity'::timestamp WHEN g % 79 = 0 THEN NULL
			ELSE '2000-01-01'::timestamp + ((g * 7) % 100000) * interval '1 min' END,
	   CASE WHEN g % 3 = 0 THEN NULL ELSE g % 2 = 0 END,
	   CASE WHEN g % 83 = 0 THEN NULL ELSE md5((g % 1000)::text)::uuid END,
	   CASE WHEN g % 89 = 0 THEN NULL ELSE ((g * 17) % 5000) * interval '1 hour' END,
	   CASE WHEN g % 97 = 0 THEN 'NaN'::numeric WHEN g % 101 = 0 THEN NULL
			WHEN g % 103 = 0 THEN 'Infinity'::numeric WHEN g % 107 = 0 THEN '-Infinity'::numeric
			ELSE ((g * 7919) % 100003 - 50000)::numeric / 37 END,
	   CASE WHEN g % 43 = 0 THEN NULL WHEN g % 41 = 0 THEN ''
			WHEN g % 997 = 0 THEN repeat(md5(g::text), 200)
			WHEN g % 991 = 0 THEN (SELECT string_agg(md5((g * 100 + i)::text), '') FROM generate_series(1, 150) i)
			ELSE md5((g % 5000)::text) END,
	   CASE WHEN g % 47 = 0 THEN NULL ELSE substr(md5(g::text), 1, g % 6) END,
	   CASE WHEN g % 31 = 0 THEN NULL ELSE md5((g % 3000)::text)::name END
FROM generate_series(1, 30000) g;
ALTER TABLE gs_derive DROP COLUMN dropme;
ALTER TABLE gs_derive ADD COLUMN late int8 DEFAULT 42;
INSERT INTO gs_derive (id, i8, t, late)
SELECT g, g % 13, md5(g::text), CASE WHEN g % 3 = 0 THEN NULL ELSE g % 5 END
FROM generate_series(30001, 32000) g;
ANALYZE gs_derive;
SET work_mem = '64kB';
SELECT * FROM gs_check_cols('gs_derive',
	ARRAY['i2', 'i4', 'i8', 'f4', 'f8', 'd', 'ts', 'b', 'u', 'iv', 'n', 't',
		  'bp', 'nm', 'late']);
SELECT * FROM gs_check('SELECT * FROM gs_derive ORDER BY i8, id');
SELECT * FROM gs_check('SELECT * FROM gs_derive ORDER BY t DESC NULLS LAST, id');
SELECT * FROM gs_check('SELECT id, b, i2, f4 FROM gs_derive ORDER BY b NULLS FIRST, i2 DESC, f4, id');
SELECT * FROM gs_check('SELECT id, d, bp, n FROM gs_derive ORDER BY d DESC, bp, n NULLS FIRST, id');
SELECT * FROM gs_check('SELECT id, late, i4 FROM gs_derive ORDER BY late, i4 DESC, id');
-- a projection's rows of fixed-width columns only, formed by their layout
-- (by value and by reference, every alignment), NULLs among them or not
SELECT * FROM gs_check('SELECT id, i2, nm, b, u, f4, iv, i8, d FROM gs_derive ORDER BY i2, u, id');
SELECT * FROM gs_check('SELECT nm, i2, ts, b, f8, id FROM gs_derive WHERE nm IS NOT NULL ORDER BY nm DESC, id');
SELECT * FROM gs_check($q$SELECT g % 97 AS k, g, g::int2 AS a, (g % 200 - 100)::"char" AS c,
	'00:00+01'::timetz + g * interval '1 min' AS tz,
	('08:00:2b:01:02:' || lpad(to_hex(g % 256), 2, '0'))::macaddr AS m,
	point(g, -g) AS p, ('(' || g || ',' || g % 7 || ')')::tid AS t,
	g * 1.5::float4 AS f, (g * 100)::money AS mo
	FROM generate_series(1, 20000) g ORDER BY k, g DESC$q$);
-- keys of one text column in C order after fixed-width columns, derived
-- from the rows in place: empty strings, prefixes around the key's width,
-- compressed and out-of-line values (those keep their keys), NULLs in the
-- key and beside it; from the table's rows and from a projection's, both
-- directions, and with an 8-byte key
CREATE TABLE gs_dtext (id int4, n int8, t text COLLATE "C");
ALTER TABLE gs_dtext ALTER COLUMN t SET STORAGE EXTENDED;
INSERT INTO gs_dtext
SELECT g, CASE WHEN g % 13 = 0 THEN NULL ELSE g * 7 END,
	   CASE WHEN g % 101 = 0 THEN NULL WHEN g % 103 = 0 THEN ''
			WHEN g % 997 = 0 THEN repeat(md5(g::text), 300)
			WHEN g % 991 = 0 THEN (SELECT string_agg(md5((g * 100 + i)::text), '') FROM generate_series(1, 150) i)
			WHEN g % 7 = 0 THEN repeat('x', g % 41) || (g % 10)::text
			WHEN g % 11 = 0 THEN repeat('~', g % 37)
			ELSE md5((g % 5000)::text) END
FROM generate_series(1, 30000) g;
ANALYZE gs_dtext;
SELECT * FROM gs_check('SELECT * FROM gs_dtext ORDER BY t, id');
SELECT * FROM gs_check('SELECT * FROM gs_dtext ORDER BY t DESC NULLS LAST, id');
SELECT * FROM gs_check('SELECT t, id FROM gs_dtext ORDER BY t NULLS FIRST, id DESC');
SELECT * FROM gs_check('SELECT n, t FROM gs_dtext ORDER BY t DESC, n');
SET gpusort.max_key_bytes = 8;
SELECT * FROM gs_check('SELECT * FROM gs_dtext ORDER BY t, id');
SELECT * FROM gs_check('SELECT t, id FROM gs_dtext ORDER BY t DESC, id');
RESET gpusort.max_key_bytes;
DROP TABLE gs_dtext;
SELECT * FROM gs_check('SELECT DISTINCT i8 FROM gs_derive');
SELECT * FROM gs_check('SELECT id, t, row_number() OVER (ORDER BY t, id) FROM gs_derive');
SET gpusort.cpu_threads = 1;
SELECT * FROM gs_check('SELECT id, i8, t FROM gs_derive ORDER BY i8 DESC, id');
SELECT * FROM gs_check('SELECT id, n, t FROM gs_derive ORDER BY n, t, id');
RESET gpusort.cpu_threads;
SET work_mem = '4MB';
DROP TABLE gs_derive;
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();

-- and the headers of tuples without NULLs, left out with their keys:
-- tuples from a table's pages (with hint bits, frozen, updated) and from
-- projections, in runs merged on threads and in the backend
CREATE TABLE gs_hdr AS
SELECT g AS id, (g * 7919) % 10007 AS k, md5(g::text) COLLATE "C" AS t
FROM generate_series(1, 20000) g;
SET work_mem = '64kB';
SET enable_hashagg = off;
SELECT * FROM gs_check('SELECT * FROM gs_hdr ORDER BY k, id');
SELECT * FROM gs_check('SELECT DISTINCT k FROM gs_hdr');
VACUUM (FREEZE) gs_hdr;
SELECT * FROM gs_check('SELECT * FROM gs_hdr ORDER BY t');
UPDATE gs_hdr SET k = k + 1 WHERE id % 3 = 0;
SELECT * FROM gs_check('SELECT * FROM gs_hdr ORDER BY k, id');
SELECT * FROM gs_check('SELECT k * 2, id::int8 FROM gs_hdr ORDER BY 1, 2');
SET gpusort.cpu_threads = 1;
SELECT * FROM gs_check('SELECT * FROM gs_hdr ORDER BY t DESC');
SELECT * FROM gs_check('SELECT DISTINCT k::int8 FROM gs_hdr');
RESET gpusort.cpu_threads;
RESET enable_hashagg;
-- text keys after a column whose width leaves them unaligned, with 4-byte
-- varlena headers (aligned as the row is read) and short ones
CREATE TABLE gs_hdr_v AS
SELECT (g % 7)::int2 AS s, repeat(chr(65 + g % 26), g % 200) || md5(g::text) COLLATE "C" AS t, g
FROM generate_series(1, 20000) g;
SELECT * FROM gs_check('SELECT * FROM gs_hdr_v ORDER BY t, g');
SELECT * FROM gs_check('SELECT s, g, t FROM gs_hdr_v ORDER BY t DESC, g');
SET gpusort.cpu_threads = 1;
SELECT * FROM gs_check('SELECT * FROM gs_hdr_v ORDER BY t, g');
RESET gpusort.cpu_threads;
SET work_mem = '4MB';
DROP TABLE gs_hdr, gs_hdr_v;
