#!/usr/bin/env bash
# Runs the end-to-end tier as an unprivileged user, to prove it needs no root and no
# CAP_NET_ADMIN (loopback only, as in a container).  Used by .ci/run (as root); it makes a
# system user, a private clone of this checkout and a venv from Debian's python3 owned by that
# user (with the `train` extra: the training tests prove the UDP-tunnel mode needs no root
# either), then runs the non-privileged end-to-end tests there.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "unprivileged-tier: run me as root (I switch to an unprivileged user)" >&2; exit 2; }

user=netsum-ci
id -u "$user" >/dev/null 2>&1 || useradd --system --create-home --home-dir /var/lib/$user --shell /bin/bash "$user"
if ! /usr/bin/python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi

work=$(mktemp -d /tmp/netsum-unpriv.XXXXXX)
trap 'rm -rf "$work"' EXIT
git clone -q --no-hardlinks "$PWD" "$work/netsum"
# Uncommitted work in a developer's tree is tested too (CI's tree is clean, so this is a no-op).
git diff HEAD --binary | (cd "$work/netsum" && git apply --allow-empty 2>/dev/null || true)
chown -R "$user" "$work"

runuser -u "$user" -- bash -euo pipefail -c "
    cd '$work/netsum'
    /usr/bin/python3 -m venv .venv
    .venv/bin/pip install -q -e '.[dev,train]' > .venv/pip-install.log 2>&1 || { cat .venv/pip-install.log >&2; exit 1; }
    echo \"unprivileged-tier: running as \$(id -un) (uid \$(id -u))\"
    .venv/bin/python -m pytest -p no:cacheprovider -m 'not privileged' tests/e2e $*
"
