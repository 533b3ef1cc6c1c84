#!/usr/bin/env bash
# A sort's plain table scan read page by page (src/sort_heapread.c) must see exactly the rows the scan's snapshot sees.
# One session holds a REPEATABLE READ snapshot while another updates,
# deletes and inserts rows, some committed and some still in progress;
# in the first session every ORDER BY gives the same rows with gpusort
# (serial; two loading workers in memory and writing runs; a filter in the
# scan, whose rows come through the scan node)
# as with PostgreSQL's own sort.  Then the same in the writing session, which sees
# its own uncommitted changes, and in READ COMMITTED afterwards.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

gs_psql <<'SQL' || exit 1
SET client_min_messages = warning;
DROP TABLE IF EXISTS gs_lps;
CREATE TABLE gs_lps (id int, k int8, pad text)
	WITH (autovacuum_enabled = off, fillfactor = 80, parallel_workers = 2);
INSERT INTO gs_lps SELECT i, (i * 7919) % 10007, md5(i::text)
	FROM generate_series(1, 60000) AS i;
VACUUM (FREEZE) gs_lps;
SQL

# the digest of the sorted rows, read five ways, one line each
digests()
{
	local q="SELECT md5(string_agg(format('%s/%s/%s', id, k, pad), ',' ORDER BY ord))
	  FROM (SELECT *, row_number() OVER () AS ord
			FROM (SELECT * FROM gs_lps ORDER BY k, id) s) o"
	# a filter that keeps every row: the scan node reads them
	local qf=${q/FROM gs_lps ORDER BY/FROM gs_lps WHERE id > 0 ORDER BY}
	cat <<SQL
SET gpusort.min_rows = 0;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET gpusort.enabled = off;
SET max_parallel_workers_per_gather = 0;
$q;
SET gpusort.enabled = on;
$q;
SET max_parallel_workers_per_gather = 2;
SET work_mem = '64MB';
$q;
SET work_mem = '1MB';
$q;
SET work_mem = '64MB';
$qf;
RESET work_mem;
RESET max_parallel_workers_per_gather;
SELECT 'done';
SQL
}

# read one session's answers up to 'done'; print "same" if all five agree
collect()
{
	local fd=$1 line first="" same=1 n=0
	while read -r line <&"$fd"; do
		[ "$line" = done ] && break
		n=$((n + 1))
		if [ -z "$first" ]; then first=$line; elif [ "$line" != "$first" ]; then same=0; fi
	done
	if [ $n -eq 5 ] && [ $same -eq 1 ]; then echo same; else echo "differ ($n answers)"; fi
}

# a session that stays open: psql between two FIFOs; sets NAME_IN, NAME_OUT
# (file descriptors) and NAME_PID
dir=$(mktemp -d /tmp/gs-lps.XXXXXX)
trap 'rm -rf "$dir"' EXIT
open_session()
{
	local name=$1 fin fout
	mkfifo "$dir/$name.in" "$dir/$name.out"
	psql -X -q -At <"$dir/$name.in" >"$dir/$name.out" 2>&1 &
	printf -v "${name}_PID" %s $!
	exec {fin}>"$dir/$name.in" {fout}<"$dir/$name.out"
	printf -v "${name}_IN" %s "$fin"
	printf -v "${name}_OUT" %s "$fout"
}

# the reader holds its snapshot from before the changes
open_session READER
echo "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM gs_lps;" >&"$READER_IN"
read -r line <&"$READER_OUT"
[ "$line" = 60000 ] || { echo "no snapshot: $line"; exit 1; }

# committed changes: HOT updates, key updates, deletes, new rows
gs_psql <<'SQL' || exit 1
UPDATE gs_lps SET pad = pad || 'h' WHERE id <= 20000 AND id % 3 = 0;
UPDATE gs_lps SET k = -k WHERE id > 40000 AND id % 7 = 0;
DELETE FROM gs_lps WHERE id BETWEEN 20001 AND 40000 AND id % 11 = 0;
INSERT INTO gs_lps SELECT i, i % 5, 'new' FROM generate_series(60001, 65000) AS i;
SQL

# changes in progress in a third session, and one of its subtransactions
# rolled back
open_session WRITER
cat >&"$WRITER_IN" <<'SQL'
BEGIN;
DELETE FROM gs_lps WHERE id % 13 = 0;
UPDATE gs_lps SET k = k + 1000000 WHERE id % 17 = 0;
INSERT INTO gs_lps SELECT i, -i, 'uncommitted' FROM generate_series(70001, 72000) AS i;
SAVEPOINT s;
INSERT INTO gs_lps SELECT i, 0, 'rolled back' FROM generate_series(80001, 81000) AS i;
ROLLBACK TO s;
SELECT 'ready';
SQL
read -r line <&"$WRITER_OUT"
[ "$line" = ready ] || { echo "writer not ready: $line"; exit 1; }

digests >&"$READER_IN"
gs_expect "old snapshot, others' changes committed and in progress" \
	"$(collect "$READER_OUT")" same

digests >&"$WRITER_IN"
gs_expect "the writer's own uncommitted changes" \
	"$(collect "$WRITER_OUT")" same

echo "COMMIT;" >&"$READER_IN"
echo "COMMIT;" >&"$WRITER_IN"
exec {READER_IN}>&- {WRITER_IN}>&-
wait "$READER_PID" "$WRITER_PID" 2>/dev/null

open_session LAST
digests >&"$LAST_IN"
gs_expect "read committed, after both" "$(collect "$LAST_OUT")" same
exec {LAST_IN}>&-
wait "$LAST_PID" 2>/dev/null

gs_psql -c 'DROP TABLE gs_lps' || exit 1
gs_done
