--
-- sort_errors: errors raised while a GpuSort reads its input, while it
-- tie-breaks, and while it merges spilled runs; each is PostgreSQL's own
-- error, and the backend sorts correctly afterwards (also after a
-- savepoint rollback and inside a cursor)
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE TABLE gs_err AS
SELECT g AS id, (g * 7919) % 5003 AS k, g % 3 AS small, md5(g::text) COLLATE "C" AS t
FROM generate_series(1, 20000) g;
ANALYZE gs_err;

-- a comparator that fails on one value: used as a tie-break (non-leading)
CREATE FUNCTION gs_fussy_cmp(int4, int4) RETURNS int LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
	IF $1 = 4242 OR $2 = 4242 THEN
		RAISE EXCEPTION 'gs_fussy_cmp met 4242';
	END IF;
	RETURN CASE WHEN $1 < $2 THEN -1 WHEN $1 > $2 THEN 1 ELSE 0 END;
END
$$;
CREATE FUNCTION gs_fussy_lt(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_fussy_cmp($1, $2) < 0 $$;
CREATE FUNCTION gs_fussy_le(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_fussy_cmp($1, $2) <= 0 $$;
CREATE FUNCTION gs_fussy_eq(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_fussy_cmp($1, $2) = 0 $$;
CREATE FUNCTION gs_fussy_ge(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_fussy_cmp($1, $2) >= 0 $$;
CREATE FUNCTION gs_fussy_gt(int4, int4) RETURNS bool LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT gs_fussy_cmp($1, $2) > 0 $$;
CREATE OPERATOR <~< (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_fussy_lt);
CREATE OPERATOR <~<= (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_fussy_le);
CREATE OPERATOR =~= (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_fussy_eq);
CREATE OPERATOR >~>= (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_fussy_ge);
CREATE OPERATOR >~> (LEFTARG = int4, RIGHTARG = int4, FUNCTION = gs_fussy_gt);
CREATE OPERATOR CLASS gs_fussy_ops FOR TYPE int4 USING btree AS
	OPERATOR 1 <~<, OPERATOR 2 <~<=, OPERATOR 3 =~=, OPERATOR 4 >~>=, OPERATOR 5 >~>,
	FUNCTION 1 gs_fussy_cmp(int4, int4);

-- the plan: the int key is encoded, the fussy column is a tie-break
EXPLAIN (COSTS OFF) SELECT id FROM gs_err ORDER BY small, id USING <~<;
-- without 4242 it sorts, with it the comparator's error comes through
SELECT * FROM gs_check('SELECT small, id FROM gs_err WHERE id <> 4242 ORDER BY small, id USING <~<');
SELECT id FROM gs_err ORDER BY small, id USING <~< LIMIT 1000000;
-- the same while merging spilled runs
SET work_mem = '64kB';
SELECT * FROM gs_check('SELECT small, id FROM gs_err WHERE id <> 4242 ORDER BY small, id USING >~>');
SELECT id FROM gs_err ORDER BY small, id USING >~> LIMIT 1000000;
SET work_mem = '4MB';

-- an error while the input is read (in the child's projection)
SELECT id FROM gs_err ORDER BY 1 / (k - 2500), id;
SET work_mem = '64kB';
SELECT id FROM gs_err ORDER BY t, 1 / (k - 2500);
SET work_mem = '4MB';

-- inside a transaction: roll back to a savepoint, then sort again
BEGIN;
SAVEPOINT a;
SELECT id FROM gs_err ORDER BY small, id USING <~< LIMIT 1000000;
ROLLBACK TO SAVEPOINT a;
SELECT * FROM gs_check('SELECT k, id FROM gs_err ORDER BY k DESC, id');
SAVEPOINT b;
SET LOCAL work_mem = '64kB';
SELECT id FROM gs_err ORDER BY t, 1 / (k - 2500);
ROLLBACK TO SAVEPOINT b;
SELECT id, k FROM gs_err ORDER BY k DESC, id LIMIT 3;
COMMIT;

-- an error while a scrollable cursor over a spilled sort is open
BEGIN;
SET LOCAL work_mem = '64kB';
DECLARE gs_ec SCROLL CURSOR FOR SELECT id, t FROM gs_err ORDER BY t;
FETCH 2 FROM gs_ec;
SAVEPOINT c;
SELECT 1 / 0;
ROLLBACK TO SAVEPOINT c;
FETCH BACKWARD 1 FROM gs_ec;
FETCH LAST FROM gs_ec;
COMMIT;

-- no temporary files are left, and everything still sorts
SELECT count(*) AS temp_files_left FROM pg_ls_tmpdir();
SELECT * FROM gs_check('SELECT t, id FROM gs_err ORDER BY t DESC');
SELECT * FROM gs_check('SELECT small, k, id FROM gs_err ORDER BY small, k DESC, id');
