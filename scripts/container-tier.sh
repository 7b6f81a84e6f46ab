#!/usr/bin/env bash
# The container tier: builds the Containerfile's image and runs netsum's unit and unprivileged
# end-to-end tiers inside it (every test not marked privileged, or --marks), then the demo (UDP-port mode). Exit status: the tests' (pytest's
# own code), or the demo's when the tests passed and the demo did not; 2 for a set-up error.
#
#   scripts/container-tier.sh [--fresh] [--form auto|run|build] [--demo-form auto|run|build]
#                             [--tests PATHS] [--marks EXPR] [--no-demo] [-- PYTEST_ARGS...]
#
#   --fresh      use a private, temporary image store (podman only), removed at exit: every
#                image is built from nothing, as on a new machine (CI does this)
#   --form       `run`: `podman run` of the image (own network namespace with loopback only,
#                no root, no capabilities); `build`: the Containerfile's `test` stage, for
#                machines where no container can be started; `auto` (default): `run` when a
#                probe container starts, else `build`, saying why
#   --demo-form  the same choice for the demo (default: --form's)
#   --tests      the test paths inside the image (default `tests`: both tiers; CI gives
#                `tests/e2e`, its host step having run the unit tier already)
#   --marks      the pytest marker expression (default `not privileged`; it must exclude
#                privileged tests. CI gives `not privileged and not slow`: its host step ran the
#                slow ones as root with the compiled paths, and they would double its time)
#
# The base image is debian:12: used when present, else pulled, else (no registry reachable)
# made with debootstrap from the Debian mirror of this machine's apt sources and imported as
# localhost/netsum-base:debian12. The build mounts one host path, the CA bundle (pip needs it
# where TLS is intercepted); everything else comes from the build context (.dockerignore).
set -euo pipefail
cd "$(dirname "$0")/.."

fresh=0 form=auto demo_form="" demo=1 tests=tests marks="not privileged" pytest_args=()
while [ $# -gt 0 ]; do
    case $1 in
        --fresh) fresh=1 ;;
        --form) form=${2:?--form needs auto, run or build}; shift ;;
        --demo-form) demo_form=${2:?--demo-form needs auto, run or build}; shift ;;
        --tests) tests=${2:?--tests needs test paths}; shift ;;
        --marks) marks=${2:?--marks needs a marker expression}; shift ;;
        --no-demo) demo=0 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --) shift; pytest_args=("$@"); break ;;
        *) echo "container-tier: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
demo_form=${demo_form:-$form}
# A container has no CAP_NET_ADMIN: an expression that lets privileged tests in would fail them.
case $marks in *"not privileged"*) ;; *) echo "container-tier: --marks '$marks' must exclude privileged tests ('not privileged and ...')" >&2; exit 2 ;; esac
for f in "$form" "$demo_form"; do
    case $f in auto|run|build) ;; *) echo "container-tier: form '$f' is not auto, run or build" >&2; exit 2 ;; esac
done

say() { echo "container-tier: $*"; }
die() { echo "container-tier: $*" >&2; exit 2; }
now() { date +%s; }
IMAGE=localhost/netsum:latest
BUILT_BASE=localhost/netsum-base:debian12
t_start=$(now)

work=$(mktemp -d /var/tmp/netsum-container.XXXXXX)
engine=()
cleanup() {
    if [ "$fresh" = 1 ] && [ ${#engine[@]} -gt 0 ]; then
        "${engine[@]}" rmi --all --force >/dev/null 2>&1 || true
        # containers/storage keeps its overlay directory mounted: unmount before removing it.
        findmnt -rn -o TARGET | grep "^$work/" | sort -r | xargs -r umount -l 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# ---- the engine: podman (installed from Debian when missing, as root), or a working docker
if command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1; then
    engine=(podman)
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # runc beside podman's crun: crun cannot start containers on a cgroup v1/v2 hybrid host.
    say "installing podman and runc from Debian"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends podman runc >/dev/null
    engine=(podman)
elif command -v podman >/dev/null 2>&1; then
    engine=(podman)
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    engine=(docker)
else
    die "no container engine: install podman (or run a Docker engine), or run me as root on Debian"
fi
kind=${engine[0]}
if [ "$fresh" = 1 ]; then
    [ "$kind" = podman ] || die "--fresh needs podman (docker has one image store per daemon)"
    engine+=(--root "$work/storage" --runroot "$work/run")
    say "private image store in $work (removed at exit)"
fi

# ---- the base image
base=""
t0=$(now)
for candidate in docker.io/library/debian:12 "$BUILT_BASE"; do
    if "${engine[@]}" image inspect "$candidate" >/dev/null 2>&1; then base=$candidate; break; fi
done
if [ -z "$base" ] && timeout 180 "${engine[@]}" pull -q docker.io/library/debian:12 >"$work/pull.log" 2>&1; then
    base=docker.io/library/debian:12
fi
if [ -z "$base" ]; then
    say "no debian:12 from a registry ($(tail -n1 "$work/pull.log")); making it with debootstrap"
    scripts/container-base.sh "${engine[@]}" -- "$BUILT_BASE" "$work/rootfs" \
        || die "making the base image failed (above)"
    base=$BUILT_BASE
fi
t_base=$(( $(now) - t0 ))
say "base image: $base (${t_base} s)"

# ---- the project image
build_opts=(--build-arg "BASE_IMAGE=$base")
if [ "$kind" = podman ]; then
    # chroot isolation needs no OCI runtime (it builds where no container can start) and
    # shares the host's network, so apt and pip reach their registries without CNI plugins.
    build_opts+=(--pull=never --isolation="${BUILDAH_ISOLATION:-chroot}")
    # The one host path of the build: the CA bundle, for pip where TLS is intercepted.
    ca=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
    [ -s "$ca" ] && build_opts+=(-v "$ca:/run/netsum-host-ca.crt:ro")
fi
t0=$(now)
old_id=$("${engine[@]}" image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
"${engine[@]}" build "${build_opts[@]}" -t "$IMAGE" -f Containerfile . \
    || die "building the image failed (output above)"
t_image=$(( $(now) - t0 ))
# The image this build replaced would stay behind untagged, one per change of the checkout.
new_id=$("${engine[@]}" image inspect --format '{{.Id}}' "$IMAGE")
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
    "${engine[@]}" rmi "$old_id" >/dev/null 2>&1 || true
fi
size=$("${engine[@]}" image inspect --format '{{.Size}}' "$IMAGE" 2>/dev/null || echo 0)
say "image $IMAGE built (${t_image} s, $((size / 1000000)) MB)"

# ---- can a container start here? Probe once with the base image.
run_opts=(--rm --network=none)
# On hosts that withhold CAP_SYS_RESOURCE, podman's default limits for root (1048576 files and
# processes) are refused, so the fallback asks for what this process may have: the hard limits,
# capped where podman caps its own (processes at kernel.pid_max, files at fs.nr_open).
limit_opts=()
cap_limit() {  # NAME HARD CAP_FILE
    local v=$2 cap
    cap=$(cat "$3" 2>/dev/null || echo "$v")
    [ "$v" = unlimited ] || [ "$cap" -lt "$v" ] && v=$cap
    limit_opts+=(--ulimit "$1=$v:$v")
}
cap_limit nofile "$(ulimit -Hn)" /proc/sys/fs/nr_open
cap_limit nproc "$(ulimit -Hu)" /proc/sys/kernel/pid_max
run_engine=("${engine[@]}")
run_blocker=""
probe() {
    local attempt=("${engine[@]}")
    if "${attempt[@]}" run "${run_opts[@]}" "$base" true >"$work/probe.log" 2>&1; then
        run_engine=("${attempt[@]}"); return 0
    fi
    run_blocker=$(grep -m1 . "$work/probe.log" || echo "no message")
    if [ "$kind" = podman ] && command -v runc >/dev/null 2>&1; then
        # crun refuses a cgroup v1/v2 hybrid host; runc accepts it.
        attempt=("${engine[@]}" --runtime runc)
        if "${attempt[@]}" run "${run_opts[@]}" "${limit_opts[@]}" "$base" true >"$work/probe.log" 2>&1; then
            say "the default container runtime cannot start a container ($run_blocker);" \
                "runc with limits ${limit_opts[*]} can"
            run_engine=("${attempt[@]}"); run_opts+=("${limit_opts[@]}"); run_blocker=""
            return 0
        fi
        run_blocker="$run_blocker; with runc: $(grep -m1 . "$work/probe.log" || echo "no message")"
    fi
    return 1
}
if [ "$form" = auto ] || [ "$demo_form" = auto ] || [ "$form" = run ] || [ "$demo_form" = run ]; then
    if probe; then can_run=1; else can_run=0; fi
    if [ "$can_run" = 0 ]; then
        say "$kind run cannot start a container on this machine: $run_blocker"
        for f in "$form" "$demo_form"; do
            [ "$f" = run ] && die "--form run asked for, but no container can start (above)"
        done
        say "so the tiers run as build stages of the image instead (the Containerfile's test/demo)"
    fi
    [ "$form" = auto ] && { [ "$can_run" = 1 ] && form=run || form=build; }
    [ "$demo_form" = auto ] && { [ "$can_run" = 1 ] && demo_form=run || demo_form=build; }
fi

# ---- one run in either form; returns the exit status of the command inside the image
run_in_image() {  # FORM TARGET ARGS_NAME ARGS...
    local f=$1 target=$2 argname=$3; shift 3
    local log="$work/$target.log" rc
    if [ "$f" = run ]; then
        set +e
        if [ "$target" = test ]; then
            "${run_engine[@]}" run "${run_opts[@]}" -e "NETSUM_TESTS=$tests" -e "NETSUM_MARKS=$marks" \
                -e "PYTEST_ADDOPTS=$*" \
                "$IMAGE" 2>&1 | tee "$log"
        else
            "${run_engine[@]}" run "${run_opts[@]}" "$IMAGE" .venv/bin/netsum demo "$@" 2>&1 | tee "$log"
        fi
        rc=${PIPESTATUS[0]}
        set -e
        return "$rc"
    fi
    # A build stage: NETSUM_RUN defeats the layer cache, the stage's last line gives the status.
    set +e
    "${engine[@]}" build "${build_opts[@]}" --target "$target" -t "localhost/netsum:$target" \
        --build-arg "NETSUM_RUN=$(date +%s%N)" --build-arg "NETSUM_TESTS=$tests" \
        --build-arg "NETSUM_MARKS=$marks" \
        --build-arg "$argname=$*" -f Containerfile . 2>&1 \
        | tee "$log"
    set -e
    "${engine[@]}" rmi "localhost/netsum:$target" >/dev/null 2>&1 || true
    rc=$(sed -n 's/^container-stage: exit status \([0-9]*\)$/\1/p' "$log" | tail -n1)
    if [ -z "$rc" ]; then
        echo "container-tier: the $target stage failed before its command ran (output above)" >&2
        return 125
    fi
    return "$rc"
}

t0=$(now)
say "tests marked '$marks' under '$tests' inside the image ($form form)"
if run_in_image "$form" test PYTEST_ADDOPTS "${pytest_args[@]}"; then rc_tests=0; else rc_tests=$?; fi
t_tests=$(( $(now) - t0 ))
summary=$(grep -E '^=+ .*(passed|failed|errors?|skipped|deselected|no tests ran).* in [0-9.]+s' \
          "$work/test.log" | tail -n1 || true)
say "tests: exit status $rc_tests (${t_tests} s; ${summary:-no pytest summary line})"

rc_demo=0 demo_note="not run"
if [ "$demo" = 1 ]; then
    t0=$(now)
    say "the demo inside the image ($demo_form form)"
    if run_in_image "$demo_form" demo DEMO_ARGS; then rc_demo=0; else rc_demo=$?; fi
    demo_note="$(( $(now) - t0 )) s ($demo_form form)"
    say "demo: exit status $rc_demo ($demo_note)"
fi

say "times: base image ${t_base} s, image ${t_image} s ($((size / 1000000)) MB), tests ${t_tests} s ($form form)," \
    "demo $demo_note, total $(( $(now) - t_start )) s"
if [ "$rc_tests" -ne 0 ]; then
    say "FAILED: the tests inside the container exited with $rc_tests"
    exit "$rc_tests"
fi
if [ "$rc_demo" -ne 0 ]; then
    say "FAILED: the demo inside the container exited with $rc_demo"
    exit "$rc_demo"
fi
say "passed"
