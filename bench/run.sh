#!/usr/bin/env bash
# gpusort benchmark: PostgreSQL's own sort against gpusort, side by side.
#
#   bench/run.sh [options]
#
# Runs against any PostgreSQL 15 server that preloads gpusort
# (shared_preload_libraries = 'gpusort'); connection through the usual PG*
# variables (PGHOST, PGPORT, PGUSER, PGDATABASE, ...); psql is taken from
# $PG_CONFIG --bindir (PG_CONFIG defaults to pg_config on PATH).
#
# Data sets are generated in SQL with fixed seeds, so every machine sorts the
# same rows: table gsb_n_<rows> (narrow: id int8 plus the key columns below),
# gsb_w_<rows> (the same plus a 200-byte text payload) and gsb_j_<rows> (the
# other side of the merge join).  Tables are kept and reused by later runs.
#
# Keys (--keys):
#   i8u   int8, uniform over the whole int8 range
#   i8z   int8, Zipf-like (value v drawn with probability ~ 1/v; many duplicates)
#   f8    float8 with negatives, 1% NaN and some -Infinity
#   tx    text, md5 hex strings, COLLATE "C"
#   ts    timestamp, uniform over 25 years
#   comp  (int4 with 100 distinct values, int8 uniform over 0..rows)
#   id    int8 1..rows, unique, in table order: the key of unique; not in
#         --keys all, but any kind but mergejoin takes it when listed
# Kinds (--kinds):
#   scan       the scan alone, with the same columns: the floor of every case
#   full       SELECT cols FROM t ORDER BY key OFFSET rows (all rows sorted,
#              consumed in the server)
#   limit100   ORDER BY key LIMIT 100
#   limit1m    ORDER BY key LIMIT 1000000
#   window     row_number() OVER (ORDER BY key)
#   groupagg   GROUP BY key with enable_hashagg = off (GroupAggregate)
#   distinct   SELECT DISTINCT key with enable_hashagg = off
#   mergejoin  a join on the key with about one match a row, with
#              enable_hashjoin and enable_nestloop off: i8u and comp join
#              gsb_n to itself (comp on both columns), i8z joins gsb_n's Zipf
#              keys to gsb_j's uniform ones; other keys do not apply
#   index      CREATE INDEX on key (dropped after each build)
#   unique     CREATE UNIQUE INDEX on id (run once a size, whatever --keys)
# Widths (--widths): narrow (id + key) or wide (id + key + 200 B payload);
# wide applies to full, limit*, window and mergejoin.
#
# Each case: one warm-up per mode (gpusort's is an EXPLAIN ANALYZE kept in
# the log), then --runs runs per mode, alternating off/on (order swapped every
# round), in one session.  Reported: medians, speedup = PostgreSQL / gpusort,
# the medians minus the scan-alone floor (measured under the case's
# settings), whether the gpusort plan really contains GpuSort (index: whether
# gpusort built it), and whether both modes returned the same rows in the
# same order (an order-sensitive checksum computed in SQL: a position-seeded
# hash of the sort key of every row, plus an order-insensitive hash of the
# whole rows; the merge join's rows, which a Gather interleaves, as a
# multiset only; an index, where pageinspect is installed, by comparing
# its pages byte for byte with PostgreSQL's, else by reading it back in
# order).  For each mode, the temporary file bytes its warm-up wrote
# (pg_stat_database.temp_bytes before and after, statistics flushed: the
# same as log_temp_files reports).  From gpusort's EXPLAIN ANALYZE: the time
# split (load, sort, merge, emit; summed over the plan's GpuSort nodes, empty
# where EXPLAIN prints no figure: merge for a sort in memory) and the load
# of each participant of a parallel load (GpuSortLoad: leader/worker
# 0/worker 1/...).  For CREATE INDEX, from gpusort's DEBUG2 line of the
# warm-up build: the scan (the leader's whole scan/worker 0/...), the
# sort, "sort, merge and write" as the merge, and the page writer's time
# in WAL and storage calls and in the final sync.
#
# Presets (--preset): the project's benchmark table in one command, PostgreSQL
# and gpusort side by side, each row saying its settings and its target
# (met when the speedup reaches it and gpusort wrote no more temporary bytes
# than PostgreSQL; without a GPU, the CPU engine's targets):
#   defaults   at the server's settings, nothing changed: full on i8u and tx
#              at --rows (default 50000000; target 7x / 6x); window,
#              groupagg, distinct and mergejoin on i8u, i8z and comp at
#              --small-rows (default 10000000; 4x each); index on i8u and tx
#              at --rows (8x / 6x).  Without a GPU: full i8u 2.5x, window 2x.
#   tuned      full on i8u and tx at --rows with work_mem 16GB,
#              max_parallel_workers_per_gather 8 and the table's
#              parallel_workers 8 (reset after the case; from its size alone
#              the planner gives a 50M-row table 7 workers); target 12x on
#              i8u.  8 workers need max_parallel_workers >= 8 and
#              max_worker_processes >= 8 + the background workers already
#              running (gpusort service, logical replication launcher: 10 on
#              a plain server); a server setting, so the script only warns.
#   all        both, in one table.
#   index      index builds, PostgreSQL's and gpusort's at the same settings:
#              CREATE INDEX on i8u, tx and comp (int8, text in C, int4 +
#              int8) and CREATE UNIQUE INDEX on id at --rows, each serial
#              (max_parallel_maintenance_workers 0) and with --workers
#              parallel maintenance workers (default 8); at the server's
#              maintenance_work_mem (add --set maintenance_work_mem=8GB for
#              builds that stay in memory).  gpusort's DEBUG1 line says
#              whether it built each index (column "GpuSort in plan").  No
#              speedup target: the temporary bytes only.
# --kinds, --keys and --widths narrow a preset's cases; --set adds settings
# to every case.  E.g. on a small machine:
#   bench/run.sh --preset all --rows 3000000 --small-rows 3000000 --runs 1
#
# Two presets are scripts of their own (bench/lib/): every other argument is
# theirs, with the options their --help lists, and they print a Markdown table.
#   cancel     how late a statement_timeout stops a large ORDER BY, gpusort
#              and PostgreSQL, serial and parallel, in memory and in runs,
#              on a table with an int8 column k, e.g.
#                bench/run.sh --preset cancel --table g5 --timeouts 100,500
#   shards     one table, range partitions and postgres_fdw shards, ORDER BY
#              and merge join, on throwaway servers it starts itself (as a
#              user other than root), e.g.
#                bench/run.sh --preset shards --rows 1000000 --runs 1 --port 5600
#
# Options:
#   --preset NAME       defaults, tuned, all, index, cancel or shards (see
#                       above; cancel and shards take their own options)
#   --rows N[,N...]     data set sizes (default 1000000); with --preset, the
#                       size of full and index (one number)
#   --small-rows N      with --preset, the size of window, groupagg, distinct
#                       and mergejoin (one number)
#   --kinds LIST|all    (default: all); --keys LIST|all (default: all);
#   --widths LIST       (default: narrow,wide)
#   --quick             a short selection, most telling first: full on i8u
#                       and tx, mergejoin, window, limit100, full wide,
#                       groupagg and distinct on i8z, index, limit1m, full on
#                       f8, ts and comp
#   --runs N            timed runs per mode (default 3)
#   --workers N         with --preset index, the parallel builds' maintenance
#                       workers (default 8)
#   --set NAME=VALUE    a setting for both modes (repeatable), e.g.
#                       --set gpusort.engine=gpu --set work_mem=4GB
#   --deadline SEC      start no new case after SEC seconds (results so far kept)
#   --no-verify         skip the checksums (not for published numbers)
#   --out DIR           output folder (default bench/out/<date>-<time>)
#   --drop              drop the generated tables at the end
#   --data-only         generate the tables the selected cases need, then stop
#   --render-md DIR     only rewrite DIR/results.md from DIR/results.csv (for
#                       a run that was cut short)
#
# Output in DIR: results.csv (one row per case; the columns of earlier
# versions first, then settings, temp_pg_mb, temp_gs_mb, merge_ms, emit_ms,
# load_participants_ms, load_workers, load_path, target_speedup,
# target_result), machine.csv (GPU as gpusort_info() reports it, CPU,
# PostgreSQL version, settings, commit, preset), results.md (Markdown table),
# log/ (each case's psql session, EXPLAIN ANALYZE).
# Render charts with bench/render.sh DIR/results.csv (needs gnuplot).

set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# presets that are scripts of their own (bench/lib/NAME.sh): every other
# argument is theirs
for ((i = 1; i < $#; i++)); do
	j=$((i + 1))
	if [ "${!i}" = --preset ]; then
		case "${!j}" in
			cancel|shards)
				args=("${@:1:i-1}" "${@:j+1}")
				exec bash "$BENCH_DIR/lib/${!j}.sh" ${args[@]+"${args[@]}"} ;;
		esac
	fi
done

rows_list=1000000
kinds=all
keys=all
widths=narrow,wide
runs=3
deadline=0
verify=1
drop=0
data_only=0
render_md=
out=
sets=()

ALL_KINDS="scan full limit100 limit1m window groupagg distinct mergejoin index unique"
ALL_KEYS="i8u i8z f8 tx ts comp"

usage()
{
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
	exit "${1:-0}"
}

# ---- Markdown table -----------------------------------------------------------

# results.md from results.csv (and machine.csv) in folder $1; columns are
# found by name, so the results.csv of earlier versions render too
write_md()
{
	local dir=$1 m
	m()
	{
		sed -n "s/^$1,//p" "$dir/machine.csv" | head -n 1 | tr -d '"'
	}
	{
		echo "gpusort benchmark $(m date): commit $(m commit); CPU: $(m cpu); memory $(m memory);" \
			"GPU: $(m gpusort_info.device); $(m pg_version | cut -d, -f1);" \
			"$(m runs) timed runs per mode (medians, ms); server: work_mem $(m work_mem)," \
			"max_parallel_workers_per_gather $(m max_parallel_workers_per_gather)," \
			"max_parallel_workers $(m max_parallel_workers), max_worker_processes $(m max_worker_processes)," \
			"shared_buffers $(m shared_buffers); --set: $(bs=$(m bench_sets); echo "${bs:-none}");" \
			"$(p=$(m preset); echo "${p:+preset $p; }")each row's settings in its own column"
		echo
		echo "Temp MB: temporary file bytes the warm-up run of each mode wrote (pg_stat_database.temp_bytes)." \
			"gpusort time split from the EXPLAIN ANALYZE of its warm-up (summed over GpuSort nodes; - where EXPLAIN prints no figure):" \
			"load / sort / merge / emit; load per participant: leader/worker 0/worker 1/... (GpuSortLoad, + between nodes)." \
			"CREATE INDEX: from gpusort's DEBUG2 line of its warm-up build: scan / sort / sort, merge and write; the scan of the leader/worker 0/...; the page writer's WAL and storage calls and its sync." \
			"Targets ($(t=$(m targets); [ "$t" = cpu ] && echo "the CPU engine's: ORDER BY int8 2.5x and window 2x at 3M rows" || echo "the GPU machine's")):" \
			"≥ N×: the speedup target, met when the speedup reaches it and gpusort wrote no more temporary bytes than PostgreSQL;" \
			"temp: the temporary bytes alone, for a row without a speedup target."
		echo
		echo "| rows | case | key | width | settings | PostgreSQL ms | gpusort ms | speedup | target | temp MB: PG / gpusort | gpusort load / sort / merge / emit ms | load per participant ms | scan floor ms | above floor: PG / gpusort ms | GpuSort in plan | same result |"
		echo "| ---: | --- | --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"
		awk -F, '
			function f(name) { return (name in col) ? $(col[name]) : "" }
			function ms(v) { return v == "" ? "-" : sprintf("%.1f", v) }
			NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
			{
				gsub(/"/, "")
				above = f("pg_above_floor_ms") == "" ? "" : f("pg_above_floor_ms") " / " f("gpusort_above_floor_ms")
				temp = (f("temp_pg_mb") == "" && f("temp_gs_mb") == "") ? "" : ms(f("temp_pg_mb")) " / " ms(f("temp_gs_mb"))
				tsplit = ""
				if (f("load_ms") != "")
					tsplit = ms(f("load_ms")) " / " ms(f("sort_ms")) " / " ms(f("merge_ms")) " / " ms(f("emit_ms"))
				tgt = f("target_result")
				if (tgt != "")
					tgt = (f("target_speedup") != "" ? "≥ " f("target_speedup") "×" : "temp") ": " tgt
				sp = f("speedup")
				part = f("load_participants_ms")
				if (f("load_path") != "")
					part = part (part == "" ? "" : " ") "(" f("load_path") ")"
				printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
					f("rows"), f("kind"), f("key"), f("width"), f("settings"),
					f("pg_ms"), f("gpusort_ms"), (sp == "" ? "" : sp "×"), tgt, temp, tsplit,
					part, f("floor_ms"), above, f("gpusort_in_plan"), f("same_result")
			}' "$dir/results.csv"
	} >"$dir/results.md"
}

quick=0
preset=
workers=8
small_rows=
rows_given=0 kinds_given=0 keys_given=0 widths_given=0
while [ $# -gt 0 ]; do
	case "$1" in
		--rows) rows_list=$2; rows_given=1; shift ;;
		--small-rows) small_rows=$2; shift ;;
		--preset) preset=$2; shift ;;
		--kinds|--cases) kinds=$2; kinds_given=1; shift ;;
		--keys) keys=$2; keys_given=1; shift ;;
		--widths) widths=$2; widths_given=1; shift ;;
		--quick) quick=1 ;;
		--runs) runs=$2; shift ;;
		--workers) workers=$2; shift ;;
		--set) sets+=("$2"); shift ;;
		--deadline) deadline=$2; shift ;;
		--no-verify) verify=0 ;;
		--out) out=$2; shift ;;
		--drop) drop=1 ;;
		--data-only) data_only=1 ;;
		--render-md) render_md=$2; shift ;;
		-h|--help) usage 0 ;;
		*) echo "unknown option: $1" >&2; usage 2 >&2 ;;
	esac
	shift
done
case "$preset" in
	''|defaults|tuned|all|index) ;;
	*) echo "unknown preset $preset (defaults, tuned, all, index, cancel or shards)" >&2; exit 2 ;;
esac
if [ -n "$preset" ]; then
	[ "$rows_given" = 1 ] || rows_list=50000000
	small_rows=${small_rows:-10000000}
	case "$rows_list:$small_rows" in
		*[!0-9:]*|:*|*:) echo "--preset takes one number of rows for --rows and one for --small-rows" >&2; exit 2 ;;
	esac
	[ "$quick" = 0 ] || { echo "--quick and --preset both choose the cases: give one of them" >&2; exit 2; }
elif [ -n "$small_rows" ]; then
	echo "--small-rows is for --preset (the other cases run at every --rows)" >&2; exit 2
fi
[ "$kinds" = all ] && kinds=$ALL_KINDS
[ "$keys" = all ] && keys=$ALL_KEYS
kinds=${kinds//,/ }
keys=${keys//,/ }
widths=${widths//,/ }
rows_list=${rows_list//,/ }
if [ -n "$render_md" ]; then
	write_md "$render_md"
	cat "$render_md/results.md"
	exit 0
fi
case "$runs" in ''|*[!0-9]*|0) echo "--runs must be a positive integer" >&2; exit 2 ;; esac
case "$workers" in ''|*[!0-9]*|0) echo "--workers must be a positive integer" >&2; exit 2 ;; esac

PG_CONFIG=${PG_CONFIG:-pg_config}
PSQL=$("$PG_CONFIG" --bindir)/psql
[ -x "$PSQL" ] || { echo "psql not found beside $PG_CONFIG" >&2; exit 1; }

stamp=$(date -u +%Y%m%d-%H%M%S)
out=${out:-$BENCH_DIR/out/$stamp}
mkdir -p "$out/log"
start_s=$(date +%s)

# server NOTICEs (IF NOT EXISTS ...) are noise here; warnings still show
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"

psql_q()
{
	"$PSQL" -X -q -A -t -v ON_ERROR_STOP=1 "$@"
}

# ---- the cases ----------------------------------------------------------

# the ORDER BY list of a key
key_order()
{
	case "$1" in
		comp) echo "lc, i8c" ;;
		*) echo "$1" ;;
	esac
}

# Set the case's SQL pieces (kind scan: the floor of case kind $5):
#   Q      the timed statement (results consumed in the server)
#   INNER  the same rows, returned, for the checksum (empty: no checksum)
#   ORD    columns of INNER whose sequence must match (order-sensitive)
#   CONT   columns of INNER whose multiset must match
#   FLOOR  the scan-alone statement for this case (FLOOR_KEY: its key label)
#   PRE    settings the case needs in both modes
#   POST   statement run after each timed run, untimed (index: DROP INDEX)
case_sql()
{
	local kind=$1 key=$2 width=$3 n=$4
	local t=gsb_n_$n k cols
	if [ "$kind" = scan ]; then
		# the floor of case ($5 key width): its FLOOR, timed
		case_sql "$5" "$key" "$width" "$n"
		Q=$FLOOR INNER= ORD= CONT= PRE= POST=
		return
	fi
	k=$(key_order "$key")
	[ "$width" = wide ] && t=gsb_w_$n
	cols="id, $k"
	[ "$width" = wide ] && cols="$cols, pad"
	Q= INNER= ORD= CONT= PRE= POST=
	FLOOR="SELECT $cols FROM $t OFFSET $n" FLOOR_KEY=$key
	case "$kind" in
		full)
			INNER="SELECT $cols FROM $t ORDER BY $k"
			Q="$INNER OFFSET $n"
			ORD=$k CONT=$cols ;;
		limit100|limit1m)
			local l=100
			[ "$kind" = limit1m ] && l=1000000
			INNER="SELECT $cols FROM $t ORDER BY $k LIMIT $l"
			Q="SELECT * FROM ($INNER) s OFFSET $l"
			ORD=$k CONT=$k ;;
		window)
			INNER="SELECT $cols, row_number() OVER (ORDER BY $k) AS w_rn FROM $t"
			Q="$INNER OFFSET $n"
			ORD="$k, w_rn" CONT=$cols ;;
		groupagg)
			INNER="SELECT $k, count(*) AS cnt, sum(id) AS sid FROM gsb_n_$n GROUP BY $k"
			Q="$INNER OFFSET $n"
			PRE="SET enable_hashagg = off;"
			ORD="$k, cnt, sid" CONT=$ORD ;;
		distinct)
			INNER="SELECT DISTINCT $k FROM gsb_n_$n"
			Q="$INNER OFFSET $n"
			PRE="SET enable_hashagg = off;"
			ORD=$k CONT=$k ;;
		mergejoin)
			# about one match a row: i8u and comp join the table to itself
			# (on i8u, on (lc, i8c)), i8z joins its Zipf keys to gsb_j's
			# uniform ones
			local pad='' other=gsb_n_$n on acols bcols sel
			[ "$width" = wide ] && pad=pad
			case "$key" in
				i8z) other=gsb_j_$n on="a.i8z = b.i8c" acols=i8z bcols=i8c sel=a.i8z ;;
				comp) on="a.lc = b.lc AND a.i8c = b.i8c" acols="lc, i8c" bcols=$acols sel="a.lc, a.i8c" ;;
				*) on="a.$key = b.$key" acols=$key bcols=$key sel=a.$key ;;
			esac
			INNER="SELECT a.id AS aid, $sel, b.id AS bid${pad:+, a.pad} FROM $t a JOIN $other b ON $on"
			Q="$INNER OFFSET $((4 * n))"
			FLOOR="SELECT * FROM (SELECT id, $acols${pad:+, pad} FROM $t UNION ALL SELECT id, $bcols${pad:+, ''} FROM $other) u OFFSET $((2 * n))"
			FLOOR_KEY=join_$key
			PRE="SET enable_hashjoin = off; SET enable_nestloop = off;"
			# under a Gather the workers' rows come interleaved: the rows
			# are compared as a multiset only (a misordered input would
			# lose matches, which that catches)
			ORD=0 CONT="aid, $acols, bid${pad:+, pad}" ;;
		index|unique)
			local u=
			[ "$kind" = unique ] && u="UNIQUE "
			Q="CREATE ${u}INDEX gsb_idx_$n ON gsb_n_$n ($k)"
			POST="DROP INDEX gsb_idx_$n;"
			# an index a run stopped mid-case left behind
			PRE="DROP INDEX IF EXISTS gsb_idx_$n, gsb_idxpg_$n;"
			# checked through the index itself (see index_check)
			INNER="SELECT $k FROM gsb_n_$n ORDER BY $k"
			ORD=$k CONT=$k ;;
		*) echo "unknown kind $kind" >&2; return 1 ;;
	esac
}

# the checksum of INNER: rows : position-seeded key hash : row-multiset hash
checksum_sql()
{
	echo "SELECT count(*) || ':' || coalesce(bit_xor(hashtextextended(ROW($ORD)::text, rn)), 0)
		|| ':' || coalesce(sum(hashtext(ROW($CONT)::text)::int8), 0)
	  FROM (SELECT row_number() OVER () AS rn, q.* FROM ($INNER) q) s;"
}

# An index build's check where pageinspect is there: PostgreSQL's index and
# gpusort's side by side, their pages compared byte for byte past the LSN
# and checksum (what the regression tests require), gpusort's checked by
# amcheck; SUM off and SUM on then print the sizes in pages and how many
# pages differ.  Much cheaper at 50M rows than reading each index back in
# order and checking that it holds every heap tuple.
index_compare_sql()
{
	local n=$1
	echo "SET gpusort.enabled = off;"
	echo "$Q;"
	echo "ALTER INDEX gsb_idx_$n RENAME TO gsb_idxpg_$n;"
	echo "SET gpusort.enabled = on;"
	echo "$Q;"
	[ "$have_amcheck" = 1 ] && echo "SELECT bt_index_check('gsb_idx_$n', false);"
	echo "\\echo SUM off"
	echo "SELECT 'pages ' || pg_relation_size('gsb_idxpg_$n') / $BLCKSZ || ' differ 0';"
	echo "\\echo SUM on"
	echo "SELECT 'pages ' || pg_relation_size('gsb_idx_$n') / $BLCKSZ || ' differ ' || count(*)
	  FROM generate_series(0, least(pg_relation_size('gsb_idx_$n'), pg_relation_size('gsb_idxpg_$n')) / $BLCKSZ - 1) AS b
	 WHERE substr(get_raw_page('gsb_idx_$n', b), 11) <> substr(get_raw_page('gsb_idxpg_$n', b), 11);"
	echo "DROP INDEX gsb_idxpg_$n;"
	echo "$POST"
}

# is kind $1 an index build?
is_build()
{
	case "$1" in index|unique) return 0 ;; *) return 1 ;; esac
}

# does a width apply to a kind?
width_applies()
{
	case "$1:$2" in
		*:narrow) return 0 ;;
		full:wide|limit100:wide|limit1m:wide|window:wide|mergejoin:wide|scan:wide) return 0 ;;
		*) return 1 ;;
	esac
}

# does a key apply to a kind?  (the merge join: keys with about one match a row)
key_applies()
{
	case "$1:$2" in
		mergejoin:i8u|mergejoin:i8z|mergejoin:comp) return 0 ;;
		mergejoin:*) return 1 ;;
		unique:id) return 0 ;;
		unique:*) return 1 ;;
	esac
}

# ---- data -----------------------------------------------------------------

GEN_SLICES=8
GEN_JOBS=$(nproc 2>/dev/null || echo 1)
if [ "$GEN_JOBS" -gt "$GEN_SLICES" ]; then GEN_JOBS=$GEN_SLICES; fi

# create gsb_n_<n> (and gsb_w_<n>, gsb_j_<n> when wanted) unless present
make_data()
{
	local n=$1 want_wide=$2 want_join=$3 t0 have
	t0=$(date +%s)
	have=$(psql_q -c "SELECT count(*) FROM pg_class WHERE relname = 'gsb_n_$n' AND relkind = 'r'")
	if [ "$have" = 0 ]; then
		echo "generating gsb_n_$n ($n rows, $GEN_SLICES slices, $GEN_JOBS at a time)"
		# slice s holds ids lo..hi drawn with seed s; slices are made
		# concurrently, then concatenated in slice order, so the table is
		# the same whatever the number of cores
		local s lo hi
		for ((s = 0; s < GEN_SLICES; s++)); do
			lo=$((n * s / GEN_SLICES + 1)) hi=$((n * (s + 1) / GEN_SLICES))
			psql_q >/dev/null <<-SQL &
				SET max_parallel_workers_per_gather = 0;
				DROP TABLE IF EXISTS gsb_slice${s}_$n;
				SELECT setseed(0.2026 + $s / 1000.0);
				CREATE UNLOGGED TABLE gsb_slice${s}_$n AS
				SELECT g AS id,
					((random() - 0.5) * 1.8446744e19)::int8 AS i8u,
					floor(exp(random() * ln($n + 1)))::int8 AS i8z,
					CASE WHEN random() < 0.98 THEN (random() - 0.5) * 2e6
						 WHEN random() < 0.5 THEN 'NaN'::float8
						 ELSE '-Infinity'::float8 END AS f8,
					md5(random()::text) AS tx,
					timestamp '2000-01-01' + random() * interval '9131 days' AS ts,
					floor(random() * 100)::int4 AS lc,
					floor(random() * $n)::int8 AS i8c
				FROM generate_series($lo, $hi) g;
			SQL
			if (((s + 1) % GEN_JOBS == 0)); then wait; fi
		done
		wait
		local union=
		for ((s = 0; s < GEN_SLICES; s++)); do
			union+="${union:+ UNION ALL }SELECT * FROM gsb_slice${s}_$n"
		done
		psql_q >/dev/null <<-SQL
			SET max_parallel_workers_per_gather = 0;
			CREATE TABLE gsb_n_$n (id int8, i8u int8, i8z int8, f8 float8,
				tx text COLLATE "C", ts timestamp, lc int4, i8c int8);
			INSERT INTO gsb_n_$n $union;
			VACUUM (FREEZE, ANALYZE) gsb_n_$n;
		SQL
		for ((s = 0; s < GEN_SLICES; s++)); do
			psql_q -c "DROP TABLE gsb_slice${s}_$n"
		done
	fi
	if [ "$want_wide" = 1 ]; then
		have=$(psql_q -c "SELECT count(*) FROM pg_class WHERE relname = 'gsb_w_$n' AND relkind = 'r'")
		if [ "$have" = 0 ]; then
			echo "generating gsb_w_$n"
			psql_q >/dev/null <<-SQL
				SET max_parallel_workers_per_gather = 0;
				CREATE TABLE gsb_w_$n AS
				SELECT *, lpad(id::text, 200, 'abcdefghij') AS pad FROM gsb_n_$n;
				VACUUM (FREEZE, ANALYZE) gsb_w_$n;
			SQL
		fi
	fi
	if [ "$want_join" = 1 ]; then
		have=$(psql_q -c "SELECT count(*) FROM pg_class WHERE relname = 'gsb_j_$n' AND relkind = 'r'")
		if [ "$have" = 0 ]; then
			echo "generating gsb_j_$n"
			psql_q >/dev/null <<-SQL
				SET max_parallel_workers_per_gather = 0;
				CREATE TABLE gsb_j_$n (id int8, i8c int8);
				SELECT setseed(0.4711);
				INSERT INTO gsb_j_$n SELECT g, floor(random() * $n)::int8
				FROM generate_series(1, $n) g;
				VACUUM (FREEZE, ANALYZE) gsb_j_$n;
			SQL
		fi
	fi
	echo "data for $n rows ready in $(($(date +%s) - t0)) s"
}

# ---- machine information ----------------------------------------------------

csv_field()
{
	# quote a CSV field
	local v=${1//\"/\"\"}
	printf '"%s"' "$v"
}

commit=${GS_COMMIT:-$(git -C "$BENCH_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)}
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
cpu="${cpu:-unknown} x $(nproc 2>/dev/null || echo '?')"
pgver=$(psql_q -c "SHOW server_version")
psql_q -c "CREATE EXTENSION IF NOT EXISTS gpusort" >/dev/null
preload=$(psql_q -c "SHOW shared_preload_libraries")
# entries may be paths ('/x/gpusort.so'); compare their base names
if ! tr ', ' '\n\n' <<<"$preload" | sed -e 's|.*/||' -e 's|\.so$||' | grep -qx gpusort; then
	echo "warning: gpusort is not in shared_preload_libraries ($preload): gpusort runs will use PostgreSQL's sort" >&2
fi
# the gpusort service starts with the server and may still be looking for
# its GPUs (a CUDA context takes seconds): wait for it, at most 60 s
for ((i = 0; i < 60; i++)); do
	info=$(psql_q -F '=' -c "SELECT name, value FROM gpusort_info()")
	grep -q '^cuda_error=the gpusort service is not running' <<<"$info" || break
	sleep 1
done
gpu=$(printf '%s\n' "$info" | sed -n 's/^\(device\|device_name\|gpu\)=//p' | head -n 1)
gpu=${gpu:-$(printf '%s\n' "$info" | grep -i 'device\|gpu' | head -n 1)}
gpu=${gpu:-none}
# the project's targets: the GPU machine's, or the CPU engine's without a GPU
engine_now=$(printf '%s\n' "$info" | sed -n 's/^engine=//p' | head -n 1)
gpu_targets=1
[ "$engine_now" = cpu ] && gpu_targets=0

set_sql=
for s in "${sets[@]}"; do
	set_sql+="SET ${s%%=*} = '${s#*=}'; "
done

{
	echo "key,value"
	echo "date,$(date -u +%FT%TZ)"
	echo "commit,$commit"
	echo "cpu,$(csv_field "$cpu")"
	echo "memory,$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
	echo "pg_version,$(csv_field "$(psql_q -c 'SELECT version()')")"
	echo "bench_sets,$(csv_field "${sets[*]:-}")"
	echo "runs,$runs"
	echo "preset,$preset"
	echo "targets,$([ "$gpu_targets" = 1 ] && echo gpu || echo cpu)"
	printf '%s\n' "$info" | while IFS='=' read -r k v; do
		echo "gpusort_info.$k,$(csv_field "$v")"
	done
	psql_q -F ',' -c "$set_sql SELECT name, '\"' || replace(setting || coalesce(unit, ''), '\"', '\"\"') || '\"'
		FROM pg_settings
		WHERE name IN ('work_mem', 'maintenance_work_mem', 'shared_buffers',
					   'max_parallel_workers_per_gather', 'max_parallel_maintenance_workers',
					   'max_parallel_workers', 'max_worker_processes',
					   'min_parallel_table_scan_size', 'jit', 'shared_preload_libraries')
		   OR name LIKE 'gpusort.%' ORDER BY name"
} >"$out/machine.csv"

# ---- settings profiles (the presets' settings) -------------------------------

# Set, for profile $1 (defaults, tuned, serial, parallel; - for none) on
# table $2:
#   PROF_SQL   statements run before the case, in both modes
#   PROF_END   statements run after the case
#   PROF_DESC  the settings as results.csv and results.md show them
profile_setup()
{
	local prof=$1 t=$2
	PROF_SQL='' PROF_END='' PROF_DESC=''
	case "$prof" in
		defaults) PROF_DESC="PostgreSQL defaults" ;;
		serial)
			PROF_SQL="SET max_parallel_maintenance_workers = 0;"
			PROF_DESC="max_parallel_maintenance_workers=0" ;;
		parallel)
			PROF_SQL="SET max_parallel_maintenance_workers = $workers;"
			PROF_DESC="max_parallel_maintenance_workers=$workers" ;;
		tuned)
			# the planner gives a 50M-row table 7 workers from its size:
			# the table's parallel_workers makes it the 8 asked for
			PROF_SQL="SET work_mem = '16GB'; SET max_parallel_workers_per_gather = 8; ALTER TABLE $t SET (parallel_workers = 8);"
			PROF_END="ALTER TABLE $t RESET (parallel_workers);"
			PROF_DESC="work_mem=16GB max_parallel_workers_per_gather=8 table parallel_workers=8" ;;
		*) PROF_DESC='' ;;
	esac
	if [ "${#sets[@]}" -gt 0 ]; then
		PROF_DESC="${PROF_DESC:+$PROF_DESC + }${sets[*]}"
	fi
	PROF_DESC=${PROF_DESC:-server settings}
	PROF_DESC=${PROF_DESC//,/;}
}

# the project's speedup target for a preset row (profile kind key), or nothing
target_of()
{
	if [ "$gpu_targets" = 1 ]; then
		case "$1:$2:$3" in
			defaults:full:i8u) echo 7 ;;
			defaults:full:tx) echo 6 ;;
			tuned:full:i8u) echo 12 ;;
			defaults:window:*|defaults:groupagg:*|defaults:distinct:*|defaults:mergejoin:*) echo 4 ;;
			defaults:index:i8u) echo 8 ;;
			defaults:index:tx) echo 6 ;;
		esac
	else
		# the CPU engine on a small machine (3M rows)
		case "$1:$2:$3" in
			defaults:full:i8u) echo 2.5 ;;
			defaults:window:*) echo 2 ;;
		esac
	fi
}

# the server's room for $1 parallel workers (the tuned cases' 8 a gather,
# the index preset's --workers a build); $2 names them in the warning
check_workers()
{
	local want=$1 what=$2 mwp mpw bgw
	mwp=$(psql_q -c "SHOW max_worker_processes")
	mpw=$(psql_q -c "SHOW max_parallel_workers")
	# background workers already holding a slot (gpusort service, the
	# logical replication launcher, ...): every process type but the core ones
	bgw=$(psql_q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type NOT IN
		('autovacuum launcher', 'autovacuum worker', 'archiver', 'background writer',
		 'client backend', 'checkpointer', 'logger', 'standalone backend', 'startup',
		 'walreceiver', 'walsender', 'walwriter')")
	echo "worker_slots,$((mwp - bgw))" >>"$out/machine.csv"
	if [ $((mwp - bgw)) -lt "$want" ] || [ "$mpw" -lt "$want" ]; then
		echo "warning: $what ask for $want workers, but max_worker_processes is $mwp" \
			"with $bgw background workers running and max_parallel_workers is $mpw:" \
			"set max_worker_processes >= $((bgw + want)) (a server setting: restart) and" \
			"max_parallel_workers >= $want; fewer workers run" >&2
	fi
}

# ---- running a case ---------------------------------------------------------

median()
{
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# the temporary bytes this database has written, labelled $1 in the log:
# the session's pending statistics flushed first (its parallel workers
# flushed theirs when they exited), then read from a fresh snapshot
temp_probe()
{
	[ "$have_flush" = 1 ] || return 0
	echo "SELECT pg_stat_force_next_flush();"
	echo "SELECT pg_stat_clear_snapshot();"
	echo "SELECT 'TEMP $1 ' || temp_bytes FROM pg_stat_database WHERE datname = current_database();"
}

# MB written between probes $2 and $3 of log $1 (empty: not measured)
temp_mb()
{
	awk -v a="$2" -v b="$3" '$1 == "TEMP" && $2 == a { x = $3; hx = 1 }
		$1 == "TEMP" && $2 == b { y = $3; hy = 1 }
		END { if (hx && hy) printf "%.1f", (y - x) / 1048576 }' "$1"
}

declare -A FLOOR_MS
CSV=$out/results.csv
echo "rows,kind,key,width,pg_ms,gpusort_ms,speedup,floor_ms,pg_above_floor_ms,gpusort_above_floor_ms,above_floor_speedup,gpusort_in_plan,same_result,pg_runs_ms,gpusort_runs_ms,gpu,commit,engine,fallback,explain_ms,load_ms,sort_ms,transfer_ms,tiebreak_ms,settings,temp_pg_mb,temp_gs_mb,merge_ms,emit_ms,load_participants_ms,load_workers,load_path,target_speedup,target_result" >"$CSV"

# the psql script of a case (kind $1, rows $2; case_sql and profile_setup
# have set its pieces): plans, warm-ups with their temporary bytes, the
# timed runs alternating off/on, the checksums
case_script()
{
	local kind=$1 n=$2 i m first second
	echo "$set_sql"
	echo "$PROF_SQL"
	echo "$PRE"
	echo "\\echo PLAN off"
	echo "SET gpusort.enabled = off;"
	is_build "$kind" || echo "EXPLAIN (COSTS OFF) $Q;"
	echo "\\echo PLAN on"
	echo "SET gpusort.enabled = on;"
	is_build "$kind" || echo "EXPLAIN (COSTS OFF) $Q;"
	echo "\\echo WARMUP"
	echo "SET gpusort.enabled = off;"
	temp_probe off0
	echo "$Q;"
	temp_probe off1
	echo "$POST"
	echo "SET gpusort.enabled = on;"
	temp_probe on0
	if is_build "$kind"; then
		# who built it: gpusort's DEBUG1 line says; its DEBUG2 lines
		# split the build's time
		echo "SET client_min_messages = debug2;"
		echo "$Q;"
		echo "SET client_min_messages = warning;"
	else
		echo "EXPLAIN (ANALYZE, VERBOSE) $Q;"
	fi
	temp_probe on1
	echo "$POST"
	for ((i = 1; i <= runs; i++)); do
		if ((i % 2)); then first=off second=on; else first=on second=off; fi
		for m in $first $second; do
			echo "SET gpusort.enabled = $m;"
			echo "\\echo RUN $m"
			echo "\\timing on"
			echo "$Q;"
			echo "\\timing off"
			echo "$POST"
		done
	done
	if [ "$verify" = 1 ] && [ -n "$INNER" ] && is_build "$kind" &&
		[ "$have_pageinspect" = 1 ]; then
		index_compare_sql "$n"
	elif [ "$verify" = 1 ] && [ -n "$INNER" ]; then
		for m in off on; do
			echo "SET gpusort.enabled = $m;"
			if is_build "$kind"; then
				# build the index in this mode, then read it back in order
				echo "$Q;"
				echo "SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off;"
				[ "$have_amcheck" = 1 ] && echo "SELECT bt_index_check('gsb_idx_$n', true);"
			fi
			echo "\\echo SUM $m"
			checksum_sql
			if is_build "$kind"; then
				echo "RESET enable_seqscan; RESET enable_bitmapscan; RESET enable_sort;"
				echo "$POST"
			fi
		done
	fi
	echo "$PROF_END"
}

# gpusort's time split from the warm-up's EXPLAIN ANALYZE in log $1, as
# CSV fields: execution, load, sort, transfer, tie-break, merge, emit ms
# (summed over the plan's GpuSort nodes; a figure EXPLAIN did not print
# stays empty), the load of each participant, the number of workers, the
# load path.  For an index build, from gpusort's DEBUG2 line instead: the
# scan as the load (the leader's whole scan, then each worker's), the
# sort's chunks, "sort, merge and write" as the merge, and the page
# writer's time in WAL and storage calls and in its sync as the path.
explain_split()
{
	sed -n '/^WARMUP/,/^RUN /p' "$1" | awk '
	function val(t) { sub(/^[^=]*=/, "", t); return t + 0 }
	# the number that follows the first text matched by re in s, or ""
	function after(s, re,   m) {
		if (!match(s, re "[0-9.]+")) return ""
		m = substr(s, RSTART, RLENGTH)
		sub(/^.*[^0-9.]/, "", m)
		return m
	}
	/gpusort index ".*": [0-9]+ rows/ {
		l += after($0, "; scan ")
		parts = sprintf("%.1f", after($0, "; scan "))
		rest = $0
		while (match(rest, /worker [0-9]+: [0-9]+ rows in [0-9.]+/)) {
			one = substr(rest, RSTART, RLENGTH)
			rest = substr(rest, RSTART + RLENGTH)
			parts = parts "/" sprintf("%.1f", after(one, " rows in "))
			w++
		}
		hw = 1
		s += after($0, "chunks sorted by [^;]* in ")
		x += after($0, "[(]transfers ")
		b += after($0, "tie-breaks ")
		m += after($0, "sort, merge and write "); hm = 1
		if ($0 ~ /index pages written in/)
			path = "pages written in " after($0, "index pages written in ") \
				" ms; synced in " after($0, "synced in ") " ms"
		seen = 1
	}
	/Execution Time:/ { ex = $3 }
	/GpuSort Time:/ {
		for (i = 1; i <= NF; i++) {
			t = $i; gsub(/[(),]/, "", t)
			if (t ~ /^load=/) l += val(t)
			else if (t ~ /^sort=/) s += val(t)
			else if (t ~ /^transfer=/) x += val(t)
			else if (t ~ /^tie-break=/) b += val(t)
			else if (t ~ /^merge=/) { m += val(t); hm = 1 }
			else if (t ~ /^emit=/) { e += val(t); he = 1 }
		}
		seen = 1
	}
	# GpuSortLoad: one line per participant; nodes apart by " + "
	/Leader Load: / || /Worker [0-9]+ Load: / {
		for (i = 1; i <= NF; i++)
			if ($i ~ /^time=/) t = val($i)
		if ($0 ~ /Leader Load: /)
			parts = parts (parts == "" ? "" : " + ") sprintf("%.1f", t)
		else {
			parts = parts "/" sprintf("%.1f", t)
			w++
		}
		hw = 1
	}
	/Serial Load: / || /^[ ]*Load: / {
		p = $0; sub(/^[ ]*/, "", p); gsub(/,/, ";", p)
		path = path (path == "" ? "" : " + ") p
	}
	END {
		if (seen && !hw && path == "")
			path = "no GpuSortLoad in the plan"
		if (seen) printf "%s,%.3f,%.3f,%.3f,%.3f", ex, l, s, x, b; else printf "%s,,,,", ex
		printf ",%s,%s", (hm ? sprintf("%.3f", m) : ""), (he ? sprintf("%.3f", e) : "")
		printf ",%s,%s,\"%s\"", parts, (hw ? w : ""), path
	}'
}

# did gpusort do the work of the case of kind $1 whose log is $2?  yes, no
# or n/a: for a sort, GpuSort in the plan; for an index build, gpusort's
# DEBUG1 line of the warm-up build
gpusort_used()
{
	local kind=$1 log=$2
	if [ "$kind" = scan ]; then
		echo n/a
	elif is_build "$kind"; then
		# no line at all: gpusort was not asked (gpusort.index_build off)
		if grep -q 'built by gpusort' "$log"; then echo yes; else echo no; fi
	elif awk '/^PLAN on/{p=1; next} /^WARMUP/{p=0} p && /Custom Scan \(GpuSort\)/{f=1} END{exit !f}' "$log"; then
		echo yes
	else
		echo no
	fi
}

# run one case in profile $5 (kind scan: the floor of a case of kind $6)
run_case()
{
	local kind=$1 key=$2 width=$3 n=$4 prof=${5:--} floor_of=${6:-} name log sql
	case_sql "$kind" "$key" "$width" "$n" "$floor_of"
	[ "$kind" = scan ] && key=$FLOOR_KEY
	local table=gsb_n_$n
	[ "$width" = wide ] && table=gsb_w_$n
	profile_setup "$prof" "$table"
	name="${n}_${kind}_${key}_${width}"
	[ "$prof" = - ] || name+="_$prof"
	log=$out/log/$name.log
	sql=$out/log/$name.sql
	case_script "$kind" "$n" >"$sql"
	if ! psql_q -f "$sql" >"$log" 2>&1; then
		echo "case $name failed; see $log" >&2
		tail -n 5 "$log" >&2
		[ -z "$PROF_END" ] || psql_q -c "$PROF_END" >/dev/null 2>&1 || true
		return 1
	fi
	local pg_runs gs_runs pg_ms gs_ms in_plan same sum_off sum_on
	pg_runs=$(awk '/^RUN /{m=$2} /^Time:/{ if (m == "off") print $2; m="" }' "$log")
	gs_runs=$(awk '/^RUN /{m=$2} /^Time:/{ if (m == "on") print $2; m="" }' "$log")
	pg_ms=$(printf '%s\n' "$pg_runs" | median)
	gs_ms=$(printf '%s\n' "$gs_runs" | median)
	in_plan=$(gpusort_used "$kind" "$log")
	same=n/a
	if [ "$verify" = 1 ] && [ -n "$INNER" ]; then
		sum_off=$(awk '/^SUM off/{getline; print; exit}' "$log")
		sum_on=$(awk '/^SUM on/{getline; print; exit}' "$log")
		if [ -n "$sum_off" ] && [ "$sum_off" = "$sum_on" ]; then same=yes; else same=NO; fi
	fi
	# the floor is measured under the same settings as the case
	if [ "$kind" = scan ]; then
		FLOOR_MS[$prof|$FLOOR]=$pg_ms
	fi
	local floor=${FLOOR_MS[$prof|$FLOOR]:-}
	local ratio pg_above gs_above above_ratio
	ratio=$(awk -v a="$pg_ms" -v b="$gs_ms" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
	pg_above= gs_above= above_ratio=
	if [ -n "$floor" ] && [ "$kind" != scan ]; then
		pg_above=$(awk -v a="$pg_ms" -v f="$floor" 'BEGIN { printf "%.1f", a - f }')
		gs_above=$(awk -v a="$gs_ms" -v f="$floor" 'BEGIN { printf "%.1f", a - f }')
		above_ratio=$(awk -v a="$pg_above" -v b="$gs_above" 'BEGIN { if (b > 0 && a > 0) printf "%.2f", a / b }')
	fi
	# what GpuSort's EXPLAIN ANALYZE (the warm-up) says: engine, fallback,
	# the time split (summed over the plan's GpuSort nodes; a figure EXPLAIN
	# did not print stays empty) and the load of each participant
	local engine fallback split
	engine=$(sed -n '/^WARMUP/,/^RUN /s/.*GpuSort Engine: \([^ ]*\( ([^)]*)\)\{0,1\}\).*/\1/p' "$log" | sort -u | paste -sd '+' -)
	fallback=$(sed -n '/^WARMUP/,/^RUN /s/.*GpuSort Fallback: //p' "$log" | head -n 1)
	split=$(explain_split "$log")
	local split1 split2
	split1=$(cut -d, -f1-5 <<<"$split")
	split2=$(cut -d, -f6- <<<"$split")
	# temporary bytes of the warm-ups, and the project's target
	local temp_pg temp_gs tgt='' result=''
	temp_pg=$(temp_mb "$log" off0 off1)
	temp_gs=$(temp_mb "$log" on0 on1)
	if [ "$prof" != - ] && [ "$kind" != scan ]; then
		local miss=''
		tgt=$(target_of "$prof" "$kind" "$key")
		if [ -n "$tgt" ] && ! awk -v r="$ratio" -v t="$tgt" 'BEGIN { exit !(r != "" && r + 0 >= t + 0) }'; then
			miss=speed
		fi
		if [ -n "$temp_pg" ] && [ -n "$temp_gs" ] &&
			! awk -v a="$temp_gs" -v b="$temp_pg" 'BEGIN { exit !(a + 0 <= b + 0) }'; then
			miss="${miss:+$miss and }temp"
		fi
		result=${miss:+missed ($miss)}
		result=${result:-met}
	fi
	echo "$n,$kind,$key,$width,$pg_ms,$gs_ms,$ratio,$floor,$pg_above,$gs_above,$above_ratio,$in_plan,$same,$(echo $pg_runs | tr ' ' ';'),$(echo $gs_runs | tr ' ' ';'),$(csv_field "${gpu//,/;}"),$commit,$(csv_field "${engine//,/;}"),$(csv_field "${fallback//,/;}"),$split1,$(csv_field "$PROF_DESC"),$temp_pg,$temp_gs,$split2,$tgt,$result" >>"$CSV"
	printf '%-10s %-9s %-7s %-6s %-8s pg %10s ms  gpusort %10s ms  x%-6s temp MB %s/%s plan:%-3s same:%s %s\n' \
		"$n" "$kind" "$key" "$width" "${prof/-/}" "$pg_ms" "$gs_ms" "$ratio" "${temp_pg:--}" "${temp_gs:--}" "$in_plan" "$same" "$result"
}

# ---- main -----------------------------------------------------------------

have_amcheck=0
if psql_q -c "CREATE EXTENSION IF NOT EXISTS amcheck" >/dev/null 2>&1; then
	have_amcheck=1
fi
have_pageinspect=0
if psql_q -c "CREATE EXTENSION IF NOT EXISTS pageinspect" >/dev/null 2>&1; then
	have_pageinspect=1
fi
BLCKSZ=$(psql_q -c "SHOW block_size")
# PostgreSQL 15 and later: the temporary bytes can be read right after a query
have_flush=0
if psql_q -c "SELECT pg_stat_force_next_flush()" >/dev/null 2>&1; then
	have_flush=1
else
	echo "warning: no pg_stat_force_next_flush(): temporary bytes not measured" >&2
fi

# the cases of the preset: "rows kind key width profile", most telling first
preset_cases()
{
	local big=$1 small=$2 p kind key
	if [ "$preset" = index ]; then
		for key in i8u tx comp id; do
			kind=index
			[ "$key" = id ] && kind=unique
			echo "$big $kind $key narrow serial"
			echo "$big $kind $key narrow parallel"
		done
		return 0
	fi
	for p in defaults tuned; do
		[ "$preset" = all ] || [ "$preset" = "$p" ] || continue
		echo "$big full i8u narrow $p"
		echo "$big full tx narrow $p"
	done
	[ "$preset" != tuned ] || return 0
	for kind in window groupagg distinct mergejoin; do
		for key in i8u i8z comp; do
			echo "$small $kind $key narrow defaults"
		done
	done
	echo "$big index i8u narrow defaults"
	echo "$big index tx narrow defaults"
}

# the case list: "rows kind key width profile", in the order they run
entries=()
if [ -n "$preset" ]; then
	while read -r n kind key width prof; do
		# --kinds, --keys and --widths, when given, narrow the preset
		[ "$kinds_given" = 0 ] || case " $kinds " in *" $kind "*) ;; *) continue ;; esac
		[ "$keys_given" = 0 ] || case " $keys " in *" $key "*) ;; *) continue ;; esac
		[ "$widths_given" = 0 ] || case " $widths " in *" $width "*) ;; *) continue ;; esac
		entries+=("$n $kind $key $width $prof")
	done < <(preset_cases "$rows_list" "$small_rows")
	case "$preset" in
		tuned|all) check_workers 8 "the tuned cases (EXPLAIN's Workers Launched shows what ran)" ;;
		index) check_workers "$workers" "the parallel index builds" ;;
	esac
else
	cases=()
	if [ "$quick" = 1 ]; then
		# most telling first, so that a --deadline keeps the important ones
		cases=("full i8u narrow" "full tx narrow" "mergejoin comp narrow"
			   "window i8u narrow" "limit100 i8u narrow" "full i8u wide"
			   "groupagg i8z narrow" "distinct i8z narrow" "index i8u narrow"
			   "limit1m i8u narrow" "full f8 narrow" "full ts narrow"
			   "full comp narrow")
	else
		for kind in $kinds; do
			[ "$kind" = scan ] && continue
			for key in $keys; do
				key_applies "$kind" "$key" || continue
				for width in $widths; do
					width_applies "$kind" "$width" && cases+=("$kind $key $width")
				done
			done
		done
		# the merge join has its own keys; run it when asked for even if
		# none of them is listed; unique has only id
		case " $kinds " in
			*" mergejoin "*)
				case " $keys " in *" i8u "*|*" i8z "*|*" comp "*) ;; *)
					for width in $widths; do cases+=("mergejoin comp $width"); done ;;
				esac ;;
		esac
		case " $kinds " in
			*" unique "*) case " $keys " in *" id "*) ;; *) cases+=("unique id narrow") ;; esac ;;
		esac
	fi
	for n in $rows_list; do
		for c in "${cases[@]}"; do
			entries+=("$n $c -")
		done
	done
fi
[ "${#entries[@]}" -gt 0 ] || { echo "no case selected" >&2; exit 2; }

# the tables each size needs
declare -A WANT_WIDE WANT_JOIN MADE
for e in "${entries[@]}"; do
	set -- $e
	WANT_WIDE[$1]=${WANT_WIDE[$1]:-0} WANT_JOIN[$1]=${WANT_JOIN[$1]:-0}
	[ "$4" = wide ] && WANT_WIDE[$1]=1
	[ "$2" = mergejoin ] && [ "$3" = i8z ] && WANT_JOIN[$1]=1
done
if [ "$data_only" = 1 ]; then
	for n in "${!WANT_WIDE[@]}"; do
		make_data "$n" "${WANT_WIDE[$n]}" "${WANT_JOIN[$n]}"
	done
	exit 0
fi

failed=0
for e in "${entries[@]}"; do
	if [ "$deadline" -gt 0 ] && [ $(($(date +%s) - start_s)) -ge "$deadline" ]; then
		echo "deadline of $deadline s reached: remaining cases skipped"
		break
	fi
	set -- $e
	if [ -z "${MADE[$1]:-}" ]; then
		make_data "$1" "${WANT_WIDE[$1]}" "${WANT_JOIN[$1]}"
		MADE[$1]=1
	fi
	case_sql "$2" "$3" "$4" "$1"
	# the floor of this case first, once per distinct scan and settings
	if [ -z "${FLOOR_MS[$5|$FLOOR]:-}" ]; then
		run_case scan "$3" "$4" "$1" "$5" "$2" || failed=$((failed + 1))
	fi
	run_case "$2" "$3" "$4" "$1" "$5" || failed=$((failed + 1))
done

if [ "$drop" = 1 ]; then
	for n in "${!WANT_WIDE[@]}"; do
		psql_q -c "DROP TABLE IF EXISTS gsb_n_$n, gsb_w_$n, gsb_j_$n" >/dev/null
	done
fi

write_md "$out"
echo
cat "$out/results.md"
echo
echo "results: $out (results.csv, results.md, machine.csv, log/)"
if grep -q ',NO,' "$CSV"; then
	echo "ERROR: some cases returned different results with gpusort on and off" >&2
	failed=$((failed + 1))
fi
[ "$failed" -eq 0 ]
