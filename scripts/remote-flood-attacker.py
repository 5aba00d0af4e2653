#!/usr/bin/env python3
"""A forged-request flood at a node's remote-management port, for the benchmarks
(scripts/bench-netns.sh rows *-attacked, scripts/bench-remote-flood.sh).

    remote-flood-attacker.py HOST:PORT PUBLIC_KEY_HEX CONNECTIONS

Each of CONNECTIONS threads sends requests signed "by" the trusted key with a random
signature (each would cost the node a full ed25519 check) and reads the refusal, one at a
time; a hung-up connection is made again at once, as a real attacker would. Twice a second
it prints {"refused": N, "connects": M, "secs": S} (answers and connections so far). Runs
until killed (SIGTERM: a background job of a script ignores SIGINT).
"""
import json, os, socket, sys, threading, time
to, key, conns = sys.argv[1], sys.argv[2], int(sys.argv[3])
host, port = to.rsplit(":", 1)
count = [0] * conns
connects = [0] * conns
def run(i):
    while True:  # a hung-up connection is made again at once, as a real attacker would
        try:
            s = socket.create_connection((host, int(port)))
            f = s.makefile("rb")
            while True:
                env = {"request": '{"id":1,"op":"hello","protocol":1,"client":"flood"}',
                       "to": to, "nonce": os.urandom(16).hex(),
                       "expires": int(time.time()) + 60, "key": key,
                       "sig": os.urandom(64).hex()}
                s.sendall((json.dumps(env) + "\n").encode())
                if not f.readline():
                    break
                count[i] += 1
            s.close()
        except OSError:
            pass
        connects[i] += 1
for i in range(conns):
    threading.Thread(target=run, args=(i,), daemon=True).start()
t0 = time.time()
while True:
    time.sleep(0.5)
    print(json.dumps({"refused": sum(count), "connects": sum(connects),
                      "secs": time.time() - t0}), flush=True)
