//! Tables on the terminal, for the listings of `herald` and the bench's figures.

/// Print rows under headers, in columns. Cells come from devices: control characters
/// are shown escaped (`\u{1b}`), never sent to the terminal.
pub fn print_table<const N: usize>(headers: &[&str; N], rows: &[[String; N]]) {
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| row.clone().map(|c| printable(&c)))
        .collect();
    let rows = rows.as_slice();
    let mut widths = headers.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn printable(cell: &str) -> String {
    cell.chars()
        .map(|c| {
            if herald_labels::is_unsafe(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_cells_cannot_reach_the_terminal() {
        assert_eq!(super::printable("ok\x1b[2Jx"), "ok\\u{1b}[2Jx");
        assert_eq!(super::printable("a\u{202E}b"), "a\\u{202e}b");
        assert_eq!(super::printable("Küche 👋"), "Küche 👋");
    }
}
