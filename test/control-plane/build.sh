#!/usr/bin/env bash
# Builds the control plane the Kubernetes test suite (npm run test:kube) runs against: Kubernetes'
# own kube-apiserver and kube-controller-manager (kube/go.mod: k8s.io/kubernetes v1.36.3, staging
# modules replaced by their v0.36.3 releases) and etcd (etcd/go.mod: go.etcd.io/etcd/server/v3
# v3.6.8), from the Go module proxy. Binaries, Go's build cache and its module cache live outside the
# checkout, in $PGX_CONTROL_PLANE_CACHE (default ~/.cache/pgx-control-plane), so a second run finds
# them: a stamp records the hash of the go.mod/go.sum files they were built from, and nothing is
# rebuilt while it matches. Prints the bin directory on its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${PGX_CONTROL_PLANE_CACHE:-$HOME/.cache/pgx-control-plane}"
bin="$cache/bin"
mkdir -p "$bin"
export GOCACHE="$cache/gocache" GOMODCACHE="$cache/gomod" GOFLAGS="-trimpath -buildvcs=false"

# name, module directory, what to build
build() {
  local name="$1" dir="$2"; shift 2
  local stamp="$bin/.$name.stamp"
  local want
  want="$(cat "$here/$dir/go.mod" "$here/$dir/go.sum" | sha256sum | cut -c1-16) $(go env GOVERSION)"
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return; fi
  echo "control plane: building $name ($dir), a cold build takes minutes" >&2
  local start=$SECONDS
  (cd "$here/$dir" && go build -o "$bin/" "$@")
  echo "$want" >"$stamp"
  echo "control plane: $name built in $((SECONDS - start)) s" >&2
}

build etcd etcd .
# Both binaries share a stamp: they come from one module and one build. The version is stamped as
# Kubernetes' own build (hack/lib/version.sh) does; without it they report v0.0.0-master.
kv="$(sed -n 's/^\tk8s.io\/kubernetes v\([0-9.]*\).*/\1/p' "$here/kube/go.mod")"
minor="$(echo "$kv" | cut -d. -f2)"
ld=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $pkg.gitVersion=v$kv -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
build kube-apiserver kube -ldflags "$ld" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
[[ -x "$bin/kube-controller-manager" ]] || { echo "control plane: kube-controller-manager missing from $bin" >&2; exit 1; }
echo "$bin"
