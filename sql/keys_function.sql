--
-- keys_function: gpusort_normalized_key() must order every supported type exactly as
-- PostgreSQL's ORDER BY does, for both directions and both NULLS placements.
--
-- For each type, keys_check() stores values in a table (so long text is
-- compressed or toasted), orders them by the value and then by the key, and
-- counts, for each of the four direction/NULLS combinations:
--   misordered: a key lower than the key of the row before it (must be 0)
--   tied:       equal keys for values that differ (allowed only where the
--               encoding is a prefix or NULL shares an extreme; the executor
--               tie-breaks those rows)
--
SET client_min_messages = warning;
SET extra_float_digits = 0;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

CREATE FUNCTION keys_check(typ text, vals text, coll text DEFAULT NULL)
RETURNS TABLE(descending bool, nulls_first bool, nrows bigint,
			  key_bytes int, misordered bigint, tied bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
	c text := coalesce(' COLLATE ' || quote_ident(coll), '');
BEGIN
	DROP TABLE IF EXISTS kc_vals;
	EXECUTE format('CREATE TEMP TABLE kc_vals AS SELECT (x)::%s%s AS v FROM (%s) s(x)',
				   typ, c, vals);
	FOR descending, nulls_first IN
		SELECT d, n FROM (VALUES (false, false), (false, true),
								 (true, false), (true, true)) x(d, n)
	LOOP
		EXECUTE format($q$
			WITH o AS (
				SELECT v, gpusort_normalized_key(v, %L, %L) AS k FROM kc_vals),
			s AS (
				SELECT v, k, lag(v) OVER w AS pv, lag(k) OVER w AS pk,
					   row_number() OVER w AS rn
				FROM o WINDOW w AS (ORDER BY v %s NULLS %s, k))
			SELECT count(*), min(octet_length(k)),
				   count(*) FILTER (WHERE pk > k),
				   count(*) FILTER (WHERE rn > 1 AND pk = k
									AND pv IS DISTINCT FROM v)
			FROM s$q$,
			descending, nulls_first,
			CASE WHEN descending THEN 'DESC' ELSE 'ASC' END,
			CASE WHEN nulls_first THEN 'FIRST' ELSE 'LAST' END)
		INTO nrows, key_bytes, misordered, tied;
		RETURN NEXT;
	END LOOP;
END
$fn$;

-- integers: sign flip; NULL shares the extreme with INT_MAX / INT_MIN
SELECT * FROM keys_check('int2', $$
	SELECT x FROM generate_series(-32768, 32767, 97) x
	UNION ALL VALUES (-32768), (32767), (0), (-1), (1), (0), (NULL), (NULL)$$);
SELECT * FROM keys_check('int4', $$
	SELECT (i * 2654435761 % 4294967296) - 2147483648 FROM generate_series(1, 500) i
	UNION ALL VALUES (-2147483648), (2147483647), (0), (-1), (1), (1), (NULL), (NULL)$$);
SELECT * FROM keys_check('int8', $$
	SELECT (i::numeric * 11400714819323198485 % 18446744073709551616
			- 9223372036854775808)::int8 FROM generate_series(1, 500) i
	UNION ALL VALUES (-9223372036854775808), (9223372036854775807), (0), (-1),
					 (1), (-9223372036854775807), (NULL), (NULL)$$);
SELECT * FROM keys_check('oid', $$
	SELECT (i * 2654435761 % 4294967296) FROM generate_series(1, 300) i
	UNION ALL VALUES (0), (1), (2147483647), (2147483648), (4294967295), (NULL)$$);
SELECT * FROM keys_check('bool', $$VALUES (true), (false), (NULL), (true), (false)$$);
-- money as int8, pg_lsn unsigned, "char" as an unsigned byte
SELECT * FROM keys_check('money', $$
	SELECT (i * 2654435761 % 4294967296 - 2147483648)::numeric::money FROM generate_series(1, 200) i
	UNION ALL SELECT x::money FROM unnest('{-92233720368547758.08,92233720368547758.07,0,0.01,-0.01}'::text[]) x
	UNION ALL SELECT NULL$$);
SELECT * FROM keys_check('pg_lsn', $$
	SELECT (to_hex(i * 2654435761 % 4294967296) || '/' || to_hex(i * 40503))::pg_lsn FROM generate_series(1, 200) i
	UNION ALL SELECT x::pg_lsn FROM unnest('{0/0,0/1,7FFFFFFF/FFFFFFFF,80000000/0,FFFFFFFF/FFFFFFFF}'::text[]) x
	UNION ALL SELECT NULL$$);
SELECT * FROM keys_check('"char"', $$
	SELECT chr(i)::"char" FROM generate_series(1, 127) i
	UNION ALL SELECT x FROM unnest(ARRAY['é'::"char", '\377'::"char", '\200'::"char", ''::"char"]) x
	UNION ALL SELECT NULL$$);

-- floats: NaN above +Infinity, -0 = +0, subnormals
SELECT * FROM keys_check('float4', $$
	SELECT (i * 1.37 - 300)::float4 FROM generate_series(1, 400) i
	UNION ALL SELECT x::float4 FROM unnest('{NaN,-NaN,Infinity,-Infinity,-0,0,1.5,-1.5,
		1e-45,-1e-45,1.17549435e-38,3.4028235e38,-3.4028235e38,1e-30}'::text[]) x
	UNION ALL SELECT NULL$$);
SELECT * FROM keys_check('float8', $$
	SELECT i * 1.37 - 300 FROM generate_series(1, 400) i
	UNION ALL SELECT x::float8 FROM unnest('{NaN,-NaN,Infinity,-Infinity,-0,0,1.5,-1.5,
		4.9e-324,-4.9e-324,2.2250738585072014e-308,1.7976931348623157e308,
		-1.7976931348623157e308,1e-300}'::text[]) x
	UNION ALL SELECT NULL$$);
-- the NaN produced by arithmetic sorts with the literal NaN
SELECT gpusort_normalized_key('NaN'::float8) = gpusort_normalized_key('Infinity'::float8 - 'Infinity'::float8) AS nan_same,
	   gpusort_normalized_key('-0'::float4) = gpusort_normalized_key(0::float4) AS zero_same;

-- date / time / timestamps: infinities and the ends of the valid ranges
SELECT * FROM keys_check('date', $$
	SELECT date '2000-01-01' + i * 37 - 20000 FROM generate_series(1, 400) i
	UNION ALL SELECT x::date FROM unnest('{-infinity,infinity,4714-11-24 BC,
		5874897-12-31,1970-01-01,2000-01-01}'::text[]) x
	UNION ALL SELECT NULL$$);
SELECT * FROM keys_check('time', $$
	SELECT time '00:00' + i * interval '217.000123 seconds' FROM generate_series(1, 300) i
	UNION ALL SELECT x::time FROM unnest('{00:00,24:00,23:59:59.999999,00:00:00.000001,12:00}'::text[]) x
	UNION ALL SELECT NULL$$);
SELECT * FROM keys_check('timestamp', $$
	SELECT timestamp '2000-01-01' + i * interval '12345 minutes 0.5 seconds' - interval '50 years'
		FROM generate_series(1, 400) i
	UNION ALL SELECT x::timestamp FROM unnest('{-infinity,infinity,4714-11-24 00:00:00 BC,
		294276-12-31 23:59:59.999999,2000-01-01,1999-12-31 23:59:59.999999}'::text[]) x
	UNION ALL SELECT NULL$$);
SELECT * FROM keys_check('timestamptz', $$
	SELECT timestamptz '2000-01-01 00:00+00' + i * interval '12345 minutes 0.5 seconds'
		- interval '50 years' FROM generate_series(1, 400) i
	UNION ALL SELECT x::timestamptz FROM unnest('{-infinity,infinity,4714-11-24 00:00:00+00 BC,
		294276-12-31 23:59:59.999999+00,2000-01-01 00:00+00}'::text[]) x
	UNION ALL SELECT NULL$$);

-- interval: compared as one linear span (1 mon = 30 days, 1 day = 24 hours)
SELECT * FROM keys_check('interval', $$
	SELECT make_interval(months => (i % 7) - 3, days => (i % 11) - 5,
						 secs => (i % 13) * 3600.5 - 20000) FROM generate_series(1, 400) i
	UNION ALL SELECT x::interval FROM unnest('{1 mon,30 days,720 hours,1 day,24 hours,
		-1 mon,0,00:00:00.000001,-00:00:00.000001,
		2147483647 mons 2147483647 days 2562047788:00:54.775807,
		-2147483648 mons -2147483648 days -2562047788:00:54.775807,
		2147483647 mons,-2147483648 mons,-2147483648 days,2147483647 days}'::text[]) x
	UNION ALL SELECT NULL$$);
SELECT gpusort_normalized_key('1 mon'::interval) = gpusort_normalized_key('30 days'::interval) AS mon_is_30_days,
	   gpusort_normalized_key('1 day'::interval) = gpusort_normalized_key('24 hours'::interval) AS day_is_24_hours;

-- uuid: the 16 bytes (NULL shares an extreme with ffff...)
SELECT * FROM keys_check('uuid', $$
	SELECT md5(i::text)::uuid FROM generate_series(1, 300) i
	UNION ALL SELECT x::uuid FROM unnest('{00000000-0000-0000-0000-000000000000,
		ffffffff-ffff-ffff-ffff-ffffffffffff}'::text[]) x
	UNION ALL SELECT NULL$$);

-- numeric: a prefix; long values with a common prefix tie
SELECT * FROM keys_check('numeric', $$
	SELECT (i * 0.37 - 100)::numeric FROM generate_series(1, 400) i
	UNION ALL SELECT x::numeric FROM unnest('{NaN,Infinity,-Infinity,0,0.000,-0.0001,0.0001,
		1e100,-1e100,1e-100,-1e-100,1.5,1.50,-1.5,-1.50,9999,10000,10001,-9999,-10000,
		123456789012345678901234567890.123456789,
		1.0000000000000000000000000000000000000000000000000000000000001,
		1.0000000000000000000000000000000000000000000000000000000000002,
		-1.0000000000000000000000000000000000000000000000000000000000001,
		-1.0000000000000000000000000000000000000000000000000000000000002}'::text[]) x
	UNION ALL SELECT NULL$$);

-- text under C: bytes, zero padded; NULL vs '' share the low extreme
SELECT * FROM keys_check('text', $$
	SELECT md5(i::text) FROM generate_series(1, 200) i
	UNION ALL SELECT substr(md5(i::text), 1, i % 5) FROM generate_series(1, 100) i
	UNION ALL SELECT x FROM unnest(ARRAY['', ' ', 'a', 'A', 'a ', E'a\t', E'a\001', 'ab', 'abc', 'Z', '~',
		'é', 'e', 'f', 'ü', 'z', '日本', '日本語', '😀', 'Ω', repeat('x', 31), repeat('x', 32),
		repeat('x', 33), repeat('x', 40) || 'a', repeat('x', 40) || 'b']) x
	UNION ALL SELECT repeat('y', 5000) || i FROM generate_series(1, 3) i
	UNION ALL SELECT string_agg(md5(i::text || j::text), '') FROM generate_series(1, 3) i,
		generate_series(1, 100) j GROUP BY i
	UNION ALL VALUES (NULL), (NULL)$$, 'C');
SELECT * FROM keys_check('varchar(50)', $$
	SELECT md5(i::text) FROM generate_series(1, 200) i
	UNION ALL VALUES (''), ('a'), ('b'), ('é'), (NULL)$$, 'POSIX');
-- bpchar ignores trailing spaces
SELECT * FROM keys_check('char(6)', $$
	SELECT substr(md5(i::text), 1, i % 7) FROM generate_series(1, 200) i
	UNION ALL VALUES (''), (' '), ('a'), ('a '), (E'a\t'), (E'a\001'), ('é'), (NULL)$$, 'C');
SELECT gpusort_normalized_key('a'::char(5)) = gpusort_normalized_key('a  '::char(2)) AS bpchar_spaces;
SELECT * FROM keys_check('name', $$
	SELECT md5(i::text) FROM generate_series(1, 200) i
	UNION ALL VALUES (''), ('a'), ('pg_class'), (repeat('n', 63)), (NULL)$$);

-- the C.utf8 collation: code point order, the same keys as C
SELECT * FROM keys_check('text', $$
	SELECT md5(i::text) FROM generate_series(1, 100) i
	UNION ALL SELECT chr(c) FROM generate_series(1, 1000, 7) c
	UNION ALL SELECT chr(c) || 'x' FROM generate_series(1000, 200000, 997) c
		WHERE c NOT BETWEEN 55296 AND 57343
	UNION ALL VALUES (''), ('a'), ('A'), ('é'), ('ü'), ('日本'), ('😀'), (NULL)$$, 'C.utf8');
SELECT count(*) AS c_utf8_differs FROM (
	SELECT chr(c) || 'x' AS v FROM generate_series(1, 200000, 13) c
	WHERE c NOT BETWEEN 55296 AND 57343
	UNION ALL VALUES (''), ('abc'), ('😀')) s
WHERE gpusort_normalized_key(v COLLATE "C.utf8") <> gpusort_normalized_key(v COLLATE "C");

-- ICU: a sort-key prefix; equal keys are always tie-broken
SELECT * FROM keys_check('text', $$
	SELECT md5(i::text) FROM generate_series(1, 200) i
	UNION ALL SELECT x FROM unnest(ARRAY['', ' ', 'a', 'A', 'b', 'B', 'ab', 'Ab', 'é', 'e', 'E', 'f',
		'ü', 'u', 'z', 'ß', 'ss', '日本', '😀', 'résumé', 'resume', 'Resume', 'co-op', 'coop']) x
	UNION ALL SELECT NULL$$, 'und-x-icu');
SELECT * FROM keys_check('char(4)', $$
	SELECT x FROM unnest(ARRAY['', ' ', 'a', 'A', 'a ', 'b', 'é', 'E', 'ü', 'z']) x
	UNION ALL SELECT NULL$$, 'und-x-icu');

-- domains use their base type
CREATE DOMAIN keys_posint AS int4 CHECK (VALUE > 0);
CREATE DOMAIN keys_ctext AS text COLLATE "C";
SELECT * FROM keys_check('keys_posint', $$
	SELECT i * 7919 FROM generate_series(1, 300) i UNION ALL SELECT NULL$$);
SELECT * FROM keys_check('keys_ctext', $$
	SELECT md5(i::text) FROM generate_series(1, 100) i UNION ALL VALUES (''), (NULL)$$);

-- fast paths: one-column keys of 4 and 8 bytes
SELECT t AS type, octet_length(k) AS key_bytes FROM (VALUES
	('int2', gpusort_normalized_key(1::int2)),
	('int4', gpusort_normalized_key(1::int4)),
	('int8', gpusort_normalized_key(1::int8)),
	('oid', gpusort_normalized_key(1::oid)),
	('money', gpusort_normalized_key(1::money)),
	('pg_lsn', gpusort_normalized_key('0/1'::pg_lsn)),
	('char', gpusort_normalized_key('a'::"char")),
	('bool', gpusort_normalized_key(true)),
	('float4', gpusort_normalized_key(1::float4)),
	('float8', gpusort_normalized_key(1::float8)),
	('date', gpusort_normalized_key(date '2000-01-01')),
	('time', gpusort_normalized_key(time '12:00')),
	('timestamp', gpusort_normalized_key(timestamp '2000-01-01')),
	('timestamptz', gpusort_normalized_key(timestamptz '2000-01-01')),
	('interval', gpusort_normalized_key(interval '1 day')),
	('uuid', gpusort_normalized_key(md5('x')::uuid)),
	('numeric', gpusort_normalized_key(1::numeric)),
	('text', gpusort_normalized_key('x'::text))) v(t, k);

-- what cannot be encoded
SELECT gpusort_normalized_key(point(1, 2));
SELECT gpusort_normalized_key(ARRAY[1, 2]);
CREATE COLLATION keys_nd (provider = icu, locale = 'und', deterministic = false);
SELECT gpusort_normalized_key('a'::text COLLATE keys_nd);


--
-- The same encodings through the executor: every query below runs with
-- gpusort on and off and must return the same rows in the same order (each
-- ORDER BY ends with the unique id), under several key width caps.
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
CREATE TABLE keys_t AS
SELECT i AS id,
	   CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 7) % 5 - 2 END::int2 AS i2,
	   CASE WHEN i % 13 = 0 THEN NULL WHEN i % 17 = 0 THEN 2147483647
			WHEN i % 19 = 0 THEN -2147483648 ELSE (i * 31) % 9 - 4 END::int4 AS i4,
	   CASE WHEN i % 12 = 0 THEN NULL WHEN i % 23 = 0 THEN 9223372036854775807
			WHEN i % 29 = 0 THEN -9223372036854775808 ELSE (i * 37) % 7 - 3 END::int8 AS i8,
	   CASE WHEN i % 10 = 0 THEN NULL WHEN i % 21 = 0 THEN 'NaN'
			WHEN i % 27 = 0 THEN '-Infinity' WHEN i % 31 = 0 THEN '-0'
			ELSE ((i * 13) % 7 - 3) / 2.0 END::float8 AS f8,
	   CASE WHEN i % 9 = 0 THEN NULL ELSE (i % 3)::numeric / 7 END AS num,
	   CASE WHEN i % 8 = 0 THEN NULL ELSE (i % 4) * interval '1 day' - (i % 3) * interval '1 mon' END AS iv,
	   CASE WHEN i % 7 = 0 THEN NULL ELSE md5((i % 6)::text)::uuid END AS u,
	   CASE WHEN i % 14 = 0 THEN NULL ELSE date '2000-01-01' + (i % 5) END AS d,
	   CASE WHEN i % 15 = 0 THEN NULL ELSE timestamptz '2000-01-01 00:00+00' + (i % 4) * interval '1 hour' END AS ts,
	   CASE WHEN i % 6 = 0 THEN NULL ELSE (ARRAY['', 'a', 'B', 'é', 'ab', repeat('z', 40) || i % 3])[1 + i % 6] END AS t,
	   CASE WHEN i % 5 = 0 THEN NULL ELSE (ARRAY['', 'a ', 'B', 'é', 'ab'])[1 + i % 5] END::char(3) AS bp,
	   CASE WHEN i % 16 = 0 THEN NULL ELSE (i % 5 - 2)::numeric::money END AS m,
	   CASE WHEN i % 18 = 0 THEN NULL ELSE chr(120 + i % 10)::"char" END AS ch
FROM generate_series(1, 2000) i;
ANALYZE keys_t;

CREATE FUNCTION keys_same(q text, mkb int) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
	on_d text;
	off_d text;
	l text;
	gpusorts int := 0;
	digest text := 'SELECT count(*) || '' '' || md5(string_agg(s::text, '','' ORDER BY n)) '
		|| 'FROM (SELECT s, row_number() OVER () AS n FROM (' || q || ') s) s';
BEGIN
	PERFORM set_config('gpusort.max_key_bytes', mkb::text, true);
	PERFORM set_config('gpusort.enabled', 'on', true);
	FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		IF l LIKE '%Custom Scan (GpuSort)%' THEN
			gpusorts := gpusorts + 1;
		END IF;
	END LOOP;
	EXECUTE digest INTO on_d;
	PERFORM set_config('gpusort.enabled', 'off', true);
	EXECUTE digest INTO off_d;
	PERFORM set_config('gpusort.enabled', 'on', true);
	IF gpusorts = 0 THEN
		RETURN 'no GpuSort';
	END IF;
	RETURN CASE WHEN on_d = off_d THEN 'same' ELSE 'DIFFERENT' END;
END
$fn$;

CREATE TEMP TABLE keys_q AS
SELECT format('SELECT %s, id FROM keys_t ORDER BY %s %s %s, id', c, c, d, n) AS q
FROM unnest(ARRAY['i2', 'i4', 'i8', 'f8', 'num', 'iv', 'u', 'd', 'ts', 'm', 'ch',
				  't COLLATE "C"', 't COLLATE "C.utf8"', 't COLLATE "und-x-icu"',
				  'bp COLLATE "C"', 'bp COLLATE "und-x-icu"']) c,
	 unnest(ARRAY['ASC', 'DESC']) d, unnest(ARRAY['NULLS FIRST', 'NULLS LAST']) n
UNION ALL
SELECT format('SELECT %s, id FROM keys_t ORDER BY %s, id', c,
			  (SELECT string_agg(x || CASE WHEN k % 2 = 0 THEN ' DESC' ELSE '' END
								 || CASE WHEN k % 3 = 0 THEN ' NULLS FIRST' ELSE ' NULLS LAST' END, ', ')
			   FROM unnest(string_to_array(c, ', ')) WITH ORDINALITY u(x, k)))
FROM unnest(ARRAY['i2, i4', 'i4, i8', 'i8, i4, i2', 'f8, t', 'i2, t', 'd, ts, u',
				  'num, i4', 'i4, num', 'iv, i2', 'u, i8', 'bp, i2', 'ts, f8, iv',
				  'i8, i8, i8, i8', 'ch, m, i2', 'm, ch']) c;

SELECT mkb AS max_key_bytes, count(*) AS queries,
	   count(*) FILTER (WHERE r = 'same') AS same,
	   string_agg(q || ': ' || r, E'\n') FILTER (WHERE r <> 'same') AS failures
FROM (SELECT mkb, q, keys_same(q, mkb) AS r
	  FROM unnest(ARRAY[32, 16, 8, 4]) mkb, keys_q) t
GROUP BY mkb ORDER BY mkb DESC;

-- A libc collation other than C is not trusted: not encodable as the leading
-- column (the plan keeps PostgreSQL's Sort), and after an encoded column it
-- ends the key.  Checked with the first such collation this server has, if
-- any, so the output is the same everywhere.
DO $$
DECLARE
	c text;
	r text;
BEGIN
	SELECT quote_ident(collname) INTO c FROM pg_collation
	WHERE collprovider = 'c' AND collcollate NOT IN ('C', 'POSIX')
	  AND collcollate NOT ILIKE 'C.utf%8'
	  AND collencoding IN (-1, pg_char_to_encoding(getdatabaseencoding()))
	ORDER BY collname LIMIT 1;
	IF c IS NULL THEN
		RETURN;
	END IF;
	BEGIN
		EXECUTE format('SELECT gpusort_normalized_key(%L::text COLLATE %s)', 'a', c);
		RAISE EXCEPTION 'collation % was encoded', c;
	EXCEPTION WHEN feature_not_supported THEN
		NULL;
	END;
	r := keys_same(format('SELECT t, id FROM keys_t ORDER BY t COLLATE %s, id', c), 32);
	IF r <> 'no GpuSort' THEN
		RAISE EXCEPTION 'leading % column: %', c, r;
	END IF;
	r := keys_same(format('SELECT i2, t, id FROM keys_t ORDER BY i2, t COLLATE %s DESC, id', c), 32);
	IF r <> 'same' THEN
		RAISE EXCEPTION 'second % column: %', c, r;
	END IF;
END
$$;

DROP TABLE keys_t;
DROP FUNCTION keys_same(text, int);
DROP FUNCTION keys_check(text, text, text);
DROP TABLE kc_vals;
DROP DOMAIN keys_posint;
DROP DOMAIN keys_ctext;
DROP COLLATION keys_nd;
