//! The book in `docs/` checked against the product: the command-line reference is rendered
//! from the clap definitions (`understudy::cli::Cli`) and must equal
//! `docs/src/reference/cli.md`; every command block of *Getting started* and the guides
//! marked runnable (a fenced block whose info string is `sh,runnable`) is run against the
//! bundled examples with the debug binary the tests built.
//!
//! Regenerate the command-line reference after changing `src/cli.rs`:
//!
//! ```sh
//! UPDATE_DOCS=1 cargo test --test it cli_reference
//! ```

use clap::CommandFactory;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------------------------
// The command-line reference.

/// Markdown for the whole command line, from clap's own model of it.
pub fn render_cli_reference() -> String {
    let mut root = understudy::cli::Cli::command();
    root.build();
    let mut out = String::new();
    out.push_str(
        "<!-- Generated from src/cli.rs by tests/it/docs.rs: do not edit by hand.\n     \
         Regenerate with: UPDATE_DOCS=1 cargo test --test it cli_reference -->\n\n",
    );
    out.push_str("# Command line\n\n");
    if let Some(about) = root.get_about() {
        let _ = writeln!(out, "{about}\n");
    }
    out.push_str(
        "Every subcommand, its arguments and its defaults, as the binary itself parses them. \
         Exit codes are listed on the [exit codes](exit-codes.md) page; \
         `understudy help COMMAND` prints the same text in a terminal.\n\n",
    );
    out.push_str("| command | does |\n|---|---|\n");
    let mut all = Vec::new();
    collect(&root, &mut all);
    for (path, cmd) in &all {
        let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
        let _ = writeln!(
            out,
            "| [`{path}`](#{}) | {} |",
            anchor(path),
            one_line(&about)
        );
    }
    out.push('\n');
    for (path, cmd) in &all {
        render_command(&mut out, path, cmd);
    }
    out
}

/// Every leaf and inner subcommand, depth first, with its full name (`understudy ca init`).
fn collect(cmd: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
    let name = cmd
        .get_bin_name()
        .map(str::to_owned)
        .unwrap_or_else(|| cmd.get_name().to_owned());
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let path = format!("{name} {}", sub.get_name());
        let mut sub = sub.clone();
        sub = sub.bin_name(path.clone());
        out.push((path, sub.clone()));
        collect(&sub, out);
    }
}

fn anchor(path: &str) -> String {
    path.to_lowercase().replace(' ', "-")
}

/// Help text as one table-safe line: whitespace collapsed, `|` escaped, and `<`, `>`, `&`
/// outside code spans written as entities (`<report dir>` is not an HTML tag).
fn one_line(s: &str) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(joined.len());
    let mut in_code = false;
    for c in joined.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '|' => out.push_str("\\|"),
            '<' if !in_code => out.push_str("&lt;"),
            '>' if !in_code => out.push_str("&gt;"),
            '&' if !in_code => out.push_str("&amp;"),
            _ => out.push(c),
        }
    }
    out
}

fn render_command(out: &mut String, path: &str, cmd: &clap::Command) {
    let _ = writeln!(out, "## `{path}`\n");
    let about = cmd
        .get_long_about()
        .or_else(|| cmd.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    if !about.is_empty() {
        let _ = writeln!(out, "{}\n", about.trim());
    }
    let mut usage_cmd = cmd.clone();
    let usage = usage_cmd.render_usage().to_string();
    let usage = usage.trim_start_matches("Usage:").trim();
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if args.is_empty() {
        if cmd.has_subcommands() {
            out.push_str("Subcommands:");
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                let _ = write!(
                    out,
                    " [`{0} {1}`](#{2})",
                    path,
                    sub.get_name(),
                    anchor(&format!("{path} {}", sub.get_name()))
                );
            }
            out.push_str("\n\n");
        }
        return;
    }
    out.push_str("| argument | meaning |\n|---|---|\n");
    for a in args {
        let _ = writeln!(out, "| {} | {} |", arg_spelling(a), arg_meaning(a));
    }
    out.push('\n');
}

/// The argument as typed, in a code span; `|` escaped so the table cell stays one cell.
fn arg_spelling(a: &clap::Arg) -> String {
    arg_spelling_raw(a).replace('|', "\\|")
}

fn arg_spelling_raw(a: &clap::Arg) -> String {
    let value = a
        .get_value_names()
        .map(|v| {
            v.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
    let takes_value = a.get_action().takes_values();
    let mut s = match (a.get_long(), a.get_short()) {
        (Some(l), Some(c)) => format!("`-{c}`, `--{l}`"),
        (Some(l), None) => format!("`--{l}`"),
        (None, Some(c)) => format!("`-{c}`"),
        (None, None) => {
            let v = if a.is_last_set() {
                format!("-- {value}…")
            } else if matches!(a.get_num_args(), Some(r) if r.max_values() > 1) {
                format!("{value}…")
            } else {
                value.clone()
            };
            return format!("`{v}`");
        }
    };
    if takes_value && (a.get_long().is_some() || a.get_short().is_some()) {
        s.pop();
        let shown = if a.get_possible_values().is_empty() {
            value
        } else {
            a.get_possible_values()
                .iter()
                .filter(|p| !p.is_hide_set())
                .map(|p| p.get_name().to_owned())
                .collect::<Vec<_>>()
                .join("|")
        };
        let _ = write!(s, " {shown}`");
    }
    s
}

fn arg_meaning(a: &clap::Arg) -> String {
    let mut parts = Vec::new();
    let help = a
        .get_long_help()
        .or_else(|| a.get_help())
        .map(|h| one_line(&h.to_string()))
        .unwrap_or_default();
    if !help.is_empty() {
        // clap drops the final period of a one-line help; the cell goes on with more sentences
        let ends = help.ends_with(['.', ')', ':', '!', '?']) || help.ends_with(".)");
        parts.push(if ends { help } else { format!("{help}.") });
    }
    if a.is_required_set() {
        parts.push("Required.".to_owned());
    }
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    let is_flag = matches!(
        a.get_action(),
        clap::ArgAction::SetTrue | clap::ArgAction::SetFalse
    );
    if !defaults.is_empty() && !is_flag {
        parts.push(format!("Default: `{}`.", defaults.join(" ")));
    }
    if matches!(a.get_action(), clap::ArgAction::Append) {
        parts.push("Repeatable.".to_owned());
    }
    parts.join(" ")
}

#[test]
fn cli_reference() {
    let path = repo().join("docs/src/reference/cli.md");
    let rendered = render_cli_reference();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &rendered).expect("write docs/src/reference/cli.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != rendered {
        let line = committed
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .map(|i| i + 1)
            .unwrap_or_else(|| committed.lines().count().min(rendered.lines().count()) + 1);
        panic!(
            "docs/src/reference/cli.md differs from the clap definitions in src/cli.rs (first \
             difference at line {line}). Regenerate it: UPDATE_DOCS=1 cargo test --test it cli_reference"
        );
    }
}

#[test]
fn cli_reference_lists_every_subcommand_and_flag() {
    // The renderer itself can fail: every subcommand and every long flag of the clap model
    // appears in what it renders.
    let md = render_cli_reference();
    let root = understudy::cli::Cli::command();
    let mut n = 0;
    for sub in root.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        assert!(
            md.contains(&format!("## `understudy {}`", sub.get_name())),
            "{}",
            sub.get_name()
        );
        for a in sub.get_arguments() {
            if let Some(l) = a.get_long() {
                if l != "help" {
                    assert!(
                        md.contains(&format!("`--{l}")),
                        "--{l} of {}",
                        sub.get_name()
                    );
                    n += 1;
                }
            }
        }
    }
    assert!(n > 50, "only {n} flags found: the renderer lost some");
    assert!(md.contains("## `understudy ca init`"));
}

// ---------------------------------------------------------------------------------------------
// Runnable command blocks.

/// Pages whose runnable blocks are run, how many blocks each must have at least (a marker
/// lost by an edit must not turn into a silent pass), and what they need besides the binary
/// (`curl` and `python3` always; `py:MODULE` a Python module).
const RUNNABLE_PAGES: &[(&str, usize, &[&str])] = &[
    ("getting-started/install.md", 1, &[]),
    ("getting-started/example.md", 4, &[]),
    ("getting-started/first-mock.md", 4, &[]),
    ("getting-started/first-test.md", 3, &[]),
    ("getting-started/report.md", 4, &[]),
    ("guides/salesforce.md", 2, &["py:simple_salesforce"]),
    ("guides/mcp-http.md", 2, &[]),
    ("guides/record.md", 2, &[]),
    ("guides/import-drift.md", 2, &[]),
    ("guides/faults.md", 2, &[]),
];

/// One runnable block: its page, its first line in the page, its text.
#[derive(Debug, Clone)]
pub struct Block {
    pub page: String,
    pub line: usize,
    pub text: String,
}

/// The fenced blocks with info string `sh,runnable` of one markdown text.
pub fn runnable_blocks(page: &str, markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let t = line.trim_start();
        if !t.starts_with("```") {
            continue;
        }
        let fence_len = t.chars().take_while(|c| *c == '`').count();
        let info = t[fence_len..].trim();
        let runnable = info.split(',').map(str::trim).any(|w| w == "runnable");
        let mut text = String::new();
        for (_, l) in lines.by_ref() {
            let lt = l.trim_start();
            if lt.starts_with(&"`".repeat(fence_len)) && lt.trim_matches('`').is_empty() {
                break;
            }
            text.push_str(l);
            text.push('\n');
        }
        if runnable {
            blocks.push(Block {
                page: page.to_owned(),
                line: i + 1,
                text,
            });
        }
    }
    blocks
}

/// A bash script that runs the blocks in order and stops at the first command whose exit
/// status is not the one expected: 0, or `N` when the command's line ends with `# exit N`.
/// Lines ending in `&` start a background job (not checked; killed at the end). Commands are
/// logical lines (a trailing `\` continues one).
pub fn script_for(blocks: &[Block]) -> String {
    let mut s = String::from(
        "set -u\nset -o pipefail\n__fail() { echo \"runnable block failed: $1\" >&2; exit 1; }\n",
    );
    for b in blocks {
        let mut logical = String::new();
        let mut first_line = b.line + 1;
        let mut heredoc: Option<String> = None;
        let mut heredoc_done = false;
        for (k, line) in b.text.lines().enumerate() {
            if let Some(end) = &heredoc {
                // The body of a here-document belongs to the command that opened it.
                logical.push('\n');
                logical.push_str(line);
                if line.trim() == end {
                    heredoc = None;
                    heredoc_done = true;
                } else {
                    continue;
                }
            } else {
                if logical.is_empty() {
                    first_line = b.line + 1 + k;
                }
                if let Some(end) = heredoc_delimiter(line) {
                    logical.push_str(line);
                    heredoc = Some(end);
                    continue;
                }
            }
            if heredoc_done {
                // a here-document just ended: the command is complete
                heredoc_done = false;
                let cmd = std::mem::take(&mut logical);
                let _ = writeln!(
                    s,
                    "{cmd}\n__rc=$?; [ \"$__rc\" -eq 0 ] || __fail '{}:{}: here-document (exit '\"$__rc\"', expected 0)'",
                    b.page, first_line
                );
                continue;
            }
            if let Some(stripped) = line.strip_suffix('\\') {
                logical.push_str(stripped);
                logical.push(' ');
                continue;
            }
            logical.push_str(line);
            if quote_open(&logical) {
                // a quoted argument goes on over the next line
                logical.push('\n');
                continue;
            }
            let cmd = std::mem::take(&mut logical);
            let trimmed = cmd.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let (body, expect) = split_expected_exit(trimmed);
            let where_ = format!("{}:{}: {}", b.page, first_line, body.replace('\'', "'\\''"));
            if body.ends_with('&') {
                let _ = writeln!(s, "{body}");
            } else {
                let _ = writeln!(
                    s,
                    "{body}\n__rc=$?; [ \"$__rc\" -eq {expect} ] || __fail '{where_} (exit '\"$__rc\"', expected {expect})'"
                );
            }
        }
    }
    s.push_str("exit 0\n");
    s
}

/// Whether a shell command line ends inside a single- or double-quoted string.
fn quote_open(cmd: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut prev = ' ';
    for c in cmd.chars() {
        let word_start = prev.is_whitespace();
        prev = c;
        match quote {
            None if escaped => escaped = false,
            None if c == '\\' => escaped = true,
            None if c == '#' && word_start => return false,
            None if c == '\'' || c == '"' => quote = Some(c),
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            _ => {}
        }
    }
    quote.is_some()
}

/// The delimiter of a here-document the line opens (`cat > f <<'EOF'` → `EOF`).
fn heredoc_delimiter(line: &str) -> Option<String> {
    let pos = line.find("<<")?;
    let rest = line[pos + 2..].trim_start_matches('-').trim_start();
    let word: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// `cmd   # exit 1: why` → (`cmd`, 1); any other line → (line, 0). Comments are kept.
fn split_expected_exit(line: &str) -> (String, i32) {
    if let Some(pos) = line.rfind("# exit ") {
        let tail = &line[pos + "# exit ".len()..];
        let digits: String = tail.chars().take_while(|c| c.is_ascii_digit()).collect();
        if let Ok(n) = digits.parse::<i32>() {
            return (line[..pos].trim_end().to_owned(), n);
        }
    }
    (line.to_owned(), 0)
}

/// Runs a script in `dir` with `understudy` on the PATH as the debug binary, the examples
/// copied into `dir`, and the ports `7777` and `7778` replaced by free ones. Returns (exit code, stdout+stderr).
fn run_script(dir: &Path, script: &str) -> (i32, String) {
    let bin_dir = dir.join(".bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let link = bin_dir.join("understudy");
    if !link.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_understudy"), &link).unwrap();
    }
    // 7777 is the server of the pages, 7778 a stand-in for a real upstream: each becomes a
    // free port.
    let script = script
        .replace("7777", &free_port().to_string())
        .replace("7778", &free_port().to_string());
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env("PATH", path)
            .env("HOME", dir)
            .env_remove("UNDERSTUDY_ADMIN_TOKEN")
            .env_remove("UNDERSTUDY_STORE")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("bash")
    };
    let pgid = child.id();
    let deadline = Instant::now() + Duration::from_secs(240);
    let out = loop {
        if let Some(_status) = child.try_wait().unwrap() {
            break child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg("--")
                .arg(format!("-{pgid}"))
                .status();
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            panic!("runnable blocks took more than 240 s:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Background jobs a page started (a server) end with it.
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg("--")
        .arg(format!("-{pgid}"))
        .status();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A scratch copy of the repository's `examples/` (the pages run from the repository root).
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    crate::support::copy_dir(&repo().join("examples"), &dir.path().join("examples"));
    dir
}

fn page_blocks(page: &str) -> Vec<Block> {
    let path = repo().join("docs/src").join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    runnable_blocks(page, &text)
}

fn tool_missing(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
}

/// What a page's blocks need that is not installed (besides the binary).
fn missing_tools(needs: &[&str]) -> Vec<String> {
    let mut missing = Vec::new();
    for tool in ["curl", "python3"] {
        if tool_missing(tool) {
            missing.push(tool.to_owned());
        }
    }
    for need in needs {
        if let Some(module) = need.strip_prefix("py:") {
            let ok = Command::new("python3")
                .arg("-c")
                .arg(format!("import {module}"))
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if !ok {
                missing.push(format!("the Python module {module}"));
            }
        }
    }
    missing
}

/// Runs the runnable blocks of `pages`, in order, as one shell session in one scratch
/// directory (a later page may use what an earlier one made, as a reader following them
/// does). Skips (fails under CI=true) when a tool they need is missing.
fn run_pages(pages: &[(&str, usize, &[&str])]) {
    let names: Vec<&str> = pages.iter().map(|(p, _, _)| *p).collect();
    let needs: Vec<&str> = pages
        .iter()
        .flat_map(|(_, _, n)| n.iter().copied())
        .collect();
    let missing = missing_tools(&needs);
    if !missing.is_empty() {
        assert!(
            !crate::support::in_ci(),
            "{names:?}: the runnable blocks need {missing:?}"
        );
        eprintln!("skipped {names:?}: {missing:?} not installed");
        return;
    }
    let mut blocks = Vec::new();
    for (page, min_blocks, _) in pages {
        let b = page_blocks(page);
        assert!(
            b.len() >= *min_blocks,
            "{page}: {} runnable blocks, expected at least {min_blocks} (a lost `sh,runnable` marker?)",
            b.len()
        );
        blocks.extend(b);
    }
    let dir = scratch();
    let (code, out) = run_script(dir.path(), &script_for(&blocks));
    assert_eq!(code, 0, "the runnable blocks of {names:?} failed:\n{out}");
}

#[test]
fn runnable_blocks_getting_started() {
    // Getting started is one path a new user follows from top to bottom: one session.
    let pages: Vec<_> = RUNNABLE_PAGES
        .iter()
        .copied()
        .filter(|(p, _, _)| p.starts_with("getting-started/"))
        .collect();
    run_pages(&pages);
}

#[test]
fn runnable_blocks_guides() {
    // Each guide stands alone: its own session and scratch directory.
    for page in RUNNABLE_PAGES
        .iter()
        .filter(|(p, _, _)| p.starts_with("guides/"))
    {
        run_pages(&[*page]);
    }
}

#[test]
fn every_runnable_block_is_on_a_page_that_is_run() {
    // A runnable block on a page missing from RUNNABLE_PAGES would never run.
    let src = repo().join("docs/src");
    let mut stack = vec![src.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                let rel = p
                    .strip_prefix(&src)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let n = runnable_blocks(&rel, &std::fs::read_to_string(&p).unwrap()).len();
                if n > 0 {
                    assert!(
                        RUNNABLE_PAGES.iter().any(|(q, _, _)| *q == rel),
                        "{rel} has {n} runnable blocks but is not in RUNNABLE_PAGES of tests/it/docs.rs"
                    );
                }
            }
        }
    }
}

#[test]
fn a_runnable_block_whose_command_fails_fails() {
    // The runner must catch a command that stopped working, a wrong expected exit code, and
    // a command of a continued line.
    let dir = tempfile::tempdir().unwrap();
    let page = "```sh,runnable\ntrue\nfalse\n```\n";
    let (code, out) = run_script(dir.path(), &script_for(&runnable_blocks("p.md", page)));
    assert_ne!(code, 0);
    assert!(out.contains("p.md:3: false"), "{out}");

    let page =
        "```sh,runnable\nsh -c 'exit 1'   # exit 1: expected\nsh -c 'exit 0'   # exit 1\n```\n";
    let (code, out) = run_script(dir.path(), &script_for(&runnable_blocks("p.md", page)));
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("expected 1"), "{out}");

    let page = "```sh,runnable\nsh -c \\\n  'exit 3'\n```\n";
    let (code, _) = run_script(dir.path(), &script_for(&runnable_blocks("p.md", page)));
    assert_ne!(code, 0);

    // a here-document is part of its command, and a quoted argument may span lines
    let page = "```sh,runnable\ncat > f.json <<'JSON'\n{\"a\":\n 1}\nJSON\ngrep -q '\"a\"' f.json\ntest \"$(cat f.json | tr -d ' \\n')\" = '{\"a\":1}'\necho 'two\nlines' | grep -q lines\ngrep -q nothing f.json   # exit 1\n```\n";
    let (code, out) = run_script(dir.path(), &script_for(&runnable_blocks("p.md", page)));
    assert_eq!(code, 0, "{out}");
    let page = "```sh,runnable\ncat > g.json <<'JSON'\n{}\nJSON\ngrep -q missing g.json\n```\n";
    let (code, out) = run_script(dir.path(), &script_for(&runnable_blocks("p.md", page)));
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("p.md:5: grep -q missing g.json"), "{out}");

    // and passes a block that works, ignoring blocks not marked runnable
    let page = "```sh\nfalse\n```\n```sh,runnable\nunderstudy --version\necho 7777\n```\n";
    let blocks = runnable_blocks("p.md", page);
    assert_eq!(blocks.len(), 1);
    let (code, out) = run_script(dir.path(), &script_for(&blocks));
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("\n7777\n"), "the port is substituted: {out}");
}
