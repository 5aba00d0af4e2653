//! Plain-text tables for people (comfy-table, no borders): a header row, left-aligned
//! columns two spaces apart, no trailing spaces.

/// A table being built.
#[derive(Debug)]
pub struct Table(comfy_table::Table);

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        let mut t = comfy_table::Table::new();
        t.load_preset(comfy_table::presets::NOTHING)
            .set_header(headers.to_vec());
        for c in t.column_iter_mut() {
            c.set_padding((0, 2));
        }
        Table(t)
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.0.add_row(cells);
    }

    /// The table as text, one line per row.
    pub fn render(&self) -> String {
        self.0
            .lines()
            .map(|l| l.trim_end().to_string() + "\n")
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns() {
        let mut t = Table::new(&["DEST", "METRIC"]);
        t.row(vec!["127.0.0.1:4002".into(), "1".into()]);
        assert_eq!(t.render(), "DEST            METRIC\n127.0.0.1:4002  1\n");
    }
}

/// `n` bytes for a person: `512 B`, `20.6 KiB`, `1.0 MiB`, `2.3 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

#[cfg(test)]
mod size_tests {
    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(super::bytes(512), "512 B");
        assert_eq!(super::bytes(21_048), "20.6 KiB");
        assert_eq!(super::bytes(1 << 20), "1.0 MiB");
        assert_eq!(super::bytes(201_326_592), "192.0 MiB");
    }
}
