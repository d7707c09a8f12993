# Shared by the benchmarks (sourced after tests/lib.sh): medians and ratios
# that say "failed" when a run failed or a cell has no number, never
# "nan", an empty cell or an awk division by zero.

# median: the median of the numbers on stdin; "failed" if any line is
# not a number (a failed run records "failed") or there are none; "-"
# if every line is "-" (nothing to measure).
median() {
	awk '$1 == "-" { dash++ } $1 !~ /^-?[0-9]+(\.[0-9]+)?$/ || $1 < 0 { bad = 1 } { v[NR] = $1 }
	END {
		if (NR && dash == NR) { print "-"; exit }
		if (bad || NR == 0) { print "failed"; exit }
		n = asort(v)
		if (n % 2) print v[(n + 1) / 2]; else print int((v[n / 2] + v[n / 2 + 1]) / 2)
	}'
}

# ratio A B [FORMAT]: A/B, or "failed" when either is not a number or B
# is zero.
ratio() {
	awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN {
		if (a !~ /^[0-9]+(\.[0-9]+)?$/ || b !~ /^[0-9]+(\.[0-9]+)?$/ || b + 0 == 0) print "failed"
		else printf f "\n", a / b }'
}
