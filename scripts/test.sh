#!/usr/bin/env bash
# Set up and run the whole test suite: unit, property, emulator, multi-process and netns
# tests. Tests that need root (network namespaces, eBPF, AF_XDP) are #[ignore]d with the
# reason "needs root and netns"; as root this script runs them too (--include-ignored) and
# fails if any test was still left out. Not root, they are reported as ignored (never
# passed), and under CI (CI=true) that is an error.
#
# Extra arguments go to `cargo test` (e.g. `-p anode-core`); arguments after `--` go to the
# test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ./scripts/setup.sh

cargo_args=()
bin_args=()
seen_dd=0
for a in "$@"; do
    if [ "$seen_dd" = 0 ] && [ "$a" = "--" ]; then
        seen_dd=1
    elif [ "$seen_dd" = 0 ]; then
        cargo_args+=("$a")
    else
        bin_args+=("$a")
    fi
done

if [ "$(id -u)" != 0 ]; then
    if [ "${CI:-}" = true ]; then
        echo "test: CI must run as root: the netns, eBPF and AF_XDP tests need it" >&2
        exit 1
    fi
    echo "test: not root: the tests that need root and netns are ignored (run as root to include them)" >&2
    exec cargo test --workspace --locked --no-fail-fast "${cargo_args[@]}" -- "${bin_args[@]}"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --locked --no-fail-fast "${cargo_args[@]}" -- --include-ignored "${bin_args[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" != 0 ]; then
    exit "$status"
fi
# Every test ran: a summary with ignored tests means one was skipped after all.
if grep -Eq 'test result: .* [1-9][0-9]* ignored' "$log"; then
    echo "test: some tests were ignored although running as root with --include-ignored:" >&2
    grep -E 'test result: .* [1-9][0-9]* ignored' "$log" >&2
    exit 1
fi
total=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
echo "test: ${total} tests passed, none ignored (root-only tests included)"
