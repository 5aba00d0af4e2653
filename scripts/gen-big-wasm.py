#!/usr/bin/env python3
"""Writes a capsule code object (ABI v1) of about SIZE bytes of real code, for measuring what
compiling a large module costs the node (scripts/bench-compile-stall.sh).

The module exports `anode_abi_v1`, `memory` and `accept` (which forwards every capsule), and
holds FUNCS filler functions of straight-line i32 arithmetic that compilers must translate
(none is called). SEED makes the bytes, hence the code object's name, differ per run.

    scripts/gen-big-wasm.py OUT.wasm [SIZE] [SEED]    # SIZE default 20000000
"""
import sys


def leb(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def sleb(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if (n == 0 and not b & 0x40) or (n == -1 and b & 0x40):
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def section(sid, body):
    return bytes([sid]) + leb(len(body)) + body


def vec(items):
    return leb(len(items)) + b"".join(items)


def name(s):
    return leb(len(s)) + s.encode()


def main():
    out = sys.argv[1]
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000_000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    ops_per_func = 250  # about 1 KB of code per function
    funcs = max(1, size // (ops_per_func * 5))
    types = vec([
        b"\x60\x00\x00",  # 0: () -> ()
        b"\x60\x02\x7f\x7f\x01\x7f",  # 1: (i32, i32) -> i32
        b"\x60\x01\x7f\x01\x7f",  # 2: (i32) -> i32
    ])
    func_types = vec([leb(0), leb(1)] + [leb(2)] * funcs)
    memory = vec([b"\x00\x01"])  # one page, no maximum
    exports = vec([
        name("anode_abi_v1") + b"\x00" + leb(0),
        name("memory") + b"\x02" + leb(0),
        name("accept") + b"\x00" + leb(1),
    ])
    bodies = [
        b"\x00\x0b",  # anode_abi_v1: no locals, end
        b"\x00\x41\x01\x0b",  # accept: i32.const 1 (FORWARD), end
    ]
    for f in range(funcs):
        code = bytearray(b"\x00\x20\x00")  # no locals; local.get 0
        for k in range(ops_per_func):
            code += b"\x41" + sleb((f * 7919 + k * 104729 + seed) % 100000)
            code += b"\x6a" if k % 3 else b"\x73"  # i32.add / i32.xor
        code += b"\x0b"
        bodies.append(leb(len(code)) + bytes(code))
    bodies[0] = leb(len(bodies[0])) + bodies[0]
    bodies[1] = leb(len(bodies[1])) + bodies[1]
    module = (
        b"\x00asm\x01\x00\x00\x00"
        + section(1, types)
        + section(3, func_types)
        + section(5, memory)
        + section(7, exports)
        + section(10, leb(len(bodies)) + b"".join(bodies))
    )
    with open(out, "wb") as f:
        f.write(module)
    print(f"{out}: {len(module)} bytes, {funcs + 2} functions")


if __name__ == "__main__":
    main()
