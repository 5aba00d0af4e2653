#!/usr/bin/env bash
# Installs what anode needs on a fresh Debian machine with rustup: the pinned toolchain
# (rust-toolchain.toml), the wasm32 target for guest code, and the system tools the netns
# tests use. Idempotent; safe to run before every build.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found. Install Rust with rustup (https://rustup.rs), then rerun." >&2
    exit 1
fi
# rustup reads rust-toolchain.toml; make sure the toolchain, its components and targets exist.
rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install
rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
    || rustup target add wasm32-unknown-unknown

# System tools for the namespace tests and benchmarks (root only; skipped otherwise).
need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v traceroute >/dev/null 2>&1 || need+=(traceroute)
command -v ethtool >/dev/null 2>&1 || need+=(ethtool)
command -v nc >/dev/null 2>&1 || need+=(netcat-openbsd)
# The README's tour (scripts/tour.sh) reads /metrics with curl.
command -v curl >/dev/null 2>&1 || need+=(curl)
# Packet captures are checked with tshark and the dissector in tools/wireshark/.
command -v tshark >/dev/null 2>&1 || need+=(tshark)
# /metrics is checked with the Prometheus client library's reference parser.
/usr/bin/python3 -c "import prometheus_client" >/dev/null 2>&1 || need+=(python3-prometheus-client)
# The Topology Zoo import test reads the graphs of the topohub package (installed below with pip).
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
# The live view (anode view, emulate --view) is checked in headless Chromium, driven by
# Node.js (tools/browser/check-view.mjs).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v node >/dev/null 2>&1 || need+=(nodejs npm)
# The eBPF fast path (crates/ether/bpf/fastpath.c) is compiled by clang against the kernel UAPI headers.
command -v clang-14 >/dev/null 2>&1 || command -v clang >/dev/null 2>&1 || need+=(clang)
[ -e /usr/include/linux/bpf.h ] || need+=(linux-libc-dev)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing ${need[*]}"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    else
        echo "setup: missing ${need[*]} (install them as root; the netns tests need them)" >&2
    fi
fi
# `anode topo import` is tested on every Topology Zoo graph of the topohub package (pinned;
# data and pure Python, no dependencies) from PyPI: into the active Python if it allows,
# else for the user (--break-system-packages where the system Python is externally managed).
if ! python3 -c "import importlib.metadata as m; assert m.version('topohub') == '1.5.1'" >/dev/null 2>&1; then
    echo "setup: installing topohub==1.5.1 (pip)"
    python3 -m pip install -q topohub==1.5.1 2>/dev/null \
        || python3 -m pip install -q --user topohub==1.5.1 2>/dev/null \
        || python3 -m pip install -q --user --break-system-packages topohub==1.5.1 \
        || echo "setup: could not install topohub with pip; the Topology Zoo import test needs it" >&2
fi
# The browser check talks to Chromium over a WebSocket: Node's own (>= 20.10), or else the
# `ws` package from the npm registry, installed beside the script.
if command -v node >/dev/null 2>&1 \
    && ! node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null \
    && ! node --experimental-websocket -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null \
    && [ ! -d tools/browser/node_modules/ws ]; then
    echo "setup: installing the ws package for tools/browser (this Node has no WebSocket)"
    npm install --silent --no-save --no-package-lock --prefix tools/browser ws@8
fi
