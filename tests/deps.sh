#!/bin/sh
# make deps: install the Debian packages given as arguments that are not installed yet.
# Idempotent and quick when nothing is missing: apt-get update runs only if something is.
set -u
missing=
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && { echo "deps: all $# packages present"; exit 0; }
echo "deps: installing$missing"
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q || exit 3
$SUDO apt-get install -y -q --no-install-recommends $missing || exit 3
