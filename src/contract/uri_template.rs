//! RFC 6570 level-1 URI templates (`{var}` expressions only), as MCP resource templates use
//! them: parse ([`template_pieces`], [`template_vars`]), match a URI against one
//! ([`match_template`]), and the absolute-URI rule ([`is_absolute_uri`]).

use serde_json::{Map, Value};

/// `scheme:rest` with an RFC 3986 scheme and no whitespace.
pub fn is_absolute_uri(u: &str) -> bool {
    let Some((scheme, rest)) = u.split_once(':') else {
        return false;
    };
    let mut c = scheme.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic())
        && c.all(|ch| ch.is_ascii_alphanumeric() || "+.-".contains(ch))
        && !rest.is_empty()
        && !u.chars().any(|ch| ch.is_whitespace() || ch.is_control())
}

/// One piece of a level-1 URI template.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Literal(String),
    Var(String),
}

/// Split an RFC 6570 level-1 template (`{var}` only) into pieces.
pub fn template_pieces(t: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err(format!("`{t}`: an unmatched `}}`"));
        }
        if open > 0 {
            out.push(Piece::Literal(rest[..open].to_string()));
        }
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(format!("`{t}`: an unclosed `{{`"));
        };
        let name = &after[..close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "`{t}`: `{{{name}}}` is not a level-1 expression (only `{{name}}` with letters, digits and `_`)"
            ));
        }
        if matches!(out.last(), Some(Piece::Var(_))) {
            return Err(format!(
                "`{t}`: two variables must be separated by a literal"
            ));
        }
        out.push(Piece::Var(name.to_string()));
        rest = &after[close + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Literal(rest.to_string()));
    }
    Ok(out)
}

/// The variables of a level-1 template, in order, each once; a template must be an absolute
/// URI once expanded and have at least one variable.
pub fn template_vars(t: &str) -> Result<Vec<String>, String> {
    let pieces = template_pieces(t)?;
    let mut vars = Vec::new();
    for p in &pieces {
        if let Piece::Var(v) = p {
            if vars.contains(v) {
                return Err(format!("`{t}`: variable `{v}` appears twice"));
            }
            vars.push(v.clone());
        }
    }
    if vars.is_empty() {
        return Err(format!(
            "`{t}` has no `{{variable}}`: use `uri` for a fixed resource"
        ));
    }
    if !is_absolute_uri(&t.replace(['{', '}'], "")) {
        return Err(format!("`{t}` does not expand to an absolute URI"));
    }
    Ok(vars)
}

/// Match `uri` against a level-1 template: the variables' values (percent-decoded), or `None`.
/// A value is never empty and never contains `/`, `?` or `#` (level-1 expansion encodes them).
pub fn match_template(t: &str, uri: &str) -> Option<Map<String, Value>> {
    let pieces = template_pieces(t).ok()?;
    let mut vars = Map::new();
    let mut rest = uri;
    for (i, p) in pieces.iter().enumerate() {
        match p {
            Piece::Literal(l) => rest = rest.strip_prefix(l.as_str())?,
            Piece::Var(name) => {
                let end = match pieces.get(i + 1) {
                    Some(Piece::Literal(l)) => rest.find(l.as_str())?,
                    _ => rest.len(),
                };
                let raw = &rest[..end];
                if raw.is_empty() || raw.contains(['/', '?', '#']) {
                    return None;
                }
                vars.insert(name.clone(), Value::String(percent_decode(raw)?));
                rest = &rest[end..];
            }
        }
    }
    rest.is_empty().then_some(vars)
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_one_templates_parse_and_match() {
        assert_eq!(template_vars("test://template/{id}/data").unwrap(), ["id"]);
        assert!(template_vars("test://x/{+id}").is_err());
        assert!(template_vars("test://x/{id").is_err());
        assert!(template_vars("test://x/}").is_err());
        assert!(template_vars("test://x").is_err());
        assert!(template_vars("test://{a}{b}").is_err());
        assert!(template_vars("test://{a}/{a}").is_err());
        let m = match_template("test://template/{id}/data", "test://template/123/data").unwrap();
        assert_eq!(m["id"], "123");
        let m = match_template("file:///{dir}/{name}", "file:///a/b%20c").unwrap();
        assert_eq!(m["name"], "b c");
        assert!(match_template("test://template/{id}/data", "test://template/1/2/data").is_none());
        assert!(match_template("test://template/{id}/data", "test://template//data").is_none());
        assert!(match_template("test://t/{id}", "test://u/1").is_none());
    }

    #[test]
    fn absolute_uris() {
        assert!(is_absolute_uri("test://static-text"));
        assert!(is_absolute_uri("file:///a.txt"));
        assert!(!is_absolute_uri("static-text"));
        assert!(!is_absolute_uri("1x://a"));
        assert!(!is_absolute_uri("test://a b"));
    }
}
