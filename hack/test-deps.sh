#!/usr/bin/env bash
# Installs the test-only dependencies that are not Go modules: Debian's
# chromium, which the web UI's browser tests (webhook/ui_browser_test.go)
# drive, and the real MCP clients pinned in test/package.json (MCP Inspector
# CLI, mcp-remote) that the acceptance tests in test/mcp drive. `make test` runs it first; it is cheap
# when nothing changed (a stamp records which package-lock.json was installed).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/test"
lock="$dir/package-lock.json"
stamp="$dir/node_modules/.posture-lock.sha256"

# The browser comes from the distribution's packages, never from a download
# by a test tool.
if ! command -v chromium >/dev/null 2>&1; then
	if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		echo "hack/test-deps.sh: chromium is not installed; the web UI tests need it (Debian: apt-get install -y chromium)" >&2
		exit 1
	fi
	echo "==> installing chromium (apt-get install -y chromium)" >&2
	export DEBIAN_FRONTEND=noninteractive # CI has no terminal to answer prompts
	if ! apt-get install -y --no-install-recommends chromium >&2; then
		apt-get update >&2
		apt-get install -y --no-install-recommends chromium >&2
	fi
fi

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "hack/test-deps.sh: $tool is not installed; the MCP acceptance tests need Node.js 20+ and npm (Debian: apt-get install nodejs npm)" >&2
		exit 1
	fi
done
if [[ ! -f "$lock" ]]; then
	echo "hack/test-deps.sh: $lock is missing: the test clients must be installed from a committed lock file" >&2
	exit 1
fi

want="$(sha256sum "$lock" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dir/node_modules/.bin/mcp-inspector" && -x "$dir/node_modules/.bin/mcp-remote" ]]; then
	exit 0
fi

echo "==> installing the MCP test clients (npm ci --prefix test)" >&2
# --ignore-scripts: the pinned clients need no install scripts, and none of
# their dependencies gets to run code at install time.
npm ci --prefix "$dir" --ignore-scripts --no-audit --no-fund --loglevel=error >&2
echo "$want" >"$stamp"
