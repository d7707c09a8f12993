#!/bin/bash
# The README's key reference is `gpurun help config`'s, so they cannot drift.
. "$(dirname "$0")/../lib.sh"

test_expect_success 'README lists every config key as gpurun help config does' '
	sed -n "/<!-- config-keys:start -->/,/<!-- config-keys:end -->/p" "$TOP/README.md" |
		sed "1,2d;\$d" | sed "\$d" >readme &&
	"$GPURUN" help config | sed -n "/^\[remote\]/,/^Global options/p" | sed "\$d" |
		sed -e :a -e "/^\n*\$/{\$d;N;ba" -e "}" >help &&
	test_cmp help readme
'

test_done
