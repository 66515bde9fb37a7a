use super::*;
use std::collections::BTreeMap;

fn spec(method: &str, path: &str, query: &[(&str, &str)], headers: &[(&str, &str)]) -> MatchSpec {
    MatchSpec {
        method: method.into(),
        path: path.into(),
        query: query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        body: None,
    }
}

fn run(
    m: &CompiledMatch,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
) -> Result<Map<String, Value>, Mismatch> {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let segments = path_segments(path);
    let query = parse_query(query);
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    m.matches(&RequestView {
        method,
        segments: &segments,
        query: &query,
        headers: &h,
    })
}

const SOQL: &str = "SELECT Id, FirstName FROM Contact WHERE Phone = '{phone}'";

#[test]
fn soql_capture_with_whitespace_and_encodings() {
    let m = CompiledMatch::compile(&spec("GET", "/services/data/*/query", &[("q", SOQL)], &[]))
        .unwrap();
    for url in [
            "/services/data/v59.0/query?q=SELECT+Id,+FirstName+FROM+Contact+WHERE+Phone+=+'%2B1+555+0100'",
            "/services/data/v59.0/query/?q=SELECT%20Id,%20%20FirstName%0AFROM%20Contact%20WHERE%20Phone%20=%20'%2B1%20555%200100'",
        ] {
            let caps = run(&m, "GET", url, &[]).unwrap();
            assert_eq!(caps["phone"], Value::String("+1 555 0100".into()), "{url}");
        }
    let e = run(
        &m,
        "GET",
        "/services/data/v59.0/query?q=SELECT+Id+FROM+Account",
        &[],
    )
    .unwrap_err();
    assert!(e.what.starts_with("query `q`: expected"), "{}", e.what);
    let e = run(&m, "GET", "/services/data/v59.0/query", &[]).unwrap_err();
    assert_eq!(e.what, format!("query `q`: missing, expected `{SOQL}`"));
}

#[test]
fn capture_backtracks_to_a_later_literal() {
    let t = ValueTemplate::parse("name = '{n}'").unwrap();
    assert_eq!(
        t.matches("name = 'O'Brien'").unwrap(),
        vec![("n".to_string(), "O'Brien".to_string())]
    );
    assert_eq!(
        t.matches("name = ''").unwrap(),
        vec![("n".to_string(), String::new())]
    );
    assert!(t.matches("name = 'x").is_none());
    let t = ValueTemplate::parse("{a}-{b}").unwrap();
    assert_eq!(
        t.matches("x-y-z").unwrap(),
        vec![
            ("a".to_string(), "x".to_string()),
            ("b".to_string(), "y-z".to_string())
        ]
    );
    let t = ValueTemplate::parse("{{literal}} {x}").unwrap();
    assert!(t.matches("{literal} 5").is_some());
    assert!(ValueTemplate::parse("{a}{b}").is_err());
    assert!(ValueTemplate::parse("x = {phone").is_err());
    assert!(ValueTemplate::parse(r#"{"a":1}"#).unwrap().is_literal());
}

#[test]
fn path_segments_captures_and_trailing_slash() {
    let m = CompiledMatch::compile(&spec(
        "get",
        "/services/data/*/sobjects/Contact/{id}",
        &[],
        &[],
    ))
    .unwrap();
    assert_eq!(m.method(), "GET");
    let caps = run(
        &m,
        "GET",
        "/services/data/v59.0/sobjects/Contact/003000000000001AAA/",
        &[],
    )
    .unwrap();
    assert_eq!(caps["id"], "003000000000001AAA");
    let e = run(&m, "POST", "/services/data/v59.0/sobjects/Contact/1", &[]).unwrap_err();
    assert_eq!(e.what, "method: expected GET, got POST");
    assert_eq!(e.score, 0);
    let e = run(&m, "GET", "/services/data/v59.0/query/Contact/1", &[]).unwrap_err();
    assert!(
        e.what
            .starts_with("path segment 4: expected `sobjects`, got `query`"),
        "{}",
        e.what
    );
    assert_eq!(e.score, 4);
    let e = run(&m, "GET", "/services/data/v59.0/sobjects/Contact", &[]).unwrap_err();
    assert!(
        e.what.starts_with("path: expected 6 segments"),
        "{}",
        e.what
    );
}

#[test]
fn headers_are_case_insensitive_literals() {
    let m = CompiledMatch::compile(&spec("POST", "/x", &[], &[("X-Tenant", "acme")])).unwrap();
    assert!(run(&m, "POST", "/x", &[("x-tenant", " acme ")]).is_ok());
    let e = run(&m, "POST", "/x", &[("x-tenant", "other")]).unwrap_err();
    assert_eq!(e.what, "header `x-tenant`: expected `acme`, got `other`");
    let e = run(&m, "POST", "/x", &[]).unwrap_err();
    assert_eq!(e.what, "header `x-tenant`: missing, expected `acme`");
}

#[test]
fn compile_errors() {
    for (path, want) in [
        ("services/x", "must start with `/`"),
        ("/a/v*", "must be a whole segment"),
        ("/a/{x}{y}.json", "no literal text between"),
        ("/a/{id}.json/{id}", "used twice"),
        ("/a/{1x}", "capture name"),
        ("/a/{id}/{id}", "used twice"),
    ] {
        let e = CompiledMatch::compile(&spec("GET", path, &[], &[])).unwrap_err();
        assert!(e.contains(want), "{path}: {e}");
    }
    let e =
        CompiledMatch::compile(&spec("GET", "/a/{id}", &[("q", "x = '{id}'")], &[])).unwrap_err();
    assert!(e.contains("used twice"), "{e}");
    assert!(CompiledMatch::compile(&spec("G T", "/a", &[], &[])).is_err());
    assert!(CompiledMatch::compile(&spec("GET", "/a", &[], &[("bad header", "x")])).is_err());
}

#[test]
fn specificity_and_ties() {
    let c =
        |m: &str, p: &str, q: &[(&str, &str)]| CompiledMatch::compile(&spec(m, p, q, &[])).unwrap();
    let by_id = c("GET", "/sobjects/Contact/{id}", &[]);
    let describe = c("GET", "/sobjects/Contact/describe", &[]);
    assert_eq!(by_id.specificity(), (2, 0, 0));
    assert_eq!(describe.specificity(), (3, 0, 0));
    assert!(by_id.may_overlap(&describe));
    assert!(!by_id.ties_with(&describe));
    assert!(by_id.ties_with(&c("GET", "/sobjects/Contact/*", &[])));
    assert!(!by_id.ties_with(&c("PATCH", "/sobjects/Contact/{id}", &[])));
    assert!(!by_id.ties_with(&c("GET", "/sobjects/Account/{id}", &[])));
    let q1 = c(
        "GET",
        "/query",
        &[("q", "SELECT Id FROM Contact WHERE Phone = '{p}'")],
    );
    let q2 = c(
        "GET",
        "/query",
        &[("q", "SELECT Id FROM Account WHERE Phone = '{p}'")],
    );
    let q3 = c(
        "GET",
        "/query",
        &[("q", "SELECT  Id FROM Contact WHERE Phone = '{phone}'")],
    );
    assert!(!q1.ties_with(&q2));
    assert!(q1.ties_with(&q3));
    let lit = c(
        "GET",
        "/query",
        &[("q", "SELECT Id FROM Contact WHERE Phone = '1'")],
    );
    assert!(lit.may_overlap(&q1));
    assert!(!lit.may_overlap(&q2));
}

#[test]
fn query_parsing() {
    assert_eq!(
        parse_query("a=1+2&b=%41%zz&c&=x"),
        vec![
            ("a".into(), "1 2".into()),
            ("b".into(), "A%zz".into()),
            ("c".into(), String::new()),
            (String::new(), "x".into())
        ]
    );
    assert_eq!(
        path_segments("/a%20b//c/"),
        vec!["a b".to_string(), "c".to_string()]
    );
    assert_eq!(path_segments("/a%2"), vec!["a%2".to_string()]);
}

#[test]
fn find_ties_is_the_all_pairs_loop() {
    let mut specs = Vec::new();
    for method in ["GET", "post"] {
        for len in 1..=3u32 {
            for code in 0..4usize.pow(len) {
                let mut path = String::new();
                let mut c = code;
                for p in 0..len {
                    path.push('/');
                    match c % 4 {
                        0 => path.push('a'),
                        1 => path.push('b'),
                        2 => path.push_str(&format!("{{x{p}}}")),
                        _ => path.push('*'),
                    }
                    c /= 4;
                }
                for query in [&[][..], &[("q", "1")][..], &[("q", "{v}")][..]] {
                    specs.push(spec(method, &path, query, &[]));
                }
            }
        }
    }
    let compiled: Vec<CompiledMatch> = specs
        .iter()
        .map(|s| CompiledMatch::compile(s).unwrap())
        .collect();
    let refs: Vec<&CompiledMatch> = compiled.iter().collect();
    let mut expected = Vec::new();
    for j in 0..refs.len() {
        for i in 0..j {
            if refs[i].ties_with(refs[j]) {
                expected.push((i, j));
            }
        }
    }
    assert!(!expected.is_empty());
    assert_eq!(find_ties(&refs), expected);
}

#[test]
fn literals_around_a_capture_inside_one_segment() {
    let c = |p: &str| CompiledMatch::compile(&spec("GET", p, &[], &[])).unwrap();
    let json = c("/Accounts/{Sid}.json");
    let bare = c("/Accounts/{Sid}");
    let list = c("/Accounts.json");
    let v = c("/api/v{version}/items");
    let archive = c("/things/{name}:archive");
    let caps = run(&json, "GET", "/Accounts/AC123.json", &[]).unwrap();
    assert_eq!(caps["Sid"], "AC123");
    assert!(run(&json, "GET", "/Accounts/AC123", &[])
        .unwrap_err()
        .what
        .contains("expected `{Sid}.json`"));
    // A capture is never empty.
    assert!(run(&json, "GET", "/Accounts/.json", &[]).is_err());
    assert_eq!(
        run(&v, "GET", "/api/v2/items", &[]).unwrap()["version"],
        "2"
    );
    assert!(run(&v, "GET", "/api/2/items", &[]).is_err());
    assert_eq!(
        run(&archive, "GET", "/things/box:archive", &[]).unwrap()["name"],
        "box"
    );
    // The more literal template wins, and they do not tie.
    assert!(json.specificity() > bare.specificity());
    assert!(json.may_overlap(&bare) && !json.ties_with(&bare));
    assert!(!list.may_overlap(&c("/{x}.xml")));
    assert!(list.may_overlap(&c("/{x}.json")));
    assert_eq!(json.capture_names(), vec!["Sid"]);
    // Two segments with text around captures that can hold the same text tie.
    assert!(c("/a/{x}.json").ties_with(&c("/a/{y}.json")));
    assert!(!c("/a/{x}.json").ties_with(&c("/a/{y}.xml")));
}
