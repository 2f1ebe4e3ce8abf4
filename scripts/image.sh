#!/bin/sh
# image.sh BINARY TAG: builds the container image TAG from a static toolgate
# binary with no registry: scratch plus CA certificates and tzdata from this
# machine (Debian's ca-certificates and tzdata packages) and a non-root
# user. Uses podman, or docker when podman is not installed
# (CONTAINER_ENGINE=… picks one).
set -eu
bin=$1
tag=$2
here=$(cd "$(dirname "$0")/.." && pwd)

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
	if command -v podman >/dev/null 2>&1; then engine=podman
	elif command -v docker >/dev/null 2>&1; then engine=docker
	else echo "image.sh: neither podman nor docker is installed" >&2; exit 1
	fi
fi
certs=/etc/ssl/certs/ca-certificates.crt
if [ ! -f "$certs" ]; then
	echo "image.sh: $certs missing (apt-get install ca-certificates)" >&2
	exit 1
fi
if [ ! -d /usr/share/zoneinfo ]; then
	echo "image.sh: /usr/share/zoneinfo missing (apt-get install tzdata)" >&2
	exit 1
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/usr/share" "$ctx/rootfs/tmp" "$ctx/state"
chmod 1777 "$ctx/rootfs/tmp"
cp "$bin" "$ctx/rootfs/toolgate"
chmod 0755 "$ctx/rootfs/toolgate"
cp "$certs" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
cp -R /usr/share/zoneinfo "$ctx/rootfs/usr/share/zoneinfo"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/rootfs/etc/group"
cp "$here/deploy/image/Containerfile" "$ctx/Containerfile"

"$engine" build -q -f "$ctx/Containerfile" -t "$tag" "$ctx" >/dev/null
echo "built $tag with $engine"
