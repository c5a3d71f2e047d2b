#!/usr/bin/env python3
"""Unit test: what `meson install` gives programs that link jobcg (docs/library.md). Installs the
build's `devel` parts into a temporary DESTDIR, then checks that the archive exports only
jobcg_* symbols, that every public header compiles on its own as C11 (with POSIX) and as C++11,
that the configuration's layout is not in them (opaque), that every struct they only declare
can be obtained by a caller, that docs/library.md's function count and header list and
man/libjobcg.3's header list and EXAMPLE match them, and that examples/step-agent.c
compiles and links with nothing but `pkg-config libjobcg` and runs. Usage: test-install.py CC
SANITIZE (CC: the C compiler's command line as one string; SANITIZE: meson's b_sanitize, "none"
or a list)."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pytap import coverage, diag, finish, ok, run_checks, skip  # noqa: E402


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def find(top, name):
    for dirpath, _, files in os.walk(top):
        if name in files:
            return os.path.join(dirpath, name)
    return None


def main():
    cc, sanitize = shlex.split(sys.argv[1]), sys.argv[2]
    build = os.environ["JOBCG_BUILD_ROOT"]
    src = os.environ["JOBCG_SOURCE_ROOT"]
    san = [] if sanitize == "none" else [f"-fsanitize={sanitize}"]
    dest = tempfile.mkdtemp(prefix="jobcg-install-")
    try:
        run_checks(checks, cc, san, build, src, dest)
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    return finish()


def checks(cc, san, build, src, dest):
    r = run(["meson", "install", "-C", build, "--no-rebuild", "--quiet", "--tags", "devel",
             "--destdir", dest])
    if not ok(r.returncode == 0, "meson install --tags devel into a DESTDIR"):
        diag(r.stdout + r.stderr)
        return
    archive = find(dest, "libjobcg.a")
    pc = find(dest, "libjobcg.pc")
    header = find(dest, "job.h")
    if not ok(archive and pc and header and os.path.basename(os.path.dirname(header)) == "jobcg",
              "installed: libjobcg.a, libjobcg.pc and the headers under include/jobcg/"):
        diag("\n".join(os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs))
        return
    incdir = os.path.dirname(os.path.dirname(header))
    public = sorted(os.listdir(os.path.join(src, "lib", "include", "jobcg")))
    installed = sorted(os.listdir(os.path.dirname(header)))
    ok(installed == public, "every header of lib/include/jobcg is installed, and only those")
    if installed != public:
        diag(f"missing {sorted(set(public) - set(installed))}, "
             f"extra {sorted(set(installed) - set(public))}")

    r = run(["nm", "-g", "--defined-only", archive])
    names = [line.split()[2] for line in r.stdout.splitlines() if len(line.split()) == 3]
    # ASan builds add an ODR indicator per exported variable, named after it.
    others = [x for x in names if not x.startswith(("jobcg_", "__odr_asan.jobcg_"))]
    ok(r.returncode == 0 and len(names) > 100 and not others,
       f"the archive exports {len(names)} symbols, all jobcg_* (internal ones are local)")
    if others:
        diag(" ".join(others[:40]))

    # docs/library.md states how many functions the archive exports; count them here.
    funcs = sorted(line.split()[2] for line in r.stdout.splitlines()
                   if len(line.split()) == 3 and line.split()[1] == "T"
                   and line.split()[2].startswith("jobcg_"))
    with open(os.path.join(src, "docs", "library.md")) as f:
        library_md = f.read()
    m = re.search(r"exports their (\d+)\s+functions", library_md)
    ok(m and int(m.group(1)) == len(funcs),
       f"docs/library.md's function count ({m.group(1) if m else 'none'}) is the archive's"
       f" ({len(funcs)})")
    with open(os.path.join(src, "man", "libjobcg.3")) as f:
        man = f.read()
    unnamed = [h for h in installed if f"`{h}`" not in library_md or f"jobcg/{h}" not in man]
    ok(not unnamed, "docs/library.md and man/libjobcg.3 name every installed header")
    if unnamed:
        diag(f"not named: {unnamed}")
    # A struct only declared in the installed headers must reach the caller some way (a ret
    # pointer, a return value, a field): otherwise a function taking it cannot be called.
    text = ""
    for h in installed:
        with open(os.path.join(os.path.dirname(header), h)) as f:
            text += f.read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    defined = set(re.findall(r"struct (\w+)\s*\{", text))
    unreachable = []
    for name in sorted(set(re.findall(r"struct (jobcg_\w+)", text)) - defined):
        if not re.search(rf"struct {name}\s*(\*\*|\*\s*(const\s+)?\w+\s*(;|\())", text):
            unreachable.append(name)
    ok(not unreachable, "every opaque struct of the installed headers can be obtained by a caller")
    if unreachable:
        diag(f"no public way to get: {unreachable}")
    # The man page's EXAMPLE compiles with its SYNOPSIS's includes alone.
    incs = re.findall(r"^\.B #include <([^>]+)>", man, re.M)
    ex = re.search(r"^\.EX\n(.*?)^\.EE", man, re.M | re.S)
    code = "".join(f"#include <{i}>\n" for i in incs)
    code += "void f(void);\nvoid f(void)\n{\n" + (ex.group(1) if ex else "") + "}\n"
    r = run([*cc, "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-result", "-fsyntax-only",
             "-I", incdir, "-x", "c", "-"], input=code.replace("\\-", "-").replace("\\e", "\\"))
    if not ok(ex and r.returncode == 0, "man/libjobcg.3's EXAMPLE compiles with its SYNOPSIS"):
        diag(r.stderr)

    bad = []
    cxx = shutil.which("c++")
    for h in installed:
        for lang, cmd in (("C11", [*cc, "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-x", "c"]),
                          ("C++11", [cxx, "-std=c++11", "-x", "c++"]) if cxx else (None, None)):
            if not lang:
                continue
            r = run(cmd + ["-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                           "-I", incdir, "-"], input=f"#include <jobcg/{h}>\n")
            if r.returncode:
                bad.append(f"{h} ({lang}): {r.stderr.strip().splitlines()[0]}")
    ok(not bad, f"each of the {len(installed)} headers compiles on its own as C11"
       + (" and C++11" if cxx else " (no C++ compiler here)"))
    for b in bad:
        diag(b)

    # The configuration and its gres.conf records are opaque to a program that links jobcg
    # (lib/src/conf/config_internal.h has their layout): reaching into either must not compile,
    # while the accessors do.
    opaque = {
        "struct jobcg_config": "int f(const struct jobcg_config *c) "
                               "{ return c->cgroup.constrain_cores; }",
        "struct jobcg_config's size": "struct jobcg_config conf;",
        "struct jobcg_gres_record": "const char *f(const struct jobcg_gres_device *d) "
                                    "{ return d->rec->name; }",
    }
    leaked = []
    for what, code in opaque.items():
        r = run([*cc, "-std=gnu11", "-fsyntax-only", "-I", incdir, "-x", "c", "-"],
                input=f"#include <jobcg/gres.h>\n{code}\n")
        # gcc: "undefined type", "storage size ... isn't known"; clang: "incomplete type"
        if r.returncode == 0 or not re.search(r"incomplete|undefined type|storage size",
                                              r.stderr):
            leaked.append(f"{what}: {r.stderr.strip() or 'compiles'}")
    r = run([*cc, "-std=gnu11", "-Wall", "-Werror", "-fsyntax-only", "-I", incdir, "-x", "c", "-"],
            input="#include <jobcg/gres.h>\n"
                  "const char *f(const struct jobcg_config *c, struct jobcg_gres_node **n);\n"
                  "const char *f(const struct jobcg_config *c, struct jobcg_gres_node **n)\n"
                  "{ const struct jobcg_config_entry *e = jobcg_config_entry(c, \"StateDir\");\n"
                  "  return jobcg_gres_node_new(c, n) < 0 || !e ? NULL : e->value; }\n")
    if r.returncode:
        leaked.append(f"the accessors do not compile: {r.stderr.strip()}")
    ok(not leaked, "the configuration and gres.conf records are opaque in the installed headers")
    for x in leaked:
        diag(x)

    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pc), PKG_CONFIG_SYSROOT_DIR=dest)
    r = run(["pkg-config", "--cflags", "--libs", "libjobcg"], env=env)
    if not ok(r.returncode == 0 and "-ljobcg" in r.stdout and dest in r.stdout,
              f"pkg-config libjobcg: {r.stdout.strip()}"):
        diag(r.stderr)
        return
    if coverage():
        skip("examples/step-agent.c against the archive: a coverage build's needs libgcov")
        return
    exe = os.path.join(dest, "step-agent")
    r = run([*cc, "-std=gnu11", "-Wall", "-Wextra", "-Werror", *san,
             os.path.join(src, "examples", "step-agent.c"), "-o", exe,
             *r.stdout.split()])
    if not ok(r.returncode == 0, "examples/step-agent.c builds with only what pkg-config says"):
        diag(r.stderr)
        return
    r = run([exe])
    ok(r.returncode == 2 and "usage: step-agent" in r.stderr,
       "and runs (no arguments: usage, exit 2)")


if __name__ == "__main__":
    sys.exit(main())
