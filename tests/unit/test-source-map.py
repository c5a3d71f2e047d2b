#!/usr/bin/env python3
"""Unit test: docs/design.md's source map names every source file of lib/, cli/, spank/ and
bench/, and names no file that does not exist, so the map a newcomer reads stays the tree."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pytap import finish, ok, run_checks  # noqa: E402

DIRS = ("lib", "cli", "spank", "bench")


def sources(top):
    for d in DIRS:
        for root, _, files in os.walk(os.path.join(top, d)):
            for f in files:
                if f.endswith((".c", ".h", ".sh", ".map")) or f in ("run", "peers.sh"):
                    yield os.path.relpath(os.path.join(root, f), top)


def checks(top):
    with open(os.path.join(top, "docs", "design.md")) as f:
        text = f.read()
    m = re.search(r"^## Source map\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not ok(m, "docs/design.md has a '## Source map' section"):
        return
    named = set()
    for row in re.findall(r"^\|\s*(.+?)\s*\|", m.group(1), re.M):
        # A row names one file, or several of one folder: `dir/a.c`, `b.c`.
        folder = ""
        for p in re.findall(r"`([^`]+)`", row):
            if "/" in p:
                folder = os.path.dirname(p)
                named.add(p)
            elif folder:
                named.add(os.path.join(folder, p))
    have = set(sources(top))
    for f in sorted(have):
        ok(f in named, f"the source map names {f}")
    stale = sorted(p for p in named if not os.path.exists(os.path.join(top, p)))
    ok(not stale, f"the source map names only files that exist (stale: {stale})")


if __name__ == "__main__":
    top = os.environ.get("JOBCG_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
    run_checks(lambda: checks(top))
    sys.exit(finish())
