#!/usr/bin/env python3
"""Unit test: the man pages. Every page in man/ is installed (listed in man/meson.build),
renders with groff without a warning, and names in SEE ALSO and the text only jobcg pages that
exist. Skipped when groff is not installed."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pytap import diag, finish, ok, run_checks  # noqa: E402


def checks(man):
    pages = sorted(f for f in os.listdir(man) if re.fullmatch(r"[a-z.-]+\.[1-8]", f))
    with open(os.path.join(man, "meson.build")) as f:
        listed = set(re.findall(r"'([a-z.-]+\.[1-8])'", f.read()))
    ok(pages and set(pages) == listed,
       f"man/meson.build installs exactly the {len(pages)} pages in man/"
       f" (not listed: {sorted(set(pages) - listed)}, missing: {sorted(listed - set(pages))})")
    for p in pages:
        path = os.path.join(man, p)
        r = subprocess.run(["groff", "-man", "-ww", "-z", path], capture_output=True, text=True,
                           timeout=60)
        if not ok(r.returncode == 0 and not r.stderr.strip(), f"{p} renders without warnings"):
            diag(r.stderr)
        with open(path) as f:
            text = f.read()
        name, section = p.rsplit(".", 1)
        ok(re.search(rf"^\.TH {re.escape(name.upper())} {section} ", text, re.M) is not None,
           f"{p}: .TH names it {name.upper()}({section})")
        refs = set(re.findall(r"^\.BR ((?:lib)?jobcg[a-z.-]*) \(([1-8])\)", text, re.M))
        dangling = sorted(f"{n}({s})" for n, s in refs if f"{n}.{s}" not in pages)
        ok(not dangling, f"{p}: every jobcg page it names exists"
           + (f" (not: {', '.join(dangling)})" if dangling else ""))


def main():
    if not shutil.which("groff"):
        print("1..0 # SKIP groff is not installed")
        return 0
    run_checks(checks, os.path.join(os.environ["JOBCG_SOURCE_ROOT"], "man"))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
