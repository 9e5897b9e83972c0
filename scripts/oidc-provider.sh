#!/usr/bin/env bash
# scripts/oidc-provider.sh — installs the real OpenID provider the OAuth tests sign in with:
# oidc-provider (the version tests/oidc/package-lock.json pins) and Node 22 (npm's
# node-linux-* package, so it does not depend on the machine's Node), into a cache folder
# outside the clone, once. Prints the Node binary and the provider script to run with it:
#
#   read -r node script < <(bash scripts/oidc-provider.sh)
#   PORT=4100 RESOURCE=http://127.0.0.1:3001/mcp KEYS_OUT=keys.json "$node" "$script"
#
# tests/it/oidc.rs runs it; .ci/run runs it before the tests so that their first one does not
# wait for npm.
#
# Environment:
#   APIGATE_CACHE  cache directory (default /var/tmp/apigate-cache)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${APIGATE_CACHE:-/var/tmp/apigate-cache}
die() {
  echo "oidc-provider.sh: $*" >&2
  exit 1
}
source "$ROOT/scripts/npm-tools.sh"

lock=$(sha256sum "$ROOT/tests/oidc/package-lock.json" | cut -c1-12)
DIR="$CACHE/oidc-provider-$lock-node$NODE_VERSION"
NODE="$DIR/node_modules/$NODE_PKG/bin/node"
if [[ ! -f $DIR/.complete ]]; then
  need_npm "oidc-provider"
  rm -rf "$DIR"
  mkdir -p "$DIR"
  cp "$ROOT/tests/oidc/package.json" "$ROOT/tests/oidc/package-lock.json" "$DIR/"
  (cd "$DIR" && timeout 600 npm ci --no-audit --no-fund --loglevel=error &&
    timeout 600 npm install --no-audit --no-fund --no-save --loglevel=error "$NODE_PKG@$NODE_VERSION") \
    >"$DIR.log" 2>&1 || {
    cat "$DIR.log" >&2
    die "installing oidc-provider failed (log: $DIR.log)"
  }
  touch "$DIR/.complete"
fi
"$NODE" --version | grep -q '^v22\.' || die "$NODE is not Node 22; delete $DIR and rerun"
# The script beside its node_modules, where its imports resolve; copied each time, so an edit
# of tests/oidc/provider.mjs is what runs.
cp "$ROOT/tests/oidc/provider.mjs" "$DIR/provider.mjs"
echo "$NODE $DIR/provider.mjs"
