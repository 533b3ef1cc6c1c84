--
-- sort_rescan: a GpuSort rescanned many times, with and without changed
-- parameters (correlated subqueries, LATERAL, nested loops), and plans
-- reused from the plan cache
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';
SET gpusort.topn_limit = 0;
SET enable_memoize = off;

CREATE TABLE gs_outer AS SELECT g AS id, g % 13 AS k, g * 17 % 100 AS x FROM generate_series(1, 60) g;
CREATE TABLE gs_inner AS
SELECT g AS id, g % 13 AS k, (g * 7919) % 1009 AS v, md5(g::text) COLLATE "C" AS t
FROM generate_series(1, 4000) g;
ANALYZE gs_outer, gs_inner;

-- LATERAL: the sort's input depends on the outer row (re-sort on every rescan)
EXPLAIN (COSTS OFF)
SELECT o.id, l.v FROM gs_outer o, LATERAL (SELECT v FROM gs_inner i WHERE i.k = o.k ORDER BY v DESC, id LIMIT 3) l;
SELECT o.id, l.v FROM gs_outer o,
	LATERAL (SELECT v FROM gs_inner i WHERE i.k = o.k ORDER BY v DESC, id LIMIT 3) l
WHERE o.id <= 5 ORDER BY o.id, l.v DESC;
SELECT * FROM gs_check('SELECT o.id, l.v, l.id FROM gs_outer o, LATERAL (SELECT v, id FROM gs_inner i WHERE i.k = o.k ORDER BY v DESC, id LIMIT 3) l');
-- the sort key itself depends on the outer row
SELECT * FROM gs_check('SELECT o.id, l.id FROM gs_outer o, LATERAL (SELECT id FROM gs_inner i ORDER BY abs(i.v - o.x * 10), id LIMIT 2) l');
SELECT o.id, l.v FROM gs_outer o,
	LATERAL (SELECT v FROM gs_inner i ORDER BY abs(i.v - o.x * 10), id LIMIT 2) l
WHERE o.id <= 4;
-- the sort's direction depends on the outer row (via the key)
SELECT * FROM gs_check('SELECT o.id, l.t FROM gs_outer o, LATERAL (SELECT t FROM gs_inner i WHERE i.k = o.k ORDER BY CASE WHEN o.id % 2 = 0 THEN v ELSE -v END, id LIMIT 4) l');
-- correlated scalar sub query
SELECT * FROM gs_check('SELECT o.id, (SELECT t FROM gs_inner i WHERE i.k = o.k ORDER BY t DESC LIMIT 1 OFFSET o.id % 5) FROM gs_outer o ORDER BY o.id');
SELECT * FROM gs_check('SELECT o.id, (SELECT string_agg(v::text, '','') FROM (SELECT v FROM gs_inner i WHERE i.k = o.k ORDER BY v, id LIMIT 5) s) FROM gs_outer o ORDER BY o.id');

-- rescan without changed parameters: the sort's input is the same every
-- time, only the filter above its Limit depends on the outer row (the sort
-- need not be redone; it is rewound)
EXPLAIN (COSTS OFF)
SELECT o.id, (SELECT count(*) FROM (SELECT v FROM gs_inner ORDER BY v, id LIMIT 2000) s WHERE s.v > o.x * 10) FROM gs_outer o;
SELECT * FROM gs_check('SELECT o.id, (SELECT count(*) FROM (SELECT v FROM gs_inner ORDER BY v, id LIMIT 2000) s WHERE s.v > o.x * 10) FROM gs_outer o ORDER BY o.id');
SELECT * FROM gs_check('SELECT o.id, (SELECT string_agg(v::text, '','') FROM (SELECT v FROM gs_inner ORDER BY t DESC LIMIT 1000) s WHERE s.v BETWEEN o.x * 10 AND o.x * 10 + 10) FROM gs_outer o ORDER BY o.id');
SELECT o.id, (SELECT count(*) FROM (SELECT v FROM gs_inner ORDER BY v, id LIMIT 2000) s WHERE s.v > o.x * 10) FROM gs_outer o WHERE o.id < 6 ORDER BY o.id;
-- nested loop whose inner side is a sort (materialized or not)
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
EXPLAIN (COSTS OFF) SELECT o.id, s.id FROM gs_outer o JOIN (SELECT * FROM gs_inner ORDER BY t LIMIT 100) s ON s.k = o.k;
SELECT * FROM gs_check('SELECT o.id, s.id FROM gs_outer o JOIN (SELECT * FROM gs_inner ORDER BY t LIMIT 100) s ON s.k = o.k ORDER BY o.id, s.id');
SELECT * FROM gs_check('SELECT o.id, s.id FROM gs_outer o JOIN LATERAL (SELECT * FROM gs_inner i WHERE i.v < o.x * 5 ORDER BY t LIMIT 20) s ON true ORDER BY o.id, s.id');
RESET enable_material;
SELECT * FROM gs_check('SELECT o.id, s.id FROM gs_outer o JOIN (SELECT * FROM gs_inner ORDER BY t DESC LIMIT 100) s ON s.k = o.k ORDER BY o.id, s.id');
RESET enable_hashjoin;
RESET enable_mergejoin;

-- a sort inside the recursive term of a recursive CTE (run once per level)
SELECT * FROM gs_check('WITH RECURSIVE r(lvl, id, v) AS (SELECT 0, 1, 0 UNION ALL SELECT r.lvl + 1, s.id, s.v FROM r, LATERAL (SELECT i.id, i.v FROM gs_inner i WHERE i.k = (r.id + r.lvl) % 13 ORDER BY i.v DESC, i.id LIMIT 2) s WHERE r.lvl < 6) SELECT * FROM r ORDER BY lvl, id');
WITH RECURSIVE r(lvl, id, v) AS (
	SELECT 0, 1, 0
	UNION ALL
	SELECT r.lvl + 1, s.id, s.v FROM r,
		LATERAL (SELECT i.id, i.v FROM gs_inner i WHERE i.k = (r.id + r.lvl) % 13 ORDER BY i.v DESC, i.id LIMIT 1) s
	WHERE r.lvl < 4)
SELECT * FROM r;

-- a merge join as the inner side of a nested loop (rescans with mark/restore)
SET enable_hashjoin = off;
SET enable_nestloop = on;
SELECT * FROM gs_check('SELECT o.id, (SELECT count(*) FROM gs_inner a JOIN gs_inner b ON a.v = b.v AND a.k = o.k) FROM gs_outer o WHERE o.id <= 13 ORDER BY o.id');
RESET enable_hashjoin;
RESET enable_nestloop;

-- plans from the plan cache, executed many times: PL/pgSQL and PREPARE
CREATE FUNCTION gs_topv(kk int, n int) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
	r int[];
BEGIN
	SELECT array_agg(v) INTO r FROM (SELECT v FROM gs_inner WHERE k = kk ORDER BY v DESC, id LIMIT n) s;
	RETURN r;
END
$$;
SELECT k, gs_topv(k, 3) FROM generate_series(0, 12, 4) k;
SELECT * FROM gs_check('SELECT k, gs_topv(k, k) FROM generate_series(0, 12) k');
PREPARE gs_prep(int) AS SELECT id, v FROM gs_inner WHERE k = $1 ORDER BY v DESC, id LIMIT 3;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE gs_prep(1);
EXECUTE gs_prep(1);
EXECUTE gs_prep(2);
EXECUTE gs_prep(1);
EXECUTE gs_prep(12);
EXECUTE gs_prep(13);
-- a parameter inside the sort key of a cached generic plan
PREPARE gs_prep2(int) AS SELECT id, v FROM gs_inner ORDER BY abs(v - $1), id LIMIT 3;
EXECUTE gs_prep2(500);
EXECUTE gs_prep2(0);
EXECUTE gs_prep2(500);
EXPLAIN (COSTS OFF) EXECUTE gs_prep2(7);
DEALLOCATE gs_prep2;
RESET plan_cache_mode;
DEALLOCATE gs_prep;
RESET enable_memoize;
RESET gpusort.topn_limit;
