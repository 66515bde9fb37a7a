#!/usr/bin/env bash
# Build the book (docs/) with warnings as errors and check every internal link and anchor.
#
#   bash scripts/book.sh
#
# mdBook is not packaged by Debian, so it is installed from crates.io with cargo, pinned and
# --locked, into cargo's own bin directory (kept between clones: a second run does not rebuild it).
# MDBOOK=/path/to/mdbook uses another binary.
set -euo pipefail
cd "$(dirname "$0")/.."
MDBOOK_VERSION=0.5.4
ROOT="${CARGO_HOME:-$HOME/.cargo}"   # persists across clones on one machine: a second CI run does not rebuild it
if [ -z "${MDBOOK:-}" ] && command -v mdbook >/dev/null 2>&1 \
   && mdbook --version 2>/dev/null | grep -q "v$MDBOOK_VERSION"; then
  MDBOOK="$(command -v mdbook)"          # the pinned version is already installed
fi
MDBOOK="${MDBOOK:-$ROOT/bin/mdbook}"
if ! { [ -x "$MDBOOK" ] && "$MDBOOK" --version 2>/dev/null | grep -q "v$MDBOOK_VERSION"; }; then
  echo "installing mdbook $MDBOOK_VERSION into $ROOT"
  cargo install --locked --quiet mdbook --version "$MDBOOK_VERSION" \
    --no-default-features --features search --root "$ROOT"
  MDBOOK="$ROOT/bin/mdbook"
fi
"$MDBOOK" --version

# Warnings as errors: mdBook reports a missing page, a broken include or a renderer problem
# as a WARN or ERROR line but may still exit 0.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
rm -rf target/book
if ! "$MDBOOK" build docs 2>&1 | tee "$log"; then
  echo "mdbook build failed"; exit 1
fi
if grep -E '(WARN|ERROR|warning|error)' "$log" | grep -v 'INFO' ; then
  echo "mdbook build printed warnings (shown above): treated as errors"; exit 1
fi

# Every chapter of SUMMARY.md exists and every page in docs/src is in SUMMARY.md.
python3 - <<'PY'
import os, re, sys
src = "docs/src"
summary = open(os.path.join(src, "SUMMARY.md"), encoding="utf-8").read()
listed = set(re.findall(r"\]\(([^)]+\.md)\)", summary))
pages = {os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs if f.endswith(".md")}
pages.discard("SUMMARY.md")
bad = sorted(pages - listed) + [f"listed but missing: {p}" for p in sorted(listed - pages)]
for b in bad:
    print(f"docs/src: not in SUMMARY.md: {b}" if not b.startswith("listed") else f"docs/src/SUMMARY.md: {b}")
sys.exit(1 if bad else 0)
PY

python3 scripts/check-book-links.py target/book
