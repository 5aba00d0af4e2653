#!/usr/bin/env bash
# How long deploying a module along a 5-hop path takes (issue 23's goals: <= 50 ms plus the
# path's RTT once every node has the package, <= 200 ms when every node fetches it from the
# node before it). Six real `anode node` processes on loopback in a line a - b - c - d - e -
# f, release build. Each round: a fresh package (the built-in `counter` with a SIZE-byte
# custom section whose bytes differ per round, so every node must fetch it) deployed from a
# to f, the same deploy again (a refresh: every node has it), then an undeploy; then another
# fresh package deployed with `--repo` (every node fetches it from an `anode repo serve` on
# loopback instead of from the node before it), and an undeploy. Beside it in the same run:
# the path's round trip by `anode ping` (capsules a -> f -> a, p50 of 20).
# Prints one JSON line per round and a summary line; the summary also goes to
# bench-out/deploy.json.
#
#   scripts/bench-deploy.sh               # ROUNDS=10 SIZE=200000
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-10}
SIZE=${SIZE:-200000}
. scripts/lib/loopback-bench.sh
"$B" keygen --out "$dir/ops" >/dev/null
"$B" keygen --out "$dir/pub" >/dev/null
ops=$(cat "$dir/ops.pub")
publisher=$(cat "$dir/pub.pub")
names=(a b c d e f)
addrs=()
for _ in "${names[@]}"; do addrs+=("127.0.0.1:$(port)"); done
for i in "${!names[@]}"; do
    n=${names[$i]}
    {
        printf '[node]\naddress = "%s"\n\n[control]\nsocket = "%s/%s.sock"\n\n[capsule]\ncache_dir = "%s/%s-code"\n' \
            "${addrs[$i]}" "$dir" "$n" "$dir" "$n"
        printf '\n[modules]\ntrusted_keys = ["%s"]\nstate_dir = "%s/%s-modules"\n' "$publisher" "$dir" "$n"
        printf '\n[[deploy.key]]\nkey = "%s"\nname = "ops"\n' "$ops"
        [ "$i" -gt 0 ] && printf '\n[[link]]\nname = "prev"\npeer = "%s"\n' "${addrs[$((i - 1))]}"
        [ "$i" -lt 5 ] && printf '\n[[link]]\nname = "next"\npeer = "%s"\n' "${addrs[$((i + 1))]}"
    } > "$dir/$n.toml"
    "$B" node --config "$dir/$n.toml" 2> "$dir/$n.log" &
    pids+=($!)
done
sock=$dir/a.sock
f=${addrs[5]}
for _ in $(seq 100); do
    "$B" routes --socket "$sock" --json 2>/dev/null | grep -q "\"$f\"" && break
    sleep 0.1
done
"$B" module pack --builtin counter --out "$dir/counter.amod" >/dev/null

# A copy of the package with a SIZE-byte custom section (bytes seeded by the round) in its
# code: valid WebAssembly, a different SHA-256 every round.
pad() { # round
    python3 - "$dir/counter.amod" "$dir/big.amod" "$SIZE" "$1" <<'PY'
import struct, sys
src, out, size, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b = open(src, "rb").read()
magic = b"ANODEMOD1\n"
assert b.startswith(magic)
rest = b[len(magic):]
ml = struct.unpack(">I", rest[:4])[0]; manifest = rest[4:4 + ml]; rest = rest[4 + ml:]
cl = struct.unpack(">I", rest[:4])[0]; code = rest[4:4 + cl]
name = b"padding"
payload = bytes((i * 7 + seed) % 251 for i in range(size))
body = bytes([len(name)]) + name + payload
n, leb = len(body), b""
while True:
    byte = n & 0x7F; n >>= 7
    leb += bytes([byte | (0x80 if n else 0)])
    if not n: break
code = code + b"\x00" + leb + body
open(out, "wb").write(magic + struct.pack(">I", ml) + manifest + struct.pack(">I", len(code)) + code + struct.pack(">I", 0))
PY
    "$B" module sign "$dir/big.amod" --key "$dir/pub.key" >/dev/null
}

deploy() { # op args... -> last_ms
    "$B" module "$@" --to "$f" --sign "$dir/ops.key" --socket "$sock" --json | tail -1 |
        python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["done"], s; print(s["last_ms"])'
}

"$B" ping "$f" -c 3 -i 0.05 --socket "$sock" >/dev/null   # loads the ping code on the path
mkdir -p "$dir/repo"
repo_addr=127.0.0.1:$(port)
"$B" repo serve "$dir/repo" --listen "$repo_addr" 2> "$dir/repo.log" &
pids+=($!)
fetch=(); cached=(); undeploy=(); rtt=(); repo=()
for r in $(seq "$ROUNDS"); do
    pad "$r"
    fm=$(deploy deploy "$dir/big.amod" --ttl 600)
    cm=$(deploy deploy "$dir/big.amod" --ttl 600)
    um=$(deploy undeploy counter)
    pad $((r + 1000))
    cp "$dir/big.amod" "$dir/repo/counter-1.0.0.amod"
    rm_=$(deploy deploy "$dir/big.amod" --ttl 600 --repo "http://$repo_addr")
    deploy undeploy counter >/dev/null
    pm=$("$B" ping "$f" -c 20 -i 0.01 --socket "$sock" --json | python3 -c '
import json,sys
rtts = sorted(r for r in json.load(sys.stdin)["rtt_ms"] if r is not None)
print(rtts[len(rtts) // 2])')
    fetch+=("$fm"); cached+=("$cm"); undeploy+=("$um"); rtt+=("$pm"); repo+=("$rm_")
    printf '{"round": %d, "size": %d, "fetch_ms": %s, "cached_ms": %s, "undeploy_ms": %s, "repo_fetch_ms": %s, "path_rtt_ms": %s}\n' \
        "$r" "$SIZE" "$fm" "$cm" "$um" "$rm_" "$pm"
done
mkdir -p bench-out
python3 - "$SIZE" "${fetch[*]}" "${cached[*]}" "${undeploy[*]}" "${rtt[*]}" "${repo[*]}" <<'PY' | tee bench-out/deploy.json
import json, statistics, sys
size = int(sys.argv[1])
col = [list(map(float, a.split())) for a in sys.argv[2:]]
med = [round(statistics.median(c), 3) for c in col]
mx = [round(max(c), 3) for c in col]
print(json.dumps({"hops": 5, "package_bytes": size, "rounds": len(col[0]),
    "fetch_ms_p50": med[0], "fetch_ms_max": mx[0], "cached_ms_p50": med[1], "cached_ms_max": mx[1],
    "undeploy_ms_p50": med[2], "path_rtt_ms_p50": med[3],
    "repo_fetch_ms_p50": med[4], "repo_fetch_ms_max": mx[4],
    "goal_cached_ms": round(50 + med[3], 3), "goal_fetch_ms": 200}))
PY
