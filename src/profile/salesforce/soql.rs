//! The SOQL the default org answers (docs/src/guides/salesforce.md#the-default-org): one
//! object, a field list, an optional `WHERE` of `field = 'text'` / `field = number` /
//! `field != …` / `field LIKE 'a%'` comparisons joined by `AND`, an optional `ORDER BY field
//! [ASC|DESC]` and `LIMIT n`. Keywords are case-insensitive. Anything else (relationships,
//! aggregates, `OR`, subqueries) is refused with `MALFORMED_QUERY` naming what the default
//! org does not answer — an operation file for `query` answers such a query instead.

use serde_json::{Map, Value};

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Soql {
    pub fields: Vec<String>,
    pub object: String,
    pub filters: Vec<Filter>,
    pub order: Option<(String, bool)>,
    pub limit: Option<usize>,
}

/// One `WHERE` comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub field: String,
    pub op: Op,
    pub value: Value,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Eq,
    Ne,
    Like,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Text(String),
    Sym(String),
}

fn tokens(q: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut it = q.chars().peekable();
    while let Some(&c) = it.peek() {
        if c.is_whitespace() {
            it.next();
        } else if c == '\'' {
            it.next();
            let mut s = String::new();
            loop {
                match it.next() {
                    None => return Err("a quoted value is not closed".into()),
                    Some('\\') => match it.next() {
                        Some(e) => s.push(e),
                        None => return Err("a quoted value is not closed".into()),
                    },
                    Some('\'') => break,
                    Some(ch) => s.push(ch),
                }
            }
            out.push(Tok::Text(s));
        } else if c == ',' || c == '=' || c == '(' || c == ')' {
            it.next();
            out.push(Tok::Sym(c.to_string()));
        } else if c == '!' || c == '<' || c == '>' {
            it.next();
            let mut s = c.to_string();
            if it.peek() == Some(&'=') {
                it.next();
                s.push('=');
            }
            out.push(Tok::Sym(s));
        } else {
            let mut s = String::new();
            while let Some(&ch) = it.peek() {
                if ch.is_whitespace() || ",=()!<>'".contains(ch) {
                    break;
                }
                s.push(ch);
                it.next();
            }
            out.push(Tok::Word(s));
        }
    }
    Ok(out)
}

fn kw(t: Option<&Tok>, k: &str) -> bool {
    matches!(t, Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k))
}

fn name(t: Option<Tok>, what: &str) -> Result<String, String> {
    match t {
        Some(Tok::Word(w))
            if w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !w.is_empty() =>
        {
            Ok(w)
        }
        Some(Tok::Word(w)) if w.contains('.') => Err(format!(
            "`{w}`: relationship fields are not answered by the default org"
        )),
        other => Err(format!("expected {what}, found {}", show(other.as_ref()))),
    }
}

fn show(t: Option<&Tok>) -> String {
    match t {
        None => "the end of the query".into(),
        Some(Tok::Word(w)) => format!("`{w}`"),
        Some(Tok::Text(s)) => format!("'{s}'"),
        Some(Tok::Sym(s)) => format!("`{s}`"),
    }
}

/// Parse `q`; the error says what was expected.
pub fn parse(q: &str) -> Result<Soql, String> {
    let mut t = tokens(q)?.into_iter().peekable();
    if !kw(t.peek(), "select") {
        return Err(format!("expected SELECT, found {}", show(t.peek())));
    }
    t.next();
    let mut fields = Vec::new();
    loop {
        let f = name(t.next(), "a field name")?;
        if t.peek() == Some(&Tok::Sym("(".into())) {
            return Err(format!(
                "`{f}(…)`: functions and aggregates are not answered by the default org"
            ));
        }
        fields.push(f);
        if t.peek() == Some(&Tok::Sym(",".into())) {
            t.next();
            continue;
        }
        break;
    }
    if !kw(t.peek(), "from") {
        return Err(format!("expected FROM, found {}", show(t.peek())));
    }
    t.next();
    let object = name(t.next(), "an object name")?;
    let mut filters = Vec::new();
    if kw(t.peek(), "where") {
        t.next();
        loop {
            let field = name(t.next(), "a field name")?;
            let op = match t.next() {
                Some(Tok::Sym(s)) if s == "=" => Op::Eq,
                Some(Tok::Sym(s)) if s == "!=" => Op::Ne,
                Some(Tok::Word(w)) if w.eq_ignore_ascii_case("like") => Op::Like,
                other => {
                    return Err(format!(
                        "expected `=`, `!=` or LIKE after `{field}` (the default org answers only these), found {}",
                        show(other.as_ref())
                    ))
                }
            };
            let value = match t.next() {
                Some(Tok::Text(s)) => Value::String(s),
                Some(Tok::Word(w)) if w.eq_ignore_ascii_case("null") => Value::Null,
                Some(Tok::Word(w)) if w.eq_ignore_ascii_case("true") => Value::Bool(true),
                Some(Tok::Word(w)) if w.eq_ignore_ascii_case("false") => Value::Bool(false),
                Some(Tok::Word(w)) => match w.parse::<f64>() {
                    Ok(n) => serde_json::Number::from_f64(n)
                        .map(Value::Number)
                        .unwrap_or(Value::Null),
                    Err(_) => return Err(format!("expected a value, found `{w}`")),
                },
                other => return Err(format!("expected a value, found {}", show(other.as_ref()))),
            };
            filters.push(Filter { field, op, value });
            if kw(t.peek(), "and") {
                t.next();
                continue;
            }
            if kw(t.peek(), "or") {
                return Err("OR is not answered by the default org (only AND)".into());
            }
            break;
        }
    }
    let mut order = None;
    if kw(t.peek(), "order") {
        t.next();
        if !kw(t.peek(), "by") {
            return Err(format!("expected BY after ORDER, found {}", show(t.peek())));
        }
        t.next();
        let f = name(t.next(), "a field name")?;
        let mut asc = true;
        if kw(t.peek(), "asc") {
            t.next();
        } else if kw(t.peek(), "desc") {
            t.next();
            asc = false;
        }
        order = Some((f, asc));
    }
    let mut limit = None;
    if kw(t.peek(), "limit") {
        t.next();
        match t.next() {
            Some(Tok::Word(w)) => match w.parse::<usize>() {
                Ok(n) => limit = Some(n),
                Err(_) => return Err(format!("expected a number after LIMIT, found `{w}`")),
            },
            other => {
                return Err(format!(
                    "expected a number after LIMIT, found {}",
                    show(other.as_ref())
                ))
            }
        }
    }
    if let Some(rest) = t.next() {
        return Err(format!(
            "unexpected {} (the default org answers SELECT … FROM … [WHERE … AND …] [ORDER BY …] [LIMIT n])",
            show(Some(&rest))
        ));
    }
    Ok(Soql {
        fields,
        object,
        filters,
        order,
        limit,
    })
}

fn field<'a>(rec: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    rec.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

fn same(a: Option<&Value>, b: &Value) -> bool {
    match (a, b) {
        (None | Some(Value::Null), Value::Null) => true,
        (Some(Value::String(x)), Value::String(y)) => x == y,
        (Some(Value::String(x)), Value::Number(n)) => x.parse::<f64>().ok() == n.as_f64(),
        (Some(Value::Number(x)), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Some(Value::String(x)), Value::Bool(y)) => x.eq_ignore_ascii_case(&y.to_string()),
        (Some(x), y) => x == y,
        _ => false,
    }
}

/// `LIKE`: `%` any run of characters, `_` one character; case-insensitive as Salesforce's.
fn like(text: &str, pattern: &str) -> bool {
    let t: Vec<char> = text.to_lowercase().chars().collect();
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let (mut ti, mut pi, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '_' || p[pi] == t[ti]) {
            ti += 1;
            pi += 1;
        } else if pi < p.len() && p[pi] == '%' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '%' {
        pi += 1;
    }
    pi == p.len()
}

impl Soql {
    /// Whether `rec` passes every filter.
    pub fn matches(&self, rec: &Map<String, Value>) -> bool {
        self.filters.iter().all(|f| {
            let v = field(rec, &f.field);
            match f.op {
                Op::Eq => same(v, &f.value),
                Op::Ne => !same(v, &f.value),
                Op::Like => match (v, &f.value) {
                    (Some(Value::String(s)), Value::String(p)) => like(s, p),
                    _ => false,
                },
            }
        })
    }

    /// The records of `all` this query selects, ordered and limited, each projected to the
    /// query's fields (`attributes` first, as Salesforce answers).
    pub fn run(&self, all: &[Map<String, Value>], version: &str) -> Vec<Map<String, Value>> {
        let mut hits: Vec<&Map<String, Value>> = all.iter().filter(|r| self.matches(r)).collect();
        if let Some((f, asc)) = &self.order {
            hits.sort_by(|a, b| {
                let key = |r: &Map<String, Value>| match field(r, f) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(v) => v.to_string(),
                };
                let o = key(a).cmp(&key(b));
                if *asc {
                    o
                } else {
                    o.reverse()
                }
            });
        }
        if let Some(n) = self.limit {
            hits.truncate(n);
        }
        hits.into_iter().map(|r| self.project(r, version)).collect()
    }

    fn project(&self, r: &Map<String, Value>, version: &str) -> Map<String, Value> {
        let id = field(r, "Id").and_then(Value::as_str).unwrap_or_default();
        let mut out = Map::new();
        out.insert(
            "attributes".into(),
            serde_json::json!({
                "type": self.object,
                "url": format!("/services/data/v{version}/sobjects/{}/{id}", self.object),
            }),
        );
        for f in &self.fields {
            out.insert(f.clone(), field(r, f).cloned().unwrap_or(Value::Null));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_what_the_default_org_answers() {
        let q = parse("SELECT Id, LastName FROM Contact WHERE LastName LIKE 'Lo%' AND Phone != null ORDER BY LastName DESC LIMIT 5").unwrap();
        assert_eq!(q.fields, vec!["Id", "LastName"]);
        assert_eq!(q.object, "Contact");
        assert_eq!(q.filters.len(), 2);
        assert_eq!(q.order, Some(("LastName".into(), false)));
        assert_eq!(q.limit, Some(5));
        let rec = |id: &str, n: &str| {
            json!({"Id": id, "LastName": n, "Phone": "1"})
                .as_object()
                .unwrap()
                .clone()
        };
        let rows = q.run(
            &[rec("1", "Lovelace"), rec("2", "Hopper"), rec("3", "Lowe")],
            "59.0",
        );
        let names: Vec<_> = rows.iter().map(|r| r["LastName"].clone()).collect();
        assert_eq!(names, vec![json!("Lowe"), json!("Lovelace")]);
        assert_eq!(
            rows[0]["attributes"]["url"],
            "/services/data/v59.0/sobjects/Contact/3"
        );
    }

    #[test]
    fn refuses_what_it_does_not_answer() {
        for (q, want) in [
            ("SELECT COUNT() FROM Contact", "aggregates"),
            ("SELECT Account.Name FROM Contact", "relationship"),
            ("SELECT Id FROM Contact WHERE A = '1' OR B = '2'", "OR"),
            ("SELECT Id FROM Contact WHERE A > 1", "expected `=`"),
            ("DELETE FROM Contact", "expected SELECT"),
            ("SELECT Id FROM Contact LIMIT x", "LIMIT"),
            ("SELECT Id FROM Contact WHERE A = 'x", "not closed"),
        ] {
            let e = parse(q).unwrap_err();
            assert!(e.contains(want), "{q}: {e}");
        }
    }
}
