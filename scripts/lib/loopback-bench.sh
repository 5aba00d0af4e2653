# Shared start of the loopback benchmarks (bench-deploy, bench-remote-flood,
# bench-compile-stall, bench-upgrade): sourced after `set -euo pipefail` and `cd` to the
# repository. Builds the release `anode` (B), makes a scratch directory (dir) that is removed
# at exit with every process in `pids` (KEEP=1 keeps the directory), and gives `port`: a free
# UDP port on 127.0.0.1.
cargo build --release --locked -q -p anode --bin anode
B=$PWD/target/release/anode
dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${KEEP:-}" ]; then echo "kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
