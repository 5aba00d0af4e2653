#!/usr/bin/env bash
# What a flood of forged remote-management requests costs a node's forwarding (issue 23's
# goal: < 10 %). Three real `anode node` processes on loopback, d -- hub -- e, the hub with
# `[remote] listen` and one trusted key. `anode flood` sends capsules from d to e as fast as
# d takes them for SECS seconds (d's control-socket injection is the limit, ~8k/s of 256 B
# here; the figure is whether the hub keeps forwarding them), counted at e: ROUNDS times
# alone and ROUNDS times while scripts/remote-flood-attacker.py runs CONNS connections at
# the hub (requests signed "by" the trusted key with a wrong signature), alternating.
# Prints one JSON line per round and a summary; release build.
#
#   scripts/bench-remote-flood.sh            # SECS=3 ROUNDS=3 CONNS=4 SIZE=256
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-3}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-4}
SIZE=${SIZE:-256}
. scripts/lib/loopback-bench.sh
d=127.0.0.1:$(port); hub=127.0.0.1:$(port); e=127.0.0.1:$(port); remote=127.0.0.1:$(port)
"$B" keygen --out "$dir/ops" >/dev/null
# Lift the default 2 MB/s per capsule protocol (it would be what is measured, not the node).
printf '["capsule/*"]\nchannel_bandwidth = 1250000000\nmemory_bytes = 16777216\ncode_bytes = 4194304\n' \
    > "$dir/policy.toml"
pub=$(cat "$dir/ops.pub")
conf() { # name me peers...
    local name=$1 me=$2; shift 2
    {
        printf '[node]\naddress = "%s"\n\n[control]\nsocket = "%s/%s.sock"\n\n[capsule]\ncache_dir = "%s/%s-code"\n' \
            "$me" "$dir" "$name" "$dir" "$name"
        printf '\n[nodeos]\npolicy = "%s/policy.toml"\n' "$dir"
        for p in "$@"; do printf '\n[[link]]\npeer = "%s"\n' "$p"; done
    } > "$dir/$name.toml"
}
conf d "$d" "$hub"
conf e "$e" "$hub"
conf hub "$hub" "$d" "$e"
printf '\n[remote]\nlisten = "%s"\n\n[[remote.key]]\nkey = "%s"\nname = "ops"\nmay = ["read"]\n' \
    "$remote" "$pub" >> "$dir/hub.toml"
for n in hub d e; do
    "$B" node --config "$dir/$n.toml" 2>"$dir/$n.log" &
    pids+=($!)
done
for _ in $(seq 100); do
    "$B" routes --socket "$dir/d.sock" --json 2>/dev/null | grep -q "\"$e\"" && break
    sleep 0.1
done

flood() {
    "$B" flood "$e" --socket "$dir/d.sock" --size "$SIZE" --seconds "$SECS" --json \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["rate_pps"])'
}

alone=() attacked=() rates=()
for r in $(seq "$ROUNDS"); do
    a=$(flood)
    python3 scripts/remote-flood-attacker.py "$remote" "$pub" "$CONNS" > "$dir/attack.out" &
    apid=$!
    sleep 0.5
    b=$(flood)
    kill "$apid" 2>/dev/null || true
    wait "$apid" 2>/dev/null || true
    rate=$(tail -n 1 "$dir/attack.out" | python3 -c 'import json,sys; v=json.load(sys.stdin); print(round(v["refused"]/v["secs"]))')
    echo "{\"round\":$r,\"alone_pps\":$a,\"attacked_pps\":$b,\"forged_requests_per_s\":$rate}"
    alone+=("$a") attacked+=("$b") rates+=("$rate")
done
bad=$("$B" stats --socket "$dir/hub.sock" --json | python3 -c 'import json,sys; r=json.load(sys.stdin)["control"]["remote"]["refused"]; print(r["bad_signature"] + r["throttled"])')
python3 - "${alone[*]}" "${attacked[*]}" "${rates[*]}" "$bad" <<'EOF'
import json, statistics as st, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
r = [float(x) for x in sys.argv[3].split()]
print(json.dumps({"alone_pps_median": st.median(a), "attacked_pps_median": st.median(b),
                  "kept": round(st.median(b) / st.median(a), 3),
                  "forged_requests_per_s_median": st.median(r),
                  "refused_total": int(sys.argv[4])}))
EOF
