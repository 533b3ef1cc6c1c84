#!/usr/bin/env bash
# GPU machine, one call: bench/cancel.sh on the 50M-row g50 (bench/gpu-env.sh),
# with what the server and the kernel said meanwhile kept beside the table:
# crashes, the OOM killer, /dev/shm and memory left over.
#   run  command="OUT=$OUT bash bench/gpu-cancel.sh"  carry=[".gpu"]
# Env: CONFIGS and TIMEOUTS as bench/cancel.sh takes them.  Results:
# $OUT/cancel.md, $OUT/server.txt (the server log's crashes and FATALs,
# dmesg's OOM and segfault lines, /dev/shm and free memory before and after).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-cancel}
ROWS=${ROWS:-50000000}
mkdir -p "$OUT"
# shellcheck disable=SC1091
source .gpu/pg-up.sh .gpu/debs >"$OUT/pgup.log" 2>&1
# shellcheck disable=SC1091
source bench/gpu-env.sh
gs_bench_setup
state() { echo "== $1"; df -h /dev/shm | tail -1; free -g | head -2; ls /dev/shm | wc -l; }
state before >"$OUT/server.txt"
lines=$(wc -l </var/tmp/pg.log)
TABLE=g50 bash bench/cancel.sh >"$OUT/cancel.md" 2>&1
{
	state after
	echo "== server log: each crash with the 40 lines before it"
	tail -n +"$lines" /var/tmp/pg.log | grep -B40 "terminated by signal" | head -120
	echo "== server log: PANIC, WARNING, out of memory"
	tail -n +"$lines" /var/tmp/pg.log |
		grep -E "out of memory|PANIC|could not|WARNING" | head -20
	echo "== dmesg"
	dmesg 2>/dev/null | grep -iE "oom|killed process|segfault|general protection" | tail -20
} >>"$OUT/server.txt"
cat "$OUT/cancel.md" "$OUT/server.txt"
