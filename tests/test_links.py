"""Every relative link and image in README.md and docs/ points at a file or folder that exists."""

import glob
import os
import re

from helpers import ROOT

# [text](target) and ![alt](target), and <img src="target">; code spans and blocks are left out.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<img [^>]*src=\"([^\"]+)\"")
FENCE = re.compile(r"^(```|~~~)")


def documents():
    return [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    )


def relative_links(path):
    """-> [(line number, target)] of the relative links in a Markdown file, outside code; a link's
    text may wrap across lines."""
    with open(path) as f:
        lines = f.read().split("\n")
    in_code = False
    for i, line in enumerate(lines):
        fence = FENCE.match(line.strip())
        if fence or in_code:
            lines[i] = ""  # kept as an empty line, so line numbers stay
        if fence:
            in_code = not in_code
    text = re.sub(r"`[^`\n]*`", "", "\n".join(lines))
    found = []
    for match in LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # another site, mail, or a heading of the same page
        found.append((text.count("\n", 0, match.end()) + 1, target))
    return found


def broken_links():
    broken = []
    for path in documents():
        for number, target in relative_links(path):
            file = target.split("#", 1)[0]
            if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(path), file))):
                broken.append(f"{os.path.relpath(path, ROOT)}:{number}: {target}")
    return broken


def test_every_relative_link_and_image_resolves():
    assert documents() and sum(len(relative_links(p)) for p in documents()) > 50
    assert broken_links() == []


def test_the_check_finds_a_broken_link_and_skips_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "See [here](missing.md) and ![a\nfig](page.md).\n"
        "`[not a link](nowhere.md)`\n```\n[code](nowhere.md)\n```\n[site](https://example.org) [top](#a)\n"
    )
    assert relative_links(str(page)) == [(1, "missing.md"), (2, "page.md")]
