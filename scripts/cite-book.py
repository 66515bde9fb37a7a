#!/usr/bin/env python3
"""Rewrite citations of the product specification into citations of the book.

    python3 scripts/cite-book.py [--dry-run] [ROOT]      (ROOT: the repository, default .)

Comments in src/ and tests/ (and the README) used to cite "SPEC n", "SPEC n.m",
"SPEC section n", "shared/SPEC.md" and "PROTOCOLS n.m" — documents a reader of the
repository does not have. Each such citation is replaced by the book page that states the
rule (`docs/src/...`), from the table below. Prints every change as `file:line: old -> new`,
then the mentions it could not rewrite (left for a human), then a count. Running it twice
changes nothing the second time. `--dry-run` prints without writing.
"""
import os
import re
import sys

# Section of the specification → the book page that covers it. The most specific entry
# wins (5.1.1 before 5.1 before 5).
SPEC = {
    "1": "docs/src/concepts/operations.md",
    "2": "docs/src/reference/config.md",
    "2.1": "docs/src/reference/config.md",
    "2.2": "docs/src/reference/operation-files.md",
    "2.3": "docs/src/reference/profiles.md",
    "3": "docs/src/reference/mock-definition.md",
    "3.1": "docs/src/reference/mock-definition.md#selection",
    "3.2": "docs/src/reference/mock-definition.md#rendering-expressions",
    "3.3": "docs/src/reference/mock-definition.md#state",
    "3.4": "docs/src/reference/mock-definition.md#checks-and-limits",
    "4": "docs/src/reference/modes.md",
    "5": "docs/src/reference/operation-files.md#matching",
    "5.1": "docs/src/reference/mock-definition.md#the-envelope-rule",
    "5.1.1": "docs/src/reference/mcp.md#the-endpoint",
    "5.2": "docs/src/concepts/errors.md",
    "5.3": "docs/src/concepts/errors.md",
    "5.4": "docs/src/reference/operation-files.md#idempotency",
    "6": "docs/src/concepts/attempts.md",
    "6.1": "docs/src/concepts/attempts.md",
    "6.2": "docs/src/concepts/attempts.md",
    "7": "docs/src/guides/record.md",
    "8": "docs/src/reference/evidence-envelope.md",
    "9": "docs/src/reference/admin-api.md",
    "10": "docs/src/reference/cli.md",
    "11": "docs/src/reference/https.md",
    "12": "docs/src/operations/durability.md",
    "13": "docs/src/operations/limits.md",
    "14": "docs/src/reference/contracts.md",
    "15": "docs/src/reference/events.md",
    "16": "docs/src/getting-started/first-test.md",
    "17": "docs/src/operations/fleet-store.md",
    "18": "docs/src/reference/mcp.md",
    "19": "docs/src/reference/import-drift.md",
    "20": "docs/src/operations/security.md",
    "20.1": "docs/src/operations/security.md",
    "20.2": "docs/src/operations/security.md",
    "21": "docs/src/reference/verdict.md",
    "22": "docs/src/reference/mcp.md",
    "23": "docs/src/guides/salesforce.md",
    "24": "docs/src/reference/evidence-envelope.md",
    "25": "docs/src/guides/ci.md",
}

# The wire notes (PROTOCOLS): 1 MCP, 2 Salesforce, 4 trace context, 5 SSE framing.
PROTOCOLS = {
    "1": "docs/src/reference/mcp.md",
    "2": "docs/src/reference/profiles.md#salesforce",
    "3": "docs/src/reference/profiles.md",
    "4": "docs/src/reference/evidence-envelope.md#tool-events",
    "5": "docs/src/reference/mcp.md",
}

NUM = r"[0-9]+(?:\.[0-9]+)*"
LIST = rf"{NUM}(?:\s*(?:[–-]|,|and|or|/)\s*{NUM})*"
# "SPEC 14", "SPEC 6.2, 14", "SPEC section 3", "SPEC sections 1 and 5", "SPEC 5.1–5.3",
# "PROTOCOLS 1.4", "PROTOCOLS.md section 2", "PROTOCOLS.md 1.1–1.3"
CITE = re.compile(
    rf"\b(?P<doc>SPEC|PROTOCOLS(?:\.md)?)(?![_A-Za-z])(?:'s)?\s+(?:sections?\s+)?(?P<nums>{LIST})"
)

# Mentions without a section number, rewritten phrase by phrase.
PHRASES = [
    ("`shared/SPEC.md` is the contract.", "The book in `docs/` describes the product."),
    ("../shared/SPEC.md", "docs/src/SUMMARY.md"),
    ("shared/SPEC.md", "docs/src/SUMMARY.md"),
    ("shared/PROTOCOLS.md", "docs/src/reference/mcp.md"),
    ("(SPEC is silent on them)", "(the documented rules leave them open)"),
    ("SPEC is silent", "the documented rules are silent"),
    ("Field names are the SPEC's:", "Field names are the evidence envelope's (docs/src/reference/evidence-envelope.md):"),
    ("as the SPEC grammar allows them", "as the grammar of docs/src/reference/mock-definition.md allows them"),
    ("(SPEC: calls", "(docs/src/reference/verdict.md: calls"),
    ("the SPEC example", "the documented example"),
]

BARE = re.compile(r"\b(?:SPEC|PROTOCOLS(?:\.md)?)(?![_A-Za-z])|\.\./shared/")


def pages_for(doc, nums):
    table = SPEC if doc == "SPEC" else PROTOCOLS
    out = []
    for n in re.findall(NUM, nums):
        key = n
        while key not in table and "." in key:
            key = key.rsplit(".", 1)[0]
        page = table.get(key)
        if page is None:
            return None
        if page not in out:
            out.append(page)
    return out


def rewrite_line(line):
    def sub(m):
        pages = pages_for("SPEC" if m.group("doc") == "SPEC" else "PROTOCOLS", m.group("nums"))
        if not pages:
            return m.group(0)
        return ", ".join(pages)

    new = CITE.sub(sub, line)
    for old, rep in PHRASES:
        new = new.replace(old, rep)
    return new


def files(root):
    readme = os.path.join(root, "README.md")
    if os.path.exists(readme):
        yield readme
    for top in ("src", "tests", "clients", "examples", "scripts", "bench", "fuzz"):
        for d, dirs, fs in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in ("node_modules", "target", "dist")]
            for f in sorted(fs):
                if f == "cite-book.py":
                    continue
                if f.endswith((".rs", ".py", ".md", ".json", ".yaml", ".yml", ".sh", ".toml")):
                    yield os.path.join(d, f)


def main():
    args = [a for a in sys.argv[1:] if a != "--dry-run"]
    dry = "--dry-run" in sys.argv[1:]
    root = args[0] if args else "."
    changed = 0
    changed_files = 0
    left = []
    for path in files(root):
        try:
            text = open(path, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        lines = text.split("\n")
        out = []
        file_changed = False
        for i, line in enumerate(lines, 1):
            new = rewrite_line(line)
            rel = os.path.relpath(path, root)
            if new != line:
                changed += 1
                file_changed = True
                print(f"{rel}:{i}: {line.strip()}\n    -> {new.strip()}")
            for m in BARE.finditer(new):
                if "LICENSE" not in rel:
                    left.append(f"{rel}:{i}: {new.strip()}")
                    break
            out.append(new)
        if file_changed:
            changed_files += 1
            if not dry:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write("\n".join(out))
    if left:
        print("\nleft for a human (a mention this script does not know how to rewrite):")
        for line in left:
            print("  " + line)
    verb = "would change" if dry else "changed"
    print(f"\n{verb} {changed} lines in {changed_files} files; {len(left)} mentions left")
    if changed and not dry:
        print("src/cli.rs help texts may have changed: regenerate the command-line reference with\n"
              "  UPDATE_DOCS=1 cargo test --test it cli_reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
