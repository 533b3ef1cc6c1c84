--
--
-- pg_stat_progress_cluster during CLUSTER's table sort: gpusort reports
-- the phases and counts of PostgreSQL's sort path (also where PostgreSQL
-- would have followed the index).  An expression index's function prints
-- its own backend's progress when it meets the row with id 7000 (a NOTICE:
-- an immutable function cannot write a table, and CLUSTER undoes settings
-- made during it): while gpusort scans the heap (PostgreSQL's sort never
-- evaluates the expression then: its line is the expected file's), and
-- while the index is rebuilt after the copy, where the copy's final counts
-- of gpusort's sorts and of PostgreSQL's must be equal.
--
LOAD 'gpusort';
\set SHOW_CONTEXT never
SET max_parallel_maintenance_workers = 0;
SET maintenance_work_mem = '64MB';

CREATE FUNCTION gscp_key(i int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	p record;
BEGIN
	IF i = 7000 AND current_setting('gscp.who', true) <> '' THEN
		PERFORM pg_stat_clear_snapshot();
		SELECT * INTO p FROM pg_stat_progress_cluster WHERE pid = pg_backend_pid();
		IF p.phase IN ('seq scanning heap', 'rebuilding index') THEN
			RAISE NOTICE '%: phase "%", index %, blocks % of %, tuples scanned %, written %',
				current_setting('gscp.who'), p.phase, p.cluster_index_relid,
				p.heap_blks_scanned, p.heap_blks_total, p.heap_tuples_scanned,
				p.heap_tuples_written;
		END IF;
	END IF;
	RETURN i % 1000;
END $$;

CREATE FUNCTION gscp_make(name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TABLE %I (id int, pad text) WITH (autovacuum_enabled = off)', name);
	EXECUTE format('INSERT INTO %I SELECT i, md5(i::text) FROM generate_series(1, 20000) AS i', name);
	EXECUTE format('DELETE FROM %I WHERE id %% 9 = 0', name);
	EXECUTE format('CREATE INDEX %I ON %I (gscp_key(id), id)', name || '_e', name);
END $$;
SELECT gscp_make('gscp1'), gscp_make('gscp2'), gscp_make('gscp3');

-- PostgreSQL's sort (the costs make its planner prefer it)
SET random_page_cost = 1000000;
SET effective_cache_size = '8kB';
SET gpusort.enabled = off;
SET gscp.who = 'pg';
SELECT gs_quiet();
CLUSTER gscp1 USING gscp1_e;
-- gpusort's sort where PostgreSQL chose it
SET gpusort.enabled = on;
SET gscp.who = 'gs';
SELECT gs_quiet();
CLUSTER gscp2 USING gscp2_e;
-- gpusort's sort where PostgreSQL chose the index scan
RESET random_page_cost;
RESET effective_cache_size;
SET gpusort.log_index_builds = on;
SET client_min_messages = log;
SET gscp.who = 'gs_scan';
SELECT gs_quiet();
CLUSTER gscp3 USING gscp3_e;
RESET client_min_messages;

RESET gscp.who;

DROP TABLE gscp1, gscp2, gscp3;
DROP FUNCTION gscp_make(text);
DROP FUNCTION gscp_key(int);
