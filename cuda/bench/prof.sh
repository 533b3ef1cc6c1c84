#!/bin/sh
# cuda/bench/prof.sh CONFIG...: per-kernel device time of one benchmark
# configuration (e.g. 1e8:uniform:u64) under Nsight Compute, summed by
# kernel over the measured repetition (the warm-up is excluded).
OUT=${OUT:-/tmp/gs-out}
for cfg in "$@"; do
	f="$OUT/prof-$(echo "$cfg" | tr ':+' '__').csv"
	ncu --metrics gpu__time_duration.sum --csv --print-units base \
		cuda/build/bench_engine --only "$cfg" --reps 1 >"$f" 2>"$f.err"
	python3 - "$f" "$cfg" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ii = hdr.index("ID")
seq = [(r[ki], float(r[vi].replace(',', ''))) for r in rows]
# the run is: gen, iota, cub x2 (warm-up, timed), ours x2, diff.
def short(k):
    for w in ("histogram", "plan", "scatter", "local_sort", "copy_kernel", "prepass",
              "Onesweep", "Histogram", "ExclusiveSum", "gen_kernel", "iota", "diff"):
        if w in k: return w
    return k[:40]
tot = collections.OrderedDict()
for k, v in seq:
    s = short(k)
    if "local_sort" in k:
        s = "local_sort<" + k.split("LocalPolicy<")[1].split(">")[0] + ">" if "LocalPolicy<" in k else s
    tot.setdefault(s, [0.0, 0])
    tot[s][0] += v; tot[s][1] += 1
print("==", sys.argv[2], "(sums over warm-up + 1 rep; halve for one sort)")
for k, (v, c) in tot.items():
    print("  %-34s %9.3f ms  %5d launches" % (k, v / 1e6, c))
PY
done
