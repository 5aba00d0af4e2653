#!/usr/bin/env bash
# Kernel forwarding vs the anode IP fast path, same topology, same run:
#   <p>s --veth-- <p>r --veth-- <p>d   (scripts/netns-router.sh; 198.18.0.0/15 only)
# For each router mode (MODES: kernel, anode, or anode:OPT=VAL,... for `anode router --OPT VAL`,
# e.g. anode:ring=v3; `anode` is the default kernel fast path (eBPF on TC ingress),
# anode:fast-path=off forwards every packet in user space through TPACKET_V2 rings; xsk runs
# `anode-xskfwd` instead, the same user-space router over AF_XDP sockets (an XDP program on
# r0/r1 redirects every frame to them; xsk:OPT=VAL,... for `anode-xskfwd --OPT VAL`, e.g.
# xsk:umem=separate) and UDP payload size (64, 1472 bytes):
#   - full offered load (blast at full speed for SECS): sent, delivered pps, loss, and where
#     the loss happened: veth drops (a full backlog queue: s0->r0, r1->d0), UDP receive-buffer
#     overflows at the receiver in d; anode's own ring-full drops (PACKET_STATISTICS) are
#     printed from its counters at the end of its mode;
#   - the maximum loss-free rate (loss <= 0.1%), by bisection over paced rates;
#   - ping RTT through the router (avg of 20 pings).
# The router's own counters (ring-full drops, AF_XDP socket counters) are printed after its mode.
# Traffic: GEN=pktgen (default): `anode-pktgen` (crates/ether) writes pre-built UDP frames
# straight onto s0 through AF_PACKET from THREADS sender threads (TXMODE sendmmsg or txring),
# so the sender spends nothing in its own IP/UDP stack; GEN=blast: the C `blast` UDP-socket
# sender of ../shared/baselines. The receiver in d counts datagrams: RECV=c (default) the C
# `recv` of ../shared/baselines (blocking recvmmsg: it sleeps when its queue is empty, and the
# CPU delivering each packet pays for waking it), RECV=poll `anode-pollsink` (crates/ether), which
# polls with non-blocking recvmmsg and is never woken (it spins one CPU).
# PIN=1 pins the generator (one thread) to CPU 0 and the receiver to CPU 1: forwarding runs
# in the sender's softirq on CPU 0 in every mode (the veth hand-offs stay on the sending
# CPU), so the delivered rate is what one CPU does per packet (send + forward + deliver)
# and the modes differ only in the forwarding; the receiver on the other CPU keeps up.
# ROUTER_CPU=N (netns-router.sh) pins the user-space router too, e.g. ROUTER_CPU=0 with PIN=1:
# the router's thread then shares the generator's CPU, as the kernel's forwarding does, so
# a user-space path cannot win by taking the second CPU.
# Without PIN the scheduler spreads THREADS senders, the receiver and (user-space mode) the
# router over both CPUs, and single runs swing by +-20 %.
# MTU_S / MTU_D: the links' MTUs (netns-router.sh), e.g. 9000 for SIZES=8000 (jumbo frames
# from the generator are non-linear skbs).
# Needs root. Tears everything down on exit, even on failure.
# usage: bench-router.sh [SECS=3]
#        bench-router.sh txmodes [SECS=3]: the generator alone, sendmmsg vs PACKET_TX_RING, one
#        thread, 64 and 1472 B, onto a veth whose peer drops each frame on arrival (foreign
#        destination MAC), alternating, REPS=3 times each: only the transmit mechanism differs.
#   env: ANODE_BIN, XSKFWD_BIN, PKTGEN_BIN, SINK_BIN, RECV=c|poll, GEN=pktgen|blast, THREADS=2, TXMODE=sendmmsg, BISECT_STEPS=5, PIN=0,
#        SIZES="64 1472", MODES="kernel anode anode:fast-path=off xsk", PINGS=20,
#        REPS=1 (run the whole mode list this many times, alternating, to see the spread),
#        ASSERT=1 (exit 1 when the fast path misses a goal: >= 80 % of kernel at 64 B, >= 100 % at
#        1472 B, summed over the reps)
set -euo pipefail
cd "$(dirname "$0")/.."
txmodes=0
if [ "${1:-}" = txmodes ]; then txmodes=1; shift; fi
secs=${1:-3}
steps=${BISECT_STEPS:-5}
sizes=${SIZES:-64 1472}
modes=${MODES:-kernel anode anode:fast-path=off xsk}
pings=${PINGS:-20}
reps=${REPS:-1}
gen=${GEN:-pktgen}
threads=${THREADS:-2}
pin_gen=(); pin_recv=()
if [ "${PIN:-0}" = 1 ]; then
    [ "$(nproc)" -ge 2 ] || { echo "bench-router: PIN=1 needs two CPUs" >&2; exit 1; }
    threads=1; pin_gen=(taskset -c 0); pin_recv=(taskset -c 1)
fi
txmode=${TXMODE:-sendmmsg}
p=bench
if [ "$(id -u)" != 0 ]; then echo "bench-router: needs root (network namespaces)" >&2; exit 1; fi
tmp=$(mktemp -d)
cleanup() { scripts/netns-router.sh down "$p" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
ns() { ip netns exec "$@"; }
if [ "$txmodes" = 1 ]; then
    [ -n "${PKTGEN_BIN:-}" ] || { cargo build -q --release -p anode-ether --bin anode-pktgen; PKTGEN_BIN=${CARGO_TARGET_DIR:-target}/release/anode-pktgen; }
    cleanup() { ip netns del ${p}g 2>/dev/null || true; ip netns del ${p}k 2>/dev/null || true; rm -rf "$tmp"; }
    cleanup; mkdir -p "$tmp"
    ip netns add ${p}g; ip netns add ${p}k
    ip link add g0 netns ${p}g type veth peer name k0 netns ${p}k
    # Frames to a MAC that is not k0's: the peer's IP layer drops them first thing
    # (PACKET_OTHERHOST), the same small cost for both mechanisms.
    ip -n ${p}g link set g0 up; ip -n ${p}k link set k0 up
    kmac=02:00:5e:00:00:99
    echo "| UDP payload | tx mode | generator pps (each run) |"
    echo "|---|---|---|"
    for size in $sizes; do
        declare -A runs=()
        for _ in $(seq "${REPS:-3}"); do
            for m in sendmmsg txring; do
                r=$(ns ${p}g "$PKTGEN_BIN" --iface g0 --dst-mac "$kmac" --src 198.18.1.1 --dst 198.18.2.2 \
                    --size "$size" --secs "$secs" --threads 1 --mode "$m" | sed -n 's/.*pps=\([0-9]*\).*/\1/p')
                runs[$m]="${runs[$m]:-}${runs[$m]:+, }$r"
            done
        done
        for m in sendmmsg txring; do echo "| $size B | $m | ${runs[$m]} |"; done
    done
    echo "load: $(uptime | sed 's/.*load average: //')"
    exit 0
fi

base=../shared/baselines
[ -d "$base" ] || { echo "bench-router: $base not found (the repo's parent holds shared/)" >&2; exit 1; }
make -s -C "$base" O="$tmp" >/dev/null
has_mode() { for m in $modes; do [ "${m%%:*}" = "$1" ] && return 0; done; return 1; }
if [ -z "${ANODE_BIN:-}" ] && has_mode anode; then
    cargo build -q --release -p anode
    ANODE_BIN=${CARGO_TARGET_DIR:-target}/release/anode
fi
if [ -z "${XSKFWD_BIN:-}" ] && has_mode xsk; then
    cargo build -q --release -p anode-ether --bin anode-xskfwd
    XSKFWD_BIN=${CARGO_TARGET_DIR:-target}/release/anode-xskfwd
fi
export ANODE_BIN XSKFWD_BIN
recv_bin=$tmp/recv
if [ "${RECV:-c}" = poll ]; then
    if [ -z "${SINK_BIN:-}" ]; then
        cargo build -q --release -p anode-ether --bin anode-pollsink
        SINK_BIN=${CARGO_TARGET_DIR:-target}/release/anode-pollsink
    fi
    recv_bin=$SINK_BIN
fi
if [ "$gen" = pktgen ] && [ -z "${PKTGEN_BIN:-}" ]; then
    cargo build -q --release -p anode-ether --bin anode-pktgen
    PKTGEN_BIN=${CARGO_TARGET_DIR:-target}/release/anode-pktgen
fi

# trial RATE SIZE -> "sent rcvd"
trial() {
    local rate=$1 size=$2
    ns ${p}d "${pin_recv[@]}" "$recv_bin" 198.18.2.2:9000 $((secs + 4)) 1 >"$tmp/recv.out" &
    local rp=$!
    for _ in $(seq 50); do grep -q ready "$tmp/recv.out" 2>/dev/null && break; sleep 0.05; done
    local b
    if [ "$gen" = pktgen ]; then
        b=$(ns ${p}s "${pin_gen[@]}" "$PKTGEN_BIN" --iface s0 --dst-mac "$rmac" --src 198.18.1.1 --dst 198.18.2.2 \
            --dport 9000 --size "$size" --secs "$secs" --rate "$rate" --threads "$threads" \
            --mode "$txmode" 2>&1 | tail -1)
    else
        b=$(ns ${p}s "${pin_gen[@]}" "$tmp/blast" 198.18.2.2:9000 "$size" "$secs" "$rate" 2>&1 | tail -1)
    fi
    wait "$rp" || true
    local sent rcvd
    sent=$(echo "$b" | sed -n 's/.*sent=\([0-9]*\).*/\1/p')
    rcvd=$(sed -n 's/.*rcvd=\([0-9]*\).*/\1/p' "$tmp/recv.out")
    echo "${sent:-0} ${rcvd:-0}"
}

# drops -> "veth udp": drops at full veth backlogs (all four ends) and UDP receive-buffer
# overflows in d, cumulative.
drops() {
    local v=0 x
    for e in "s s0 tx_dropped" "r r0 rx_dropped" "r r1 tx_dropped" "d d0 rx_dropped"; do
        set -- $e
        x=$(ns "${p}$1" cat "/sys/class/net/$2/statistics/$3" 2>/dev/null || echo 0)
        v=$((v + x))
    done
    x=$(ns ${p}d awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1 } else print $c }' /proc/net/snmp)
    echo "$v ${x:-0}"
}

results=()
for rep in $(seq "$reps"); do
for spec in $modes; do
    mode=${spec%%:*}
    args=""
    if [ "$spec" != "$mode" ]; then
        for kv in $(echo "${spec#*:}" | tr ',' ' '); do args="$args --${kv%%=*} ${kv#*=}"; done
    fi
    ANODE_ROUTER_ARGS=$args XSKFWD_ARGS=$args scripts/netns-router.sh up "$p" "$mode" >/dev/null
    rmac=$(ns ${p}r cat /sys/class/net/r0/address)
    # Warm up ARP/NDP and measure RTT.
    ns ${p}s ping -c 3 -i 0.2 -W 1 -q 198.18.2.2 >/dev/null || true
    rtt=$(ns ${p}s ping -c "$pings" -i 0.05 -W 1 -q 198.18.2.2 | sed -n 's/.*= \([0-9.]*\)\/\([0-9.]*\)\/\([0-9.]*\)\/.*/\2 (min \1 max \3)/p' | tr ' ' '_')
    rtt=${rtt:-n/a}
    for size in $sizes; do
        read -r v0 u0 < <(drops)
        read -r sent rcvd < <(trial 0 "$size")
        read -r v1 u1 < <(drops)
        full_pps=$((rcvd / secs)); offered=$((sent / secs))
        loss=$(awk -v s="$sent" -v r="$rcvd" 'BEGIN { if (s > 0) printf "%.2f", 100 * (s - r) / s; else print "n/a" }')
        # Bisection for the largest rate with loss <= 0.1%.
        lo=0; hi=$((offered > 0 ? offered : 1000000))
        # A lossless full-speed run is itself the loss-free rate (the sender is the limit).
        if [ "$sent" -gt 0 ] && [ $((1000 * (sent - rcvd))) -le "$sent" ]; then lo=$offered; hi=$offered; fi
        for _ in $(seq "$steps"); do
            [ "$hi" -gt "$lo" ] || break
            mid=$(((lo + hi) / 2))
            read -r s r < <(trial "$mid" "$size")
            if [ "$s" -gt 0 ] && [ $((1000 * (s - r))) -le "$s" ]; then lo=$mid; else hi=$mid; fi
        done
        results+=("$spec $size $offered $full_pps $loss $lo $rtt $((v1 - v0)) $((u1 - u0)) $rep")
        echo "bench-router: $spec size=$size offered=$offered delivered=$full_pps loss=$loss% (veth drops $((v1 - v0)), udp rcvbuf $((u1 - u0))) lossfree=$lo rtt=${rtt}ms" >&2
    done
    if [ "$mode" = anode ] || [ "$mode" = xsk ]; then
        pid=$(cat "${TMPDIR:-/tmp}/anode-netns-$p/router.pid")
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        sed "s/^/bench-router: $spec: /" "${TMPDIR:-/tmp}/anode-netns-$p/router.log" | grep -E "forwarded |dropped |link |fast path|AF_XDP|note:" >&2 || true
    fi
    scripts/netns-router.sh down "$p" >/dev/null
done
done

echo
echo "generator: $gen$([ "$gen" = pktgen ] && echo " ($threads threads, $txmode)"), receiver: ${RECV:-c}$([ "${PIN:-0}" = 1 ] && echo ", pinned: generator CPU 0, receiver CPU 1")$([ -n "${ROUTER_CPU:-}" ] && echo ", router CPU $ROUTER_CPU"), MTU ${MTU_S:-1500}/${MTU_D:-1500}, $secs s per trial, load: $(uptime | sed 's/.*load average: //')"
echo "| rep | router | UDP payload | offered pps | delivered pps | loss (veth drops / UDP rcvbuf drops) | max loss-free pps (<=0.1%) | ping RTT avg ms |"
echo "|---|---|---|---|---|---|---|---|"
for r in "${results[@]}"; do
    set -- $r
    echo "| ${10} | $1 | $2 B | $3 | $4 | $5% ($8 / $9) | $6 | ${7//_/ } |"
done
echo
for rep in $(seq "$reps"); do
    for size in $sizes; do
        k=$(printf '%s\n' "${results[@]}" | awk -v s="$size" -v r="$rep" '$1=="kernel" && $2==s && $10==r {print $4}')
        for spec in $modes; do
            [ "$spec" = kernel ] && continue
            a=$(printf '%s\n' "${results[@]}" | awk -v s="$size" -v m="$spec" -v r="$rep" '$1==m && $2==s && $10==r {print $4}')
            awk -v k="$k" -v a="$a" -v s="$size" -v m="$spec" -v r="$rep" 'BEGIN { if (k > 0) printf "rep %s: %s / kernel delivered pps at %s B: %.0f%%\n", r, m, s, 100 * a / k }'
        done
    done
done

# Over all repetitions (sums of delivered pps, so no single run decides), against the
# issue's goals for the fast path: >= 80 % of kernel at 64 B and >= 100 % at 1472 B.
# ASSERT=1 makes an unmet goal the script's failure (exit 1).
unmet=0
echo
for spec in $modes; do
    [ "$spec" = kernel ] && continue
    for size in $sizes; do
        line=$(printf '%s\n' "${results[@]}" | awk -v s="$size" -v m="$spec" '
            $2 == s && $1 == "kernel" { k += $4; if (!nk || $4 < kmin) kmin = $4; if ($4 > kmax) kmax = $4; nk++ }
            $2 == s && $1 == m { a += $4; r[$10] = $4 }
            $2 == s && $1 == "kernel" { kr[$10] = $4 }
            END {
                if (k == 0) exit
                lo = ""; hi = ""
                for (i in r) if (kr[i] > 0) { x = 100 * r[i] / kr[i]; if (lo == "" || x < lo) lo = x; if (hi == "" || x > hi) hi = x }
                printf "%.0f %.0f %.0f", 100 * a / k, lo, hi
            }')
        [ -n "$line" ] || continue
        set -- $line
        goal=""
        if [ "$spec" = anode ]; then
            case $size in 64) goal=80 ;; 1472) goal=100 ;; esac
        fi
        verdict=""
        if [ -n "$goal" ]; then
            if [ "$1" -ge "$goal" ]; then verdict=" (goal >= $goal %: met)"; else verdict=" (goal >= $goal %: NOT met)"; unmet=1; fi
        fi
        echo "all reps: $spec / kernel delivered pps at $size B: $1 % (runs $2-$3 %)$verdict"
    done
done
if [ "${ASSERT:-0}" = 1 ] && [ "$unmet" = 1 ]; then
    echo "bench-router: a throughput goal was not met" >&2
    exit 1
fi
