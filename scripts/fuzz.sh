#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for the given time each,
# going on past a failing target so one run reports all of them. A failing
# input is written under the package's testdata/fuzz/, where plain `go test`
# replays it from then on.
# Usage: scripts/fuzz.sh 30s
set -uo pipefail
cd "$(dirname "$0")/.."
t="${1:-30s}"
failed=()
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u); do
		echo "== $pkg $f ($t)"
		if ! go test "$pkg" -run '^$' -fuzz "^${f}\$" -fuzztime "$t"; then
			failed+=("$pkg $f")
		fi
	done
done
if [ ${#failed[@]} -gt 0 ]; then
	printf 'failing fuzz targets:\n'
	printf '  %s\n' "${failed[@]}"
	exit 1
fi
