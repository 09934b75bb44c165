#!/bin/sh
# benchpkgs.sh: print the import paths of the packages of the Go module in
# the current directory whose test files define a Benchmark function, one
# per line (nothing when none does). make bench runs the Go benchmarks of
# these only: building every package's test binary to find none took a
# fifth of the step.
set -eu
go list -f '{{$d := .Dir}}{{.ImportPath}}{{range .TestGoFiles}} {{$d}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$d}}/{{.}}{{end}}' ./... |
while read -r pkg files; do
	[ -n "$files" ] || continue
	# shellcheck disable=SC2086 # the file list is split on purpose
	if grep -q '^func Benchmark' $files; then
		echo "$pkg"
	fi
done
