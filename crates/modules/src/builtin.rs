//! The modules of `guest/modules/`, built by `build.rs` and embedded: name, manifest text and
//! WebAssembly code. They are packages like any other: unsigned until signed with a key.

macro_rules! builtin {
    ($($name:literal),*) => {
        /// (name, manifest, code) of every module in `guest/modules/`.
        pub const BUILTIN: &[(&str, &str, &[u8])] = &[$(
            (
                $name,
                include_str!(concat!(env!("OUT_DIR"), "/modules/", $name, ".toml")),
                include_bytes!(concat!(env!("OUT_DIR"), "/modules/", $name, ".wasm")),
            ),
        )*];
    };
}

include!(concat!(env!("OUT_DIR"), "/builtin_list.rs"));

/// An unsigned package of the built-in module `name`.
pub fn package(name: &str) -> Option<crate::Package> {
    let (_, m, c) = BUILTIN.iter().find(|(n, _, _)| *n == name)?;
    crate::Package::new((*m).to_string(), c.to_vec()).ok()
}
