#!/bin/sh
# cpuhog.sh: keep N CPUs busy for at most SECONDS, to run tests the way a
# busy machine runs them (issue 11, part 7).
#
#   scripts/cpuhog.sh [N [SECONDS]]        defaults: 2 loops, 1800 s
#   scripts/cpuhog.sh 2 900 & hog=$!; make test; kill $hog
#
# Each loop is a plain `while :; do :; done` in its own sh. The script
# stops every loop it started when the time limit passes or when it is
# told to stop (INT, TERM, HUP) or exits, so no loop outlives it.
set -u
n=${1:-2}
limit=${2:-1800}
pids=
stop() {
	trap - EXIT INT TERM HUP
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
}
trap stop EXIT
trap 'stop; exit 143' INT TERM HUP
i=0
while [ "$i" -lt "$n" ]; do
	sh -c 'while :; do :; done' &
	pids="$pids $!"
	i=$((i + 1))
done
# Sleep in the background and wait for it, so a signal interrupts the wait
# at once rather than after the sleep.
sleep "$limit" &
sleeper=$!
pids="$pids $sleeper"
wait "$sleeper"
