;; scripts/compute-a.wat with another seed: the same work under another SHA-256, so another
;; code object (another protocol, its own NodeOS domain) for the compute rows of
;; scripts/bench-netns.sh.
(module
  (memory (export "memory") 1)
  (global $x (mut i64) (i64.const 2463534242))
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
