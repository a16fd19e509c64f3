#!/usr/bin/env bash
# Install the platform's TypeScript client (@jetty/sdk, at the version
# tests/sdk/package-lock.json pins) into tests/sdk/node_modules, for the
# compatibility suite (tests/integration/api/test_sdk_client.py). Needs Node 18+.
set -euo pipefail
cd "$(dirname "$0")/../tests/sdk"
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "install-sdk: node and npm are needed (apt-get install nodejs npm)" >&2; exit 1; }
major=$(node -p "process.versions.node.split('.')[0]")
if ((major < 18)); then
  echo "install-sdk: node $(node --version) is too old: @jetty/sdk needs Node 18+" >&2; exit 1
fi
npm ci --no-audit --no-fund
node -e "import('@jetty/sdk').then(m => { if (!m.JettyClient) process.exit(1) })"
echo "install-sdk: @jetty/sdk $(node -p "require('./node_modules/@jetty/sdk/package.json').version") ready"
