//! Strings that satisfy a JSON Schema `pattern` (with `minLength`/`maxLength`): a small
//! generator over `regex-syntax`'s HIR, seeded and deterministic (the same pattern and seed
//! always give the same string), for [`crate::author::generate`].
//!
//! Literals are copied; a class gives one of its characters (an ASCII letter or digit when
//! it has one, chosen by the seed); a repetition runs its minimum, plus extra rounds when the
//! string must be longer (`minLength`); an alternation takes a branch chosen by the seed;
//! anchors and word boundaries add nothing. The result is checked with the `regex` crate
//! (the same engine `check` validates with), so a pattern this cannot satisfy (a
//! lookaround the parser refuses, contradictory anchors) is an `Err` that says so, never a
//! wrong value.

use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A small deterministic generator (xorshift64*), seeded from text (FNV-1a).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn from_text(seed: &str) -> Rng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in seed.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Rng(h | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// At most this many characters in a generated string.
pub const MAX_LEN: usize = 4096;

/// A string matching `pattern` with `min..=max` characters (module doc).
pub fn string_for_pattern(
    pattern: &str,
    seed: &str,
    min: usize,
    max: Option<usize>,
) -> Result<String, String> {
    let parsed = parsed(pattern)?;
    let (hir, re) = (&parsed.0, &parsed.1);
    let max = max.unwrap_or(MAX_LEN).min(MAX_LEN);
    let mut budget = 0usize;
    let mut prev = usize::MAX;
    for _ in 0..12 {
        let mut out = String::new();
        let mut rng = Rng::from_text(seed);
        let mut left = budget;
        gen(hir, &mut rng, &mut left, &mut out, 0);
        let n = out.chars().count();
        if n > max {
            break;
        }
        if n >= min {
            if re.is_match(&out) {
                return Ok(out);
            }
            // A branch chosen by the seed may contradict an anchor: the first branches.
            let mut out = String::new();
            let mut left = budget;
            gen_first(hir, &mut left, &mut out, 0);
            if re.is_match(&out) && (min..=max).contains(&out.chars().count()) {
                return Ok(out);
            }
            return Err(format!(
                "`pattern` `{pattern}`: the generated `{}` does not match it (lookarounds, anchors inside the text?)",
                out.chars().take(40).collect::<String>()
            ));
        }
        if n == prev {
            // Repetitions cannot make it longer: pad (an unanchored pattern still matches).
            let padded = format!("{out}{}", "x".repeat(min - n));
            if padded.chars().count() <= max && re.is_match(&padded) {
                return Ok(padded);
            }
            break;
        }
        prev = n;
        budget = budget.max(1) * 2 + (min - n);
    }
    Err(format!(
        "`pattern` `{pattern}` together with minLength {min} / maxLength {max}: no string found"
    ))
}

/// A pattern parsed for generating (its HIR) and compiled for checking: once per distinct
/// pattern (a real document repeats a few id patterns across thousands of members, and
/// parsing and compiling were most of an import's time). Bounded: the cache is emptied when
/// it holds [`MAX_CACHED`] patterns.
fn parsed(pattern: &str) -> Parsed {
    static CACHE: OnceLock<Mutex<HashMap<String, Parsed>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(pattern) {
        return hit.clone();
    }
    let made = (|| {
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(pattern)
            .map_err(|e| {
                format!(
                    "`pattern` `{pattern}` is not a regular expression this generator reads: {}",
                    first_line(&e.to_string())
                )
            })?;
        let re = regex::Regex::new(pattern)
            .map_err(|e| format!("`pattern` `{pattern}`: {}", first_line(&e.to_string())))?;
        Ok(Arc::new((hir, re)))
    })();
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() >= MAX_CACHED {
        map.clear();
    }
    map.insert(pattern.to_string(), made.clone());
    made
}

/// A pattern's HIR and compiled regex, or why it has none.
type Parsed = Result<Arc<(Hir, regex::Regex)>, String>;

/// At most this many parsed patterns are kept ([`parsed`]).
const MAX_CACHED: usize = 1024;

fn first_line(s: &str) -> String {
    s.lines().last().unwrap_or("").trim().to_string()
}

fn gen(h: &Hir, rng: &mut Rng, extra: &mut usize, out: &mut String, depth: usize) {
    walk(h, &mut Some(rng), extra, out, depth);
}

fn gen_first(h: &Hir, extra: &mut usize, out: &mut String, depth: usize) {
    walk(h, &mut None, extra, out, depth);
}

fn walk(h: &Hir, rng: &mut Option<&mut Rng>, extra: &mut usize, out: &mut String, depth: usize) {
    if depth > 64 || out.len() > MAX_LEN {
        return;
    }
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => out.push_str(&String::from_utf8_lossy(&l.0)),
        HirKind::Class(c) => {
            if let Some(ch) = pick(c, rng) {
                out.push(ch);
            }
        }
        HirKind::Repetition(r) => {
            let room = r.max.map_or(u32::MAX, |m| m - r.min) as usize;
            let more = (*extra).min(room).min(MAX_LEN);
            *extra -= more;
            for _ in 0..(r.min as usize).saturating_add(more).min(MAX_LEN) {
                walk(&r.sub, rng, extra, out, depth + 1);
                if out.len() > MAX_LEN {
                    break;
                }
            }
        }
        HirKind::Capture(c) => walk(&c.sub, rng, extra, out, depth + 1),
        HirKind::Concat(hs) => {
            for x in hs {
                walk(x, rng, extra, out, depth + 1);
            }
        }
        HirKind::Alternation(hs) => {
            let i = match rng {
                Some(r) => r.below(hs.len()),
                None => 0,
            };
            walk(&hs[i], rng, extra, out, depth + 1);
        }
    }
}

/// One character of a class: an ASCII letter or digit it holds (chosen by the seed), else
/// its first printable character.
fn pick(c: &Class, rng: &mut Option<&mut Rng>) -> Option<char> {
    let ranges: Vec<(char, char)> = match c {
        Class::Unicode(u) => u.ranges().iter().map(|r| (r.start(), r.end())).collect(),
        Class::Bytes(b) => b
            .ranges()
            .iter()
            .filter(|r| r.start() < 0x80)
            .map(|r| (r.start() as char, (r.end().min(0x7f)) as char))
            .collect(),
    };
    let mut nice = Vec::new();
    for &(a, b) in &ranges {
        for ch in ('0'..='9').chain('A'..='Z').chain('a'..='z') {
            if a <= ch && ch <= b {
                nice.push(ch);
            }
        }
    }
    if !nice.is_empty() {
        let i = match rng {
            Some(r) => r.below(nice.len()),
            None => 0,
        };
        return Some(nice[i]);
    }
    ranges
        .iter()
        .find_map(|&(a, b)| (a..=b).find(|ch| !ch.is_control()))
        .or_else(|| ranges.first().map(|r| r.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twilio_sids_and_friends() {
        let sid = string_for_pattern("^AC[0-9a-fA-F]{32}$", "a", 34, Some(34)).unwrap();
        assert!(sid.starts_with("AC") && sid.len() == 34, "{sid}");
        // Deterministic per seed, different across seeds.
        assert_eq!(
            sid,
            string_for_pattern("^AC[0-9a-fA-F]{32}$", "a", 34, Some(34)).unwrap()
        );
        assert_ne!(
            sid,
            string_for_pattern("^AC[0-9a-fA-F]{32}$", "b", 34, Some(34)).unwrap()
        );
        for (p, min, max) in [
            ("^\\+[1-9]\\d{1,14}$", 0, None),
            ("^[a-z]+(-[a-z]+)*$", 12, Some(20)),
            ("(cat|dog)s?", 0, None),
            ("^\\d{4}-\\d{2}$", 7, Some(7)),
            ("[A-Z]", 5, None),
            ("^v[0-9]+\\.[0-9]+$", 0, None),
        ] {
            let s = string_for_pattern(p, "x", min, max).unwrap_or_else(|e| panic!("{p}: {e}"));
            assert!(regex::Regex::new(p).unwrap().is_match(&s), "{p}: {s}");
            assert!(
                s.chars().count() >= min && max.is_none_or(|m| s.chars().count() <= m),
                "{p}: {s}"
            );
        }
    }

    #[test]
    fn impossible_patterns_are_errors() {
        assert!(string_for_pattern("^a{5}$", "x", 0, Some(3)).is_err());
        assert!(string_for_pattern("(?=a)b", "x", 0, None).is_err());
        assert!(string_for_pattern("^a$b", "x", 0, None).is_err());
    }
}
