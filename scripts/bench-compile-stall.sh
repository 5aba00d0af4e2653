#!/usr/bin/env bash
# What building a large code object costs a node's forwarding (issue 17's goal: while a 20 MB
# code object compiles, passive forwarding p99 latency grows <= 10 %). Three real `anode node`
# processes on loopback in a line a - b - c (release build, [capsule] max_code_bytes = 32 MiB,
# [metrics] on a, a NodeOS policy letting a protocol hold 144 MiB of code). A SIZE-byte module (scripts/gen-big-wasm.py) sits in b's disk code cache
# from the start (too large for a control request, which is at most 1 MiB). `anode ping` from
# a to c (capsules pass b on the passive path; COUNT pings every 2 ms) runs in three phases,
# each reported as p50/p99 RTT beside the idle phase of the same run:
#   idle    nothing else happens;
#   hog     two busy loops in the SCHED_IDLE class (the code worker's), one per core: the
#           machine's own cost of idle-class CPU load, a control for the next two phases;
#   build   `anode capsule send` of that code from b to a: b builds it from its disk cache
#           (read, Winch compile, ABI check) on its code worker, runs it, forwards the capsule;
#           a demand-loads the code from b and builds it on its own worker; the phase's
#           pings run until a has the code (`build_s`: from the send until then);
#   tierup  right after: Cranelift recompiles the module on both workers (`tier_ups` says
#           whether a swapped in the optimized code within the phase).
# The summary goes to bench-out/compile-stall.json.
#
#   scripts/bench-compile-stall.sh            # COUNT=1500 SIZE=20000000
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-1500}
SIZE=${SIZE:-20000000}
. scripts/lib/loopback-bench.sh
names=(a b c)
addrs=()
for _ in "${names[@]}"; do addrs+=("127.0.0.1:$(port)"); done
metrics=127.0.0.1:$(port)
mkdir -p "$dir/b-code"
python3 scripts/gen-big-wasm.py "$dir/big.wasm" "$SIZE" "$RANDOM" >&2
hash=$(sha256sum "$dir/big.wasm" | cut -d' ' -f1)
cp "$dir/big.wasm" "$dir/b-code/$hash.wasm"
# A protocol's domain may hold this much code (the default policy allows 256 KiB).
printf '["capsule/*"]\nmemory_bytes = 167772160\ncode_bytes = 150994944\n' > "$dir/policies.toml"
for i in "${!names[@]}"; do
    n=${names[$i]}
    {
        printf '[node]\naddress = "%s"\n\n[control]\nsocket = "%s/%s.sock"\n\n' "${addrs[$i]}" "$dir" "$n"
        printf '[capsule]\ncache_dir = "%s/%s-code"\nmax_code_bytes = 33554432\n' "$dir" "$n"
        printf '\n[nodeos]\npolicy = "%s/policies.toml"\n' "$dir"
        [ "$n" = a ] && printf '\n[metrics]\nlisten = "%s"\n' "$metrics"
        [ "$i" -gt 0 ] && printf '\n[[link]]\nname = "prev"\npeer = "%s"\n' "${addrs[$((i - 1))]}"
        [ "$i" -lt 2 ] && printf '\n[[link]]\nname = "next"\npeer = "%s"\n' "${addrs[$((i + 1))]}"
    } > "$dir/$n.toml"
    "$B" node --config "$dir/$n.toml" 2> "$dir/$n.log" &
    pids+=($!)
done
c=${addrs[2]}
for _ in $(seq 100); do
    "$B" routes --socket "$dir/a.sock" --json 2>/dev/null | grep -q "\"$c\"" && break
    sleep 0.1
done
# Every node has the ping code before the first phase.
# Routes settle first: three warm-up rounds in a row must all come back.
ok=0
for _ in $(seq 100); do
    if "$B" ping --socket "$dir/a.sock" "$c" -c 5 -i 0.01 >/dev/null 2>&1; then
        ok=$((ok + 1))
        [ "$ok" -ge 3 ] && break
    else
        ok=0
    fi
    sleep 0.2
done
metric() { # name: a's counter
    curl -s --max-time 5 "http://$metrics/metrics" | awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
# The ping code's own tier-up (Cranelift, on the workers) is over before the idle phase.
for _ in $(seq 300); do
    [ "$(metric anode_code_tier_ups_total)" -ge 1 ] && break
    sleep 0.1
done
sleep 1

ping_phase() { # name
    "$B" ping --socket "$dir/a.sock" "$c" -c "$COUNT" -i 0.002 --json > "$dir/$1.json"
}
ping_phase idle
# Control: the same pings while two busy loops (one per core) run in the SCHED_IDLE class,
# as the code worker does: what any idle-class CPU load costs forwarding on this machine.
hogs=()
for _ in 1 2; do
    chrt --idle 0 python3 -c 'while True: pass' &
    hogs+=($!)
done
ping_phase hog
kill "${hogs[@]}"
wait "${hogs[@]}" 2>/dev/null || true

# The build phase's pings last until a holds the code (at most 120 s).
ping_until_built() {
    while [ ! -e "$dir/built" ]; do
        "$B" ping --socket "$dir/a.sock" "$c" -c 250 -i 0.002 --json >> "$dir/build.jsonl"
    done
}
ping_until_built &
pinger=$!
t0=$(date +%s.%N)
"$B" capsule send "${addrs[0]}" --socket "$dir/b.sock" --code "$hash" --payload x -c 1 --wait 0 >/dev/null
for _ in $(seq "${BUILD_POLLS:-600}"); do
    [ "$(metric anode_code_loads_total)" -ge 1 ] && break
    sleep 0.2
done
build_s=$(python3 -c "import time; print(round(time.time() - $t0, 3))")
touch "$dir/built"
wait "$pinger"
ping_phase tierup
tier_ups=$(( $(metric anode_code_tier_ups_total) - 1 ))

python3 - "$dir" "$build_s" "$tier_ups" <<'PY'
import json, os, sys
d, build_s, tier_ups = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]
def runs(name):
    p = os.path.join(d, name + ".json")
    if os.path.exists(p):
        return [json.load(open(p))]
    return [json.loads(l) for l in open(os.path.join(d, name + ".jsonl")) if l.strip()]
out = {"size_bytes": os.path.getsize(os.path.join(d, "big.wasm")), "build_s": build_s,
       "tier_ups_at_a": tier_ups, "phases": {}}
for ph in ("idle", "hog", "build", "tierup"):
    rs = runs(ph)
    r = [x for s in rs for x in s["rtt_ms"] if x is not None]
    out["phases"][ph] = {"sent": sum(s["sent"] for s in rs),
                         "received": sum(s["received"] for s in rs),
                         "p50_ms": round(pct(r, 0.5), 4), "p99_ms": round(pct(r, 0.99), 4),
                         "max_ms": round(max(r), 4)}
idle = out["phases"]["idle"]
for ph in ("hog", "build", "tierup"):
    p = out["phases"][ph]
    p["p50_vs_idle"] = round(p["p50_ms"] / idle["p50_ms"], 3)
    p["p99_vs_idle"] = round(p["p99_ms"] / idle["p99_ms"], 3)
os.makedirs("bench-out", exist_ok=True)
json.dump(out, open("bench-out/compile-stall.json", "w"), indent=1)
print(json.dumps(out))
PY
