#!/usr/bin/env bash
# Refresh the vendored front-end files in static/vendor from the npm registry (never a CDN).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
(cd "$tmp" && npm init -y >/dev/null && npm install --silent bootstrap@5 bootstrap-icons@1 htmx.org@2 chart.js@4)
N="$tmp/node_modules"
cp "$N/bootstrap/dist/css/bootstrap.min.css" "$N/bootstrap/dist/js/bootstrap.bundle.min.js" static/vendor/bootstrap/
cp "$N/bootstrap-icons/font/bootstrap-icons.min.css" static/vendor/bootstrap-icons/
cp -r "$N/bootstrap-icons/font/fonts" static/vendor/bootstrap-icons/
cp "$N/htmx.org/dist/htmx.min.js" static/vendor/htmx/
cp "$N/chart.js/dist/chart.umd.min.js" static/vendor/chartjs/
# Source maps are not shipped; drop the references so the manifest storage does not look for them.
sed -i 's#//\# sourceMappingURL=.*##; s#/\*\# sourceMappingURL=.*\*/##' static/vendor/*/*.js static/vendor/*/*.css
rm -rf "$tmp"
echo "static/vendor refreshed; update static/vendor/VERSIONS.md"
