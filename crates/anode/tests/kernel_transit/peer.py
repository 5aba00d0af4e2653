#!/usr/bin/env python3
"""The end hosts of kernel_transit.rs: `send` writes a corpus of ANEP packets to the router
node from the source host; `recv` collects what reaches the destination host.

    peer.py send SRC_IP ROUTER_IP DST_IP FAR_IP      (ports: 3322; FAR is routed via DST)
    peer.py one SRC_IP ROUTER_IP DST_IP FAR_IP       (only the corpus's first, valid packet)
    peer.py far SRC_IP ROUTER_IP DST_IP FAR_IP       (only the valid packet routed via DST)
    peer.py recv BIND_IP SECONDS OUT_FILE [PORT]      (one line per datagram: hex)

Addresses are IPv4 or IPv6. Only the standard library is used.
"""
import socket
import struct
import sys
import time

PORT = 3322
TYPE_CONTROL, TYPE_DATAGRAM, TYPE_CAPSULE = 0x0A01, 0x0A02, 0x0A03


def family(ip):
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def addr(ip, port=PORT):
    if ":" in ip:
        b = socket.inet_pton(socket.AF_INET6, ip)
    else:
        b = b"\0" * 10 + b"\xff\xff" + socket.inet_aton(ip)
    return b + struct.pack("!H", port)


def transit(src, dst, prev, flags=0, rb=16):
    return struct.pack("!BBHHHQ", 1, flags, 72, rb, 0, 7) + src + dst + prev + b"\0\0"


def anep(type_id, body, flags=0, options=b""):
    hl = (8 + len(options)) // 4
    return struct.pack("!BBHHH", 1, flags, type_id, hl, 8 + len(options) + len(body)) + options + body


def source_option(ip):
    if ":" in ip:
        v = struct.pack("!HH", 2, PORT) + socket.inet_pton(socket.AF_INET6, ip)
    else:
        v = struct.pack("!HH", 1, PORT) + socket.inet_aton(ip)
    return struct.pack("!HH", 1, (4 + len(v)) // 4) + v


def corpus(s, r, d, far):
    S, R, D, F = addr(s), addr(r), addr(d), addr(far)
    nowhere = addr("198.18.77.77") if ":" not in s else addr("2001:2:0:77::77")
    body = struct.pack("!HH", 9, 0) + b"hello anode"

    def dgram(dst, **kw):
        opts = kw.pop("options", b"")
        pad = b"\0" * kw.pop("pad", 0)
        return anep(TYPE_DATAGRAM, transit(S, dst, S, **kw) + body + pad, options=opts)

    valid = dgram(D)
    return [
        ("valid", PORT, valid),
        ("valid-far", PORT, dgram(F)),
        ("rb0", PORT, dgram(D, rb=0)),
        ("every-hop", PORT, anep(TYPE_CAPSULE, transit(S, D, S, flags=1) + b"\0" * 40)),
        ("truncated", PORT, valid[:20]),
        ("options", PORT, dgram(D, options=source_option(s))),
        ("for-node", PORT, dgram(R)),
        ("no-route", PORT, dgram(nowhere)),
        ("control", PORT, anep(TYPE_CONTROL, b"\xff" * 16)),
        ("unknown-type", PORT, anep(0x7777, transit(S, D, S) + body, flags=0x80)),
        ("not-peer", 4000, valid),
        # r's link to d takes 256 bytes: one of 300 is refused there.
        ("over-link-mtu", PORT, dgram(D, pad=205)),
        # Larger than the interface MTU: the sender's kernel sends IP fragments.
        ("fragmented", PORT, dgram(D, pad=2900)),
    ]


def send(s, r, d, far, only=None):
    socks = {}
    packets = corpus(s, r, d, far)
    for name, port, pkt in packets:
        if only is not None and name != only:
            continue
        if port not in socks:
            k = socket.socket(family(s), socket.SOCK_DGRAM)
            k.bind((s, port))
            socks[port] = k
        socks[port].sendto(pkt, (r, PORT))
        time.sleep(0.02)


def recv(bind, seconds, out, port=PORT):
    k = socket.socket(family(bind), socket.SOCK_DGRAM)
    k.bind((bind, int(port)))
    k.settimeout(0.1)
    end = time.time() + seconds
    got = []
    while time.time() < end:
        try:
            data, _ = k.recvfrom(65536)
        except socket.timeout:
            continue
        # The router's hellos and routing updates are not part of the corpus.
        if len(data) >= 4 and struct.unpack("!H", data[2:4])[0] == TYPE_CONTROL:
            continue
        got.append(data.hex())
    with open(out, "w") as f:
        f.write("\n".join(got) + ("\n" if got else ""))


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(*sys.argv[2:6])
    elif sys.argv[1] == "one":
        send(*sys.argv[2:6], only="valid")
    elif sys.argv[1] in ("far", "far-again"):
        send(*sys.argv[2:6], only="valid-far")
    else:
        recv(sys.argv[2], float(sys.argv[3]), *sys.argv[4:6])
