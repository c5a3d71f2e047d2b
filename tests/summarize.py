#!/usr/bin/env python3
"""Count TAP results over every tier: meson's testlog-*.json and plain *.tap files.

Prints failing test names, then one line "N passed, N failed, N skipped"; exits 1 on any failure.
A test program that produced no TAP line but failed (crash, sanitizer abort, timeout) counts as
one failure; one that exited 77 with no TAP line counts as one skip.
"""
import json, os, re, sys

OK = re.compile(r"^(not )?ok\b(.*)$")

def count_tap(text, name, tot, fails):
    seen = False
    skip_all = re.search(r"^1\.\.0\s*#\s*SKIP", text, re.M | re.I)
    for line in text.splitlines():
        m = OK.match(line)
        if not m:
            continue
        seen = True
        rest = m.group(2)
        if m.group(1):
            tot[1] += 1
            fails.append(f"{name}:{rest.strip()}")
        elif re.search(r"#\s*SKIP", rest, re.I):
            tot[2] += 1
        else:
            tot[0] += 1
    if not seen and skip_all:
        tot[2] += 1
        return True
    return seen

def main(d):
    tot = [0, 0, 0]
    fails = []
    for f in sorted(os.listdir(d)):
        p = os.path.join(d, f)
        if f.startswith("testlog-") and f.endswith(".json"):
            for line in open(p, errors="replace"):
                try:
                    t = json.loads(line)
                except ValueError:
                    continue
                name = t.get("name", "?")
                res = t.get("result", "")
                before = tot[1]
                seen = count_tap(t.get("stdout", "") or "", name, tot, fails)
                if res in ("FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS") and tot[1] == before:
                    tot[1] += 1
                    fails.append(f"{name}: {res} (exit {t.get('returncode')})")
                elif not seen and res == "SKIP":
                    tot[2] += 1
                elif not seen and res == "OK":
                    tot[0] += 1
        elif f.endswith(".tap"):
            before = tot[1]
            text = open(p, errors="replace").read()
            seen = count_tap(text, f[:-4], tot, fails)
            if not seen:
                tot[1] += 1
                fails.append(f"{f}: no TAP output")
    for x in fails:
        print("FAILED:", x)
    print(f"{tot[0]} passed, {tot[1]} failed, {tot[2]} skipped")
    return 1 if tot[1] else 0

sys.exit(main(sys.argv[1]))
