#!/usr/bin/env python3
"""A flood of forged deploy requests at a node, for the benchmarks (scripts/bench-netns.sh
row anode-node-deploy-attacked).

    deploy-flood-attacker.py BIND NODE KEY_HEX RATE

Sends RATE deploy requests a second (UDP, from BIND, an address the node has as a link peer)
to NODE, each signed "by" KEY_HEX (a key in the node's [[deploy.key]]) with a random
signature and a fresh nonce, so each would cost the node a full ed25519 check; the target is
NODE itself and the origin BIND. Twice a second it prints {"sent": N, "secs": S}. Runs until
killed (SIGTERM). Layout: crates/wire/src/deploy.rs (request), crates/wire/src/transit.rs,
crates/wire/src/anep.rs (destination option).
"""
import ipaddress, json, os, socket, struct, sys, time

bind, node, key, rate = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3]), int(sys.argv[4])

def split(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)

def addr18(a):
    h, p = split(a)
    ip = ipaddress.ip_address(h)
    if ip.version == 4:
        ip = ipaddress.IPv6Address("::ffff:" + h)
    return ip.packed + struct.pack(">H", p)

src, dst = addr18(bind), addr18(node)
nh, nport = split(node)

def packet():
    name, version = b"counter", b"1.0.0"
    nonce = os.urandom(16)
    req = (bytes([1, 1, 1, 0]) + struct.pack(">HBB", 0, len(name), len(version))
           + struct.pack(">II", 60, 5000) + struct.pack(">Q", int(time.time() * 1000) + 60_000)
           + nonce + src + dst + os.urandom(32) + key + os.urandom(64) + src + name + version)
    transit = (bytes([1, 1]) + struct.pack(">H", 72) + struct.pack(">HH", 8, 0)
               + nonce[:8] + src + dst + src + bytes(2))
    opt = struct.pack(">HHHH", 2, 3, 1, nport) + ipaddress.ip_address(nh).packed
    body = opt + transit + req
    return bytes([1, 0]) + struct.pack(">HHH", 0x0A05, (8 + len(opt)) // 4, 8 + len(body)) + body

pool = [packet() for _ in range(4096)]
s = socket.socket(socket.AF_INET6 if ":" in split(bind)[0] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind(split(bind))
to = split(node)
t0 = last = time.time()
sent = 0
while True:
    now = time.time()
    due = int((now - t0) * rate) - sent
    for _ in range(min(due, 1000)):
        try:
            s.sendto(pool[sent % len(pool)], to)
        except OSError:
            pass
        sent += 1
    if now - last >= 0.5:
        print(json.dumps({"sent": sent, "secs": round(now - t0, 3)}), flush=True)
        last = now
    time.sleep(0.001)
