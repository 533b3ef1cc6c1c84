#!/usr/bin/env bash
# gpusort over one table, a partitioned table and postgres_fdw shards:
# PostgreSQL's own sort against gpusort, side by side.
#
#   bench/run.sh --preset shards [options]
#
# Starts its own throwaway servers with the PostgreSQL of $PG_CONFIG (default:
# pg_config on PATH), as the user running it (not root): a coordinator and
# --shards shard servers on 127.0.0.1, ports --port, --port+1, ..., every one
# preloading gpusort, every one at PostgreSQL's default settings except
# shared_buffers (sized to hold its tables) and the settings of --set.
#
# Tables (id int8, k int8 from a fixed hash of id, s text: md5 of id):
#   one      a plain table on the coordinator, --rows rows
#   parts    the same rows in --partitions range partitions on id
#   shards   the same rows in a table partitioned on id whose partitions are
#            postgres_fdw foreign tables, one per shard server (range of ids)
#   dim      a plain table on the coordinator, --rows/5 rows whose k match
#            every fifth row's (the other side of the merge join)
# Queries (--kinds):
#   orderby    SELECT * FROM t ORDER BY k OFFSET rows
#   mergejoin  SELECT count(*) FROM t JOIN dim USING (k), with enable_hashjoin
#              and enable_nestloop off
# Modes: "PostgreSQL" (gpusort.enabled off on every server) and "gpusort" (on
# everywhere); for the shards also "shards only" (off on the coordinator: its
# plan is PostgreSQL's, each shard sorts its rows with gpusort, one shard after
# another) and "gpusort, serial" (on, inside a transaction block, where the
# coordinator reads the shards itself rather than with parallel workers).
#
# Options:
#   --rows N          rows of the table (default 10000000)
#   --shards N        shard servers (default 4)
#   --partitions N    local partitions (default 16)
#   --kinds LIST      orderby,mergejoin (default both)
#   --tables LIST     one,parts,shards (default all three)
#   --fetch-size N    postgres_fdw's fetch_size for the shards (its default: 100)
#   --runs N          timed runs of each case (default 2; the best is reported)
#   --port P          first port (default 55432)
#   --dir DIR         where the clusters live (default: a new temporary folder)
#   --set NAME=VALUE  a setting for every server (repeatable)
#   --keep            leave the servers running and the data in place
#
# Each run is an EXPLAIN (ANALYZE, TIMING OFF): its execution time is the
# figure reported, and its plan (for gpusort, the time split of the sort) is
# kept in DIR/explain-*.txt.  Prints a Markdown table.

set -euo pipefail

rows=10000000
nshards=4
nparts=16
kinds=orderby,mergejoin
tables=one,parts,shards
fetch_size=
runs=2
port=55432
dir=
keep=no
sets=()

while [ $# -gt 0 ]; do
	case "$1" in
		--rows) rows=$2; shift 2 ;;
		--shards) nshards=$2; shift 2 ;;
		--partitions) nparts=$2; shift 2 ;;
		--kinds) kinds=$2; shift 2 ;;
		--tables) tables=$2; shift 2 ;;
		--fetch-size) fetch_size=$2; shift 2 ;;
		--runs) runs=$2; shift 2 ;;
		--port) port=$2; shift 2 ;;
		--dir) dir=$2; shift 2 ;;
		--set) sets+=("$2"); shift 2 ;;
		--keep) keep=yes; shift ;;
		-h|--help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
		*) echo "bench/run.sh --preset shards: unknown option $1" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -ne 0 ] || { echo "bench/run.sh --preset shards: run it as a user other than root" >&2; exit 2; }

PG_CONFIG=${PG_CONFIG:-pg_config}
bindir=$("$PG_CONFIG" --bindir)
dir=${dir:-$(mktemp -d /tmp/gpusort-shards.XXXXXX)}
mkdir -p "$dir"
jobs=$(nproc)
[ "$jobs" -le 8 ] || jobs=8

# server i: 0 is the coordinator, 1..nshards the shards
sport() { echo $((port + $1)); }
spsql() { local i=$1; shift; "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$(sport "$i")" -U "$(id -un)" -d postgres "$@"; }

# shared_buffers: the coordinator holds one, parts and dim; a shard its share
row_bytes=100
coord_sb=$(( (rows * row_bytes * 22 / 10) / 1048576 + 256 ))
shard_sb=$(( (rows * row_bytes / nshards) / 1048576 + 256 ))

start_server()
{
	local i=$1 sb=$2 d="$dir/s$1"
	if [ ! -f "$d/PG_VERSION" ]; then
		"$bindir/initdb" -D "$d" -A trust --no-locale -E UTF8 >/dev/null
		{
			echo "port = $(sport "$i")"
			echo "listen_addresses = '127.0.0.1'"
			echo "unix_socket_directories = '$dir'"
			echo "shared_preload_libraries = 'gpusort'"
			echo "shared_buffers = ${sb}MB"
			for s in "${sets[@]}"; do echo "${s%%=*} = '${s#*=}'"; done
		} >>"$d/postgresql.conf"
	fi
	"$bindir/pg_ctl" -D "$d" status >/dev/null 2>&1 ||
		"$bindir/pg_ctl" -D "$d" -l "$dir/s$i.log" -w start >/dev/null
}

stop_servers()
{
	local i
	for i in $(seq 0 "$nshards"); do
		"$bindir/pg_ctl" -D "$dir/s$i" -m fast -w stop >/dev/null 2>&1 || true
	done
}
[ "$keep" = yes ] || trap stop_servers EXIT

# INSERT rows lo..hi of the data set into table t of server i, in $jobs
# sessions at once; dim rows are every fifth id's key
fill()
{
	local i=$1 t=$2 lo=$3 hi=$4 step=${5:-1} j a b n
	n=$(( (hi - lo + 1 + jobs - 1) / jobs ))
	for j in $(seq 0 $((jobs - 1))); do
		a=$((lo + j * n)); b=$((a + n - 1)); [ "$b" -le "$hi" ] || b=$hi
		[ "$a" -le "$b" ] || continue
		spsql "$i" -c "INSERT INTO $t SELECT i, hashint8extended(i * $step, 42), md5(i::text)
			FROM generate_series($a::int8, $b) i" &
	done
	wait
}

echo "==> servers in $dir: coordinator on port $(sport 0), $nshards shards"
start_server 0 "$coord_sb"
for i in $(seq 1 "$nshards"); do start_server "$i" "$shard_sb"; done
for i in $(seq 0 "$nshards"); do spsql "$i" -c "CREATE EXTENSION IF NOT EXISTS gpusort"; done

per=$(( (rows + nshards - 1) / nshards ))
if [ "$(spsql 0 -Atc "SELECT count(*) FROM pg_class WHERE relname = 'shards'")" = 0 ]; then
	echo "==> loading $rows rows (one, parts, dim on the coordinator; the shards' shares)"
	spsql 0 <<-SQL
		CREATE EXTENSION IF NOT EXISTS postgres_fdw;
		CREATE TABLE one (id int8, k int8, s text);
		CREATE TABLE dim (id int8, k int8, s text);
		CREATE TABLE parts (id int8, k int8, s text) PARTITION BY RANGE (id);
		SELECT format('CREATE TABLE parts_%s PARTITION OF parts FOR VALUES FROM (%s) TO (%s)',
					  p, p * ($rows / $nparts) + 1,
					  CASE WHEN p = $nparts - 1 THEN $rows + 1 ELSE (p + 1) * ($rows / $nparts) + 1 END)
		FROM generate_series(0, $nparts - 1) p \gexec
	SQL
	case ",$tables," in *,one,*) fill 0 one 1 "$rows" & ;; esac
	case ",$tables," in *,parts,*) fill 0 parts 1 "$rows" & ;; esac
	case ",$kinds," in *,mergejoin,*) fill 0 dim 1 $((rows / 5)) 5 & ;; esac
	for i in $(seq 1 "$nshards"); do
		lo=$(( (i - 1) * per + 1 )); hi=$(( i * per )); [ "$hi" -le "$rows" ] || hi=$rows
		spsql "$i" -c "CREATE TABLE shard (id int8, k int8, s text)"
		fill "$i" shard "$lo" "$hi" &
	done
	wait
	spsql 0 -c "CREATE TABLE shards (id int8, k int8, s text) PARTITION BY RANGE (id)"
	for i in $(seq 1 "$nshards"); do
		lo=$(( (i - 1) * per + 1 )); hi=$(( i * per + 1 ))
		spsql 0 <<-SQL
			CREATE SERVER shard$i FOREIGN DATA WRAPPER postgres_fdw
				OPTIONS (host '127.0.0.1', port '$(sport "$i")', dbname 'postgres');
			CREATE USER MAPPING FOR CURRENT_USER SERVER shard$i OPTIONS (user '$(id -un)');
			CREATE FOREIGN TABLE shards_$i PARTITION OF shards
				FOR VALUES FROM ($lo) TO ($hi) SERVER shard$i OPTIONS (table_name 'shard');
		SQL
	done
	for i in $(seq 0 "$nshards"); do spsql "$i" -c "ANALYZE" & done
	wait
	spsql 0 -c "ANALYZE shards"
	echo "==> loaded in $SECONDS s" >&2
fi

# gpusort on or off on the shards (their sessions are the coordinator's
# connections: a new coordinator session per query gets new ones)
shards_gpusort()
{
	local i
	for i in $(seq 1 "$nshards"); do
		spsql "$i" -c "ALTER SYSTEM SET gpusort.enabled = $1" -c "SELECT pg_reload_conf()" >/dev/null
	done
}

query()
{
	case "$1" in
		orderby) echo "SELECT * FROM $2 ORDER BY k OFFSET $rows" ;;
		mergejoin) echo "SELECT count(*) FROM $2 JOIN dim USING (k)" ;;
	esac
}

# best of $runs runs, in seconds; $3: "on", "off" or "serial" on the coordinator
timed()
{
	local kind=$1 t=$2 mode=$3 best= r ms pre= q out="$dir/explain-$1-$2-$3.txt"
	q=$(query "$kind" "$t")
	[ "$kind" = mergejoin ] && pre="SET enable_hashjoin = off; SET enable_nestloop = off;"
	case "$mode" in
		off) pre="$pre SET gpusort.enabled = off;" ;;
		serial) pre="$pre BEGIN;" ;;
	esac
	for r in $(seq 1 "$runs"); do
		# statement by statement: one string of several would be a
		# transaction block, and the shards would be read serially
		spsql 0 >"$out" 2>&1 <<-SQL
			$pre
			EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF) $q;
		SQL
		ms=$(sed -n 's/^ *Execution Time: \([0-9.]*\) ms.*/\1/p' "$out")
		if [ -z "$best" ] || awk "BEGIN { exit !($ms < $best) }"; then best=$ms; fi
	done
	awk "BEGIN { printf \"%.2f\", $best / 1000 }"
}

# postgres_fdw's fetch_size for every shard: --fetch-size, or its default
for i in $(seq 1 "$nshards"); do
	spsql 0 -c "ALTER SERVER shard$i OPTIONS (DROP fetch_size)" >/dev/null 2>&1 || true
	[ -z "$fetch_size" ] ||
		spsql 0 -c "ALTER SERVER shard$i OPTIONS (ADD fetch_size '$fetch_size')"
done

# read every table once, so that the timed runs find them in shared_buffers
for i in $(seq 1 "$nshards"); do spsql "$i" -c "SELECT count(*) FROM shard" >/dev/null; done
spsql 0 -c "SELECT count(*) FROM one" -c "SELECT count(*) FROM parts" -c "SELECT count(*) FROM dim" >/dev/null

table="$dir/results.md"
{
	echo "| query | table | mode | seconds | vs PostgreSQL |"
	echo "| --- | --- | --- | ---: | ---: |"
} >"$table"
for kind in ${kinds//,/ }; do
	for t in ${tables//,/ }; do
		echo "==> $kind over $t" >&2
		shards_gpusort off
		base=$(timed "$kind" "$t" off)
		echo "| $kind | $t | PostgreSQL | $base | 1.00× |" >>"$table"
		modes="gpusort"
		[ "$t" = shards ] && modes="shards_only gpusort serial"
		for m in $modes; do
			case "$m" in
				shards_only) shards_gpusort on; s=$(timed "$kind" "$t" off); label="shards only" ;;
				gpusort) shards_gpusort on; s=$(timed "$kind" "$t" on); label="gpusort" ;;
				serial) shards_gpusort on; s=$(timed "$kind" "$t" serial); label="gpusort, serial" ;;
			esac
			echo "| $kind | $t | $label | $s | $(awk "BEGIN { printf \"%.2f\", $base / $s }")× |" >>"$table"
		done
	done
done
shards_gpusort on
echo
echo "$rows rows; $nparts partitions; $nshards shards; fetch_size ${fetch_size:-100}; PostgreSQL $("$bindir/postgres" -V | awk '{print $3}')"
cat "$table"
