--
-- sort_settings: the settings (enabled, min_rows, engine, max_key_bytes), and key
-- types gpusort cannot encode (they stay PostgreSQL's Sort, or are only
-- tie-broken when they are not the leading key)
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE TABLE gs_g AS
SELECT g AS id, (g * 7919) % 1000 AS k, point(g % 10, g % 7) AS p,
	   ARRAY[g % 3, g % 5] AS arr, (g % 4 - 2) AS sk
FROM generate_series(1, 2000) g;
ANALYZE gs_g;

-- enabled = off: a plain Sort
SET gpusort.enabled = off;
EXPLAIN (COSTS OFF) SELECT * FROM gs_g ORDER BY k;
SELECT * FROM gs_plan('SELECT * FROM gs_g ORDER BY k');
RESET gpusort.enabled;
EXPLAIN (COSTS OFF) SELECT * FROM gs_g ORDER BY k;
-- it applies when planning: a plan made while on keeps its GpuSort
PREPARE gs_q AS SELECT id FROM gs_g ORDER BY k, id LIMIT 100000;
SET plan_cache_mode = force_generic_plan;
EXECUTE gs_q \g /dev/null
SET gpusort.enabled = off;
EXPLAIN (COSTS OFF) EXECUTE gs_q;
RESET gpusort.enabled;
RESET plan_cache_mode;
DEALLOCATE gs_q;

-- min_rows: sorts estimated smaller stay PostgreSQL's
SET gpusort.min_rows = 100000;
SELECT * FROM gs_plan('SELECT * FROM gs_g ORDER BY k');
SET gpusort.min_rows = 1000;
SELECT * FROM gs_plan('SELECT * FROM gs_g ORDER BY k');
SELECT * FROM gs_plan('SELECT * FROM gs_g WHERE id < 10 ORDER BY k');
SET gpusort.min_rows = 0;

-- the engine setting never changes an answer ("gpu" is not set here: the
-- suite runs on machines with and without one)
SET gpusort.engine = cpu;
SELECT * FROM gs_check('SELECT id FROM gs_g ORDER BY k, id');
SET gpusort.engine = auto;
SELECT * FROM gs_check('SELECT id FROM gs_g ORDER BY k, id');
RESET gpusort.engine;

-- invalid values
-- (the message's range reads "(4 .. 32)" before PostgreSQL 16 and
-- "(4 B .. 32 B)" from 16 on: it is cut off)
DO $$
DECLARE
	v text;
BEGIN
	FOREACH v IN ARRAY ARRAY['3', '33'] LOOP
		BEGIN
			PERFORM set_config('gpusort.max_key_bytes', v, false);
			RAISE NOTICE 'gpusort.max_key_bytes = % accepted', v;
		EXCEPTION WHEN invalid_parameter_value THEN
			RAISE NOTICE '%', regexp_replace(SQLERRM, ' \(.*\)$', '');
		END;
	END LOOP;
END
$$;
SET gpusort.engine = 'tpu';
SET gpusort.min_rows = -1;
SET gpusort.max_key_bytes = 4;
SHOW gpusort.max_key_bytes;
SET gpusort.max_key_bytes = 32;
SHOW gpusort.max_key_bytes;
RESET gpusort.max_key_bytes;

-- a point type with a btree operator class of our own: not encodable
CREATE FUNCTION gs_point_cmp(point, point) RETURNS int LANGUAGE sql IMMUTABLE STRICT AS
$$ SELECT CASE WHEN $1[0] < $2[0] THEN -1 WHEN $1[0] > $2[0] THEN 1
			   WHEN $1[1] < $2[1] THEN -1 WHEN $1[1] > $2[1] THEN 1 ELSE 0 END $$;
CREATE FUNCTION gs_point_lt(point, point) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_point_cmp($1, $2) < 0 $$;
CREATE FUNCTION gs_point_le(point, point) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_point_cmp($1, $2) <= 0 $$;
CREATE FUNCTION gs_point_eq(point, point) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_point_cmp($1, $2) = 0 $$;
CREATE FUNCTION gs_point_ge(point, point) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_point_cmp($1, $2) >= 0 $$;
CREATE FUNCTION gs_point_gt(point, point) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_point_cmp($1, $2) > 0 $$;
CREATE OPERATOR <<< (LEFTARG = point, RIGHTARG = point, FUNCTION = gs_point_lt);
CREATE OPERATOR <<<= (LEFTARG = point, RIGHTARG = point, FUNCTION = gs_point_le);
CREATE OPERATOR === (LEFTARG = point, RIGHTARG = point, FUNCTION = gs_point_eq);
CREATE OPERATOR >>>= (LEFTARG = point, RIGHTARG = point, FUNCTION = gs_point_ge);
CREATE OPERATOR >>> (LEFTARG = point, RIGHTARG = point, FUNCTION = gs_point_gt);
CREATE OPERATOR CLASS gs_point_ops DEFAULT FOR TYPE point USING btree AS
	OPERATOR 1 <<<, OPERATOR 2 <<<=, OPERATOR 3 ===, OPERATOR 4 >>>=, OPERATOR 5 >>>,
	FUNCTION 1 gs_point_cmp(point, point);
EXPLAIN (COSTS OFF) SELECT p, id FROM gs_g ORDER BY p, id;
SELECT * FROM gs_check('SELECT p, id FROM gs_g ORDER BY p, id');
SELECT * FROM gs_check('SELECT p, id FROM gs_g ORDER BY p DESC, id');
SELECT p, min(id) FROM gs_g WHERE id < 30 GROUP BY p ORDER BY p DESC LIMIT 5;
-- not leading: the int key is encoded, the point is a tie-break
EXPLAIN (COSTS OFF) SELECT k % 10, p, id FROM gs_g ORDER BY k % 10, p, id;
SELECT * FROM gs_check('SELECT k % 10, p, id FROM gs_g ORDER BY k % 10, p DESC, id');
-- the later test files share this database: point has no ordering again
DROP OPERATOR FAMILY gs_point_ops USING btree;

-- int4 under a non-default operator class (order by absolute value): the
-- key is not the type's default order, so it must not be encoded as int4
CREATE FUNCTION gs_abs_cmp(int4, int4) RETURNS int LANGUAGE sql IMMUTABLE STRICT AS
$$ SELECT CASE WHEN abs($1) < abs($2) THEN -1 WHEN abs($1) > abs($2) THEN 1 ELSE 0 END $$;
CREATE FUNCTION gs_abs_lt(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT abs($1) < abs($2) $$;
CREATE FUNCTION gs_abs_le(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT abs($1) <= abs($2) $$;
CREATE FUNCTION gs_abs_eq(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT abs($1) = abs($2) $$;
CREATE FUNCTION gs_abs_ge(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT abs($1) >= abs($2) $$;
CREATE FUNCTION gs_abs_gt(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT abs($1) > abs($2) $$;
CREATE OPERATOR |<| (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_abs_lt);
CREATE OPERATOR |<=| (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_abs_le);
CREATE OPERATOR |=| (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_abs_eq);
CREATE OPERATOR |>=| (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_abs_ge);
CREATE OPERATOR |>| (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_abs_gt);
CREATE OPERATOR CLASS gs_abs_ops FOR TYPE int4 USING btree AS
	OPERATOR 1 |<|, OPERATOR 2 |<=|, OPERATOR 3 |=|, OPERATOR 4 |>=|, OPERATOR 5 |>|,
	FUNCTION 1 gs_abs_cmp(int4, int4);
SELECT sk, id FROM gs_g WHERE id <= 8 ORDER BY sk USING |<|, id;
SELECT sk, id FROM gs_g WHERE id <= 8 ORDER BY sk USING |>|, id DESC;
SELECT * FROM gs_check('SELECT sk, id FROM gs_g ORDER BY sk USING |<|, id');
SELECT * FROM gs_check('SELECT sk, id FROM gs_g ORDER BY k, sk USING |>|, id');

-- other types: whatever gpusort does with them, the answers are the same
SELECT * FROM gs_check('SELECT arr, id FROM gs_g ORDER BY arr, id');
SELECT * FROM gs_check('SELECT (id, k) AS r FROM gs_g ORDER BY (k % 3, id)');
SELECT * FROM gs_check('SELECT ctid, id FROM gs_g ORDER BY ctid DESC');
SELECT * FROM gs_check('SELECT b, id FROM (SELECT decode(md5(id::text), ''hex'') AS b, id FROM gs_g) s ORDER BY b, id');
SELECT * FROM gs_check('SELECT j, id FROM (SELECT jsonb_build_object(''a'', k % 5) AS j, id FROM gs_g) s ORDER BY j DESC, id');
SELECT * FROM gs_check('SELECT m, id FROM (SELECT (k % 50)::money AS m, id FROM gs_g) s ORDER BY m, id');
SELECT * FROM gs_check('SELECT c, id FROM (SELECT chr(65 + k % 50)::"char" AS c, id FROM gs_g) s ORDER BY c DESC, id');
SELECT * FROM gs_check('SELECT i, id FROM (SELECT (''10.0.'' || (k % 7) || ''.'' || (id % 255) || ''/'' || (16 + k % 17))::inet AS i, id FROM gs_g) s ORDER BY i, id');
SELECT * FROM gs_check('SELECT l, id FROM (SELECT (CASE id % 4 WHEN 0 THEN ''FFFFFFFF/FFFFFFFF'' WHEN 1 THEN ''80000000/0'' WHEN 2 THEN ''7FFFFFFF/FFFFFFFF'' ELSE ''0/'' || to_hex(k) END)::pg_lsn AS l, id FROM gs_g) s ORDER BY l DESC, id');
SELECT * FROM gs_check('SELECT r, id FROM (SELECT (CASE WHEN id % 3 = 0 THEN ''pg_class'' WHEN id % 3 = 1 THEN ''gs_g'' ELSE ''pg_type'' END)::regclass AS r, id FROM gs_g) s ORDER BY r, id');
CREATE TYPE gs_mood AS ENUM ('sad', 'ok', 'happy');
ALTER TYPE gs_mood ADD VALUE 'meh' BEFORE 'ok';
SELECT * FROM gs_check('SELECT m, id FROM (SELECT (enum_range(NULL::gs_mood))[1 + k % 4] AS m, id FROM gs_g) s ORDER BY m DESC, id');
SELECT DISTINCT (enum_range(NULL::gs_mood))[1 + k % 4] AS m FROM gs_g ORDER BY 1;

-- gpusort.cpu_threads: the gather of a large in-memory sort (1.2M rows, over
-- the size where it goes parallel) on one and on several threads
SET gpusort.cpu_threads = 0;
SET gpusort.cpu_threads = 65;
SET work_mem = '256MB';
SET gpusort.cpu_threads = 1;
SELECT * FROM gs_check('SELECT g, (g::int8 * 7919) % 1200007 AS k FROM generate_series(1, 1200000) g ORDER BY 2 DESC, 1');
SET gpusort.cpu_threads = 5;
SELECT * FROM gs_check('SELECT g, (g::int8 * 7919) % 1200007 AS k FROM generate_series(1, 1200000) g ORDER BY 2 DESC, 1');
SELECT * FROM gs_check('SELECT md5(g::text) COLLATE "C" AS t, g FROM generate_series(1, 1200000) g ORDER BY 1 OFFSET 600000 LIMIT 20');
RESET gpusort.cpu_threads;
RESET work_mem;
