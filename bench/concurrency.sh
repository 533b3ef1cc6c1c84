#!/usr/bin/env bash
# Concurrency benchmark: N sessions sorting at once, through pgbench.
#
# The query: SELECT * FROM conc_t ORDER BY k OFFSET <rows>, over a table of
# CONC_ROWS rows (int8 key in random order, md5 text, int4), work_mem 1GB,
# no parallel workers.  For 1, 16 and 64 clients, on persistent connections
# and with a new connection per transaction (pgbench -C), it runs PostgreSQL
# (gpusort.enabled = off), gpusort's CPU engine (gpusort.engine = cpu) and
# gpusort's default (gpusort.engine = auto: the GPU service when it has a
# device, with admission control) in one run, and prints per case: latency,
# TPS, CPU-seconds of the whole cluster (postmaster's reaped children plus
# every live child, from /proc) per query, and peak GPU memory (nvidia-smi,
# when there is one).
#
# Against the server of the libpq environment (PGHOST, PGPORT, ...), which
# must preload gpusort and allow 64 more connections; psql and pgbench from
# PATH, e.g.:
#   CONC_ROWS=200000 bash bench/concurrency.sh
#
# Environment (all optional):
#   CONC_ROWS      table rows (default 2000000)
#   CONC_CLIENTS   client counts (default "1 16 64")
#   CONC_TX        transactions per client, per client count
#                  (default "1:6 16:4 64:3")
#   CONC_MODES     "persistent connect" (default both)
#   CONC_ENGINES   "pg cpu gpu" (default all three)
#   CONC_LIMIT     seconds after which no new case starts (default 540, to
#                  stay inside a 10-minute command)
#   OUT            results folder (default /tmp/concurrency-out)

set -uo pipefail

T0=$(date +%s)
OUT=${OUT:-/tmp/concurrency-out}
mkdir -p "$OUT"
ROWS=${CONC_ROWS:-2000000}
CLIENTS=${CONC_CLIENTS:-1 16 64}
TXSPEC=${CONC_TX:-1:6 16:4 64:3}
MODES=${CONC_MODES:-persistent connect}
ENGINES=${CONC_ENGINES:-pg cpu gpu}
NPROC=$(nproc)
TCK=$(getconf CLK_TCK)

say() { echo "== [$(($(date +%s) - T0))s] $*"; }

PSQL=(psql -X -v ON_ERROR_STOP=1)
PGBENCH=$(command -v pgbench)

sql() { "${PSQL[@]}" -Atc "$1"; }

sql "DROP EXTENSION IF EXISTS gpusort CASCADE" >/dev/null
sql "CREATE EXTENSION gpusort" >/dev/null
sql "SELECT * FROM gpusort_service" >"$OUT/service-before.txt" 2>&1
say "service: $(sql "SELECT state || ', ' || devices || ' device(s): ' || device_names FROM gpusort_service")"

if [ "$(sql "SELECT count(*) FROM pg_class WHERE relname = 'conc_t' AND reltuples = $ROWS")" != 1 ]; then
	say "table conc_t: $ROWS rows"
	sql "DROP TABLE IF EXISTS conc_t" >/dev/null
	sql "CREATE TABLE conc_t AS SELECT (random() * 1e15)::int8 AS k, md5(g::text) AS s, g::int4 AS i FROM generate_series(1, $ROWS) g" >/dev/null
	sql "VACUUM ANALYZE conc_t" >/dev/null
fi
sql "SELECT count(*) FROM conc_t" >/dev/null	# warm the buffers

SCRIPT=$OUT/query.sql
echo "SELECT * FROM conc_t ORDER BY k OFFSET $ROWS;" >"$SCRIPT"
chmod a+r "$SCRIPT"
chmod a+rwx "$OUT"

PMPID=$(sql "SELECT split_part(pg_read_file('postmaster.pid'), E'\n', 1)")

# CPU ticks of the whole cluster: the postmaster's reaped children, plus
# every live child (backends, the gpusort service, background processes)
cluster_ticks()
{
	local t c
	t=$(awk '{print $16 + $17 + $14 + $15}' "/proc/$PMPID/stat")
	for c in $(cat /proc/"$PMPID"/task/*/children 2>/dev/null); do
		[ -r "/proc/$c/stat" ] || continue
		t=$((t + $(awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}

gpu_sampler_start()
{
	GPU_LOG=$OUT/gpu-mem.$1.log
	: >"$GPU_LOG"
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$GPU_LOG" 2>/dev/null &
		GPU_PID=$!
	else
		GPU_PID=
	fi
}

# peak of the summed memory over all GPUs (nvidia-smi prints one line per GPU)
gpu_sampler_stop()
{
	local ngpu
	if [ -n "$GPU_PID" ]; then
		kill "$GPU_PID" 2>/dev/null
		wait "$GPU_PID" 2>/dev/null
		ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
		awk -v n="$ngpu" '{s += $1; if (NR % n == 0) { if (s > m) m = s; s = 0 } } END { printf "%d", m }' "$GPU_LOG"
	else
		echo "n/a"
	fi
}

settings()
{
	local o="-c work_mem=1GB -c max_parallel_workers_per_gather=0"
	case $1 in
		pg) o+=" -c gpusort.enabled=off" ;;
		cpu) o+=" -c gpusort.engine=cpu" ;;
		gpu) o+=" -c gpusort.engine=auto" ;;
	esac
	echo "$o"
}

tx_for() { local c=$1 e; for e in $TXSPEC; do [ "${e%%:*}" = "$c" ] && { echo "${e#*:}"; return; }; done; echo 3; }

CSV=$OUT/concurrency.csv
echo "clients,mode,engine,transactions,latency_ms,tps,cpu_s,cpu_s_per_query,gpu_peak_mib,failed" >"$CSV"

for c in $CLIENTS; do
	tx=$(tx_for "$c")
	for mode in $MODES; do
		for eng in $ENGINES; do
			if [ $(($(date +%s) - T0)) -gt "${CONC_LIMIT:-540}" ]; then
				say "time limit: skipping $c clients, $mode, $eng"
				continue
			fi
			flags=(-n -f "$SCRIPT" -c "$c" -j "$((c < NPROC ? c : NPROC))" -t "$tx")
			[ "$mode" = connect ] && flags+=(-C)
			gpu_sampler_start "$c-$mode-$eng"
			t0=$(cluster_ticks)
			PGOPTIONS="$(settings "$eng")" "$PGBENCH" "${flags[@]}" >"$OUT/pgbench.$c-$mode-$eng.log" 2>&1
			rc=$?
			# let the backends (and, before the service, their CUDA
			# contexts) go and the postmaster reap them
			for _ in $(seq 1 60); do
				[ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" = 0 ] && break
				sleep 0.5
			done
			sleep 0.5
			t1=$(cluster_ticks)
			peak=$(gpu_sampler_stop)
			log=$OUT/pgbench.$c-$mode-$eng.log
			lat=$(awk '/latency average/ {print $4}' "$log")
			tps=$(awk '/^tps/ {print $3; exit}' "$log")
			failed=$(awk '/number of failed transactions/ {print $5}' "$log")
			[ "$rc" -ne 0 ] && failed="rc=$rc"
			nq=$((c * tx))
			cpu=$(awk -v a="$t0" -v b="$t1" -v t="$TCK" 'BEGIN { printf "%.1f", (b - a) / t }')
			cpuq=$(awk -v a="$t0" -v b="$t1" -v t="$TCK" -v n="$nq" 'BEGIN { printf "%.3f", (b - a) / t / n }')
			echo "$c,$mode,$eng,$nq,${lat:-},${tps:-},$cpu,$cpuq,$peak,${failed:-0}" >>"$CSV"
			say "$c clients, $mode, $eng: latency ${lat:-?} ms, tps ${tps:-?}, cpu ${cpu}s, gpu peak ${peak} MiB, failed ${failed:-0}"
		done
	done
done

sql "SELECT * FROM gpusort_service" >"$OUT/service-after.txt" 2>&1

# the table: one row per (clients, mode), the three engines side by side
{
	echo "# Concurrency: \`SELECT * FROM conc_t ORDER BY k OFFSET $ROWS\`, $ROWS rows, work_mem 1GB"
	echo
	echo "commit ${GS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}; $(nproc) cores; $(nvidia-smi -L 2>/dev/null | head -n 1 || echo 'no GPU')"
	echo
	echo "| clients | connections | latency PG / CPU / GPU (ms) | GPU÷CPU | GPU÷PG | TPS PG / CPU / GPU | CPU-s per query PG / CPU / GPU | peak GPU MiB PG / CPU / GPU | failed |"
	echo "| ---: | --- | --- | ---: | ---: | --- | --- | --- | --- |"
	awk -F, 'NR > 1 {
		k = $1 "," $2; lat[k, $3] = $5; tps[k, $3] = $6; cq[k, $3] = $8; gm[k, $3] = $9;
		f[k] = f[k] ($10 != "0" && $10 != "" ? $3 ":" $10 " " : "");
		if (!(k in seen)) { seen[k] = 1; order[++n] = k }
	} END {
		for (i = 1; i <= n; i++) {
			k = order[i]; split(k, p, ",");
			r1 = (lat[k, "cpu"] > 0 && lat[k, "gpu"] != "") ? sprintf("%.2f", lat[k, "gpu"] / lat[k, "cpu"]) : "";
			r2 = (lat[k, "pg"] > 0 && lat[k, "gpu"] != "") ? sprintf("%.2f", lat[k, "gpu"] / lat[k, "pg"]) : "";
			printf "| %s | %s | %s / %s / %s | %s | %s | %s / %s / %s | %s / %s / %s | %s / %s / %s | %s |\n",
				p[1], p[2], lat[k, "pg"], lat[k, "cpu"], lat[k, "gpu"], r1, r2,
				tps[k, "pg"], tps[k, "cpu"], tps[k, "gpu"],
				cq[k, "pg"], cq[k, "cpu"], cq[k, "gpu"],
				gm[k, "pg"], gm[k, "cpu"], gm[k, "gpu"], (f[k] == "" ? "0" : f[k]);
		}
	}' "$CSV"
	echo
	echo "Service after the run:"
	echo
	echo '```'
	"${PSQL[@]}" -c "SELECT * FROM gpusort_service" 2>&1
	echo '```'
} >"$OUT/concurrency.md"
cat "$OUT/concurrency.md"
