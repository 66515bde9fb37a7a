#!/usr/bin/env python3
"""Check every internal link and anchor of the rendered book.

    python3 scripts/check-book-links.py [BOOK_HTML_DIR]   (default: target/book)

Reads every HTML page mdBook wrote, collects the ids each page defines, and checks that every
<a href> that stays inside the book points to a page that exists and, when it has a
#fragment, to an id that page defines. Links to other sites are not fetched (CI is offline
for them). Prints each broken link as `page: href: why` and exits 1 when there is one; exits
2 when the directory holds no page (nothing was checked, which must not pass).
"""
import os
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

# Pages mdBook generates around the book itself; their links are its own.
SKIP = {"print.html", "404.html", "toc.html"}


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "a" and a.get("href") is not None:
            self.links.append(a["href"])


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/book")
    pages = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".html"):
                path = os.path.join(dirpath, f)
                p = Page()
                with open(path, encoding="utf-8") as fh:
                    p.feed(fh.read())
                pages[os.path.relpath(path, root)] = p
    checked_pages = [k for k in pages if os.path.basename(k) not in SKIP]
    if not checked_pages:
        print(f"{root}: no HTML pages found: build the book first (mdbook build docs)")
        return 2
    broken = []
    n_links = 0
    for rel in sorted(checked_pages):
        page = pages[rel]
        for href in page.links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("//"):
                continue  # another site, mailto:, javascript:
            if href == "" or href == "#":
                continue
            n_links += 1
            if parts.path:
                target = os.path.normpath(os.path.join(os.path.dirname(rel), unquote(parts.path)))
                if target.endswith(os.sep) or os.path.isdir(os.path.join(root, target)):
                    target = os.path.join(target, "index.html")
            else:
                target = rel
            if target.startswith(".."):
                broken.append(f"{rel}: {href}: leaves the book")
                continue
            if not os.path.exists(os.path.join(root, target)):
                broken.append(f"{rel}: {href}: no such page {target}")
                continue
            frag = unquote(parts.fragment)
            if frag and target.endswith(".html"):
                ids = pages[target].ids if target in pages else set()
                if frag not in ids:
                    broken.append(f"{rel}: {href}: no anchor #{frag} in {target}")
    for b in broken:
        print(b)
    print(f"checked {n_links} internal links on {len(checked_pages)} pages: {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
