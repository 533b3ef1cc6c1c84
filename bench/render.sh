#!/usr/bin/env bash
# Draw the benchmark's charts from bench/run.sh's CSV (needs gnuplot, e.g.
# Debian's gnuplot-nox; the GPU machine has none, so render elsewhere).
#
#   bench/render.sh RESULTS.csv [MORE.csv ...] [--out DIR]
#
# Writes into DIR (default: the first CSV's folder):
#   speedup.png  PostgreSQL time / gpusort time per case, one bar per data
#                set size (the scan-alone rows are left out; 1 = no gain)
#   split.png    where gpusort's time goes, per case at the largest size, from
#                the warm-up EXPLAIN ANALYZE: load (reading and encoding the
#                input), sort (without transfers), transfers, tie-break, and the
#                rest of the statement (EXPLAIN ANALYZE's timing inflates it);
#                the medians of both ways, without EXPLAIN, as points
# Several CSVs (e.g. one per size) are drawn together.

set -euo pipefail

csvs=()
out=
while [ $# -gt 0 ]; do
	case "$1" in
		--out) out=$2; shift ;;
		-h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
		*) csvs+=("$1") ;;
	esac
	shift
done
[ "${#csvs[@]}" -gt 0 ] || { echo "usage: bench/render.sh RESULTS.csv [MORE.csv ...] [--out DIR]" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
out=${out:-$(dirname "${csvs[0]}")}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# all data rows, quotes removed (run.sh writes no commas inside fields)
for f in "${csvs[@]}"; do tail -n +2 "$f"; done | tr -d '"' >"$tmp/all.csv"
[ -s "$tmp/all.csv" ] || { echo "no data rows in ${csvs[*]}" >&2; exit 1; }
title=$(awk -F, 'NR == 1 { printf "GPU: %s, commit %s", $16, $17 }' "$tmp/all.csv")

# ---- speedup by case and size ----
sizes=$(awk -F, '$2 != "scan" { print $1 }' "$tmp/all.csv" | sort -n -u)
awk -F, -v sizes="$sizes" '
	BEGIN { ns = split(sizes, sz, "\n") }
	$2 != "scan" {
		label = $2 " " $3 " " $4
		if (!(label in seen)) { seen[label] = 1; order[++n] = label }
		v[label, $1] = ($7 == "" ? "-" : $7)
	}
	END {
		printf "case"; for (j = 1; j <= ns; j++) printf "\t%s", sz[j]; printf "\n"
		for (i = 1; i <= n; i++) {
			printf "\"%s\"", order[i]
			for (j = 1; j <= ns; j++) { k = order[i] SUBSEP sz[j]; printf "\t%s", (k in v ? v[k] : "-") }
			printf "\n"
		}
	}' "$tmp/all.csv" >"$tmp/speedup.dat"
ncases=$(($(wc -l <"$tmp/speedup.dat") - 1))
nsizes=$(echo "$sizes" | wc -l)

gnuplot <<GP
set terminal pngcairo size $(w=$((400 + 70 * ncases)); [ $w -lt 900 ] && w=900; echo $w),600 font ",10"
set output "$out/speedup.png"
set title "gpusort speedup over PostgreSQL's own sort (median times; >1 = gpusort faster)\n$title"
set datafile separator "\t"
set datafile missing "-"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set ylabel "PostgreSQL ms / gpusort ms"
set yrange [0:*]
set xtics rotate by -40 scale 0 noenhanced
set bmargin 9
set key top left noenhanced title "rows"
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2 lc rgb "black"
plot for [c=2:$((nsizes + 1))] "$tmp/speedup.dat" using c:xtic(1) title columnheader(c)
GP

# ---- time split at the largest size ----
largest=$(echo "$sizes" | tail -n 1)
awk -F, -v n="$largest" '
	$1 == n && $2 != "scan" && $20 != "" && $21 != "" {
		load = $21; sort = $22 - $23; xfer = $23; tb = $24
		if (sort < 0) sort = 0
		rest = $20 - load - $22 - tb
		if (rest < 0) rest = 0
		printf "\"%s %s %s\"\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", $2, $3, $4, load, sort, xfer, tb, rest, $5, $6
	}' "$tmp/all.csv" >"$tmp/split.dat"
if [ -s "$tmp/split.dat" ]; then
	nsplit=$(wc -l <"$tmp/split.dat")
	gnuplot <<GP
set terminal pngcairo size $(w=$((700 + 70 * nsplit)); [ $w -lt 1100 ] && w=1100; echo $w),600 font ",10"
set output "$out/split.png"
set title "Where gpusort's time goes, $largest rows (warm-up EXPLAIN ANALYZE)\n$title"
set datafile separator "\t"
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set ylabel "ms"
set yrange [0:*]
set xtics rotate by -40 scale 0 noenhanced
set bmargin 9
set key outside right top noenhanced
set grid ytics
plot "$tmp/split.dat" using 2:xtic(1) title "load (read + encode)", \
	 "" using 3 title "sort", \
	 "" using 4 title "transfer", \
	 "" using 5 title "tie-break", \
	 "" using 6 title "rest of the statement", \
	 "" using 0:7 with points pt 7 ps 1.5 lc rgb "black" title "PostgreSQL median (whole statement)", \
	 "" using 0:8 with points pt 9 ps 1.8 lc rgb "red" title "gpusort median (whole statement, without EXPLAIN)"
GP
	echo "wrote $out/speedup.png $out/split.png"
else
	echo "wrote $out/speedup.png (no GpuSort time split in these results: split.png not drawn)"
fi
