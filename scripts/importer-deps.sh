#!/usr/bin/env bash
# usage: scripts/importer-deps.sh <holdfast dir> <label> <import path>...
# e.g.   scripts/importer-deps.sh . lease-only github.com/holdfast-go/holdfast/lease
# Builds a throwaway consumer module (outside the repo) that imports the given
# holdfast packages, with a fresh GOMODCACHE, and prints what it pulls: the
# non-std packages it builds, the modules whose source zips were downloaded,
# the modules of which only the go.mod was fetched, and its go.mod/go.sum.
set -euo pipefail
root=$(cd "$1" && pwd); label=$2; shift 2
base=github.com/holdfast-go/holdfast
work=$(mktemp -d); cache=$(mktemp -d)
trap 'chmod -R u+w "$cache" 2>/dev/null; rm -rf "$work" "$cache"' EXIT
# modmap: the holdfast module (import path, dir) that holds each package.
mods=""
for p in "$@"; do
  rel=${p#"$base"}; rel=${rel#/}; d=$rel
  while [ -n "$d" ] && [ ! -f "$root/$d/go.mod" ]; do
    case $d in */*) d=${d%/*} ;; *) d="" ;; esac
  done
  m=$base${d:+/$d}
  case " $mods " in *" $m=$d "*) ;; *) mods="$mods $m=$d" ;; esac
done
case " $mods " in *" $base= "*) ;; *) mods="$mods $base=" ;; esac
cd "$work"
{
  printf 'module example.com/consumer\n\ngo 1.26.0\n\n'
  for md in $mods; do echo "require ${md%%=*} v0.0.0-00010101000000-000000000000"; done
  echo
  for md in $mods; do d=${md#*=}; echo "replace ${md%%=*} => $root${d:+/$d}"; done
} > go.mod
{ printf 'package main\n\nimport (\n'; for p in "$@"; do printf '\t_ "%s"\n' "$p"; done; printf ')\n\nfunc main() {}\n'; } > main.go
export GOMODCACHE=$cache GOFLAGS=-modcacherw
go mod tidy
go build -o /dev/null .
dl=$cache/cache/download
echo "== $label: imports $*"
echo "packages built (go list -deps, not std, not holdfast):"
go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' . | grep -v "^$base" | grep -v '^example.com/consumer$' | sed 's/^/  /' || true
echo "source zips downloaded:"
(cd "$dl" && find . -path ./sumdb -prune -o -name '*.zip' -print | sed 's|^\./||; s|/@v/| |; s|\.zip$||' | sort | sed 's/^/  /')
echo "only go.mod downloaded:"
(cd "$dl" && find . -path ./sumdb -prune -o -name '*.mod' -print | sed 's|^\./||; s|\.mod$||' | sort |
  while read -r m; do [ -e "$m.zip" ] || echo "  ${m/\/@v\// }"; done)
echo "consumer go.mod: $(wc -l < go.mod) lines, go.sum: $(wc -l < go.sum) lines"
sed "s/^/  | /" go.mod
echo "module graph (go list -m all, after the counts above): $(go list -m all | wc -l) modules"
go list -m all | sed 's/^/  /'
echo "go mod graph: $(go mod graph | wc -l) edges"
