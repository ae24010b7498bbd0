#!/usr/bin/env bash
# run-go.sh NAME ARGS...: the `run` of a Go conformance client
# (tests/conformance/clients/NAME). Builds the program once into
# $CONFORMANCE_CACHE/bin (set by the runner; default
# tests/conformance/.work/cache/bin), rebuilding it when a source of the
# client or of this shared package, or the tests module's go.mod or go.sum
# is newer than the binary, then runs it with ARGS; see
# tests/conformance/PROTOCOL.md.
set -euo pipefail

name=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
mod=$(cd "$here/../../.." && pwd -P) # tests/, the Go module of the clients
cache=${CONFORMANCE_CACHE:-$mod/conformance/.work/cache}
bin=$cache/bin/$name

stale() {
	[ ! -x "$bin" ] && return 0
	[ -n "$(find "$here" "$here/../$name" "$mod/go.mod" "$mod/go.sum" -newer "$bin" -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print -quit)" ]
}

if stale; then
	mkdir -p "$(dirname "$bin")"
	PATH=$PATH:/usr/local/go/bin
	# build to a temporary name so a concurrent run never execs half a file
	(cd "$mod" && go build -o "$bin.tmp.$$" ./conformance/clients/$name) >&2
	mv -f "$bin.tmp.$$" "$bin"
fi
exec "$bin" "$@"
