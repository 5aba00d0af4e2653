#!/usr/bin/env bash
# Runs every line of the README's "Quick tour" as written, in a scratch directory, and fails
# on the first line that does not work. Lines ending in `&` run in the background (and are
# stopped at the end); a line whose comment says "Ctrl-C quits" gets SIGINT after a while, as
# a user would press Ctrl-C. Continuation lines (ending in `\`) are joined.
#
# usage: scripts/tour.sh              builds the release binary, as the tour's first line does
#        ANODE_TOUR_BIN=PATH scripts/tour.sh   uses that anode binary instead of building
#                                      (the tests pass the one cargo built for them)
# Uses the README's fixed loopback ports (4001-4003, 8470, 8471, 9464); bounded in time.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d /tmp/anode-tour.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill -INT "$p" 2>/dev/null || true
    done
    sleep 0.5
    for p in "${pids[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# The scratch directory looks like the repository root to the tour's relative paths.
for d in examples topologies crates guest tools docs; do
    ln -s "$repo/$d" "$work/$d"
done
cp "$repo/rust-toolchain.toml" "$work/"
if [[ -n ${ANODE_TOUR_BIN:-} ]]; then
    mkdir -p "$work/target/release"
    ln -s "$ANODE_TOUR_BIN" "$work/target/release/anode"
else
    ln -s "$repo/target" "$work/target"
fi

# The tour: the first ```sh block after "## Quick tour", continuation lines joined.
mapfile -t lines < <(awk '
    /^## Quick tour/ { tour = 1; next }
    tour && /^```sh/ { inblock = 1; next }
    inblock && /^```/ { exit }
    inblock {
        if (sub(/\\[[:space:]]*$/, "")) { acc = acc $0; next }
        print acc $0; acc = ""
    }' "$repo/README.md")
[[ ${#lines[@]} -gt 10 ]] || { echo "tour: no quick tour found in README.md" >&2; exit 1; }

cd "$work"
# A state directory of its own (code caches, the module journal), so runs do not meet.
export XDG_STATE_HOME=$work/state
n=0
for line in "${lines[@]}"; do
    code=${line%%#*}
    # Keep a `#` inside quotes or $(...) out of the way: only strip a comment after spaces.
    if [[ $line =~ ^(.*[^[:space:]])[[:space:]]+#[[:space:]] ]]; then code=${BASH_REMATCH[1]}; else code=$line; fi
    [[ $code =~ ^[[:space:]]*(#|$) ]] && continue
    if [[ -n ${ANODE_TOUR_BIN:-} && $code =~ ^cargo\ build\ --release\ -p\ anode ]]; then
        echo "tour: skip (given a binary): $code"
        continue
    fi
    n=$((n + 1))
    echo "tour [$n]: $code"
    if [[ $code =~ \&[[:space:]]*$ ]]; then
        bash -c "B=./target/release/anode; ${code%&*}" >"bg-$n.log" 2>&1 &
        pids+=("$!")
        sleep 1.5
        continue
    fi
    if [[ $line == *"Ctrl-C quits"* ]]; then
        set +e
        timeout -s INT 20 bash -c "B=./target/release/anode; $code" >"fg-$n.log" 2>&1
        st=$?
        set -e
        if [[ $st != 0 && $st != 124 ]]; then
            cat "fg-$n.log" >&2
            echo "tour: line $n failed (exit $st): $code" >&2
            exit 1
        fi
        continue
    fi
    set +e
    timeout 300 bash -c "B=./target/release/anode; $code" >"fg-$n.log" 2>&1
    st=$?
    set -e
    if [[ $st != 0 ]]; then
        cat "fg-$n.log" >&2
        for f in bg-*.log; do [[ -e $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
        echo "tour: line $n failed (exit $st): $code" >&2
        exit 1
    fi
done
echo "tour: all $n lines of the README's quick tour worked"
