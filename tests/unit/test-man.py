#!/usr/bin/env python3
"""Unit test: the man pages. Every page in man/ is installed (listed in man/meson.build),
renders with groff without a warning, and names in SEE ALSO and the text only jobcg pages that
exist. jobcg(1) has an entry for every command `jobcg help` lists, and each entry's synopsis
names every option of the command's own usage (an entry whose synopsis says OPTIONS or ...
describes them below it or in the command's own page). Skipped when groff is not installed."""
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


def roff_text(s):
    """Roff source as words: fonts dropped, escaped hyphens plain."""
    return re.sub(r"\\f[BIRP]", "", s).replace("\\-", "-")


def commands_documented(man, jobcg):
    """Every command of `jobcg help` has a jobcg(1) entry naming its usage's options."""
    env = dict(os.environ, JOBCG_CONF_DIR="/nonexistent")
    helped = subprocess.run([jobcg, "help"], capture_output=True, text=True, env=env,
                            timeout=60).stdout
    cmds = re.findall(r"^  ([a-z-]+) ", helped, re.M)
    with open(os.path.join(man, "jobcg.1")) as f:
        src = f.read()
    sec = src[src.index(".SH COMMANDS"):src.index(".SH PAM")]
    heads = list(re.finditer(r"^\.TP\n\.B ([a-z][a-z\\-]*)(.*)$", sec, re.M))
    entries = {}
    for k, m in enumerate(heads):
        body_end = heads[k + 1].start() if k + 1 < len(heads) else len(sec)
        entries[m.group(1).replace("\\-", "-")] = (roff_text(m.group(2)),
                                                     roff_text(sec[m.end():body_end]))
    ok(cmds, f"jobcg help lists commands ({len(cmds)})")
    missing = [c for c in cmds if c not in entries]
    ok(not missing, "jobcg(1) has an entry for every command"
       + (f" (not: {', '.join(missing)})" if missing else ""))
    for c in cmds:
        if c not in entries:
            continue
        usage = subprocess.run([jobcg, c, "--help"], capture_output=True, text=True, env=env,
                               timeout=60).stdout.split("\n\n")[0]
        opts = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", usage)))
        synopsis, body = entries[c]
        where = synopsis
        if "OPTIONS" in synopsis or synopsis.rstrip().endswith("..."):
            where += body
            own = os.path.join(man, f"jobcg-{c}.1")
            if os.path.exists(own):
                with open(own) as f:
                    where += roff_text(f.read())
        absent = [o for o in opts if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", where)]
        ok(not absent, f"jobcg(1) {c}: names every option of its usage"
           + (f" (not: {' '.join(absent)})" if absent else ""))


def main():
    if not shutil.which("groff"):
        print("1..0 # SKIP groff is not installed")
        return 0
    man = os.path.join(os.environ["JOBCG_SOURCE_ROOT"], "man")
    run_checks(checks, man)
    run_checks(commands_documented, man,
               os.path.join(os.environ["JOBCG_BUILD_ROOT"], "cli", "jobcg"))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
