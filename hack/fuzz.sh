#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a bounded time each:
#   hack/fuzz.sh [FUZZTIME]      (default $FUZZTIME, else 30s)
# Targets are found with `go test -list 'Fuzz.*'` in every package whose tests
# declare one, so a new target is picked up without editing this script.
# Failing inputs are written by `go test` to <pkg>/testdata/fuzz/<Target>/;
# commit them so that they stay regression tests.
# FUZZPARALLEL sets the number of fuzz workers per target (go's default: GOMAXPROCS).
set -euo pipefail

FUZZTIME="${1:-${FUZZTIME:-30s}}"
MINIMIZE="${FUZZMINIMIZETIME:-5s}"
cd "$(dirname "$0")/.."

# API-level targets run against a real control plane.
if [[ -z "${KUBEBUILDER_ASSETS:-}" ]]; then
	KUBEBUILDER_ASSETS="$(hack/control-plane.sh)"
	export KUBEBUILDER_ASSETS
fi

parallel=()
if [[ -n "${FUZZPARALLEL:-}" ]]; then
	parallel=(-parallel "$FUZZPARALLEL")
fi

mapfile -t dirs < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | xargs -r -n1 dirname | sort -u)
if [[ ${#dirs[@]} -eq 0 ]]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi

ran=0
failed=()
for dir in "${dirs[@]}"; do
	pkg="$(go list "$dir")"
	mapfile -t targets < <(go test -list '^Fuzz' "$dir" | grep -E '^Fuzz' || true)
	for target in "${targets[@]}"; do
		echo "=== $pkg $target for $FUZZTIME"
		if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$MINIMIZE" "${parallel[@]}" "$dir"; then
			ran=$((ran + 1))
		else
			failed+=("$pkg.$target")
		fi
	done
done

echo "fuzz.sh: $ran target(s) passed for $FUZZTIME each"
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "fuzz.sh: FAILED: ${failed[*]} (failing inputs are under testdata/fuzz/)" >&2
	exit 1
fi
