#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 20) starting from its committed seed
# corpus. Installs cargo-fuzz if missing. Uses the pinned stable toolchain with
# RUSTC_BOOTSTRAP=1 (cargo-fuzz needs nightly flags) and no sanitizer, so no nightly is needed.
# Any crash fails the script and leaves the input under fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked -q
export RUSTC_BOOTSTRAP=1
# One target directory for every fuzz crate: the dependencies they share (wasmtime among
# them) are built once, and a clean clone does not hold eight copies of them on disk.
target_dir="$PWD/target/fuzz"
run_dir() { # dir
    local dir=$1
    for t in $(cd "$dir" && cargo fuzz list); do
        echo "fuzz: $dir/$t for ${secs}s"
        mkdir -p "$dir/corpus/$t"
        # Copy seeds into a scratch corpus so new inputs are not committed by accident.
        local work; work=$(mktemp -d)
        cp -r "$dir/corpus/$t/." "$work/" 2>/dev/null || true
        # A target may name more seeds: lines of paths or globs (relative to the repository)
        # in DIR/TARGET.seeds, e.g. the PLAN conformance programs for plan_parse.
        if [ -f "$dir/$t.seeds" ]; then
            while read -r glob; do
                case "$glob" in '' | '#'*) continue ;; esac
                for f in $glob; do
                    if [ -f "$f" ]; then cp "$f" "$work/seed-$(echo "$f" | tr / _)"; fi
                done
            done < "$dir/$t.seeds"
        fi
        (cd "$dir" && cargo fuzz run -s none -O --target-dir "$target_dir" "$t" "$work" -- \
            -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 2>&1 | tail -n 3)
        rm -rf "$work"
    done
}
run_dir fuzz
for d in crates/*/fuzz; do
    [ -f "$d/Cargo.toml" ] && run_dir "$d"
done
echo "fuzz: all targets ran ${secs}s each with no findings"
