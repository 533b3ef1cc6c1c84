--
-- sort_fuzz: random ORDER BY clauses (1 to 4 keys over every encoded type,
-- random directions and NULL orders) under random key widths, work_mem
-- and GPU budgets, each compared with PostgreSQL's own answer.  The seed
-- is fixed, so the queries are the same on every run; any failure is
-- printed with the settings that produced it.
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

SELECT setseed(0.15);
CREATE TABLE gs_fz AS
SELECT g AS id,
	   CASE WHEN r1 < 0.05 THEN NULL ELSE (r2 * 7)::int2 - 3 END AS i2,
	   CASE WHEN r1 < 0.05 THEN NULL WHEN r3 < 0.02 THEN -2147483648 ELSE (r3 * 9)::int4 END AS i4,
	   CASE WHEN r2 < 0.05 THEN NULL WHEN r1 > 0.98 THEN 9223372036854775807 ELSE (r1 * 5)::int8 * 1000000007 END AS i8,
	   CASE WHEN r3 < 0.05 THEN NULL ELSE ((r2 * 3)::int8 * 1073741824 + (r1 * 2)::int)::oid END AS o,
	   CASE WHEN r1 < 0.1 THEN NULL ELSE r3 < 0.5 END AS b,
	   CASE WHEN r2 < 0.05 THEN NULL WHEN r3 < 0.03 THEN 'NaN' WHEN r3 > 0.97 THEN '-0' ELSE round((r1 * 6)::numeric, 1) END::float4 AS f4,
	   CASE WHEN r3 < 0.05 THEN NULL WHEN r1 < 0.03 THEN 'NaN' WHEN r1 > 0.97 THEN '-Infinity' ELSE round((r2 * 6)::numeric, 1) END::float8 AS f8,
	   CASE WHEN r1 < 0.05 THEN NULL WHEN r2 < 0.03 THEN 'NaN' ELSE round((r3 * 3)::numeric, (r1 * 3)::int) * 1000000000000 END AS n,
	   CASE WHEN r2 < 0.05 THEN NULL ELSE '2000-01-01'::date + (r3 * 5)::int END AS d,
	   CASE WHEN r3 < 0.05 THEN NULL ELSE '00:00'::time + (r1 * 4)::int * interval '6 hours' END AS t,
	   CASE WHEN r1 < 0.05 THEN NULL ELSE '2000-01-01'::timestamp + (r2 * 4)::int * interval '1 usec' END AS ts,
	   CASE WHEN r2 < 0.05 THEN NULL ELSE '2000-01-01 00:00+00'::timestamptz + (r3 * 4)::int * interval '1 year' END AS tstz,
	   CASE WHEN r3 < 0.05 THEN NULL ELSE (r1 * 3)::int * interval '1 mon' + (r2 * 3)::int * interval '10 days' END AS iv,
	   CASE WHEN r1 < 0.05 THEN NULL ELSE ('0000000' || (r2 * 3)::int || '-0000-0000-0000-00000000000' || (r3 * 3)::int)::uuid END AS u,
	   CASE WHEN r2 < 0.05 THEN NULL ELSE (ARRAY['', 'a', 'A', 'ab', 'b', 'é', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab'])[1 + (r3 * 7)::int] END COLLATE "C" AS tx,
	   CASE WHEN r3 < 0.05 THEN NULL ELSE (ARRAY['', 'a', 'A', 'ab', 'b', 'é', 'e' || U&'\0301', 'ss', 'ß'])[1 + (r1 * 8)::int] END COLLATE "und-x-icu" AS ti,
	   CASE WHEN r1 < 0.05 THEN NULL ELSE (ARRAY['', 'a', 'A', 'ab', 'b', 'é', 'a b', 'ab '])[1 + (r2 * 7)::int] END COLLATE "C.utf8" AS tl,
	   CASE WHEN r2 < 0.05 THEN NULL ELSE (ARRAY['a', 'a ', 'a' || chr(9), 'b', ''])[1 + (r1 * 4)::int] END::bpchar(3) AS c,
	   CASE WHEN r3 < 0.05 THEN NULL ELSE (ARRAY['x', 'y', 'xy', 'xyz'])[1 + (r2 * 3)::int] END::name AS nm
FROM (SELECT g, random() AS r1, random() AS r2, random() AS r3 FROM generate_series(1, 3000) g) s;
ANALYZE gs_fz;

CREATE TEMP TABLE gs_fz_results (q text, settings text, rows bigint, same boolean, gpusort int);

DO $$
DECLARE
	cols text[] := ARRAY['i2', 'i4', 'i8', 'o', 'b', 'f4', 'f8', 'n', 'd', 't', 'ts',
						 'tstz', 'iv', 'u', 'tx', 'ti', 'tl', 'c', 'nm'];
	widths int[] := ARRAY[4, 8, 16, 24, 32];
	i int;
	j int;
	nkeys int;
	keys text;
	sel text;
	c text;
	q text;
	settings text;
	r record;
BEGIN
	PERFORM setseed(0.25);
	FOR i IN 1..300 LOOP
		nkeys := 1 + (random() * 3)::int;
		keys := '';
		sel := '';
		FOR j IN 1..nkeys LOOP
			c := cols[1 + (random() * (array_length(cols, 1) - 1))::int];
			IF random() < 0.15 THEN
				c := c || '::text COLLATE "C"';
			END IF;
			keys := keys || c
				|| CASE WHEN random() < 0.5 THEN ' DESC' ELSE '' END
				|| CASE WHEN random() < 0.33 THEN ' NULLS FIRST'
						WHEN random() < 0.5 THEN ' NULLS LAST' ELSE '' END
				|| ', ';
			sel := sel || c || ' AS k' || j || ', ';
		END LOOP;
		q := 'SELECT ' || sel || 'id FROM gs_fz ORDER BY ' || keys || 'id'
			|| CASE WHEN random() < 0.2 THEN ' LIMIT ' || (random() * 200)::int
					WHEN random() < 0.1 THEN ' OFFSET 2990' ELSE '' END;
		settings := format('max_key_bytes=%s work_mem=%s gpu_memory_limit=%s topn_limit=%s',
						   widths[1 + (random() * 4)::int],
						   CASE WHEN random() < 0.3 THEN '64kB' ELSE '4MB' END,
						   CASE WHEN random() < 0.3 THEN '64kB' ELSE '0' END,
						   CASE WHEN random() < 0.5 THEN '0' ELSE '10000' END);
		PERFORM set_config('gpusort.max_key_bytes', split_part(split_part(settings, ' ', 1), '=', 2), false);
		PERFORM set_config('work_mem', split_part(split_part(settings, ' ', 2), '=', 2), false);
		PERFORM set_config('gpusort.gpu_memory_limit', split_part(split_part(settings, ' ', 3), '=', 2), false);
		PERFORM set_config('gpusort.topn_limit', split_part(split_part(settings, ' ', 4), '=', 2), false);
		BEGIN
			r := gs_check(q);
			INSERT INTO gs_fz_results VALUES (q, settings, r.rows, r.same, r.gpusort);
		EXCEPTION WHEN others THEN
			INSERT INTO gs_fz_results VALUES (q, settings || ' ERROR: ' || SQLERRM, NULL, false, NULL);
		END;
	END LOOP;
END
$$;
RESET gpusort.max_key_bytes;
SET work_mem = '4MB';
RESET gpusort.gpu_memory_limit;
RESET gpusort.topn_limit;

-- how many queries ran, and how many of them used a GpuSort
SELECT count(*) AS queries, count(*) FILTER (WHERE gpusort > 0) AS with_gpusort,
	   count(*) FILTER (WHERE same) AS same_answer
FROM gs_fz_results;
-- failures (none expected)
SELECT q, settings FROM gs_fz_results WHERE NOT same;

-- merge joins on one or two random columns (many duplicates on both sides,
-- so the inner sort is marked and restored), with and without Materialize
CREATE TEMP TABLE gs_fzj_results (q text, settings text, rows bigint, same boolean, gpusort int);
SET enable_hashjoin = off;
SET enable_nestloop = off;
DO $$
DECLARE
	cols text[] := ARRAY['i2', 'i4', 'i8', 'o', 'b', 'f4', 'f8', 'n', 'd', 't', 'ts',
						 'tstz', 'iv', 'u', 'tx', 'ti', 'c', 'nm'];
	c1 text;
	c2 text;
	q text;
	settings text;
	r record;
BEGIN
	PERFORM setseed(0.35);
	FOR i IN 1..40 LOOP
		c1 := cols[1 + (random() * (array_length(cols, 1) - 1))::int];
		c2 := cols[1 + (random() * (array_length(cols, 1) - 1))::int];
		q := format('SELECT count(*), sum(a.id::int8 * 3 + b.id), min(a.id * 10000 + b.id) FROM gs_fz a JOIN gs_fz b ON a.%s = b.%s%s WHERE a.id %% %s = 0',
					c1, c1,
					CASE WHEN random() < 0.5 THEN format(' AND a.%s = b.%s', c2, c2) ELSE '' END,
					1 + (random() * 4)::int);
		settings := format('work_mem=%s enable_material=%s max_key_bytes=%s',
						   CASE WHEN random() < 0.4 THEN '64kB' ELSE '4MB' END,
						   CASE WHEN random() < 0.5 THEN 'off' ELSE 'on' END,
						   (ARRAY[4, 8, 16, 24, 32])[1 + (random() * 4)::int]);
		PERFORM set_config('work_mem', split_part(split_part(settings, ' ', 1), '=', 2), false);
		PERFORM set_config('enable_material', split_part(split_part(settings, ' ', 2), '=', 2), false);
		PERFORM set_config('gpusort.max_key_bytes', split_part(split_part(settings, ' ', 3), '=', 2), false);
		BEGIN
			r := gs_check(q);
			INSERT INTO gs_fzj_results VALUES (q, settings, r.rows, r.same, r.gpusort);
		EXCEPTION WHEN others THEN
			INSERT INTO gs_fzj_results VALUES (q, settings || ' ERROR: ' || SQLERRM, NULL, false, NULL);
		END;
	END LOOP;
END
$$;
RESET enable_hashjoin;
RESET enable_nestloop;
RESET enable_material;
SET work_mem = '4MB';
RESET gpusort.max_key_bytes;
SELECT count(*) AS joins, count(*) FILTER (WHERE gpusort >= 2) AS both_sides_gpusort,
	   count(*) FILTER (WHERE same) AS same_answer
FROM gs_fzj_results;
SELECT q, settings FROM gs_fzj_results WHERE NOT same;
