//! The GML parser and the GML importer on any bytes: neither may panic; what imports is a
//! network of at least two nodes whose file ends with the all-pairs check, and importing
//! is deterministic.
#![no_main]
use anode_topo::{Options, gml, import};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gml::parse(&gml::decode(data));
    if let Ok(o) = import(data, "fuzz.gml", &Options::default()) {
        assert!(o.summary.nodes >= 2 && o.summary.links >= 1);
        assert!(o.toml.ends_with("from = \"*\"\nto = \"*\"\n"));
        let again = import(data, "fuzz.gml", &Options::default()).expect("imports twice");
        assert_eq!(again.toml, o.toml);
    }
});
