#!/usr/bin/env bash
# Forwarding benchmark on a three-namespace line  s -- r -- d  (../shared/baselines/topo-line.sh):
# the same traffic generator (anode-blast, ANEP datagrams) in s and counting sink (anode-sink) in d
# measure three forwarders in r:
#   kernel  ip_forward=1, blast addressed to d directly
#   cfwd    the C baseline `fwd LISTEN DST mmsg SECS` (ip_forward=0)
#   anode   an anode node (anode-fwd-node: static neighbors s and d, anode-io driver) forwarding
#           on its fast path (ip_forward=0); traffic is addressed (transit dst) to d's node address
#   anode-capsule  `anode node --config r.toml` (the real command) with protocols::FORWARD put
#           into its code cache (`anode code put forward`) and the per-protocol bandwidth cap
#           lifted; the blaster sends capsules (transit FLAG_EVAL_EVERY_HOP, code = SHA-256 of
#           FORWARD, no code source) instead of datagrams, so the capsule's code runs in r on
#           every packet
#   anode-capsule-cut  anode-capsule with flood data capsules carrying the flood protocol's
#           cut-through flag (`anode-blast --capsule --cut-through`, protocols::FLOOD put into
#           r's cache): r runs the code on each flow's first capsule, which opens a NodeOS
#           cut-through channel for the flow, and forwards the rest on the fast path without
#           the EE (`anode flood --cut-through`'s packets; at least 160 bytes; opt-in); the
#           packets r counted on its channels are in the JSON (cut_packets)
#   anode-capsule-compute, anode-capsule-compute2  anode-capsule with two compute-heavy
#           protocols (scripts/compute-a.wat from the main blaster, compute-b.wat from a second
#           one on a third link peer in s, both put into r's cache; 2,000 xorshift rounds per
#           capsule): r with one thread, and with `[capsule] workers = 2`, `[nodeos]
#           cpu_percent = 100` (per worker core) for both (opt-in; the second blaster's count
#           is storm_sent, delivered_pps counts both)
#   anode-fwd-capsule  the same through the harness, `anode-fwd-node --capsule` (opt-in); the
#           EE's counters (ran, drops by reason) are in the report
#   anode-module  the same anode-fwd-node with `--module null`: the null service module (a
#           WebAssembly packet processor at pre-routing whose filter matches every packet) installed
#           and active, so every datagram passes through it (NetServ's module-layer comparison); the
#           module's packet count is in the JSON report
#   anode-node  the same node run by the real command, `anode node --config r.toml`, with its
#           default data plane (`[dataplane] mode = "auto"`: passive transit forwarded by the
#           kernel fast path, eBPF at TC ingress, when it loads)
#   anode-node-socket  the same with `[dataplane] mode = "socket"`: every packet through the
#           node's UDP socket and its user-space fast path (opt-in)
#   anode-node-attacked, anode-node-socket-attacked  anode-node and anode-node-socket with
#           remote management on (`[remote] listen`, one trusted key) while 4 connections from
#           d send r requests signed "by" that key with a wrong signature, each costing r a
#           full ed25519 check (opt-in; the rate of forged requests is in the JSON)
#   anode-node-deploy-attacked, anode-node-socket-deploy-attacked  anode-node and
#           anode-node-socket hosting modules with one [[deploy.key]] while d sends r
#           DEPLOY_RATE (default 20000) deploy requests a second from a third link peer, each
#           signed "by" that key with a wrong signature (scripts/deploy-flood-attacker.py;
#           opt-in; the rate sent is in the JSON)
#   anode-node-stormed, anode-node-socket-stormed  anode-node and anode-node-socket while a
#           second blaster in s sends r STORM_RATE (default 20000) capsules a second of a
#           hostile code object (scripts/storm.wat: spins until its fuel is gone; r holds the
#           code, so every capsule runs until the NodeOS terminates the protocol's domain and
#           refuses the rest); compare with the rows without a storm at the same fixed rates
#           (opt-in; the storm's sent count is in the JSON)
#   anode-node-socket-plain, anode-capsule-plain  anode-node-socket and anode-capsule with
#           `[dataplane] udp_offload = false`: one datagram per send, as before UDP
#           segmentation offload (opt-in, to compare)
#   anode-node-scraped  anode-node with `[metrics] listen` on r's loopback, scraped once a
#           second for the whole point (what Prometheus does; opt-in, compare with anode-node)
# for each packet size at full offered load and at fixed rates; then, for each forwarder, the
# one-way latency (p50/p99) of stamped packets at a low rate (LAT_RATE, one packet per send):
# sender and sink share CLOCK_MONOTONIC, and one-way suits the C forwarder, which forwards one
# way only. Prints markdown tables and writes JSON to bench-out/. Must be run as root. Every run
# is bounded in time; only namespace addresses.
#
# usage: sudo scripts/bench-netns.sh
# env:   SECS=5 (per point)  SIZES="84 1472"  RATES="0 50000 100000 200000 300000" (0 = full speed)
#        FORWARDERS="kernel cfwd anode anode-node anode-capsule"  PREFIX=anb  BATCH=32
#        NICE=0 (e.g. -19 on a machine busy with other work: blaster, forwarder and sink get the CPU)
#        LAT_SIZES="92 1472" (92: the smallest datagram with an 8-byte stamp; capsules at least 144)
#        LAT_RATE=2000 LAT_SECS=3 (LAT_SIZES="" skips the latency points)
#        CARGO_TARGET_DIR (default: target/ in the repo)  NO_BUILD=1 (reuse its release binaries)
#        BUSY_POLL_US (e.g. 1000: the anode node rows busy-poll their socket, [dataplane] busy_poll_us)
# Note: the smallest ANEP datagram is 84 bytes (8 ANEP + 72 transit + 4 datagram header), so the
# "64-byte" point is run at 84 bytes, the same for all forwarders. The smallest capsule is 136 bytes
# (8 ANEP + 72 transit + 56 capsule header), so the capsule rows run any size below 136 at 136: with
# the default SIZES their rows are 136 and 1472 bytes.
set -euo pipefail

if [[ $EUID -ne 0 ]]; then
  echo "bench-netns.sh: must be run as root (it creates network namespaces)" >&2
  exit 1
fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=$(cd "$repo/../shared/baselines" && pwd)
P=${PREFIX:-anb}
SECS=${SECS:-5}
SIZES=${SIZES:-"84 1472"}
RATES=${RATES:-"0 50000 100000 200000 300000"}
FORWARDERS=${FORWARDERS:-"kernel cfwd anode anode-node anode-capsule"}
BATCH=${BATCH:-32}
LAT_SIZES=${LAT_SIZES-"92 1472"}
LAT_RATE=${LAT_RATE:-2000}
LAT_SECS=${LAT_SECS:-3}
LAT=0
NICE=${NICE:-0}
target=${CARGO_TARGET_DIR:-$repo/target}
tmp=$(mktemp -d /tmp/anode-bench.XXXXXX)
outdir=$repo/bench-out
stamp=$(date -u +%Y%m%dT%H%M%SZ)
json=$outdir/netns-$stamp.json
pids=()

cleanup() {
  local rc=$?
  for p in "${pids[@]:-}"; do
    [[ -n $p ]] && kill "$p" 2>/dev/null || true
  done
  "$shared/topo-line.sh" down "$P" >/dev/null 2>&1 || true
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

S=198.18.1.1 R=198.18.1.2 D=198.18.2.2 PORT=3322

echo "== building C baselines into $tmp" >&2
make -s -C "$shared" O="$tmp" >&2
echo "== building anode release binaries (target $target)" >&2
pkgs=(-p anode-netbench)
need=(anode-blast anode-sink anode-fwd-node)
if [[ " $FORWARDERS " == *" anode-node"* || " $FORWARDERS " == *" anode-capsule"* ]]; then pkgs+=(-p anode); need+=(anode); fi
if [[ -z ${NO_BUILD:-} ]]; then
  CARGO_TARGET_DIR=$target cargo build -q --release "${pkgs[@]}" --manifest-path "$repo/Cargo.toml" >&2
fi
bin=$target/release
for b in "${need[@]}"; do
  [[ -x $bin/$b ]] || { echo "missing $bin/$b" >&2; exit 1; }
done

"$shared/topo-line.sh" down "$P" >/dev/null 2>&1 || true
"$shared/topo-line.sh" up "$P" 0
# Foreground only: backgrounding a function would make $! a subshell, not the program.
nsx() { local ns=$1; shift; ip netns exec "$P$ns" nice -n "$NICE" "$@"; }

# kv KEY FILE: the value of KEY=... in the last line of FILE carrying it (0 if absent).
kv() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$2" | tail -n1 | grep . || echo 0; }

# point FWD SIZE RATE -> appends a JSON object to $tmp/points and a row to $tmp/rows
point() {
  local fwd=$1 size=$2 rate=$3 dst fpid="" kind=() sinkx=() blastx=() batch=$BATCH secs=$SECS
  # The smallest capsule is 136 B, 144 B with a stamp: smaller sizes run at that.
  local min_capsule=136
  if ((LAT)); then sinkx=(--latency); blastx=(--stamp); batch=1; secs=$LAT_SECS; min_capsule=144; fi
  if [[ $fwd == *capsule* ]] && ((size < min_capsule)); then size=$min_capsule; fi
  if [[ $fwd == anode-capsule-cut ]] && ((size < 160)); then size=160; fi
  nsx r sysctl -qw net.ipv4.ip_forward=$([[ $fwd == kernel ]] && echo 1 || echo 0)
  ip netns exec "${P}d" nice -n "$NICE" timeout $((secs + 10)) "$bin/anode-sink" --bind $D:$PORT --max-secs $((secs + 6)) --idle 1 --min-secs $((secs + 1)) \
    "${sinkx[@]}" >"$tmp/sink.out" 2>&1 &
  local spid=$!; pids+=("$spid")
  case $fwd in
    kernel) dst=$D:$PORT ;;
    cfwd)
      dst=$R:$PORT
      ip netns exec "${P}r" nice -n "$NICE" timeout $((SECS + 8)) "$tmp/fwd" $R:$PORT $D:$PORT mmsg $((SECS + 4)) >"$tmp/fwd.out" 2>&1 &
      fpid=$!; pids+=("$fpid") ;;
    anode)
      dst=$R:$PORT
      ip netns exec "${P}r" nice -n "$NICE" timeout $((SECS + 8)) "$bin/anode-fwd-node" --addr $R:$PORT --peer $S:$PORT --peer $D:$PORT \
        --secs $((SECS + 4)) --batch "$BATCH" >"$tmp/fwd.out" 2>&1 &
      fpid=$!; pids+=("$fpid") ;;
    anode-fwd-capsule)
      dst=$R:$PORT; kind=(--capsule)
      ip netns exec "${P}r" nice -n "$NICE" timeout $((SECS + 8)) "$bin/anode-fwd-node" --addr $R:$PORT --peer $S:$PORT --peer $D:$PORT \
        --secs $((SECS + 4)) --batch "$BATCH" --capsule >"$tmp/fwd.out" 2>&1 &
      fpid=$!; pids+=("$fpid") ;;
    anode-module)
      dst=$R:$PORT
      ip netns exec "${P}r" nice -n "$NICE" timeout $((SECS + 8)) "$bin/anode-fwd-node" --addr $R:$PORT --peer $S:$PORT --peer $D:$PORT \
        --secs $((SECS + 4)) --batch "$BATCH" --module null >"$tmp/fwd.out" 2>&1 &
      fpid=$!; pids+=("$fpid") ;;
    anode-node | anode-node-socket | anode-node-socket-plain | anode-node-scraped | anode-capsule | anode-capsule-plain | anode-capsule-cut | anode-capsule-compute | anode-capsule-compute2 | anode-node-attacked | anode-node-socket-attacked | anode-node-deploy-attacked | anode-node-socket-deploy-attacked | anode-node-stormed | anode-node-socket-stormed)
      dst=$R:$PORT
      [[ $fwd == anode-capsule* ]] && kind=(--capsule)
      [[ $fwd == anode-capsule-cut ]] && kind=(--capsule --cut-through)
      [[ $fwd == anode-capsule-compute* ]] && kind=(--capsule --code "$repo/scripts/compute-a.wat")
      printf '[node]\naddress = "%s"\n[[link]]\npeer = "%s"\nstatic = true\n[[link]]\npeer = "%s"\nstatic = true\n[control]\nsocket = "%s"\n' \
        "$R:$PORT" "$S:$PORT" "$D:$PORT" "$tmp/r.sock" >"$tmp/r.toml"
      if [[ $fwd == anode-node-scraped ]]; then
        printf '[metrics]\nlisten = "127.0.0.1:9464"\n' >>"$tmp/r.toml"
      fi
      if [[ $fwd == *-deploy-attacked ]]; then
        [[ -f $tmp/ops.pub ]] || "$bin/anode" keygen --out "$tmp/ops" >/dev/null
        printf '[modules]\ntrusted_keys = ["%s"]\nstate_dir = "%s"\n[[deploy.key]]\nkey = "%s"\n[[link]]\npeer = "%s"\nstatic = true\n' \
          "$(cat "$tmp/ops.pub")" "$tmp/mods" "$(cat "$tmp/ops.pub")" "$D:$((PORT + 1))" >>"$tmp/r.toml"
      elif [[ $fwd == *-attacked ]]; then
        [[ -f $tmp/ops.pub ]] || "$bin/anode" keygen --out "$tmp/ops" >/dev/null
        printf '[remote]\nlisten = "0.0.0.0:7100"\n[[remote.key]]\nkey = "%s"\nmay = ["read"]\n' \
          "$(cat "$tmp/ops.pub")" >>"$tmp/r.toml"
      fi
      local dp=()
      [[ $fwd == anode-node-socket* ]] && dp+=('mode = "socket"')
      [[ $fwd == *-plain ]] && dp+=('udp_offload = false')
      [[ -n ${BUSY_POLL_US:-} ]] && dp+=("busy_poll_us = $BUSY_POLL_US")
      if ((${#dp[@]})); then
        printf '[dataplane]\n' >>"$tmp/r.toml"
        printf '%s\n' "${dp[@]}" >>"$tmp/r.toml"
      fi
      if [[ $fwd == *-stormed ]]; then
        # The storm comes from a third link peer in s, so r runs its capsules.
        printf '[capsule]\ncache_dir = "%s"\n[[link]]\npeer = "%s"\nstatic = true\n' "$tmp/code" "$S:$((PORT + 2))" >>"$tmp/r.toml"
      fi
      if [[ $fwd == anode-capsule* ]]; then
        # 10 Gbit/s for the capsule protocol: the node's speed, not the default 2 MB/s cap.
        printf '["capsule/*"]\nchannel_bandwidth = 1250000000\nmemory_bytes = 16777216\ncode_bytes = 4194304\n' >"$tmp/policy.toml"
        printf '[nodeos]\npolicy = "%s"\n' "$tmp/policy.toml" >>"$tmp/r.toml"
        # The compute rows: the capsule EE may use a whole core (per worker).
        [[ $fwd == anode-capsule-compute* ]] && printf 'cpu_percent = 100\n' >>"$tmp/r.toml"
        printf '[capsule]\ncache_dir = "%s"\n' "$tmp/code" >>"$tmp/r.toml"
      fi
      if [[ $fwd == anode-capsule-compute* ]]; then
        # Two compute protocols, the second from a third link peer in s; compute2: two workers.
        [[ $fwd == anode-capsule-compute2 ]] && printf 'workers = 2\n' >>"$tmp/r.toml"
        printf '[[link]]\npeer = "%s"\nstatic = true\n' "$S:$((PORT + 2))" >>"$tmp/r.toml"
      fi
      ip netns exec "${P}r" nice -n "$NICE" timeout $((SECS + 8)) "$bin/anode" node --config "$tmp/r.toml" >"$tmp/fwd.out" 2>&1 &
      fpid=$!; pids+=("$fpid")
      if [[ $fwd == anode-node-scraped ]]; then
        # One scrape a second for the point's duration (bash's /dev/tcp: no client needed).
        ip netns exec "${P}r" timeout $((SECS + 6)) bash -c 'sleep 0.5; : >"$1"
          while true; do
            exec 3<>/dev/tcp/127.0.0.1/9464 && printf "GET /metrics HTTP/1.0\r\n\r\n" >&3 &&
              cat <&3 >/dev/null && echo scrape >>"$1"; exec 3<&-; sleep 1
          done' _ "$tmp/scrapes" 2>/dev/null &
        pids+=("$!")
      fi ;;
  esac
  # Wait (bounded) until the sink and the forwarder say they are ready.
  for _ in $(seq 50); do
    grep -q ready "$tmp/sink.out" 2>/dev/null &&
      { [[ -z $fpid ]] || grep -Eq 'ready|running on UDP' "$tmp/fwd.out" 2>/dev/null; } && break
    sleep 0.1
  done
  local apid2=""
  if [[ $fwd == *-deploy-attacked ]]; then
    ip netns exec "${P}d" timeout $((secs + 4)) python3 "$repo/scripts/deploy-flood-attacker.py" \
      "$D:$((PORT + 1))" "$R:$PORT" "$(cat "$tmp/ops.pub")" "${DEPLOY_RATE:-20000}" >"$tmp/attack.out" 2>&1 &
    apid2=$!; pids+=("$apid2")
    sleep 0.5
  elif [[ $fwd == *-attacked ]]; then
    ip netns exec "${P}d" timeout $((secs + 4)) python3 "$repo/scripts/remote-flood-attacker.py" 198.18.2.1:7100 "$(cat "$tmp/ops.pub")" 4 >"$tmp/attack.out" 2>&1 &
    apid2=$!; pids+=("$apid2")
    sleep 0.5
  fi
  if [[ $fwd == anode-capsule-compute* ]]; then
    for c in a b; do
      ip netns exec "${P}r" timeout 10 "$bin/anode" code put "$repo/scripts/compute-$c.wat" --socket "$tmp/r.sock" >/dev/null
    done
  elif [[ $fwd == anode-capsule* ]]; then
    ip netns exec "${P}r" timeout 10 "$bin/anode" code put "$([[ $fwd == anode-capsule-cut ]] && echo flood || echo forward)" --socket "$tmp/r.sock" >/dev/null
  fi
  local spid2="" stormsent=null
  if [[ $fwd == anode-capsule-compute* ]]; then
    # The second protocol's capsules, as many again (counted as storm_sent).
    nsx s timeout $((secs + 5)) "$bin/anode-blast" --dst "$R:$PORT" --bind $S:$((PORT + 2)) --to $D:$PORT \
      --capsule --code "$repo/scripts/compute-b.wat" --size "$size" --secs "$secs" --rate "$rate" --batch "$batch" --json >"$tmp/storm.out" 2>&1 &
    spid2=$!; pids+=("$spid2")
  elif [[ $fwd == *-stormed ]]; then
    ip netns exec "${P}r" timeout 10 "$bin/anode" code put "$repo/scripts/storm.wat" --socket "$tmp/r.sock" >/dev/null
    nsx s timeout $((secs + 5)) "$bin/anode-blast" --dst "$R:$PORT" --bind $S:$((PORT + 2)) --to $D:$PORT \
      --capsule --code "$repo/scripts/storm.wat" --size 136 --secs "$secs" --rate "${STORM_RATE:-20000}" --json >"$tmp/storm.out" 2>&1 &
    spid2=$!; pids+=("$spid2")
  fi
  nsx s timeout $((secs + 5)) "$bin/anode-blast" --dst "$dst" --bind $S:$PORT --to $D:$PORT \
    --size "$size" --secs "$secs" --rate "$rate" --batch "$batch" "${kind[@]}" "${blastx[@]}" >"$tmp/blast.out" 2>&1 || true
  wait "$spid" || true
  if [[ -n $spid2 ]]; then
    wait "$spid2" || true
    stormsent=$(tail -n1 "$tmp/storm.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sent"])' 2>/dev/null || echo null)
  fi
  local forged=null reconnects=null
  if [[ -n $apid2 ]]; then
    kill "$apid2" 2>/dev/null || true
    wait "$apid2" 2>/dev/null || true
    forged=$(tail -n1 "$tmp/attack.out" | python3 -c 'import json,sys; v=json.load(sys.stdin); print(round(v.get("refused", v.get("sent", 0))/v["secs"]))' 2>/dev/null || echo null)
    reconnects=$(tail -n1 "$tmp/attack.out" | python3 -c 'import json,sys; v=json.load(sys.stdin); print(round(v["connects"]/v["secs"]))' 2>/dev/null || echo null)
  fi
  # CPU seconds the anode node process used during the point (user + system, 10 ms ticks).
  local cpu=null apid
  if [[ $fwd == anode-node* || $fwd == anode-capsule* ]]; then
    apid=$(pgrep -f "anode node --config $tmp/r.toml" | tail -n1 || true)
    if [[ -n $apid && -r /proc/$apid/stat ]]; then
      cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$apid/stat")
    fi
  fi
  local cutp=null
  if [[ $fwd == anode-capsule-cut ]]; then
    cutp=$(ip netns exec "${P}r" timeout 10 "$bin/anode" channels --json --socket "$tmp/r.sock" 2>/dev/null |
      python3 -c 'import json,sys; print(sum(c["packets"] for c in json.load(sys.stdin)))' 2>/dev/null || echo null)
  fi
  if [[ -n $fpid ]]; then
    kill -TERM "$fpid" 2>/dev/null || true
    wait "$fpid" || true
  fi
  local sent rcvd bsecs pps offered loss
  sent=$(kv sent "$tmp/blast.out"); bsecs=$(kv secs "$tmp/blast.out")
  rcvd=$(kv rcvd "$tmp/sink.out"); pps=$(kv pps "$tmp/sink.out")
  offered=$(awk -v s="$sent" -v t="$bsecs" 'BEGIN{printf "%.0f", (t > 0 ? s / t : 0)}')
  loss=$(awk -v s="$sent" -v r="$rcvd" 'BEGIN{printf "%.4f", (s > 0 ? (s - r) / s * 100 : 100)}')
  local fwdinfo=null
  if [[ $fwd == anode || $fwd == anode-fwd-capsule || $fwd == anode-module ]]; then
    fwdinfo=$(grep '^{' "$tmp/fwd.out" | tail -n1 || true); fwdinfo=${fwdinfo:-null}
  elif [[ $fwd == anode-node* || $fwd == anode-capsule* ]]; then
    fwdinfo=$(sed -n 's/.*stopped.*: \([0-9]*\) packets in, \([0-9]*\) out, \([0-9]*\) forwarded, [0-9]* delivered, \([0-9]*\) forwarded in the kernel.*/{"rx":\1,"tx":\2,"forwarded":\3,"kernel_forwarded":\4}/p' "$tmp/fwd.out")
    fwdinfo=${fwdinfo:-null}
  elif [[ $fwd == cfwd ]]; then
    fwdinfo=$(sed -n 's/^fwd rx=\([0-9]*\) tx=\([0-9]*\) drop=\([0-9]*\) txerr=\([0-9]*\).*/{"rx":\1,"tx":\2,"drop":\3,"txerr":\4}/p' "$tmp/fwd.out")
    fwdinfo=${fwdinfo:-null}
  fi
  if ((LAT)); then
    local p50 p99
    p50=$(kv lat_p50_us "$tmp/sink.out"); p99=$(kv lat_p99_us "$tmp/sink.out")
    printf '{"forwarder":"%s","size":%s,"rate":%s,"sent":%s,"rcvd":%s,"loss_pct":%s,"lat_p50_us":%s,"lat_p99_us":%s}\n' \
      "$fwd" "$size" "$rate" "$sent" "$rcvd" "$loss" "$p50" "$p99" >>"$tmp/latpoints"
    printf '| %s | %s | %s | %s | %s | %s%% |\n' "$fwd" "$size" "$rate" "$p50" "$p99" "$loss" >>"$tmp/latrows"
    echo "   latency $fwd size=$size rate=$rate: p50=${p50}us p99=${p99}us loss=$loss%" >&2
    return
  fi
  printf '{"forwarder":"%s","size":%s,"rate":%s,"sent":%s,"offered_pps":%s,"rcvd":%s,"delivered_pps":%s,"loss_pct":%s,"forwarder_cpu_s":%s,"forwarder_report":%s,"forged_requests_per_s":%s,"attacker_connects_per_s":%s,"cut_packets":%s,"storm_sent":%s}\n' \
    "$fwd" "$size" "$rate" "$sent" "$offered" "$rcvd" "$pps" "$loss" "$cpu" "$fwdinfo" "$forged" "$reconnects" "$cutp" "$stormsent" >>"$tmp/points"
  printf '| %s | %s | %s | %s | %s | %s | %s%% |\n' "$fwd" "$size" \
    "$([[ $rate == 0 ]] && echo full || echo "$rate")" "$offered" "$rcvd" "$pps" "$loss" >>"$tmp/rows"
  if [[ $fwd == anode-fwd-capsule ]]; then
    # capsule EE counters: capsules handed to it, accept runs, traps, drops by reason
    local cap
    cap=$(printf '%s' "$fwdinfo" | sed -n 's/.*"capsule":\({[^{}]*\({[^{}]*}\)\?[^{}]*}\).*/\1/p')
    printf '| %s | %s | %s | %s |\n' "$size" "$([[ $rate == 0 ]] && echo full || echo "$rate")" \
      "$(printf '%s' "$cap" | sed -n 's/.*"capsules":\([0-9]*\).*/\1/p') / $(printf '%s' "$cap" | sed -n 's/.*"ran":\([0-9]*\).*/\1/p') / $(printf '%s' "$cap" | sed -n 's/.*"traps":\([0-9]*\).*/\1/p')" \
      "$(d=$(printf '%s' "$cap" | sed -n 's/.*"drops":{\([^}]*\)}.*/\1/p' | tr -d '"'); echo "${d:-none}")" >>"$tmp/caprows"
  fi
  local scrapes=""
  if [[ $fwd == anode-node-scraped ]]; then
    scrapes=" scrapes=$(wc -l <"$tmp/scrapes" 2>/dev/null || echo 0)"
    : >"$tmp/scrapes"
  fi
  local attacked=""
  [[ $forged != null ]] && attacked=" forged_requests_per_s=$forged attacker_connects_per_s=$reconnects"
  local cut=""
  [[ $cutp != null ]] && cut=" cut_packets=$cutp"
  [[ $stormsent != null ]] && cut="$cut storm_sent=$stormsent"
  echo "   $fwd size=$size rate=$rate: offered=$offered rcvd=$rcvd delivered_pps=$pps loss=$loss% cpu_s=$cpu$scrapes$attacked$cut" >&2
}

: >"$tmp/points"; : >"$tmp/rows"; : >"$tmp/caprows"; : >"$tmp/latpoints"; : >"$tmp/latrows"
for size in $SIZES; do
  for fwd in $FORWARDERS; do
    for rate in $RATES; do
      point "$fwd" "$size" "$rate"
    done
  done
done
# Latency: one stamped packet per send at LAT_RATE.
LAT=1
for size in $LAT_SIZES; do
  for fwd in $FORWARDERS; do
    point "$fwd" "$size" "$LAT_RATE"
  done
done
LAT=0

# Maximum loss-free rate: the highest *achieved* offered rate (fixed or full speed) with < 0.1% loss.
summary=$(awk '
  { f=$0; sub(/.*"forwarder":"/, "", f); sub(/".*/, "", f)
    s=$0; sub(/.*"size":/, "", s); sub(/,.*/, "", s)
    o=$0; sub(/.*"offered_pps":/, "", o); sub(/,.*/, "", o)
    l=$0; sub(/.*"loss_pct":/, "", l); sub(/,.*/, "", l)
    r=$0; sub(/.*"rate":/, "", r); sub(/,.*/, "", r)
    k=f " " s; if (!(k in best)) { best[k]=0; order[++n]=k }
    v = o
    if (l + 0 < 0.1 && v + 0 > best[k]) best[k] = v + 0 }
  END { for (i = 1; i <= n; i++) print order[i], best[order[i]] }' "$tmp/points")

mkdir -p "$outdir"
{
  printf '{"when":"%s","secs_per_point":%s,"batch":%s,"nice":%s,"load":"%s","kernel":"%s","points":[' \
    "$stamp" "$SECS" "$BATCH" "$NICE" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(uname -r)"
  paste -sd, "$tmp/points"
  printf '],"max_loss_free_pps":{'
  echo "$summary" | awk '{printf "%s\"%s/%s\":%s", (NR > 1 ? "," : ""), $1, $2, $3}'
  printf '},"latency":['
  paste -sd, "$tmp/latpoints"
  printf ']}\n'
} >"$json"

echo
echo "### Forwarding s -> r -> d (veth, ${SECS}s per point, batch $BATCH, nice $NICE, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), kernel $(uname -r))"
echo
echo "| forwarder | size (B) | offered rate | offered pps | received | delivered pps | loss |"
echo "|---|---|---|---|---|---|---|"
cat "$tmp/rows"
echo
echo "| forwarder | size (B) | max loss-free pps (< 0.1% loss) |"
echo "|---|---|---|"
echo "$summary" | awk '{printf "| %s | %s | %s |\n", $1, $2, $3}'
if [[ -s $tmp/caprows ]]; then
  echo
  echo "anode-capsule: capsule EE in r (code protocols::FORWARD pre-installed)"
  echo
  echo "| size (B) | offered rate | capsules / ran / traps | capsule drops by reason |"
  echo "|---|---|---|---|"
  cat "$tmp/caprows"
fi
echo
if [[ -s $tmp/latrows ]]; then
  echo
  echo "One-way latency s -> d through r, one stamped packet per send at $LAT_RATE pps for ${LAT_SECS}s (p50/p99, us):"
  echo
  echo "| forwarder | size (B) | rate (pps) | p50 (us) | p99 (us) | loss |"
  echo "|---|---|---|---|---|---|"
  cat "$tmp/latrows"
fi
echo
echo "JSON: $json"
