//! Capsule files (ABI v2) under arbitrary guest calls: the input is a sequence of
//! operations (`op u8 | code u8 | path_len u8 | path | data_len u8 | data`) on a store with
//! small bounds. None may panic; a refused write or delete changes nothing; the bytes held
//! always equal the files' sizes and stay within the quota; no accepted path leaves the code
//! object's directory; a hand-over's import of the store's own export changes nothing.
#![no_main]
use anode_capsule::files::{FileLimits, FileStore};
use libfuzzer_sys::fuzz_target;

fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let n = n.min(data.len());
    let (a, b) = data.split_at(n);
    *data = b;
    a
}

fuzz_target!(|input: &[u8]| {
    let limits = FileLimits {
        max_bytes: 256,
        max_files: 4,
        max_file_bytes: 96,
        max_path: 24,
        max_depth: 3,
    };
    let mut s = FileStore::new(limits);
    let mut data = input;
    while data.len() >= 3 {
        let head = take(&mut data, 3);
        let (op, code) = (head[0] % 4, [head[1] % 2; 32]);
        let path = take(&mut data, usize::from(head[2] % 32)).to_vec();
        let len = take(&mut data, 1).first().copied().unwrap_or(0);
        let body = take(&mut data, usize::from(len)).to_vec();
        let before = s.bytes_of(&code);
        if let Some(p) = s.check_path(&path) {
            assert!(!p.starts_with('/') && !p.split('/').any(|c| c.is_empty() || c == ".."));
        }
        match op {
            0 => {
                if s.write(code, &path, &body).is_err() {
                    assert_eq!(s.bytes_of(&code), before, "a refused write changes nothing");
                } else {
                    assert_eq!(s.read(&code, &path).expect("written"), &body[..]);
                }
            }
            1 => {
                let _ = s.read(&code, &path);
                assert_eq!(s.bytes_of(&code), before);
            }
            2 => {
                let all = s.export();
                assert_eq!(s.import(all.clone()), 0, "its own files fit");
                assert_eq!(s.export(), all, "an import of the export changes nothing");
            }
            _ => {
                if s.delete(&code, &path).is_err() {
                    assert_eq!(s.bytes_of(&code), before, "a refused delete changes nothing");
                }
            }
        }
        assert!(s.bytes_of(&code) <= limits.max_bytes, "within the quota");
        let files: usize = s
            .export()
            .iter()
            .filter(|(c, _, _)| *c == code)
            .map(|(_, _, d)| d.len())
            .sum();
        assert_eq!(files, s.bytes_of(&code), "bytes held are the files' sizes");
    }
});
