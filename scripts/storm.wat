;; A hostile capsule protocol for the storm rows of scripts/bench-netns.sh (`anode code put
;; scripts/storm.wat`, `anode-blast --capsule --code scripts/storm.wat`): every run spins
;; until its fuel is gone. The NodeOS guard counts each exhaustion against the protocol's
;; domain and terminates it (then refuses its capsules) after [nodeos] max_exhaustions.
(module
  (memory (export "memory") 1)
  (func (export "anode_abi_v1"))
  (func (export "accept") (param i32 i32) (result i32)
    (loop $spin (br $spin))
    (i32.const 1)))
