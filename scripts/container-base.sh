#!/usr/bin/env bash
# Makes a Debian 12 base image where no container registry is reachable:
#   scripts/container-base.sh ENGINE... -- TAG ROOTFS_DIR
# debootstrap (minbase) from the Debian mirror of this machine's apt sources (NETSUM_DEBIAN_MIRROR
# overrides it; deb.debian.org when the sources name none), made to look like the registry's
# debian:12 (bookworm, -updates and -security in apt's sources, no package lists or caches, no
# host name or resolver of this machine), then imported into the engine's store as TAG.
# Needs root (debootstrap does); installs debootstrap from Debian when it is missing.
set -euo pipefail
engine=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do engine+=("$1"); shift; done
[ $# -eq 3 ] && [ ${#engine[@]} -gt 0 ] || { echo "usage: $0 ENGINE... -- TAG ROOTFS_DIR" >&2; exit 2; }
tag=$2 rootfs=$3
say() { echo "container-base: $*"; }
die() { echo "container-base: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "debootstrap needs root (or pull debian:12 from a registry)"
if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap from Debian"
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
        || die "could not install debootstrap"
fi

# The URIs of apt's deb822 or one-line sources whose suites are bookworm / bookworm-security.
apt_uri() {  # SUITE
    local s=$1 f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        awk -v s="$s" 'BEGIN { RS = ""; FS = "\n" }
            { uri = ""; hit = 0
              for (i = 1; i <= NF; i++) {
                  if ($i ~ /^URIs:/) { split($i, w, /[ \t]+/); uri = w[2] }
                  if ($i ~ /^Suites:/) { n = split($i, w, /[ \t]+/)
                      for (j = 2; j <= n; j++) if (w[j] == s) hit = 1 } }
              if (hit && uri != "") { print uri; exit } }' "$f"
    done
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | awk -v s="$s" '$1 == "deb" { o = ($2 ~ /^\[/) ? 1 : 0; if ($(3+o) == s) print $(2+o) }' \
        || true
}
mirror=${NETSUM_DEBIAN_MIRROR:-}
[ -n "$mirror" ] || mirror=$(apt_uri bookworm | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
security=$(apt_uri bookworm-security | head -n1 || true)
security=${security:-http://deb.debian.org/debian-security}

say "debootstrap --variant=minbase bookworm from $mirror"
rm -rf "$rootfs"
log=$rootfs.log
if ! debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    for m in proc sys dev/pts dev; do mountpoint -q "$rootfs/$m" && umount -l "$rootfs/$m"; done
    die "debootstrap failed (last lines above, whole log in $log)"
fi

rm -f "$rootfs/etc/apt/sources.list" "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"
cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb

say "importing the root file system as $tag"
tar -C "$rootfs" --numeric-owner -c . \
    | "${engine[@]}" import --change 'CMD ["bash"]' \
        --change "LABEL org.opencontainers.image.description=\"Debian 12 minbase, debootstrap from $mirror\"" \
        - "$tag" >/dev/null
rm -rf "$rootfs" "$log"
