#!/usr/bin/env bash
# Set up, build, and run `anode demo`: a small emulated network, end to end.
# Extra arguments go to `anode demo` (e.g. --json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ./scripts/setup.sh
cargo build --release --locked -q -p anode
exec ./target/release/anode demo "$@"
