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
# Kinds (--kinds):
#   scan       the scan alone, with the same columns: the floor of every case
#   full       SELECT cols FROM t ORDER BY key OFFSET rows (all rows sorted,
#              consumed in the server)
#   limit100   ORDER BY key LIMIT 100
#   limit1m    ORDER BY key LIMIT 1000000
#   window     row_number() OVER (ORDER BY key)
#   groupagg   GROUP BY key with enable_hashagg = off (GroupAggregate)
#   distinct   SELECT DISTINCT key with enable_hashagg = off
#   mergejoin  gsb_n JOIN gsb_j on an int8 (key comp's int8 column, ~1 match
#              a row) with enable_hashjoin and enable_nestloop off
#   index      CREATE INDEX on key (dropped after each build)
# Widths (--widths): narrow (id + key) or wide (id + key + 200 B payload);
# wide applies to full, limit*, window and mergejoin.
#
# Each case: one warm-up per mode (gpusort's is an EXPLAIN ANALYZE kept in
# the log), then --runs runs per mode, alternating off/on (order swapped every
# round), in one session.  Reported: medians, speedup = PostgreSQL / gpusort,
# the medians minus the scan-alone floor, whether the gpusort plan really
# contains GpuSort, and whether both modes returned the same rows in the same
# order (an order-sensitive checksum computed in SQL: a position-seeded hash of
# the sort key of every row, plus an order-insensitive hash of the whole rows).
#
# Options:
#   --rows N[,N...]     data set sizes (default 1000000)
#   --kinds LIST|all    (default: all); --keys LIST|all (default: all);
#   --widths LIST       (default: narrow,wide)
#   --quick             a short selection, most telling first: full on i8u
#                       and tx, mergejoin, window, limit100, full wide,
#                       groupagg and distinct on i8z, index, limit1m, full on
#                       f8, ts and comp
#   --runs N            timed runs per mode (default 3)
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
# Output in DIR: results.csv (one row per case), machine.csv (GPU as
# gpusort_info() reports it, CPU, PostgreSQL version, settings, commit),
# results.md (Markdown table), log/ (each case's psql session, EXPLAIN ANALYZE).
# Render charts with bench/render.sh DIR/results.csv (needs gnuplot).

set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

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

ALL_KINDS="scan full limit100 limit1m window groupagg distinct mergejoin index"
ALL_KEYS="i8u i8z f8 tx ts comp"

usage()
{
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
	exit "${1:-0}"
}

# ---- Markdown table -----------------------------------------------------------

# results.md from results.csv (and machine.csv) in folder $1
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
			"$(m runs) timed runs per mode (medians, ms); work_mem $(m work_mem);" \
			"settings: $(bs=$(m bench_sets); echo "${bs:-server defaults}")"
		echo
		echo "| rows | case | key | width | PostgreSQL ms | gpusort ms | speedup | scan floor ms | above floor: PG / gpusort ms | GpuSort in plan | same result |"
		echo "| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"
		tail -n +2 "$dir/results.csv" | while IFS=, read -r r kind key width pg gs sp fl pa ga ar ip same _; do
			local above=
			[ -n "$pa" ] && above="$pa / $ga"
			echo "| $r | $kind | $key | $width | $pg | $gs | ${sp:+$sp×} | $fl | $above | $ip | $same |"
		done
	} >"$dir/results.md"
}

quick=0
while [ $# -gt 0 ]; do
	case "$1" in
		--rows) rows_list=$2; shift ;;
		--kinds|--cases) kinds=$2; shift ;;
		--keys) keys=$2; shift ;;
		--widths) widths=$2; shift ;;
		--quick) quick=1 ;;
		--runs) runs=$2; shift ;;
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
			local pad=
			[ "$width" = wide ] && pad=", a.pad"
			INNER="SELECT a.id AS aid, a.i8c, b.id AS bid$pad FROM $t a JOIN gsb_j_$n b ON a.i8c = b.i8c"
			Q="$INNER OFFSET $((4 * n))"
			FLOOR="SELECT * FROM (SELECT id, i8c$pad FROM $t UNION ALL SELECT id, i8c${pad:+, ''} FROM gsb_j_$n) u OFFSET $((2 * n))"
			FLOOR_KEY=join
			PRE="SET enable_hashjoin = off; SET enable_nestloop = off;"
			ORD=i8c CONT="aid, i8c, bid${pad:+, pad}" ;;
		index)
			Q="CREATE INDEX gsb_idx_$n ON gsb_n_$n ($k)"
			POST="DROP INDEX gsb_idx_$n;"
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

# does a width apply to a kind?
width_applies()
{
	case "$1:$2" in
		*:narrow) return 0 ;;
		full:wide|limit100:wide|limit1m:wide|window:wide|mergejoin:wide|scan:wide) return 0 ;;
		*) return 1 ;;
	esac
}

# does a key apply to a kind?  (the merge join joins on comp's int8 column)
key_applies()
{
	[ "$1" != mergejoin ] || [ "$2" = comp ]
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
info=$(psql_q -F '=' -c "SELECT name, value FROM gpusort_info()")
gpu=$(printf '%s\n' "$info" | sed -n 's/^\(device\|device_name\|gpu\)=//p' | head -n 1)
gpu=${gpu:-$(printf '%s\n' "$info" | grep -i 'device\|gpu' | head -n 1)}
gpu=${gpu:-none}

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
	printf '%s\n' "$info" | while IFS='=' read -r k v; do
		echo "gpusort_info.$k,$(csv_field "$v")"
	done
	psql_q -F ',' -c "$set_sql SELECT name, '\"' || replace(setting || coalesce(unit, ''), '\"', '\"\"') || '\"'
		FROM pg_settings
		WHERE name IN ('work_mem', 'maintenance_work_mem', 'shared_buffers',
					   'max_parallel_workers_per_gather', 'max_parallel_maintenance_workers',
					   'max_worker_processes', 'jit', 'shared_preload_libraries')
		   OR name LIKE 'gpusort.%' ORDER BY name"
} >"$out/machine.csv"

# ---- running a case ---------------------------------------------------------

median()
{
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

declare -A FLOOR_MS
CSV=$out/results.csv
echo "rows,kind,key,width,pg_ms,gpusort_ms,speedup,floor_ms,pg_above_floor_ms,gpusort_above_floor_ms,above_floor_speedup,gpusort_in_plan,same_result,pg_runs_ms,gpusort_runs_ms,gpu,commit,engine,fallback,explain_ms,load_ms,sort_ms,transfer_ms,tiebreak_ms" >"$CSV"

# run one case (kind scan: the floor of a case of kind $5)
run_case()
{
	local kind=$1 key=$2 width=$3 n=$4 floor_of=${5:-} name log sql i first second
	case_sql "$kind" "$key" "$width" "$n" "$floor_of"
	[ "$kind" = scan ] && key=$FLOOR_KEY
	name="${n}_${kind}_${key}_${width}"
	log=$out/log/$name.log
	sql=$out/log/$name.sql
	{
		echo "$set_sql"
		echo "$PRE"
		echo "\\echo PLAN off"
		echo "SET gpusort.enabled = off;"
		[ "$kind" = index ] || echo "EXPLAIN (COSTS OFF) $Q;"
		echo "\\echo PLAN on"
		echo "SET gpusort.enabled = on;"
		[ "$kind" = index ] || echo "EXPLAIN (COSTS OFF) $Q;"
		echo "\\echo WARMUP"
		echo "SET gpusort.enabled = off;"
		echo "$Q;"
		echo "$POST"
		echo "SET gpusort.enabled = on;"
		if [ "$kind" = index ]; then
			echo "$Q;"
		else
			echo "EXPLAIN (ANALYZE, VERBOSE) $Q;"
		fi
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
		if [ "$verify" = 1 ] && [ -n "$INNER" ]; then
			for m in off on; do
				echo "SET gpusort.enabled = $m;"
				if [ "$kind" = index ]; then
					# build the index in this mode, then read it back in order
					echo "$Q;"
					echo "SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off;"
					[ "$have_amcheck" = 1 ] && echo "SELECT bt_index_check('gsb_idx_$n', true);"
				fi
				echo "\\echo SUM $m"
				checksum_sql
				if [ "$kind" = index ]; then
					echo "RESET enable_seqscan; RESET enable_bitmapscan; RESET enable_sort;"
					echo "$POST"
				fi
			done
		fi
	} >"$sql"
	if ! psql_q -f "$sql" >"$log" 2>&1; then
		echo "case $name failed; see $log" >&2
		tail -n 5 "$log" >&2
		return 1
	fi
	local pg_runs gs_runs pg_ms gs_ms in_plan same sum_off sum_on
	pg_runs=$(awk '/^RUN /{m=$2} /^Time:/{ if (m == "off") print $2; m="" }' "$log")
	gs_runs=$(awk '/^RUN /{m=$2} /^Time:/{ if (m == "on") print $2; m="" }' "$log")
	pg_ms=$(printf '%s\n' "$pg_runs" | median)
	gs_ms=$(printf '%s\n' "$gs_runs" | median)
	if [ "$kind" = index ] || [ "$kind" = scan ]; then
		in_plan=n/a
	elif awk '/^PLAN on/{p=1; next} /^WARMUP/{p=0} p && /Custom Scan \(GpuSort\)/{f=1} END{exit !f}' "$log"; then
		in_plan=yes
	else
		in_plan=no
	fi
	same=n/a
	if [ "$verify" = 1 ] && [ -n "$INNER" ]; then
		sum_off=$(awk '/^SUM off/{getline; print; exit}' "$log")
		sum_on=$(awk '/^SUM on/{getline; print; exit}' "$log")
		if [ -n "$sum_off" ] && [ "$sum_off" = "$sum_on" ]; then same=yes; else same=NO; fi
	fi
	if [ "$kind" = scan ]; then
		FLOOR_MS[$FLOOR]=$pg_ms
	fi
	local floor=${FLOOR_MS[$FLOOR]:-}
	local ratio pg_above gs_above above_ratio
	ratio=$(awk -v a="$pg_ms" -v b="$gs_ms" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
	pg_above= gs_above= above_ratio=
	if [ -n "$floor" ] && [ "$kind" != scan ]; then
		pg_above=$(awk -v a="$pg_ms" -v f="$floor" 'BEGIN { printf "%.1f", a - f }')
		gs_above=$(awk -v a="$gs_ms" -v f="$floor" 'BEGIN { printf "%.1f", a - f }')
		above_ratio=$(awk -v a="$pg_above" -v b="$gs_above" 'BEGIN { if (b > 0 && a > 0) printf "%.2f", a / b }')
	fi
	# what GpuSort's EXPLAIN ANALYZE (the warm-up) says: engine, fallback, time split
	local engine fallback split
	engine=$(sed -n '/^WARMUP/,/^RUN /s/.*GpuSort Engine: \([^ ]*\( ([^)]*)\)\{0,1\}\).*/\1/p' "$log" | sort -u | paste -sd '+' -)
	fallback=$(sed -n '/^WARMUP/,/^RUN /s/.*GpuSort Fallback: //p' "$log" | head -n 1)
	split=$(sed -n '/^WARMUP/,/^RUN /p' "$log" | awk '
		/Execution Time:/ { ex = $3 }
		/GpuSort Time:/ {
			for (i = 1; i <= NF; i++) {
				t = $i; gsub(/[()]/, "", t)
				if (t ~ /^load=/) { sub(/^load=/, "", t); l += t }
				else if (t ~ /^sort=/) { sub(/^sort=/, "", t); s += t }
				else if (t ~ /^transfer=/) { sub(/^transfer=/, "", t); x += t }
				else if (t ~ /^tie-break=/) { sub(/^tie-break=/, "", t); b += t }
			}
			seen = 1
		}
		END { if (seen) printf "%s,%.3f,%.3f,%.3f,%.3f", ex, l, s, x, b; else printf "%s,,,,", ex }')
	echo "$n,$kind,$key,$width,$pg_ms,$gs_ms,$ratio,$floor,$pg_above,$gs_above,$above_ratio,$in_plan,$same,$(echo $pg_runs | tr ' ' ';'),$(echo $gs_runs | tr ' ' ';'),$(csv_field "${gpu//,/;}"),$commit,$(csv_field "${engine//,/;}"),$(csv_field "${fallback//,/;}"),$split" >>"$CSV"
	printf '%-10s %-9s %-5s %-6s  pg %10s ms  gpusort %10s ms  x%-6s plan:%-3s same:%s\n' \
		"$n" "$kind" "$key" "$width" "$pg_ms" "$gs_ms" "$ratio" "$in_plan" "$same"
}

# ---- main -----------------------------------------------------------------

have_amcheck=0
if psql_q -c "CREATE EXTENSION IF NOT EXISTS amcheck" >/dev/null 2>&1; then
	have_amcheck=1
fi

# the case list: kind key width, in the order they run
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
	# the merge join has one key; run it when asked for even if comp is not listed
	case " $kinds " in
		*" mergejoin "*)
			case " $keys " in *" comp "*) ;; *)
				for width in $widths; do cases+=("mergejoin comp $width"); done ;;
			esac ;;
	esac
fi
[ "${#cases[@]}" -gt 0 ] || { echo "no case selected" >&2; exit 2; }

failed=0
for n in $rows_list; do
	want_wide=0 want_join=0
	for c in "${cases[@]}"; do
		case "$c" in *" wide") want_wide=1 ;; esac
		case "$c" in mergejoin*) want_join=1 ;; esac
	done
	make_data "$n" "$want_wide" "$want_join"
	[ "$data_only" = 1 ] && continue
	for c in "${cases[@]}"; do
		if [ "$deadline" -gt 0 ] && [ $(($(date +%s) - start_s)) -ge "$deadline" ]; then
			echo "deadline of $deadline s reached: remaining cases skipped"
			break 2
		fi
		set -- $c
		case_sql "$@" "$n"
		# the floor of this case first, once per distinct scan
		if [ -z "${FLOOR_MS[$FLOOR]:-}" ]; then
			run_case scan "$2" "$3" "$n" "$1" || failed=$((failed + 1))
		fi
		run_case "$1" "$2" "$3" "$n" || failed=$((failed + 1))
	done
done

if [ "$data_only" = 1 ]; then
	exit 0
fi
if [ "$drop" = 1 ]; then
	for n in $rows_list; do
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
