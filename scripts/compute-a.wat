;; A compute-heavy capsule protocol for the compute rows of scripts/bench-netns.sh (`anode code
;; put scripts/compute-a.wat`, `anode-blast --capsule --code scripts/compute-a.wat`): 2,000
;; rounds of xorshift per capsule (about 3.5 µs of guest work, the kind of per-packet
;; computation a payload inspector or sketch does), then forward. compute-b.wat is the same
;; with another seed, so it is another code object (another protocol, its own domain).
(module
  (memory (export "memory") 1)
  (global $x (mut i64) (i64.const 88172645463325252))
  (func (export "anode_abi_v1"))
  (func (export "accept") (param i32 i32) (result i32)
    (local $i i32) (local $x i64)
    (local.set $x (global.get $x))
    (loop $l
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 13))))
      (local.set $x (i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 7))))
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 17))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 2000))))
    (global.set $x (local.get $x))
    (i32.const 1)))
