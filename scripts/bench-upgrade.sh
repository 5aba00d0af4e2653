#!/usr/bin/env bash
# What `anode upgrade` costs a flow crossing the node it replaces, beside what a restart
# costs it (issue 23: "upgrading the capsule EE under a capsule flood loses no capsule").
# Three release `anode node` processes on loopback, a - b - c; `anode flood` sends COUNT
# capsules from a to c at RATE a second (the flood code runs at every hop); in each round:
#   none     the flood alone (the baseline of the same run),
#   upgrade  b replaced by `anode upgrade` UPGRADES times during the flood,
#   restart  b stopped (`anode stop`) and started again once during the flood: the new b
#            knows no neighbor, a drops its routes through b, and the flood stops with
#            `no_route` (anode flood ends at the first capsule its node refuses); a polls its
#            route to c every 10 ms meanwhile, which gives how long c was unreachable.
# Prints one JSON line per round and flood (sent, delivered, loss, and for upgrades the
# pause and total time the node reported), and a summary in bench-out/upgrade.json.
#
#   scripts/bench-upgrade.sh          # ROUNDS=3 COUNT=20000 RATE=10000 UPGRADES=3
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
COUNT=${COUNT:-20000}
RATE=${RATE:-10000}
UPGRADES=${UPGRADES:-3}
. scripts/lib/loopback-bench.sh
names=(a b c)
addrs=()
for _ in "${names[@]}"; do addrs+=("127.0.0.1:$(port)"); done
for i in "${!names[@]}"; do
    n=${names[$i]}
    {
        printf '[node]\naddress = "%s"\n\n[control]\nsocket = "%s/%s.sock"\n\n[capsule]\ncache_dir = "%s/%s-code"\n' \
            "${addrs[$i]}" "$dir" "$n" "$dir" "$n"
        # The flood is the workload: lift the NodeOS's default 2 MB/s per capsule protocol.
        printf '\n[nodeos]\npolicy = "%s/policy.toml"\n' "$dir"
        [ "$i" -gt 0 ] && printf '\n[[link]]\nname = "prev"\npeer = "%s"\n' "${addrs[$((i - 1))]}"
        [ "$i" -lt 2 ] && printf '\n[[link]]\nname = "next"\npeer = "%s"\n' "${addrs[$((i + 1))]}"
    } > "$dir/$n.toml"
done
printf '["capsule/*"]\nchannel_bandwidth = 1250000000\nmemory_bytes = 16777216\ncode_bytes = 4194304\n' > "$dir/policy.toml"
start() { # name
    "$B" node --config "$dir/$1.toml" 2>> "$dir/$1.log" &
    pids+=($!)
    for _ in $(seq 100); do [ -S "$dir/$1.sock" ] && return; sleep 0.05; done
    echo "node $1 did not start" >&2; cat "$dir/$1.log" >&2; exit 1
}
for n in "${names[@]}"; do start "$n"; done
a=$dir/a.sock; bs=$dir/b.sock; c=${addrs[2]}
for _ in $(seq 100); do
    "$B" routes --socket "$a" --json 2>/dev/null | grep -q "\"$c\"" && break
    sleep 0.1
done
"$B" flood "$c" --count 100 --rate 1000 --socket "$a" >/dev/null   # loads the code on the path

flood() { # -> the summary line
    "$B" flood "$c" --count "$COUNT" --rate "$RATE" --size 64 --json --socket "$a" | tail -1
}
secs=$(python3 -c "print($COUNT / $RATE)")
mkdir -p bench-out
: > "$dir/rows"
for r in $(seq "$ROUNDS"); do
    s=$(flood)
    echo "{\"round\": $r, \"case\": \"none\", \"flood\": $s}" | tee -a "$dir/rows" | cut -c1-200
    flood > "$dir/flood.json" &
    fp=$!
    ups=()
    for k in $(seq "$UPGRADES"); do
        sleep "$(python3 -c "print($secs / ($UPGRADES + 1))")"
        ups+=("$("$B" upgrade --socket "$bs" --json)")
    done
    wait "$fp"
    echo "{\"round\": $r, \"case\": \"upgrade\", \"flood\": $(cat "$dir/flood.json"), \"upgrades\": [$(IFS=,; echo "${ups[*]}")]}" |
        tee -a "$dir/rows" | cut -c1-200
    ( flood > "$dir/flood.json" 2> "$dir/flood.err" || true ) &
    fp=$!
    sleep "$(python3 -c "print($secs / 2)")"
    python3 - "$B" "$a" "$c" > "$dir/outage" <<'PY' &
import json, subprocess, sys, time
b, sock, c = sys.argv[1:4]
t0, down, up_again, end = time.time(), None, None, time.time() + 30
while time.time() < end:
    out = subprocess.run([b, "routes", "--socket", sock, "--json"], capture_output=True, text=True).stdout
    ok = any(r.get("dest") == c and r.get("reachable") for r in json.loads(out or "[]"))
    now = time.time()
    if not ok and down is None:
        down = now
    if ok and down is not None:
        up_again = now
        break
    time.sleep(0.01)
print(json.dumps({"unreachable_ms": round((up_again - down) * 1e3, 1) if down and up_again else 0.0}))
PY
    op=$!
    "$B" stop --socket "$bs" >/dev/null
    for _ in $(seq 100); do [ -S "$bs" ] || break; sleep 0.02; done
    start b
    wait "$fp"
    wait "$op"
    if [ -s "$dir/flood.json" ]; then fl=$(cat "$dir/flood.json"); else
        fl=$(python3 -c 'import json,sys; print(json.dumps({"aborted": sys.argv[1].strip()}))' "$(tail -1 "$dir/flood.err")"); fi
    echo "{\"round\": $r, \"case\": \"restart\", \"flood\": $fl, \"outage\": $(cat "$dir/outage")}" | tee -a "$dir/rows" | cut -c1-200
done
python3 - "$dir/rows" "$COUNT" "$RATE" <<'PY' | tee bench-out/upgrade.json
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out = {"count": int(sys.argv[2]), "rate": int(sys.argv[3])}
for case in ("none", "upgrade"):
    rs = [r for r in rows if r["case"] == case]
    lost = [r["flood"]["sent"] - r["flood"]["delivered"] for r in rs]
    out[case] = {"rounds": len(rs), "lost": lost, "lost_max": max(lost)}
rs = [r for r in rows if r["case"] == "restart"]
out["restart"] = {"rounds": len(rs), "aborted": sum("aborted" in r["flood"] for r in rs),
    "unreachable_ms": [r["outage"]["unreachable_ms"] for r in rs]}
ups = [u for r in rows if r["case"] == "upgrade" for u in r["upgrades"]]
if ups:
    p = sorted(u["paused_ms"] for u in ups)
    t = sorted(u["total_ms"] for u in ups)
    out["upgrade"].update({"upgrades": len(ups), "paused_ms_p50": p[len(p) // 2],
        "paused_ms_max": p[-1], "total_ms_p50": t[len(t) // 2], "total_ms_max": t[-1],
        "held_total": sum(u["held"] for u in ups)})
print(json.dumps(out))
PY
