#!/usr/bin/env bash
# Removes the switch interfaces a killed Mininet run left behind, which make the next run fail
# with "RTNETLINK answers: File exists":
#   scripts/mininet-leftovers.sh [--dry-run] [--force]
# Only names of the switches of netsum's topologies are touched: `s<N>-eth<M>` (single switch),
# `root-eth<M>` and `leaf<N>-eth<M>` (tree), in this network namespace. Host interfaces live in
# the hosts' namespaces and go with them; a switch-to-switch link (root-eth1 <-> leaf1-eth5) has
# both ends here, so nothing removes it once Mininet is killed. Deleting one end of a veth pair
# deletes its peer: both are named. Each removal is printed.
# A live Mininet run (a host shell `bash ... mininet:NAME` whose parent is still running, i.e.
# not re-parented to init) owns such names: then nothing is removed, unless --force.
# --dry-run only lists. Exit status 0 when nothing of the kind is left, 1 otherwise.
set -euo pipefail
dry=0 force=0
for a in "$@"; do
    case $a in
        --dry-run|-n) dry=1 ;;
        --force) force=1 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "mininet-leftovers: unknown argument '$a' (see --help)" >&2; exit 2 ;;
    esac
done
say() { echo "mininet-leftovers: $*"; }
pattern='^(s[0-9]+|root|leaf[0-9]+)-eth[0-9]+$'

leftovers() { ls /sys/class/net 2>/dev/null | grep -E "$pattern" || true; }
found=$(leftovers)
[ -n "$found" ] || exit 0

live=()
for d in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
    case $cmd in *"-is mininet:"*) ;; *) continue ;; esac
    ppid=$(awk '/^PPid:/ { print $2 }' "$d/status" 2>/dev/null) || continue
    [ "${ppid:-1}" != 1 ] && live+=("${d#/proc/} (${cmd% })")
done
if [ ${#live[@]} -gt 0 ] && [ "$force" = 0 ]; then
    say "a Mininet run is live (host shell ${live[0]}): leaving $(echo $found) alone (--force removes them)"
    exit 1
fi

rc=0
for name in $found; do
    [ -e "/sys/class/net/$name" ] || continue   # went with its peer
    peer=$(ip -o link show dev "$name" 2>/dev/null | sed -nE 's/^[0-9]+: [^@:]+@([^:]+):.*/\1/p')
    # A peer in another namespace shows as `if<index>`; it goes too, but has no name here.
    [[ $peer =~ ^if[0-9]+$ ]] && peer=""
    what="$name${peer:+ (and its veth peer $peer)}"
    if [ "$dry" = 1 ]; then
        say "left behind: $what"
    elif ip link delete dev "$name"; then
        say "removed $what"
        continue
    else
        say "could not remove $name" >&2
    fi
    rc=1
done
exit "$rc"
