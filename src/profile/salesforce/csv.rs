//! The CSV of Bulk API 2.0 (docs/src/guides/salesforce.md#bulk-api-20): RFC 4180 as
//! Salesforce speaks it — a header row, then one row per record; a field is quoted when it
//! holds the delimiter, a quote or a line break, and a quote inside is doubled; rows end in
//! `LF` or `CRLF`; the delimiter is `,` unless the job names another (`columnDelimiter`).
//!
//! [`parse`] reads an uploaded batch with bounds (bytes, rows, columns) and says what was
//! wrong and where (row and column, 1-based); [`write`] is its inverse. Pure, no I/O; fuzzed
//! by `fuzz/fuzz_targets/bulk_csv.rs` (every input parses or fails, never panics, and what
//! parses writes back to text that parses to the same rows).

/// At most this many bytes of CSV in one upload.
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
/// At most this many rows (header included) in one upload.
pub const MAX_ROWS: usize = 100_000;
/// At most this many columns in a row.
pub const MAX_COLUMNS: usize = 512;

/// Why a CSV upload was refused: the 1-based row and column where it went wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvError {
    pub row: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for CsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CSV row {}, column {}: {}",
            self.row, self.column, self.message
        )
    }
}

/// A parsed upload: the header and the rows, each row as long as the header.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// The column delimiter of a job's `columnDelimiter` (`COMMA`, `TAB`, `PIPE`, `SEMICOLON`,
/// `CARET`, `BACKQUOTE`); `None` for any other name.
pub fn delimiter(name: &str) -> Option<u8> {
    Some(match name {
        "COMMA" => b',',
        "TAB" => b'\t',
        "PIPE" => b'|',
        "SEMICOLON" => b';',
        "CARET" => b'^',
        "BACKQUOTE" => b'`',
        _ => return None,
    })
}

/// Parse `text` with delimiter `delim`: a non-empty header of distinct names, then rows with
/// exactly as many fields. A final line break ends the last row (it does not start one).
pub fn parse(text: &[u8], delim: u8) -> Result<Table, CsvError> {
    if text.len() > MAX_BYTES {
        return Err(err(
            1,
            1,
            format!(
                "the upload is {} bytes: at most {MAX_BYTES} are accepted",
                text.len()
            ),
        ));
    }
    let text = std::str::from_utf8(text).map_err(|e| {
        let before = &text[..e.valid_up_to()];
        let row = before.iter().filter(|b| **b == b'\n').count() + 1;
        err(row, 1, "not UTF-8 text".into())
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rows = split(text, delim as char)?;
    let mut rows = rows.into_iter();
    let header = match rows.next() {
        Some(h) if !(h.len() == 1 && h[0].is_empty()) => h,
        _ => return Err(err(1, 1, "no header row: expected the field names".into())),
    };
    for (i, name) in header.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(err(1, i + 1, "an empty field name in the header".into()));
        }
        if header[..i].contains(name) {
            return Err(err(1, i + 1, format!("the field `{name}` is named twice")));
        }
    }
    let mut out = Vec::new();
    for (i, row) in rows.enumerate() {
        if row.len() != header.len() {
            return Err(err(
                i + 2,
                row.len().min(header.len()) + 1,
                format!("{} fields where the header has {}", row.len(), header.len()),
            ));
        }
        out.push(row);
    }
    Ok(Table { header, rows: out })
}

fn err(row: usize, column: usize, message: String) -> CsvError {
    CsvError {
        row,
        column,
        message,
    }
}

/// Split into rows of fields (quotes resolved). A final line break ends the last row.
fn split(text: &str, delim: char) -> Result<Vec<Vec<String>>, CsvError> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row: Vec<String> = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut at_start = true;
    let mut any = false;
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    field.push('"');
                } else {
                    quoted = false;
                }
            } else {
                field.push(c);
            }
            continue;
        }
        match c {
            '"' if at_start => {
                quoted = true;
                was_quoted = true;
                at_start = false;
            }
            '"' => {
                return Err(err(
                    rows.len() + 1,
                    row.len() + 1,
                    "a quote inside an unquoted field: quote the field and double the quote".into(),
                ))
            }
            c if c == delim => {
                row.push(std::mem::take(&mut field));
                if row.len() > MAX_COLUMNS {
                    return Err(err(
                        rows.len() + 1,
                        row.len(),
                        format!("more than {MAX_COLUMNS} columns"),
                    ));
                }
                at_start = true;
                was_quoted = false;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
                if rows.len() > MAX_ROWS {
                    return Err(err(rows.len(), 1, format!("more than {MAX_ROWS} rows")));
                }
                at_start = true;
                was_quoted = false;
                any = false;
            }
            c => {
                if was_quoted {
                    return Err(err(
                        rows.len() + 1,
                        row.len() + 1,
                        "text after a quoted field's closing quote".into(),
                    ));
                }
                field.push(c);
                at_start = false;
            }
        }
    }
    if quoted {
        return Err(err(
            rows.len() + 1,
            row.len() + 1,
            "a quoted field is not closed".into(),
        ));
    }
    if any || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    Ok(rows)
}

/// `header` and `rows` as CSV text (`LF` line ends), quoting where needed.
pub fn write(header: &[String], rows: &[Vec<String>], delim: u8) -> String {
    let mut out = String::new();
    let mut line = |fields: &[String]| {
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.push(delim as char);
            }
            let needs = f.is_empty() && fields.len() == 1
                || f.contains(['"', '\n', '\r', delim as char])
                || f.starts_with('\u{feff}');
            if needs {
                out.push('"');
                out.push_str(&f.replace('"', "\"\""));
                out.push('"');
            } else {
                out.push_str(f);
            }
        }
        out.push('\n');
    };
    line(header);
    for r in rows {
        line(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_quotes_crlf_and_a_final_newline() {
        let t = parse(
            b"FirstName,LastName,Note\r\nAda,\"Love, lace\",\"say \"\"hi\"\"\nthere\"\r\n",
            b',',
        )
        .unwrap();
        assert_eq!(t.header, s(&["FirstName", "LastName", "Note"]));
        assert_eq!(t.rows, vec![s(&["Ada", "Love, lace", "say \"hi\"\nthere"])]);
        let back = write(&t.header, &t.rows, b',');
        assert_eq!(parse(back.as_bytes(), b',').unwrap(), t);
    }

    #[test]
    fn says_where_it_went_wrong() {
        let e = parse(b"A,B\n1,2\n3\n", b',').unwrap_err();
        assert_eq!((e.row, e.column), (3, 2));
        assert!(e.message.contains("1 fields where the header has 2"), "{e}");
        let e = parse(b"A,B\n1,\"2\n", b',').unwrap_err();
        assert!(e.message.contains("not closed"), "{e}");
        let e = parse(b"A,A\n", b',').unwrap_err();
        assert!(e.message.contains("named twice"), "{e}");
        let e = parse(b"A\nx\"y\n", b',').unwrap_err();
        assert_eq!(e.row, 2);
        assert!(parse(b"", b',').is_err());
        assert!(parse(b"A,\xff\n", b',')
            .unwrap_err()
            .message
            .contains("UTF-8"));
    }

    /// The fuzz target's property (`fuzz/fuzz_targets/bulk_csv.rs`) over many small inputs
    /// made of the characters that matter: never a panic, and what parses round-trips.
    #[test]
    fn what_parses_writes_back_to_the_same_table() {
        let alphabet = [b'a', b',', b'"', b'\n', b'\r', b'|', b'b', b' '];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut parsed = 0;
        for _ in 0..20_000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (seed >> 58) as usize;
            let mut bytes = Vec::with_capacity(len);
            let mut x = seed;
            for _ in 0..len {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                bytes.push(alphabet[(x >> 61) as usize]);
            }
            for delim in [b',', b'|'] {
                if let Ok(t) = parse(&bytes, delim) {
                    parsed += 1;
                    assert!(t.rows.iter().all(|r| r.len() == t.header.len()));
                    let text = write(&t.header, &t.rows, delim);
                    assert_eq!(parse(text.as_bytes(), delim).as_ref(), Ok(&t), "{bytes:?}");
                }
            }
        }
        assert!(parsed > 1000, "{parsed}");
    }

    #[test]
    fn other_delimiters() {
        assert_eq!(delimiter("PIPE"), Some(b'|'));
        assert_eq!(delimiter("NOPE"), None);
        let t = parse(b"A|B\n1,5|2\n", b'|').unwrap();
        assert_eq!(t.rows, vec![s(&["1,5", "2"])]);
    }
}
