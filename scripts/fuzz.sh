#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for the given time each.
# Usage: scripts/fuzz.sh 30s
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-30s}"
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u); do
		echo "== $pkg $f ($t)"
		go test "$pkg" -run '^$' -fuzz "^${f}\$" -fuzztime "$t"
	done
done
