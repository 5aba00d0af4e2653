//! The node-link JSON importer on any bytes: it may not panic; what imports is a network of
//! at least two nodes whose file ends with the all-pairs check.
#![no_main]
use anode_topo::{Options, import};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(o) = import(data, "fuzz.json", &Options::default()) {
        assert!(o.summary.nodes >= 2 && o.summary.links >= 1);
        assert!(o.toml.ends_with("from = \"*\"\nto = \"*\"\n"));
    }
});
