#!/usr/bin/env bash
# Builds the real tools of the cluster tier from the Go module proxy and caches them:
#   bash scripts/build-tools.sh [TOOL...]
#   TOOL: kubernetes etcd kwok pulumi pulumi-language-python pulumi-kubernetes (default: all, in that order:
#   the cluster's tools first, since the cluster tier needs only them)
# Versions: scripts/tools.env (the one place). Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/elastic-training/tools/<key>/bin,
# <key> = the first 16 hex digits of sha256 of tools.env's assignments (comments do not count). The last
# line printed (stdout) is that bin directory;
# progress goes to stderr. A tool whose stamp and binaries are present is skipped, so a warm run takes seconds.
# Each tool is built in a small wrapper module of our own (<key>/src/<tool>/go.mod): the upstream modules carry
# `replace` directives, which `go install pkg@version` refuses (pulumi/pulumictl#87), and a wrapper's own
# replaces pin them to published versions (golang/go#35878).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
versions_file=$root/scripts/tools.env
# shellcheck source=tools.env
source "$versions_file"

key=$(grep -E '^[A-Z_]+=' "$versions_file" | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/elastic-training/tools/$key
bin=$cache/bin src=$cache/src stamps=$cache/stamps
mkdir -p "$bin" "$src" "$stamps"

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
command -v go >/dev/null || { echo "build-tools: no 'go' on PATH; install Go 1.26 or newer (https://go.dev/dl/)" >&2; exit 1; }
parallel=${BUILD_TOOLS_PARALLEL:-2}
build=(go build -p "$parallel" -trimpath)

log() { echo "build-tools: $*" >&2; }

# tool name -> the binaries it must leave in $bin
binaries_of() {
  case $1 in
    kubernetes) echo kube-apiserver kube-controller-manager kube-scheduler kubectl ;;
    etcd) echo etcd ;;
    kwok) echo kwok ;;
    pulumi) echo pulumi pulumi-language-python-exec pulumi-resource-pulumi-python ;;
    pulumi-language-python) echo pulumi-language-python ;;
    pulumi-kubernetes) echo pulumi-resource-kubernetes ;;
    *) echo "build-tools: unknown tool '$1'; the tools are: kubernetes etcd kwok pulumi pulumi-language-python pulumi-kubernetes" >&2; return 2 ;;
  esac
}

is_built() {
  [ -f "$stamps/$1" ] || return 1
  local b
  for b in $(binaries_of "$1"); do [ -x "$bin/$b" ] || return 1; done
}

# A fresh wrapper module in $src/$1 (kept between runs so its go.sum is reused).
wrapper() {
  mkdir -p "$src/$1" && cd "$src/$1"
  [ -f go.mod ] || go mod init "local.invalid/elastic-training-tools/$1" >/dev/null 2>&1
}

# The commit a module version was tagged from, read from the proxy's .info Origin (empty if not recorded).
origin_commit() {
  go mod download -json "$1" | python3 -c 'import json,sys; print((json.load(sys.stdin).get("Origin") or {}).get("Hash", ""))'
}

build_kubernetes() {
  wrapper kubernetes
  local gomod minor major commit ld pkg
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  # Every k8s.io/X the kubernetes go.mod replaces with ./staging/src/k8s.io/X, pinned to its published version.
  local replaces=()
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$gomod"); do
    replaces+=("-replace=$m=$m@$KUBERNETES_STAGING_VERSION")
  done
  go mod edit "${replaces[@]}"
  go get "k8s.io/kubernetes@$KUBERNETES_VERSION" >&2
  major=${KUBERNETES_VERSION#v}; major=${major%%.*}
  minor=${KUBERNETES_VERSION#v*.}; minor=${minor%%.*}
  commit=$(origin_commit "k8s.io/kubernetes@$KUBERNETES_VERSION")
  # The version strings hack/lib/version.sh sets (kube::version::ldflags): kwok, kubectl and the
  # Pulumi provider read the server's version, and the API server's compatibility version follows it.
  ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=$commit -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  "${build[@]}" -ldflags "$ld" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
}

build_etcd() {
  wrapper etcd
  local gomod
  gomod=$(go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  # server/go.mod replaces its sibling modules (api, client/pkg, client/v3, pkg) with ../<dir>: pin each
  # to the same published version.
  local replaces=()
  for m in $(sed -n 's#^[[:space:]]*\(go\.etcd\.io/etcd/[a-z0-9/]*\) => \.\./.*#\1#p' "$gomod"); do
    replaces+=("-replace=$m=$m@$ETCD_VERSION")
  done
  [ ${#replaces[@]} -eq 0 ] || go mod edit "${replaces[@]}"
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
  "${build[@]}" -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
}

build_kwok() {
  wrapper kwok
  go get "sigs.k8s.io/kwok@$KWOK_VERSION" >&2
  "${build[@]}" -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok
}

module_dir() {
  go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

# The Pulumi CLI and the two Python shims the engine runs beside it (they ship in sdk/v3, as scripts).
build_pulumi() {
  wrapper pulumi
  # pkg/go.mod: sdk/v3 => ../sdk, and a clipboard fork; sdk/go.mod pins golang.org/x/text. Replaces of a
  # dependency do not apply to us, so each is restated here.
  local pkg sdk
  pkg=$(module_dir "github.com/pulumi/pulumi/pkg/v3@$PULUMI_VERSION")
  sdk=$(module_dir "github.com/pulumi/pulumi/sdk/v3@$PULUMI_VERSION")
  local replaces=("-replace=github.com/pulumi/pulumi/sdk/v3=github.com/pulumi/pulumi/sdk/v3@$PULUMI_VERSION")
  local line
  while read -r line; do replaces+=("-replace=$line"); done < <(
    cat "$pkg/go.mod" "$sdk/go.mod" | sed -n 's#^replace[[:space:]]\{1,\}\([^ ]*\) => \([^ .][^ ]*\) \(v[^ ]*\)$#\1=\2@\3#p' | sort -u)
  go mod edit "${replaces[@]}"
  go get "github.com/pulumi/pulumi/pkg/v3@$PULUMI_VERSION" "github.com/pulumi/pulumi/sdk/v3@$PULUMI_VERSION" >&2
  "${build[@]}" -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
    -o "$bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
  install -m 755 "$sdk/python/cmd/pulumi-language-python-exec" "$sdk/python/dist/pulumi-resource-pulumi-python" "$bin/"
}

# The Python language host is a module of its own (sdk/python/cmd/pulumi-language-python/v3) with no tags,
# so only a pseudo-version could name it; tools.env says what the proxy answers.
build_pulumi_language_python() {
  if [ -z "${PULUMI_LANGUAGE_PYTHON_PSEUDO:-}" ]; then
    echo "not served: github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3 (see scripts/tools.env)"
    go list -m -versions github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3
    return 1
  fi
  wrapper pulumi-language-python
  local m=github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3
  go mod edit "-replace=github.com/pulumi/pulumi/sdk/v3=github.com/pulumi/pulumi/sdk/v3@$PULUMI_VERSION" \
    "-replace=github.com/pulumi/pulumi/pkg/v3=github.com/pulumi/pulumi/pkg/v3@$PULUMI_VERSION"
  go get "$m@$PULUMI_LANGUAGE_PYTHON_PSEUDO" >&2
  "${build[@]}" -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
    -o "$bin/pulumi-language-python" "$m"
}

# The Kubernetes provider: our own main.go (scripts/tools/pulumi-resource-kubernetes), over the schema
# files of the same module version, versioned the way upstream's generate.go does it.
build_pulumi_kubernetes() {
  wrapper pulumi-kubernetes
  local m=github.com/pulumi/pulumi-kubernetes/provider/v4 provider
  provider=$(module_dir "$m@$PULUMI_KUBERNETES_PROVIDER_PSEUDO")
  # provider/go.mod: sdk/v4 => ../sdk; pkg/v3's and sdk/v3's own replaces, restated at the versions it requires.
  go mod edit "-replace=github.com/pulumi/pulumi-kubernetes/sdk/v4=github.com/pulumi/pulumi-kubernetes/sdk/v4@v$PULUMI_KUBERNETES_VERSION"
  go get "$m@$PULUMI_KUBERNETES_PROVIDER_PSEUDO" >&2
  local pkg_version sdk line replaces=()
  pkg_version=$(go list -m -f '{{.Version}}' github.com/pulumi/pulumi/pkg/v3)
  sdk=$(module_dir "github.com/pulumi/pulumi/sdk/v3@$(go list -m -f '{{.Version}}' github.com/pulumi/pulumi/sdk/v3)")
  while read -r line; do replaces+=("-replace=$line"); done < <(
    cat "$(module_dir "github.com/pulumi/pulumi/pkg/v3@$pkg_version")/go.mod" "$sdk/go.mod" \
      | sed -n 's#^replace[[:space:]]\{1,\}\([^ ]*\) => \([^ .][^ ]*\) \(v[^ ]*\)$#\1=\2@\3#p' | sort -u)
  [ ${#replaces[@]} -eq 0 ] || go mod edit "${replaces[@]}"
  install -m 644 "$root/scripts/tools/pulumi-resource-kubernetes/main.go" main.go
  install -m 644 "$provider/cmd/pulumi-resource-kubernetes/schema.json" "$provider/cmd/pulumi-resource-kubernetes/terraform-mapping.json" .
  go mod tidy >&2
  VERSION=$PULUMI_KUBERNETES_VERSION go run "$provider/cmd/pulumi-resource-kubernetes/generate.go"
  "${build[@]}" -ldflags "-s -w -X $m/pkg/version.Version=$PULUMI_KUBERNETES_VERSION" -o "$bin/pulumi-resource-kubernetes" .
}

tools=("$@")
if [ ${#tools[@]} -eq 0 ]; then
  tools=(kubernetes etcd kwok pulumi pulumi-language-python pulumi-kubernetes)
  if [ -z "${PULUMI_LANGUAGE_PYTHON_PSEUDO:-}" ]; then
    # Not served by the proxy (tools.env says what was tried): left out of "all", reported; asking
    # for it by name still tries, and fails.
    log "pulumi-language-python: skipped, the Go module proxy serves no version of it (scripts/tools.env)"
    tools=(kubernetes etcd kwok pulumi pulumi-kubernetes)
  fi
fi
for tool in "${tools[@]}"; do binaries_of "$tool" >/dev/null || exit 2; done

failed=()
locked=""
for tool in "${tools[@]}"; do
  if is_built "$tool"; then log "$tool: cached ($(cat "$stamps/$tool"))"; continue; fi
  # One build at a time per cache (two pytest workers, two worktrees): the second waits here, then
  # finds what the first built. Tools already built never wait.
  if [ -z "$locked" ]; then
    exec 9>"$cache/.lock"
    flock 9
    locked=1
    if is_built "$tool"; then log "$tool: built meanwhile ($(cat "$stamps/$tool"))"; continue; fi
  fi
  log "$tool: building (log: $src/$tool.log)"
  start=$(date +%s)
  if (set -x; "build_${tool//-/_}") >"$src/$tool.log" 2>&1; then
    seconds=$(( $(date +%s) - start ))
    echo "built in ${seconds}s at $(date -u +%FT%TZ)" >"$stamps/$tool"
    log "$tool: built in ${seconds}s"
  else
    log "$tool: FAILED after $(( $(date +%s) - start ))s; the last lines of $src/$tool.log:"
    tail -n 15 "$src/$tool.log" >&2
    failed+=("$tool")
  fi
done
[ ${#failed[@]} -eq 0 ] || { log "not built: ${failed[*]}"; exit 1; }
echo "$bin"
