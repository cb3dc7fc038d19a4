#!/usr/bin/env bash
# Debian packages metakg's tests need beyond Python: a JDK 17+ and Maven for the Neo4j test server, and
# Virtuoso (virtuoso-opensource) for the local SPARQL endpoint the Wikidata sync is tested against, and
# Chromium (headless) for the browser tests of the `metakg serve` page.
# Installs only what is missing (needs root, as in CI); prints what it found either way.
set -euo pipefail
missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v virtuoso-t >/dev/null 2>&1 || missing+=(virtuoso-opensource)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)   # the browser tests of the web page (headless)
command -v npm >/dev/null 2>&1 || missing+=(npm)             # fetches the page's JavaScript at build time
[ -f /usr/share/doc/debian/FAQ/debian-faq.en.pdf.gz ] || missing+=(debian-faq)  # real PDF, HTML and text documents for the tests of extract
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "java: $(java -version 2>&1 | head -n 1); maven: $(mvn -v 2>/dev/null | head -n 1); virtuoso: $(command -v virtuoso-t)"
