--
-- sort_cursor: scrollable cursors over a GpuSort (backward scan): FETCH
-- NEXT / PRIOR / FIRST / LAST / ABSOLUTE / RELATIVE / BACKWARD, MOVE, past
-- both ends; WITH HOLD; a long random walk compared with PostgreSQL's Sort
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE TABLE gs_cur AS
SELECT g AS id, (g * 7919) % 1000 AS k, chr(97 + g % 26) COLLATE "C" AS c
FROM generate_series(1, 1000) g;
ANALYZE gs_cur;

-- no Material on top: GpuSort scans backward itself
EXPLAIN (COSTS OFF) DECLARE gs_c SCROLL CURSOR FOR SELECT k, c FROM gs_cur ORDER BY c DESC, k;

BEGIN;
DECLARE gs_c SCROLL CURSOR FOR SELECT k, c FROM gs_cur ORDER BY c DESC, k;
FETCH 3 FROM gs_c;
FETCH BACKWARD 2 FROM gs_c;
FETCH PRIOR FROM gs_c;
FETCH PRIOR FROM gs_c;
FETCH ABSOLUTE 500 FROM gs_c;
FETCH RELATIVE -10 FROM gs_c;
FETCH RELATIVE 0 FROM gs_c;
FETCH LAST FROM gs_c;
FETCH NEXT FROM gs_c;
FETCH BACKWARD 3 FROM gs_c;
FETCH FIRST FROM gs_c;
FETCH ABSOLUTE -1 FROM gs_c;
FETCH ABSOLUTE -1000 FROM gs_c;
FETCH ABSOLUTE 1001 FROM gs_c;
FETCH BACKWARD 2 FROM gs_c;
MOVE ABSOLUTE 0 IN gs_c;
FETCH 2 FROM gs_c;
MOVE FORWARD ALL IN gs_c;
FETCH BACKWARD 4 FROM gs_c;
MOVE BACKWARD ALL IN gs_c;
FETCH RELATIVE 250 FROM gs_c;
FETCH FORWARD 3 FROM gs_c;
CLOSE gs_c;
COMMIT;

-- backward first, on a fresh cursor: nothing before the start
BEGIN;
DECLARE gs_b SCROLL CURSOR FOR SELECT k FROM gs_cur ORDER BY k DESC;
FETCH BACKWARD 1 FROM gs_b;
FETCH PRIOR FROM gs_b;
FETCH NEXT FROM gs_b;
FETCH BACKWARD 5 FROM gs_b;
FETCH 2 FROM gs_b;
CLOSE gs_b;
DECLARE gs_b2 SCROLL CURSOR FOR SELECT k FROM gs_cur ORDER BY k DESC;
FETCH RELATIVE -3 FROM gs_b2;
FETCH ABSOLUTE 2 FROM gs_b2;
MOVE LAST IN gs_b2;
FETCH NEXT FROM gs_b2;
FETCH NEXT FROM gs_b2;
FETCH PRIOR FROM gs_b2;
COMMIT;

-- a cursor held past its transaction
BEGIN;
DECLARE gs_h SCROLL CURSOR WITH HOLD FOR SELECT id, k FROM gs_cur ORDER BY k DESC, id;
FETCH 2 FROM gs_h;
COMMIT;
FETCH ABSOLUTE 999 FROM gs_h;
FETCH BACKWARD 2 FROM gs_h;
FETCH FIRST FROM gs_h;
CLOSE gs_h;

-- a random walk over two cursors for the same query, one planned with
-- gpusort and one without; every fetched row and every FOUND must agree
CREATE FUNCTION gs_cursor_walk(q text, steps int, seed float8)
RETURNS TABLE (fetches int, mismatches int, gpusort_in_plan boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
	c_on refcursor := 'gs_walk_on';
	c_off refcursor := 'gs_walk_off';
	r1 record;
	r2 record;
	f1 boolean;
	f2 boolean;
	op int;
	n int;
	total int;
	saved text := current_setting('gpusort.enabled');
BEGIN
	EXECUTE 'SELECT count(*) FROM (' || q || ') s' INTO total;
	PERFORM setseed(seed);
	PERFORM set_config('gpusort.enabled', 'on', false);
	gpusort_in_plan := (SELECT p.gpusort > 0 FROM gs_plan(q) p);
	OPEN c_on SCROLL FOR EXECUTE q;
	PERFORM set_config('gpusort.enabled', 'off', false);
	OPEN c_off SCROLL FOR EXECUTE q;
	PERFORM set_config('gpusort.enabled', saved, false);
	fetches := 0;
	mismatches := 0;
	FOR i IN 1..steps LOOP
		op := (random() * 7)::int;
		n := (random() * (total + 4))::int - 2;
		IF op = 0 THEN
			FETCH NEXT FROM c_on INTO r1; f1 := FOUND;
			FETCH NEXT FROM c_off INTO r2; f2 := FOUND;
		ELSIF op = 1 THEN
			FETCH PRIOR FROM c_on INTO r1; f1 := FOUND;
			FETCH PRIOR FROM c_off INTO r2; f2 := FOUND;
		ELSIF op = 2 THEN
			FETCH ABSOLUTE n FROM c_on INTO r1; f1 := FOUND;
			FETCH ABSOLUTE n FROM c_off INTO r2; f2 := FOUND;
		ELSIF op = 3 THEN
			n := n / 10;
			FETCH RELATIVE n FROM c_on INTO r1; f1 := FOUND;
			FETCH RELATIVE n FROM c_off INTO r2; f2 := FOUND;
		ELSIF op = 4 THEN
			n := -n / 10;
			FETCH RELATIVE n FROM c_on INTO r1; f1 := FOUND;
			FETCH RELATIVE n FROM c_off INTO r2; f2 := FOUND;
		ELSIF op = 5 THEN
			IF random() < 0.5 THEN
				FETCH FIRST FROM c_on INTO r1; f1 := FOUND;
				FETCH FIRST FROM c_off INTO r2; f2 := FOUND;
			ELSE
				FETCH LAST FROM c_on INTO r1; f1 := FOUND;
				FETCH LAST FROM c_off INTO r2; f2 := FOUND;
			END IF;
		ELSE
			n := n / 20;
			MOVE FORWARD n FROM c_on;
			MOVE FORWARD n FROM c_off;
			FETCH BACKWARD FROM c_on INTO r1; f1 := FOUND;
			FETCH BACKWARD FROM c_off INTO r2; f2 := FOUND;
		END IF;
		fetches := fetches + 1;
		IF f1 IS DISTINCT FROM f2 OR (f1 AND r1::text IS DISTINCT FROM r2::text) THEN
			mismatches := mismatches + 1;
		END IF;
	END LOOP;
	CLOSE c_on;
	CLOSE c_off;
	RETURN NEXT;
END
$fn$;

SELECT * FROM gs_cursor_walk('SELECT k, id FROM gs_cur ORDER BY k, id', 2000, 0.1);
SELECT * FROM gs_cursor_walk('SELECT c, k FROM gs_cur ORDER BY c DESC NULLS FIRST, k DESC', 2000, 0.2);
SELECT * FROM gs_cursor_walk('SELECT id FROM gs_cur ORDER BY c, id % 7 DESC, id', 2000, 0.3);
SELECT * FROM gs_cursor_walk('SELECT id FROM gs_cur WHERE id < 3 ORDER BY k', 200, 0.4);
SELECT * FROM gs_cursor_walk('SELECT id FROM gs_cur WHERE false ORDER BY k', 50, 0.5);
