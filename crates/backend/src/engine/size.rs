//! Byte sizes on the command line: `1073741824`, `10Gi`, `512Mi`, `1G`, `4k`.

/// Parses a size with an optional binary (`Ki`..`Ti`) or decimal (`k`/`K`..`T`) suffix.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (expected e.g. 10Gi or 1073741824)"))?;
    let mult: u64 = match suffix {
        "" => 1,
        "k" | "K" => 1000,
        "M" => 1000u64.pow(2),
        "G" => 1000u64.pow(3),
        "T" => 1000u64.pow(4),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        other => return Err(format!("unknown size suffix {other:?} in {text:?}")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {text:?} does not fit in 64 bits"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        let cases = [
            ("0", Some(0)),
            ("1024", Some(1024)),
            ("4k", Some(4000)),
            ("10Gi", Some(10 << 30)),
            ("512Mi", Some(512 << 20)),
            ("1G", Some(1_000_000_000)),
            ("2Ti", Some(2 << 40)),
            ("", None),
            ("Gi", None),
            ("10Xi", None),
            ("-1", None),
            ("99999999999Ti", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text).ok(), want, "{text:?}");
        }
    }
}
