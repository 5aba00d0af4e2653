#!/usr/bin/env bash
# Set up and run the whole test suite: unit, property, emulator, multi-process and netns
# tests. The netns tests need root: as root they run; otherwise they say SKIPPED loudly, and
# under CI (CI=true) they fail instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ./scripts/setup.sh
if [ "$(id -u)" != 0 ]; then
    echo "test: WARNING: not root; netns tests will be SKIPPED (they fail under CI=true)" >&2
fi
cargo test --workspace --locked --no-fail-fast "$@"
