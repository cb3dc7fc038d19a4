#!/usr/bin/env bash
# The JavaScript and CSS the pages of `metakg serve` use, fetched from npm at build time (never a CDN at run
# time, never committed) into metakg/server/static/vendor, each with its licence:
#   cytoscape        the graph of the web page
#   swagger-ui-dist  the interactive API reference at /docs
#   redoc            the API reference at /redoc (2.x: the standalone bundle of 3.x is an ES module, which
#                    the page FastAPI writes does not load as one)
# Package tarballs are kept in ~/.cache/metakg/npm, so later builds need no network.
set -euo pipefail
out="${1:-metakg/server/static/vendor}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/metakg/npm"
mkdir -p "$cache" "$out"

# package version prefix, then the files to copy as "path-in-package:name-in-vendor"
vendor() {
  local package="$1" version="$2" prefix="$3"
  shift 3
  local tarball="$cache/$package-$version.tgz"
  if [ ! -f "$tarball" ]; then
    command -v npm >/dev/null 2>&1 || { echo "npm is needed once to fetch $package (apt-get install npm)"; exit 1; }
    (cd "$cache" && npm pack --silent "$package@$version" >/dev/null)
  fi
  local work
  work="$(mktemp -d)"
  tar -xzf "$tarball" -C "$work"
  for pair in "$@"; do
    cp "$work/package/${pair%%:*}" "$out/${pair##*:}"
  done
  cp "$work/package/LICENSE" "$out/$prefix.LICENSE"
  rm -rf "$work"
  echo "vendored $package $version into $out"
}

vendor cytoscape 3.34.4 cytoscape dist/cytoscape.min.js:cytoscape.min.js
vendor swagger-ui-dist 5.35.0 swagger-ui \
  swagger-ui-bundle.js:swagger-ui-bundle.js swagger-ui.css:swagger-ui.css favicon-32x32.png:swagger-favicon.png
vendor redoc 2.5.4 redoc bundles/redoc.standalone.js:redoc.standalone.js
# ReDoc's sidebar shows a logo fetched from its CDN on every view: an empty image instead, so the page asks
# nothing of the network (the "API docs by Redocly" credit stays)
sed -i 's#https://cdn.redoc.ly/redoc/logo-mini.svg#data:image/svg+xml,%3Csvg xmlns=%27http://www.w3.org/2000/svg%27/%3E#g' \
  "$out/redoc.standalone.js"
if grep -q "https://cdn\." "$out/redoc.standalone.js" "$out/swagger-ui-bundle.js"; then
  echo "warning: a vendored bundle still names a CDN URL:" && grep -o "https://cdn\.[^\"' ]*" "$out/redoc.standalone.js" "$out/swagger-ui-bundle.js" | sort -u
fi
