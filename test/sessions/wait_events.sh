#!/usr/bin/env bash
# While a gpusort sort waits for its own threads (runs written in the
# background, the final merge's streams), pg_stat_activity shows the wait:
# type Extension, named GpuSortThreads on PostgreSQL 17 and later (plain
# "Extension" before).  One session sorts 1M rows at work_mem 1MB, several
# times over; another samples the first's wait event every millisecond or
# so until it has seen one of gpusort's (bounded: 20 s).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

gs_psql <<'SQL' || exit 1
SET client_min_messages = warning;
DROP TABLE IF EXISTS gs_we;
CREATE TABLE gs_we (k int8, pad text) WITH (autovacuum_enabled = off);
INSERT INTO gs_we SELECT (i::int8 * 2654435761) % 1000003, md5(i::text)
	FROM generate_series(1, 1000000) AS i;
VACUUM ANALYZE gs_we;
SQL

major=$(gs_psql -c "SELECT current_setting('server_version_num')::int / 10000")
want=Extension
[ "$major" -ge 17 ] && want=GpuSortThreads

# the sorting session: application_name tells the sampler which it is
PGAPPNAME=gs_we_sort psql -X -q -At >/dev/null 2>&1 <<'SQL' &
SET work_mem = '1MB';
SET max_parallel_workers_per_gather = 0;
SET gpusort.min_rows = 0;
SELECT count(*) FROM (SELECT * FROM gs_we ORDER BY k, pad OFFSET 1) s;
SELECT count(*) FROM (SELECT * FROM gs_we ORDER BY k DESC, pad OFFSET 1) s;
SELECT count(*) FROM (SELECT * FROM gs_we ORDER BY pad COLLATE "C" OFFSET 1) s;
SELECT count(*) FROM (SELECT * FROM gs_we ORDER BY k, pad OFFSET 1) s;
SQL
sorter=$!

seen=$(gs_psql 2>&1 <<'SQL' | sed -n 's/^NOTICE:  seen: //p'
DO $$
DECLARE
	t0 timestamptz := clock_timestamp();
	ev text;
BEGIN
	LOOP
		PERFORM pg_stat_clear_snapshot();
		SELECT wait_event_type || ':' || wait_event INTO ev
		FROM pg_stat_activity
		WHERE application_name = 'gs_we_sort' AND state = 'active'
		  AND wait_event_type = 'Extension'
		LIMIT 1;
		EXIT WHEN ev IS NOT NULL OR clock_timestamp() - t0 > interval '20 s';
		PERFORM pg_sleep(0.001);
	END LOOP;
	RAISE NOTICE 'seen: %', coalesce(ev, 'nothing');
END
$$;
SQL
)
kill "$sorter" 2>/dev/null
wait "$sorter" 2>/dev/null
gs_expect "a sort waiting for its threads shows its wait event" "$seen" "Extension:$want"
gs_psql -c "DROP TABLE gs_we" >/dev/null
gs_done
