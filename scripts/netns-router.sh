#!/usr/bin/env bash
# Three test hosts in a line, each its own network namespace, with anode as the router:
#   <p>s --veth-- <p>r --veth-- <p>d
#   s0 198.18.1.1/24 2001:2:0:1::1/64      r0 198.18.1.2  2001:2:0:1::2   (anode's, not the kernel's)
#   d0 198.18.2.2/24 2001:2:0:2::2/64      r1 198.18.2.1  2001:2:0:2::1
# Addresses come from the benchmarking ranges 198.18.0.0/15 and 2001:2::/48 and exist only
# inside these namespaces. End hosts route everything via the router.
#
# usage: netns-router.sh up   [PREFIX] [anode|kernel|xsk]   build the hosts; start the router
#        netns-router.sh down [PREFIX]                      stop the router, delete the hosts
# MODE anode (default): `anode router` runs in <p>r on r0/r1, kernel forwarding OFF, no kernel
#   addresses on r0/r1 (anode owns them), kernel IPv6 disabled there.
# MODE xsk: as anode, but the router is `anode-xskfwd` (crates/ether: the same IpRouter over
#   AF_XDP sockets, an XDP program on r0/r1 redirecting every frame to them), with
#   XSKFWD_ARGS appended (e.g. "--umem separate"); it stops by itself after XSKFWD_SECS
#   (default 3600) should nobody stop it.
# MODE kernel: the kernel of <p>r forwards (the baseline), addresses on r0/r1 in the kernel.
# ANODE_BIN picks the binary (default: target/release/anode, else target/debug/anode);
# XSKFWD_BIN likewise for anode-xskfwd.
# ANODE_ROUTER_EXTRA names a TOML file appended to the router's config (modules, filters).
# ROUTER_CPU pins the router (anode or xsk mode) to that CPU (taskset -c), e.g. 0 to share
# the generator's CPU in benchmarks (scripts/bench-router.sh).
# MTU_S / MTU_D set the MTU of the s--r / r--d link (both ends; default 1500), e.g. jumbo
# frames on one side and a smaller MTU on the other for fragmentation and path MTU tests.
# The router's output goes to $STATE/router.log; its pid to $STATE/router.pid, where
# STATE=${TMPDIR:-/tmp}/anode-netns-<p>.
set -euo pipefail
cmd=${1:?usage: $0 up|down [PREFIX] [anode|kernel|xsk]}
p=${2:-ar}
mode=${3:-anode}
here=$(cd "$(dirname "$0")/.." && pwd)
state=${TMPDIR:-/tmp}/anode-netns-$p
ns() { ip netns exec "$@"; }

down() {
    if [ -f "$state/router.pid" ]; then
        pid=$(cat "$state/router.pid")
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$state/router.pid"
    fi
    for n in "${p}s" "${p}r" "${p}d"; do ip netns del "$n" 2>/dev/null || true; done
}

case $cmd in
up)
    if [ "$(id -u)" != 0 ]; then echo "$0: needs root (network namespaces)" >&2; exit 1; fi
    case $mode in anode|kernel|xsk) ;; *) echo "$0: unknown mode $mode" >&2; exit 2 ;; esac
    down
    mkdir -p "$state"
    for n in "${p}s" "${p}r" "${p}d"; do ip netns add "$n"; ip -n "$n" link set lo up; done
    ip link add s0 netns "${p}s" type veth peer name r0 netns "${p}r"
    ip link add r1 netns "${p}r" type veth peer name d0 netns "${p}d"
    # End hosts: no checksum/segmentation offload, so frames on the wire are complete and
    # no larger than the MTU (a user-space router sees exactly what a real wire would carry).
    for l in "s s0" "d d0"; do
        set -- $l
        ns "${p}$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null 2>&1 || true
    done
    for l in r0 r1; do ns "${p}r" ethtool -K "$l" tx off tso off gso off gro off >/dev/null 2>&1 || true; done
    ip -n "${p}s" addr add 198.18.1.1/24 dev s0
    ip -n "${p}s" addr add 2001:2:0:1::1/64 dev s0 nodad
    ip -n "${p}d" addr add 198.18.2.2/24 dev d0
    ip -n "${p}d" addr add 2001:2:0:2::2/64 dev d0 nodad
    ns "${p}r" sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
    if [ "$mode" = kernel ]; then
        ip -n "${p}r" addr add 198.18.1.2/24 dev r0
        ip -n "${p}r" addr add 198.18.2.1/24 dev r1
        ip -n "${p}r" addr add 2001:2:0:1::2/64 dev r0 nodad
        ip -n "${p}r" addr add 2001:2:0:2::1/64 dev r1 nodad
        ns "${p}r" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
    else
        for l in r0 r1; do ns "${p}r" sysctl -qw "net.ipv6.conf.$l.disable_ipv6=1"; done
    fi
    mtu_s=${MTU_S:-1500}; mtu_d=${MTU_D:-1500}
    for l in "s s0 $mtu_s" "r r0 $mtu_s" "r r1 $mtu_d" "d d0 $mtu_d"; do
        set -- $l
        ip -n "${p}$1" link set "$2" mtu "$3" up
    done
    ip -n "${p}s" route add default via 198.18.1.2
    ip -n "${p}d" route add default via 198.18.2.1
    ip -n "${p}s" -6 route add default via 2001:2:0:1::2
    ip -n "${p}d" -6 route add default via 2001:2:0:2::1
    pin=()
    if [ -n "${ROUTER_CPU:-}" ]; then pin=(taskset -c "$ROUTER_CPU"); fi
    if [ "$mode" = xsk ]; then
        bin=${XSKFWD_BIN:-}
        if [ -z "$bin" ]; then
            bin=$here/target/release/anode-xskfwd
            [ -x "$bin" ] || bin=$here/target/debug/anode-xskfwd
        fi
        [ -x "$bin" ] || { echo "$0: no anode-xskfwd binary (build it, or set XSKFWD_BIN)" >&2; exit 1; }
        # `ip netns exec` (and taskset) exec the forwarder, so $! is its own pid.
        ip netns exec "${p}r" "${pin[@]}" "$bin" --iface r0=198.18.1.2/24,2001:2:0:1::2/64 \
            --iface r1=198.18.2.1/24,2001:2:0:2::1/64 --secs "${XSKFWD_SECS:-3600}" ${XSKFWD_ARGS:-} \
            >"$state/router.log" 2>&1 &
        echo $! >"$state/router.pid"
    fi
    if [ "$mode" = anode ]; then
        bin=${ANODE_BIN:-}
        if [ -z "$bin" ]; then
            bin=$here/target/release/anode
            [ -x "$bin" ] || bin=$here/target/debug/anode
        fi
        [ -x "$bin" ] || { echo "$0: no anode binary (build it, or set ANODE_BIN)" >&2; exit 1; }
        cat >"$state/router.toml" <<TOML
[[interface]]
name = "r0"
ipv4 = ["198.18.1.2/24"]
ipv6 = ["2001:2:0:1::2/64"]

[[interface]]
name = "r1"
ipv4 = ["198.18.2.1/24"]
ipv6 = ["2001:2:0:2::1/64"]
TOML
        if [ -n "${ANODE_ROUTER_EXTRA:-}" ]; then
            { echo; cat "$ANODE_ROUTER_EXTRA"; } >>"$state/router.toml"
        fi
        # `ip netns exec` (and taskset) exec the router, so $! is the router's own pid.
        ip netns exec "${p}r" "${pin[@]}" "$bin" router --config "$state/router.toml" ${ANODE_ROUTER_ARGS:-} \
            >"$state/router.log" 2>&1 &
        echo $! >"$state/router.pid"
    fi
    if [ "$mode" != kernel ]; then
        # Ready when the router answers ARP: ping its near address.
        for _ in $(seq 50); do
            if ns "${p}s" ping -c1 -W1 -q 198.18.1.2 >/dev/null 2>&1; then break; fi
            kill -0 "$(cat "$state/router.pid")" 2>/dev/null || { cat "$state/router.log" >&2; exit 1; }
            sleep 0.1
        done
    fi
    echo "netns-router: ${p}s -- ${p}r ($mode) -- ${p}d up"
    ;;
down)
    down
    echo "netns-router: ${p} down"
    ;;
*) echo "usage: $0 up|down [PREFIX] [anode|kernel|xsk]" >&2; exit 2 ;;
esac
