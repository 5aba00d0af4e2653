#!/usr/bin/env bash
# Runs every paper experiment with the release build: `anode experiment run --all`.
#   scripts/experiments.sh            quick versions into a temporary directory (what CI runs),
#                                     checks all ten wrote NAME.{md,svg,json} within 10 minutes
#   scripts/experiments.sh --full     full versions into docs/experiments/ (commit the result)
# Needs root (most experiments build network namespaces) and ../shared/baselines.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $EUID -ne 0 ]]; then
  echo "experiments.sh: must be run as root (network namespaces)" >&2
  exit 1
fi
cargo build --release --locked -p anode -p anode-netbench
if [[ ${1:-} == --full ]]; then
  exec ./target/release/anode experiment run --all --out docs/experiments
fi
out=$(mktemp -d /tmp/anode-experiments.XXXXXX)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
./target/release/anode experiment run --all --quick --out "$out"
secs=$(($(date +%s) - start))
names=$(./target/release/anode experiment list --json | sed -n 's/.*"name":"\([^"]*\)".*/\1/p')
for n in $names; do
  for ext in md svg json; do
    [[ -s $out/$n.$ext ]] || { echo "experiments.sh: $n.$ext was not written" >&2; exit 1; }
  done
done
echo "experiments.sh: all $(echo "$names" | wc -w) experiments (quick) in ${secs} s"
if ((secs > 600)); then
  echo "experiments.sh: over the 10-minute budget of the quick run" >&2
  exit 1
fi
