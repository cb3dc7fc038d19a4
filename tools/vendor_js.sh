#!/usr/bin/env bash
# The JavaScript the web page of `metakg serve` uses, fetched from npm at build time (never a CDN at run
# time, never committed): cytoscape, with its licence, into metakg/server/static/vendor. The package
# tarball is kept in ~/.cache/metakg/npm, so later builds need no network.
set -euo pipefail
out="${1:-metakg/server/static/vendor}"
version="3.34.4"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/metakg/npm"
tarball="$cache/cytoscape-$version.tgz"
mkdir -p "$cache" "$out"
if [ ! -f "$tarball" ]; then
  command -v npm >/dev/null 2>&1 || { echo "npm is needed once to fetch cytoscape (apt-get install npm)"; exit 1; }
  (cd "$cache" && npm pack --silent "cytoscape@$version" >/dev/null)
fi
work="$(mktemp -d)"
tar -xzf "$tarball" -C "$work"
cp "$work/package/dist/cytoscape.min.js" "$out/cytoscape.min.js"
cp "$work/package/LICENSE" "$out/cytoscape.LICENSE"
rm -rf "$work"
echo "vendored cytoscape $version into $out"
