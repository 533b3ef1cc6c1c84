--
-- setup: helpers shared by the other test files, and the basic shape of
-- the extension (GUCs, gpusort_info(), a first sort with its plan).
--
-- Every other file compares gpusort's answers with PostgreSQL's own answers
-- for the same query, inside the test:
--
--   gs_digest(q)  row count and an md5 over the rows' text, in output order
--   gs_plan(q)    how many GpuSort and plain Sort nodes EXPLAIN shows for q
--   gs_check(q)   runs q with gpusort.enabled on and off; returns the row
--                 count, whether both outputs are identical (same rows, same
--                 order) and the node counts of the "on" plan
--
--   gs_explain(q [, options])
--                 EXPLAIN (COSTS OFF[, options]) q, written the same way by
--                 PostgreSQL 15, 17 and 18; use it rather than a bare EXPLAIN
--                 (see the function for what differs between versions)
--
--   gs_build(ddl, idx), gs_same(q), gs_index_check(idx [, ddl]),
--   gs_index_differ(idx)
--                 btree indexes built by gpusort, checked with amcheck and
--                 compared page by page with PostgreSQL's build of the same
--                 index; queries through indexes compared with PostgreSQL's
--                 sort (for the index tests, which create amcheck and
--                 pageinspect: the functions find theirs when they run)
--
--   gs_pages_differ(a, b)
--                 heap pages of two tables that differ, but for LSN,
--                 checksum and the tuples' xids and command ids (-1: not as
--                 many pages): two heaps rewritten by CLUSTER, one by gpusort
--
--   gs_error_unquoted(q)
--                 runs q; its error as "SQLSTATE: message" without double
--                 quotes (18 quotes parameter names in some messages)
--
-- Queries given to gs_check must have a fully determined output order
-- (PostgreSQL's sort is not stable), e.g. end ORDER BY with a unique column.
--
-- Every file starts with LOAD 'gpusort', SET gpusort.min_rows = 0 and
-- SET work_mem = '4MB' (plans and spilling must not depend on the server's
-- own work_mem, which differs on the GPU machine).
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';

CREATE FUNCTION gs_digest(q text) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
	d text;
BEGIN
	-- the aggregate reads its input in the sub query's output order
	EXECUTE 'SELECT count(*)::text || '' '' || '
		|| 'coalesce(md5(string_agg(s::text, E''\n'')), ''-'') '
		|| 'FROM (' || q || ') s'
		INTO d;
	RETURN d;
END
$fn$;

CREATE FUNCTION gs_plan(q text, OUT gpusort int, OUT sort int)
LANGUAGE plpgsql AS $fn$
DECLARE
	l text;
BEGIN
	gpusort := 0;
	sort := 0;
	FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q
	LOOP
		IF l ~ 'Custom Scan \(GpuSort\)' THEN
			gpusort := gpusort + 1;
		ELSIF l ~ '^\s*(->\s+)?Sort\s*$' THEN
			sort := sort + 1;
		END IF;
	END LOOP;
END
$fn$;

CREATE FUNCTION gs_check(q text,
						 OUT rows bigint, OUT same boolean,
						 OUT gpusort int, OUT sort int)
LANGUAGE plpgsql AS $fn$
DECLARE
	saved text := current_setting('gpusort.enabled');
	d_on text;
	d_off text;
	off_plan record;
BEGIN
	PERFORM set_config('gpusort.enabled', 'on', false);
	SELECT p.gpusort, p.sort INTO gpusort, sort FROM gs_plan(q) p;
	d_on := gs_digest(q);
	PERFORM set_config('gpusort.enabled', 'off', false);
	off_plan := gs_plan(q);
	d_off := gs_digest(q);
	PERFORM set_config('gpusort.enabled', saved, false);
	IF off_plan.gpusort <> 0 THEN
		RAISE EXCEPTION 'GpuSort in a plan made with gpusort.enabled = off: %', q;
	END IF;
	rows := split_part(d_off, ' ', 1)::bigint;
	same := d_on = d_off;
END
$fn$;

-- EXPLAIN without what PostgreSQL's versions print differently: init plans'
-- "(returns $0)" (gone in 17), the table prefix of keys (18 adds it once a
-- query groups, as the group step became a range table entry), "Window:"
-- lines (new in 18), "Buffers:" lines (on by default under ANALYZE in 18),
-- and the decimals of actual row counts (18 prints two)
CREATE FUNCTION gs_explain(q text, opts text DEFAULT '') RETURNS SETOF text
LANGUAGE plpgsql AS $fn$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (COSTS OFF' ||
		CASE WHEN opts = '' THEN '' ELSE ', ' || opts END || ') ' || q
	LOOP
		CONTINUE WHEN l ~ '^\s*(Window|Buffers): ';
		l := regexp_replace(l, ' \(returns \$\d+(,\$\d+)*\)$', '');
		l := regexp_replace(l, '(rows=\d+)\.\d+', '\1', 'g');
		IF l ~ '^\s*(Sort Key|Presorted Key|Group Key): ' THEN
			l := regexp_replace(l, '\m[a-z_][a-z0-9_]*\.(?=[a-z_"])', '', 'g');
		END IF;
		RETURN NEXT l;
	END LOOP;
END
$fn$;

-- EXPLAIN ANALYZE reduced to what does not depend on the machine: no
-- timings, numbers masked, and without the lines naming the engine and
-- device, any fallback, times and memory (the suite also runs on a GPU
-- machine with gpusort.engine = gpu and must print the same there)
CREATE FUNCTION gs_explain_analyze(q text) RETURNS SETOF text
LANGUAGE plpgsql AS $fn$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q
	LOOP
		CONTINUE WHEN l ~ 'GpuSort (Engine|Fallback|Time|Memory)'
			OR l ~ '^\s*(Sort Method|Worker \d+:|Memory Usage|Buffers|Window):?';
		-- how many loading processes stopped at the estimate's budget
		-- depends on how the scheduler ran them (load_parallel tests it)
		l := regexp_replace(l, ' \(\d+ stopped at the estimate''s budget\)', '');
		-- (18 prints actual row counts with two decimals)
		RETURN NEXT regexp_replace(l, '\d+(\.\d+)?', 'N', 'g');
	END LOOP;
END
$fn$;

-- Run gs_check for one column of a table in all four directions, with the
-- unique column "id" as a tie-breaker.  One row per direction.
CREATE FUNCTION gs_check_dirs(tbl text, col text, extra text DEFAULT '')
RETURNS TABLE (dir text, rows bigint, same boolean, gpusort int, sort int)
LANGUAGE plpgsql AS $fn$
DECLARE
	d text;
	c record;
BEGIN
	FOREACH d IN ARRAY ARRAY['ASC NULLS LAST', 'ASC NULLS FIRST',
							 'DESC NULLS FIRST', 'DESC NULLS LAST']
	LOOP
		c := gs_check(format('SELECT %s, id FROM %s %s ORDER BY %s %s, id',
							 col, tbl, extra, col, d));
		dir := d;
		rows := c.rows;
		same := c.same;
		gpusort := c.gpusort;
		sort := c.sort;
		RETURN NEXT;
	END LOOP;
END
$fn$;

-- Same, for every column named in cols; only the summary per column.
CREATE FUNCTION gs_check_cols(tbl text, cols text[])
RETURNS TABLE (col text, rows bigint, all_same boolean, gpusort int, sort int)
LANGUAGE plpgsql AS $fn$
DECLARE
	c text;
BEGIN
	FOREACH c IN ARRAY cols
	LOOP
		RETURN QUERY
			SELECT c, max(d.rows), bool_and(d.same), sum(d.gpusort)::int,
				   sum(d.sort)::int
			FROM gs_check_dirs(tbl, c) d;
	END LOOP;
END
$fn$;

-- amcheck's bt_index_parent_check of the btree index idx, then PostgreSQL's
-- own build of the same index (gpusort.index_build off) as <idx>_pg, in
-- idx's schema: ddl with that name for its %I, or else idx's definition;
-- compares every page but its LSN and checksum, then drops <idx>_pg.
-- size_diff: idx's size less PostgreSQL's, in pages (0 when equal; page
-- counts themselves vary between minor releases); differ: how many pages
-- differ (-1: the sizes differ).
CREATE FUNCTION gs_index_check(idx regclass, ddl text DEFAULT NULL,
							   OUT size_diff int, OUT differ int)
LANGUAGE plpgsql AS $fn$
DECLARE
	pgname text;
	nsp text;
	pgidx regclass;
	pages int;
BEGIN
	SELECT c.relname || '_pg', n.nspname INTO pgname, nsp
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = idx;
	PERFORM bt_index_parent_check(idx, true, true);
	IF ddl IS NULL THEN
		ddl := regexp_replace(pg_get_indexdef(idx), ' INDEX \S+ ON ',
							  ' INDEX ' || quote_ident(pgname) || ' ON ');
	ELSE
		ddl := format(ddl, pgname);
	END IF;
	-- the reference build must see the rows gpusort's saw (see gs_quiet)
	PERFORM gs_quiet();
	PERFORM set_config('gpusort.index_build', 'off', true);
	EXECUTE ddl;
	PERFORM set_config('gpusort.index_build', 'on', true);
	pgidx := format('%I.%I', nsp, pgname)::regclass;
	pages := pg_relation_size(idx) / 8192;
	size_diff := pages - pg_relation_size(pgidx) / 8192;
	IF size_diff <> 0 THEN
		differ := -1;
	ELSE
		SELECT count(*) INTO differ
		FROM generate_series(0, pages - 1) AS b
		WHERE substr(get_raw_page(idx::text, b), 11) <>
			  substr(get_raw_page(pgidx::text, b), 11);
	END IF;
	EXECUTE format('DROP INDEX %s', pgidx);
END
$fn$;

-- Parallel workers still running anywhere in the cluster, after waiting up
-- to 5 s for them to go (a cancelled statement's workers take a moment to
-- exit).  The activity snapshot is cleared each time round: within one
-- transaction pg_stat_activity would otherwise show the same rows.
CREATE FUNCTION gs_workers_left() RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
	n bigint;
BEGIN
	FOR i IN 1 .. 100 LOOP
		PERFORM pg_stat_clear_snapshot();
		SELECT count(*) INTO n FROM pg_stat_activity
		WHERE backend_type = 'parallel worker';
		EXIT WHEN n = 0;
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN n;
END
$fn$;

-- Wait (up to 60 s: an ANALYZE on a loaded 2-core machine took longer
-- than 10 s) until no other session holds the xmin horizon back:
-- an autovacuum worker's snapshot makes CLUSTER and VACUUM FULL keep
-- deleted rows as recently dead, so that two rewrites (or a rewrite and a
-- reference build) made a moment apart would see different rows.
CREATE FUNCTION gs_quiet() RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
	FOR i IN 1 .. 1200 LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity
							  WHERE pid <> pg_backend_pid()
								AND backend_xmin IS NOT NULL);
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$fn$;

-- Heap pages of a and b that differ, beyond their LSN and checksum, in
-- their header or in any line pointer or tuple (its header, null bitmap,
-- data), but for the tuples' xmin, xmax and command id: two tables made
-- the same way in one transaction differ there; -1 when their sizes
-- differ (pageinspect must be there)
CREATE FUNCTION gs_pages_differ(a regclass, b regclass) RETURNS int
LANGUAGE plpgsql AS $fn$
DECLARE
	pages bigint := pg_relation_size(a) / 8192;
	differ int;
BEGIN
	IF pages <> pg_relation_size(b) / 8192 THEN
		RETURN -1;
	END IF;
	SELECT count(*) INTO differ
	FROM generate_series(0, pages - 1) AS blk
	WHERE (SELECT row(flags, lower, upper, special, pagesize, version, prune_xid)::text
		   FROM page_header(get_raw_page(a::text, blk))) <>
		  (SELECT row(flags, lower, upper, special, pagesize, version, prune_xid)::text
		   FROM page_header(get_raw_page(b::text, blk)))
	   OR (SELECT string_agg(row(lp, lp_off, lp_flags, lp_len, t_ctid, t_infomask2,
								 t_infomask, t_hoff, t_bits, t_data)::text, ',' ORDER BY lp)
		   FROM heap_page_items(get_raw_page(a::text, blk))) IS DISTINCT FROM
		  (SELECT string_agg(row(lp, lp_off, lp_flags, lp_len, t_ctid, t_infomask2,
								 t_infomask, t_hoff, t_bits, t_data)::text, ',' ORDER BY lp)
		   FROM heap_page_items(get_raw_page(b::text, blk)));
	RETURN differ;
END
$fn$;

-- gs_index_check's differ alone, for an index already built (by gpusort or
-- by PostgreSQL: its LOG lines, when it logs them, say which)
CREATE FUNCTION gs_index_differ(idx regclass) RETURNS int
LANGUAGE sql AS $fn$
	SELECT differ FROM gs_index_check(idx)
$fn$;

-- Build the index with gpusort (its LOG line shows who built it; msgs: the
-- client_min_messages of the build, debug1 to see its heap scan's line):
-- ddl with the name idx for its %I; then gs_index_check(idx, ddl).  Both
-- builds start with no other session holding the xmin horizon back
-- (gs_quiet): one that did during the first only would keep deleted rows
-- in that index as recently dead.
CREATE FUNCTION gs_build(ddl text, idx text, msgs text DEFAULT 'log',
						 OUT size_diff int, OUT differ int)
LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM gs_quiet();
	PERFORM set_config('client_min_messages', msgs, true);
	EXECUTE format(ddl, idx);
	PERFORM set_config('client_min_messages', 'notice', true);
	SELECT c.size_diff, c.differ INTO size_diff, differ
	FROM gs_index_check(idx::regclass, ddl) c;
END
$fn$;

-- The rows of query q, in its order, through indexes only, then through a
-- sequential scan and PostgreSQL's own sort: equal?
CREATE FUNCTION gs_same(q text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
	h1 text;
	h2 text;
BEGIN
	PERFORM set_config('enable_seqscan', 'off', true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	EXECUTE format('SELECT md5(string_agg(x::text, E''\n'')) FROM (%s) x', q)
		INTO h1;
	PERFORM set_config('enable_seqscan', 'on', true);
	PERFORM set_config('enable_indexscan', 'off', true);
	PERFORM set_config('enable_indexonlyscan', 'off', true);
	PERFORM set_config('gpusort.enabled', 'off', true);
	EXECUTE format('SELECT md5(string_agg(x::text, E''\n'')) FROM (%s) x', q)
		INTO h2;
	PERFORM set_config('enable_indexscan', 'on', true);
	PERFORM set_config('enable_indexonlyscan', 'on', true);
	PERFORM set_config('enable_bitmapscan', 'on', true);
	PERFORM set_config('gpusort.enabled', 'on', true);
	RETURN h1 IS NOT NULL AND h1 = h2;
END
$fn$;

-- q's error, if any, as "SQLSTATE: message" without double quotes (18
-- quotes parameter names where earlier versions did not)
CREATE FUNCTION gs_error_unquoted(q text) RETURNS text
LANGUAGE plpgsql AS $fn$
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || replace(SQLERRM, '"', '');
END
$fn$;

-- the core settings and their defaults (which do not depend on the machine)
SELECT name, boot_val, unit, vartype, min_val, max_val, enumvals
FROM pg_settings
WHERE name IN ('gpusort.enabled', 'gpusort.engine', 'gpusort.min_rows',
			   'gpusort.max_key_bytes', 'gpusort.topn_limit')
ORDER BY name;

-- gpusort_info(): the rows every machine has, and the values that do not
-- depend on the machine
SELECT pg_typeof(name) AS name_type, pg_typeof(value) AS value_type
FROM gpusort_info() LIMIT 1;
SELECT name,
	   CASE WHEN name IN ('version', 'enabled') THEN value
			WHEN name = 'engine_setting' THEN (value IN ('auto', 'gpu', 'cpu'))::text
			WHEN name IN ('cuda_built', 'cuda_loaded') THEN (value IN ('yes', 'no'))::text
			ELSE (value <> '')::text END AS value
FROM gpusort_info()
WHERE name IN ('version', 'enabled', 'engine_setting', 'cuda_built',
			   'cuda_loaded', 'engine', 'device')
ORDER BY name;
SELECT count(*) FILTER (WHERE name IS NULL OR value IS NULL) AS nulls FROM gpusort_info();
SET gpusort.engine = cpu;
SELECT value FROM gpusort_info() WHERE name IN ('engine', 'engine_setting');
RESET gpusort.engine;

-- a first sort, printed
CREATE TABLE gs_small (id int PRIMARY KEY, k int, t text COLLATE "C");
INSERT INTO gs_small
SELECT g, (g * 37) % 11 - 5, chr(ascii('a') + (g * 7) % 26) || g
FROM generate_series(1, 20) g;
INSERT INTO gs_small VALUES (21, NULL, NULL), (22, NULL, 'zz');
ANALYZE gs_small;

EXPLAIN (COSTS OFF) SELECT * FROM gs_small ORDER BY k, id;
SELECT * FROM gs_small ORDER BY k, id;
SELECT * FROM gs_small ORDER BY k DESC, t;
SELECT * FROM gs_small ORDER BY t NULLS FIRST;
EXPLAIN (COSTS OFF, VERBOSE) SELECT k + 1 AS k1, t FROM gs_small ORDER BY t DESC, k + 1;
SELECT k + 1 AS k1, t FROM gs_small ORDER BY t DESC, k + 1;

-- the helpers themselves: same query, same digest; a different order differs
SELECT gs_digest('SELECT * FROM gs_small ORDER BY id') =
	   gs_digest('SELECT * FROM gs_small ORDER BY id') AS digest_stable,
	   gs_digest('SELECT * FROM gs_small ORDER BY id') <>
	   gs_digest('SELECT * FROM gs_small ORDER BY id DESC') AS digest_sees_order;
SELECT * FROM gs_check('SELECT * FROM gs_small ORDER BY k, id');
SELECT * FROM gs_check_dirs('gs_small', 'k');
SELECT * FROM gs_check_cols('gs_small', ARRAY['k', 't']);

-- the GpuSort node of q's plan, run with EXPLAIN ANALYZE (JSON): the first
-- one down the first child of each node above it; NULL if there is none
CREATE FUNCTION gs_gpusort_node(q text) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
	j jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO j;
	j := j->0->'Plan';
	WHILE j IS NOT NULL AND
		j->>'Custom Plan Provider' IS DISTINCT FROM 'GpuSort' LOOP
		j := j->'Plans'->0;
	END LOOP;
	RETURN j;
END
$fn$;
