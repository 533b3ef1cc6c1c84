--
-- keys_datetime: date, time, timestamp, timestamptz, interval, uuid (and
-- timetz, which may or may not be encoded: only its answers are checked)
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

CREATE TABLE gs_dt (
	id int PRIMARY KEY,
	d date,
	t time,
	tz timetz,
	ts timestamp,
	tstz timestamptz,
	iv interval,
	u uuid
);
INSERT INTO gs_dt VALUES
	(1, '-infinity', '00:00', '00:00+00', '-infinity', '-infinity', '-178000000 years', '00000000-0000-0000-0000-000000000000'),
	(2, 'infinity', '24:00', '24:00-15:59', 'infinity', 'infinity', '178000000 years', 'ffffffff-ffff-ffff-ffff-ffffffffffff'),
	(3, '4713-01-01 BC', '00:00:00.000001', '12:00+01', '4713-01-01 00:00 BC', '4713-01-01 00:00+00 BC', '-1 usec', '80000000-0000-0000-0000-000000000000'),
	(4, '5874897-12-31', '23:59:59.999999', '12:00+00', '294276-12-31 23:59:59.999999', '294276-12-31 23:59:59.999999+00', '1 usec', '7fffffff-ffff-ffff-ffff-ffffffffffff'),
	(5, '2000-01-01', '12:00', '11:00-01', '2000-01-01 00:00', '2000-01-01 00:00+00', '0', '00000000-0000-0000-0000-000000000001'),
	(6, '1999-12-31', '11:59:59.999999', '13:00+01', '1999-12-31 23:59:59.999999', '1999-12-31 23:59:59.999999+00', '1 mon', '00000000-0000-0000-8000-000000000000'),
	(7, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
	(8, '2000-01-02', '12:00:00.000001', '12:00:00.000001+00', '2000-01-01 00:00:00.000001', '2000-01-01 01:00:00.000001+01', '30 days', '00000000-0000-0001-0000-000000000000'),
	(9, '1970-01-01', '06:00', '06:00+06', '1970-01-01 00:00', '1970-01-01 00:00+00', '720 hours', 'ffffffff-ffff-ffff-ffff-fffffffffffe'),
	(10, '1969-12-31', '18:00', '18:00-06', '1969-12-31 23:59:59', '1969-12-31 23:59:59+00', '1 day', '00000000-0000-0000-0000-000000000000'),
	(11, '2000-01-01', '12:00', '12:00+00', '2000-01-01 00:00', '2000-01-01 05:00+05', '24 hours', '00000000-0000-0000-0000-000000000001'),
	(12, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
	(13, '0001-01-01', '00:00:01', '00:00:01+00', '0001-01-01 00:00', '0001-01-01 00:00+00', '-1 mon 30 days', '12345678-9abc-def0-1234-56789abcdef0'),
	(14, '0001-12-31 BC', '00:00:00.5', '00:00:00.5+00', '0001-12-31 23:59:59.999999 BC', '0001-12-31 23:59:59.999999+00 BC', '-1 day 24:00:00', 'fedcba98-7654-3210-fedc-ba9876543210'),
	(15, '2038-01-19', '03:14:07', '03:14:07+00', '2038-01-19 03:14:07', '2038-01-19 03:14:07+00', '1 year -12 mons 1 usec', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11');

SELECT id, d FROM gs_dt ORDER BY d, id;
SELECT id, t FROM gs_dt ORDER BY t DESC, id;
SELECT id, tz FROM gs_dt ORDER BY tz NULLS FIRST, id;
SELECT id, ts FROM gs_dt ORDER BY ts, id;
SELECT id, tstz FROM gs_dt ORDER BY tstz DESC NULLS LAST, id;
-- intervals that PostgreSQL considers equal ('1 mon' = '30 days' = '720 hours')
SELECT id, iv FROM gs_dt ORDER BY iv, id;
SET enable_hashagg = off;
SELECT justify_interval(iv) AS iv, count(*) FROM gs_dt GROUP BY iv ORDER BY iv;
RESET enable_hashagg;
SELECT id, u FROM gs_dt ORDER BY u, id;
EXPLAIN (COSTS OFF) SELECT id, iv FROM gs_dt ORDER BY iv, id;

SELECT setseed(0.3);
INSERT INTO gs_dt
SELECT 100 + g,
	   CASE WHEN g % 40 = 0 THEN NULL ELSE '2000-01-01'::date + (random() * 200000 - 100000)::int END,
	   CASE WHEN g % 40 = 1 THEN NULL ELSE '00:00'::time + random() * interval '24 hours' END,
	   CASE WHEN g % 40 = 2 THEN NULL
			ELSE ('00:00'::time + random() * interval '24 hours')::text
				 || to_char((random() * 24 - 12)::int, 'S00') END::timetz,
	   CASE WHEN g % 4 = 0 THEN '2000-01-01'::timestamp + (g % 10) * interval '1 sec'
			ELSE '2000-01-01'::timestamp + (random() - 0.5) * interval '2000 years' END,
	   CASE WHEN g % 4 = 0 THEN '2000-01-01 00:00+00'::timestamptz + (g % 10) * interval '1 usec'
			ELSE '2000-01-01 00:00+00'::timestamptz + (random() - 0.5) * interval '2000 years' END,
	   CASE g % 4
		   WHEN 0 THEN (g % 13) * interval '1 mon' + (g % 17) * interval '1 day'
		   WHEN 1 THEN (g % 400) * interval '1 day' - (g % 5) * interval '1 mon'
		   WHEN 2 THEN random() * interval '100 years' - interval '50 years'
		   ELSE (g % 10) * interval '24 hours' END,
	   CASE WHEN g % 3 = 0 THEN md5(g::text)::uuid
			ELSE ('00000000-0000-0000-0000-' || lpad(to_hex(g % 100), 12, '0'))::uuid END
FROM generate_series(1, 5000) g;
-- intervals at the ends of their range (their spans overflow 64 bits)
INSERT INTO gs_dt (id, iv) VALUES
	(50, '2147483647 mons 2147483647 days 2562047788:00:54.775806'),
	(51, '-2147483648 mons -2147483648 days -2562047788:00:54.775807'),
	(52, '2147483647 mons'), (53, '-2147483648 mons'),
	(54, '2147483647 days'), (55, '-2147483648 days'),
	(56, '2562047788:00:54.775807'), (57, '-2562047788:00:54.775807'),
	(58, '2147483647 mons -2147483648 days'), (59, '71582788 years 3 mons 2147483647 days');
SELECT id, iv FROM gs_dt WHERE id BETWEEN 50 AND 99 OR id IN (1, 2) ORDER BY iv DESC, id;
ANALYZE gs_dt;

SELECT * FROM gs_check_cols('gs_dt', ARRAY['d', 't', 'tz', 'ts', 'tstz', 'iv', 'u']);
SELECT * FROM gs_check_dirs('gs_dt', 'iv');
-- key columns only
SELECT * FROM gs_check('SELECT d, ts FROM gs_dt ORDER BY d DESC, ts');
SELECT * FROM gs_check('SELECT u FROM gs_dt ORDER BY u DESC');
SELECT * FROM gs_check('SELECT tstz, u FROM gs_dt ORDER BY tstz NULLS FIRST, u');
SELECT * FROM gs_check('SELECT iv = interval ''1 mon'' AS m FROM gs_dt ORDER BY iv, id');
-- timetz after an encoded column: tie-broken with its comparator
SELECT * FROM gs_check('SELECT d IS NULL AS n, tz, id FROM gs_dt ORDER BY d IS NULL, tz DESC, id');
SET gpusort.max_key_bytes = 4;
SELECT * FROM gs_check_cols('gs_dt', ARRAY['ts', 'iv', 'u']);
RESET gpusort.max_key_bytes;
