#!/usr/bin/env bash
# A text bar chart of bench/run.sh's results: for each case, PostgreSQL's
# median time and gpusort's, as bars on one scale, with the speedup; the
# scan alone (the floor of each key's cases) as reference lines.
#
#   bench/bars.sh RESULTS.csv [WIDTH]      (WIDTH: the longest bar, default 50)
#
# Reads the columns rows, kind, key, width, pg_ms, gpusort_ms and speedup of
# results.csv; prints plain text (UTF-8 block characters), e.g. for a README.

set -euo pipefail
csv=${1:?usage: bench/bars.sh RESULTS.csv [WIDTH]}
width=${2:-50}
[ -r "$csv" ] || { echo "cannot read $csv" >&2; exit 1; }

tail -n +2 "$csv" | awk -F, -v W="$width" '
	# the bar, padded to W columns (by hand: awk pads bytes, not characters)
	function bar(ms,   s, k, j) { s = ""; k = int(ms / max * W + 0.5); if (k < 1) k = 1
		for (j = 0; j < W; j++) s = s (j < k ? "█" : " "); return s }
	NF < 7 || $5 == "" { next }
	{ n++; kind[n] = $2; key[n] = $3; wid[n] = $4; pg[n] = $5; gs[n] = $6; sp[n] = $7; rows[n] = $1
	  if ($5 + 0 > max) max = $5 + 0; if ($6 + 0 > max) max = $6 + 0 }
	END {
		if (max == 0) exit
		for (i = 1; i <= n; i++) {
			if (kind[i] == "scan") continue
			printf "%s %s (%s rows, %s)\n", kind[i], key[i], rows[i], wid[i]
			printf "  PostgreSQL %s %6.0f ms\n", bar(pg[i]), pg[i]
			printf "  gpusort    %s %6.0f ms  %s×\n", bar(gs[i]), gs[i], sp[i]
		}
		for (i = 1; i <= n; i++)
			if (kind[i] == "scan") {
				printf "scan %s alone, no sort (the floor of full %s)\n", key[i], key[i]
				printf "             %s %6.0f ms\n", bar(pg[i]), pg[i]
			}
	}'
