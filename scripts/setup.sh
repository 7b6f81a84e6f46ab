#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine (run as root for the apt part):
#   - the Debian packages netsum needs (mininet without recommends: Open vSwitch cannot run here),
#   - a project virtualenv in .venv with the pinned Python dependencies,
#   - Debian's mininet module made importable inside .venv (PyPI's mininet lacks mnexec).
# Re-running it does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

# gcc + python3-dev: the switch's native backend (netsum/switch/native) compiles generated C against
# CPython's headers; without them the switch runs its Python path. libatomic1: the full memory
# fence of the shared-memory ports (netsum/shmring.py).
APT_PKGS=(mininet iproute2 ethtool iputils-ping tcpdump bridge-utils cpp gcc python3-dev libatomic1)
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
# Extras of pyproject.toml to install; the Containerfile names its own (`dev`: no torch there).
EXTRAS=${NETSUM_EXTRAS:-dev,train}

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
    for p in "${APT_PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "setup: installing Debian packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "setup: not root, skipping Debian packages: ${missing[*]} (privileged tests will skip)" >&2
    fi
fi

stamp="$VENV/.netsum-installed"
if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV"
    "$PY" -m venv "$VENV"
fi
# The stamp holds the extras it was made for: asking for others installs again.
if [ "$(cat "$stamp" 2>/dev/null || echo none)" != "$EXTRAS" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "setup: installing netsum and its pinned dependencies into $VENV"
    # pip's and setuptools' chatter goes to a log that is shown only when the install fails.
    pip_log="$VENV/pip-install.log"
    if ! "$VENV/bin/pip" install -q -e ".[$EXTRAS]" >"$pip_log" 2>&1; then
        cat "$pip_log" >&2
        echo "setup: pip install failed (log above, also in $pip_log)" >&2
        exit 1
    fi
    modules="netsum, p4runtime_sh, grpc, scapy, numpy"
    case ",$EXTRAS," in *,train,*) modules="$modules, torch, sklearn" ;; esac
    "$VENV/bin/python" -c "import $modules"
    echo "$EXTRAS" >"$stamp"
fi

# finsy, a second independent P4Runtime client for the P4Runtime tests, needs protobuf >= 4,
# which conflicts with p4runtime-shell's pin: it gets a virtualenv of its own that the tests
# drive as a subprocess (tests/clients/finsy_driver.py).
FINSY_VENV=${FINSY_VENV:-.venv-finsy}
FINSY_PIN="finsy==0.30.0"
finsy_stamp="$FINSY_VENV/.installed-$FINSY_PIN"
if [ ! -f "$finsy_stamp" ]; then
    echo "setup: installing $FINSY_PIN into $FINSY_VENV"
    [ -x "$FINSY_VENV/bin/python" ] || "$PY" -m venv "$FINSY_VENV"
    if ! "$FINSY_VENV/bin/pip" install -q "$FINSY_PIN" >"$FINSY_VENV/pip-install.log" 2>&1; then
        cat "$FINSY_VENV/pip-install.log" >&2
        echo "setup: pip install $FINSY_PIN failed (log above)" >&2
        exit 1
    fi
    "$FINSY_VENV/bin/python" -c "import finsy"
    touch "$finsy_stamp"
fi

# Debian's mininet (with mnexec) inside the venv, without exposing the rest of dist-packages.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -d /usr/lib/python3/dist-packages/mininet ] && [ ! -e "$site/mininet" ]; then
    ln -s /usr/lib/python3/dist-packages/mininet "$site/mininet"
fi
