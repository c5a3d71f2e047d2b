#!/usr/bin/env python3
"""jobcg kernel test: every change an operation makes can fail, and none leaves a half-made
state. With JOBCG_TEST_FAIL_AT=N (lib/src/base/testhook.h) the Nth change a jobcg process makes
(a cgroup mkdir, rmdir or file write, an xattr, a BPF map update or delete, load, attach or
pin, a state file, the task's clone, a record's append) fails with EIO; N is walked from 1
until an operation runs through without reaching it. Walked, in node and linear mode: `jobcg
alloc --gres`, a step (`jobcg run --job J --gres`), a throwaway job's `jobcg run`, a step
through `jobcg daemon` (the daemon's changes failing, then the client's), `jobcg adopt`,
`jobcg release`, `jobcg gc` finishing a killed run, `jobcg resv create` and `delete`, `jobcg
init` and `jobcg teardown --force`. A command that fails says why and leaves the tree, its
marks, the device policy and the pins as they were, or what it left is finished by the next
release, deletion, gc or teardown; one that succeeds anyway (the failed change was optional,
or its record was set aside for gc) leaves a complete result; every job and step gets the
records that say what happened, once; after any failed init the next job is contained. One
change fails per run (the rollback's own are not made to fail), except in the walk of
JOBCG_TEST_FAIL_AT=N+ over alloc, where every change from the Nth on fails and gc finishes."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pytap  # noqa: E402
from pytap import ok, diag  # noqa: E402

NGPU = 4
MAX_CHANGES = 200  # far above any operation's count: the walk ends before


class Env(pytap.KernelEnv):
    def setup(self, mode):
        self.mode = mode
        self.stand_in_gpus(NGPU, f"ConstrainDevices=yes\nDeviceProgram={mode}\n")
        self.fail_log = os.path.join(self.tmp, "fail.log")

    def failing(self, n, *args):
        """`jobcg ARGS` with its Nth change failing (N: a number, or "K+" for every change
        from the Kth on): (the result, what failed first or None when the command made fewer
        than N changes)."""
        try:
            os.unlink(self.fail_log)
        except FileNotFoundError:
            pass
        env = dict(self.env, JOBCG_TEST_FAIL_AT=str(n), JOBCG_TEST_FAIL_LOG=self.fail_log)
        r = self.run(*args, env=env)
        try:
            with open(self.fail_log) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            lines = []
        what = lines[0].split(" ", 1)[1] if lines else None
        if what:
            what = what.replace(self.root, "ROOT").replace(self.tmp, "TMP")
        return r, what

    def snapshot(self, records=True):
        """What a failed operation must leave as it found it: the tree below the root with
        every directory's trusted.* marks, the device policy's grants and managed devices,
        the pinned objects, and the accounting records."""
        tree = {}
        for dirpath, _, _ in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            marks = {}
            for name in os.listxattr(dirpath):
                # (a step id is used once, whether its step began or not)
                if name.startswith("trusted.") and name != "trusted.jobcg.next_step":
                    marks[name] = os.getxattr(dirpath, name).hex()
            tree[rel] = marks
        r = self.run("policy", "--json")
        try:
            pol = json.loads(r.stdout)
        except ValueError:
            pol = {"unreadable": r.stderr}
        grants = sorted(json.dumps([g.get("path"), g.get("level"), g.get("allow")])
                        for g in pol.get("grants", []))
        pins = []
        pin_dir = self.env["JOBCG_BPF_PIN_DIR"]
        for dirpath, _, files in os.walk(pin_dir):
            pins += [os.path.relpath(os.path.join(dirpath, f), pin_dir) for f in files]
        out = {"tree": tree, "grants": grants, "managed": pol.get("managed"),
               "attached": pol.get("attached"), "pins": sorted(pins)}
        if records:
            out["records"] = self.records()
        return out

    def gpu(self, i):
        return os.path.join(self.gpus, f"nvidia{i}")

    def opens(self, rel):
        got = self.open_in(rel, *[self.gpu(i) for i in range(NGPU)])
        return [i for i in range(NGPU) if got[i] == 0]

    def wipe(self):
        """The tree, its pins and state removed (nothing runs in them)."""
        for dirpath, _, _ in os.walk(self.root, topdown=False):
            os.rmdir(dirpath)
        subprocess.run(["rm", "-rf", self.env["JOBCG_BPF_PIN_DIR"], self.state])


def differences(a, b):
    """The keys of two snapshot() results that differ, with both sides, for a diagnostic."""
    out = []
    for k in a:
        if a[k] != b.get(k):
            out.append(f"{k}: {json.dumps(a[k])[:400]} -> {json.dumps(b.get(k))[:400]}")
    return out


def said_why(r):
    return "Input/output error" in r.stderr and r.stderr.startswith("jobcg:")


def walk(e, label, args, on_failed, on_passed, before_each=None, onward=False, args_of=None):
    """Run ARGS failing at change 1, 2, ... (with @onward, at every change from it on) until
    one run reaches no failure; @on_failed(n, what, r) and @on_passed(n, what, r) judge each.
    Returns the number of changes seen."""
    for n in range(1, MAX_CHANGES + 1):
        if before_each:
            before_each()
        r, what = e.failing(f"{n}+" if onward else n, *(args_of(args) if args_of else args))
        if what is None:
            # (n 1: nothing was made to fail, a jobcg without test hooks: proves nothing)
            ok(r.returncode == 0 and n > 1, f"{label}: with no change failing it works "
               f"({n - 1} changes; {r.stderr.strip()})")
            return n - 1
        if r.returncode != 0:
            on_failed(n, what, r)
        else:
            on_passed(n, what, r)
    ok(False, f"{label}: the walk ended (more than {MAX_CHANGES} changes)")
    return MAX_CHANGES


def check_alloc(e, m):
    """A job's creation: every failure rolls back to the state before it."""
    r = e.run("init")
    ok(r.returncode == 0, f"{m}: init ({r.stderr.strip()})")
    before = e.snapshot()

    def failed(n, what, r):
        after = e.snapshot()
        ok(said_why(r) and after == before,
           f"{m}: alloc failing at change {n} ({what}) says why and leaves nothing "
           f"({r.stderr.strip()}; {differences(before, after)})")

    def passed(n, what, r):
        # An optional change (the grant's key index): the job is whole and contained.
        job_ok = e.opens("job_40") == [0] if e.mode == "node" else True
        rel = e.run("release", "40")
        after = e.snapshot()
        recs = after["records"][len(before["records"]):]
        ok(job_ok and rel.returncode == 0 and
           {k: v for k, v in after.items() if k != "records"} ==
           {k: v for k, v in before.items() if k != "records"} and
           [x.get("type") for x in recs] == ["job"],
           f"{m}: alloc with change {n} failing ({what}) still made a whole job, "
           f"released cleanly with its record ({differences(before, after)})")
        before["records"] = after["records"]

    n = walk(e, f"{m}: alloc 40 --gres gpu:1", ["alloc", "40", "--gres", "gpu:1"], failed,
             passed)
    diag(f"{m}: alloc --gres gpu:1 makes {n} changes")
    e.run("release", "40")


def check_alloc_onward(e, m):
    """A job's creation where every change from one on fails, its rollback's too: the command
    says why, and gc removes what it left (recorded FAILED at most: a creation that never
    finished), after which the tree, the policy and the pins are as before."""
    before = e.snapshot(records=False)
    seen = [len(e.records())]

    def judge(n, what, r, failed):
        rel = e.run("release", "46") if not failed else None
        g = e.run("gc")
        after = e.snapshot(records=False)
        recs = e.records()
        new = sorted(f"{x.get('type')}:{x.get('state')}" for x in recs[seen[0]:])
        seen[0] = len(recs)
        ok((said_why(r) and new in ([], ["job:FAILED"]) if failed else
            rel.returncode == 0 and new == ["job:COMPLETED"]) and g.returncode == 0 and
           after == before,
           f"{m}: alloc with every change from {n} on failing ({what}) "
           f"{'says why' if failed else 'made a whole job'}; after gc nothing of it is "
           f"left, records {new} ({r.stderr.strip()}; {g.stderr.strip()}; "
           f"{differences(before, after)})")

    walk(e, f"{m}: alloc 46 --gres gpu:1, every change from the Nth on failing",
         ["alloc", "46", "--gres", "gpu:1"], lambda n, w, r: judge(n, w, r, True),
         lambda n, w, r: judge(n, w, r, False), onward=True)
    e.run("release", "46")


def check_run_onward(e, m):
    """A step of job 51 and a throwaway job's run where every change from one on fails, the
    rollback's and the removal's too: the command says why when it fails, and once gc has run
    (twice: a record the first could not write waits for the second) the tree, the policy and
    the pins are as before, with at most one record for each step and job made."""
    r = e.run("alloc", "51", "--gres", "gpu:2")
    ok(r.returncode == 0, f"{m}: alloc 51 --gres gpu:2 ({r.stderr.strip()})")
    before = e.snapshot(records=False)
    seen = [len(e.records())]

    trace = os.path.join(e.tmp, "ran")

    def judge(label, n, what, r):
        ran = os.path.exists(trace)
        if ran:
            os.unlink(trace)
        g = [e.run("gc") for _ in range(2)]
        after = e.snapshot(records=False)
        recs = e.records()
        new = [x for x in recs[seen[0]:]]
        seen[0] = len(recs)
        kinds = sorted(f"{x.get('type')}:{x.get('job')}.{x.get('step', '')}" for x in new)
        # A step whose task never started, but for failing to start it, ran nothing: no
        # record of it, not NODE_FAIL.
        unstarted = not ran and "/task_0" not in what
        steps = [x for x in new if x.get("type") == "step"]
        ok((r.returncode == 0 or said_why(r)) and all(x.returncode == 0 for x in g) and
           after == before and len(kinds) == len(set(kinds)) and len(kinds) <= 2 and
           not (unstarted and steps),
           f"{m}: {label} with every change from {n} on failing ({what}): rc "
           f"{r.returncode}; after gc nothing of it is left, records "
           f"{[x.get('state') for x in new]} ({r.stderr.strip()}; "
           f"{[x.stderr.strip() for x in g]}; {differences(before, after)})")

    task = ["--", "sh", "-c", f"echo >> {trace}"]
    for label, args in (("run --job 51", ["run", "--job", "51", "--gres", "gpu:1", *task]),
                        ("run without --job", ["run", "--gres", "gpu:1", *task])):
        walk(e, f"{m}: {label}, every change from the Nth on failing", args,
             lambda n, w, r, label=label: judge(label, n, w, r),
             lambda n, w, r, label=label: judge(label, n, w, r), onward=True)
    e.run("release", "51")


def step_records(e, job):
    return [r for r in e.records() if r.get("type") == "step" and str(r.get("job")) == job]


def check_step(e, m):
    """A step's creation and end: a failed step leaves its job as it was; a step whose
    record could not be written gets it from gc, once."""
    r = e.run("alloc", "41", "--gres", "gpu:2")
    ok(r.returncode == 0, f"{m}: alloc 41 --gres gpu:2 ({r.stderr.strip()})")
    before = e.snapshot(records=False)
    nrec = [len(step_records(e, "41"))]

    def failed(n, what, r):
        # gc finds nothing to do, but a step whose directory could not be removed: it
        # removes that one, as a step whose runner is gone.
        g = e.run("gc")
        after = e.snapshot(records=False)
        recs = step_records(e, "41")
        new = [x.get("state") for x in recs[nrec[0]:]]
        nrec[0] = len(recs)
        # A step that never began has no record; one whose task could not start is FAILED.
        # One left behind because its directory could not be removed: gc removes it and
        # writes the record its runner set aside, how it really ended.
        want = (["FAILED"] if what.startswith(("clone3 ", "mkdir ROOT/job_41/step_")) and
                what.endswith("/task_0") else ["COMPLETED"] if what.startswith("rmdir ")
                else [])
        ok(said_why(r) and g.returncode == 0 and after == before and new == want,
           f"{m}: run --job 41 failing at change {n} ({what}) says why, leaves the job as "
           f"it was ({r.stderr.strip()}; {g.stderr.strip()}; {differences(before, after)}; "
           f"records {new}, {want} expected)")

    def passed(n, what, r):
        g = e.run("gc")
        recs = step_records(e, "41")
        new = recs[nrec[0]:]
        nrec[0] = len(recs)
        after = e.snapshot(records=False)
        ok(g.returncode == 0 and after == before and len(new) == 1 and
           new[0].get("state") == "COMPLETED",
           f"{m}: run --job 41 with change {n} failing ({what}) ran, and its step has one "
           f"COMPLETED record once gc ran ({[x.get('state') for x in new]}; "
           f"{r.stderr.strip()}; {differences(before, after)})")

    n = walk(e, f"{m}: run --job 41 --gres gpu:1", ["run", "--job", "41", "--gres", "gpu:1",
                                                    "--", "true"], failed, passed)
    diag(f"{m}: a step with --gres gpu:1 makes {n} changes")
    r = e.run("run", "--job", "41", "--gres", "gpu:2", "--", "true")
    ok(r.returncode == 0, f"{m}: then a step gets both of the job's GPUs ({r.stderr.strip()})")
    e.run("release", "41")


def check_throwaway(e, m):
    """`jobcg run` without --job: a job made for the step and removed with it. Whatever
    change fails, the command says why when it fails, and once gc has run nothing of the job
    is left (its GPU free) and its records say what happened: none when the job was never
    made; the job FAILED when its task did not run (and the step FAILED when it was started);
    both COMPLETED when it ran, except a job whose removal could not even be marked, which gc
    found without the outcome (NODE_FAIL)."""
    base = e.snapshot(records=False)
    seen = [len(e.records())]
    trace = os.path.join(e.tmp, "ran")

    def new_records():
        recs = e.records()
        new = recs[seen[0]:]
        seen[0] = len(recs)
        return sorted(f"{x.get('type')}:{x.get('state')}" for x in new)

    def judge(n, what, r, failed):
        ran = os.path.exists(trace)
        if ran:
            os.unlink(trace)
        g = e.run("gc")
        after = e.snapshot(records=False)
        recs = new_records()
        jobs = [x for x in recs if x.startswith("job:")]
        steps = [x for x in recs if x.startswith("step:")]
        if ran:
            removal_unmarked = failed and what.startswith("setxattr ROOT/job_") and \
                "/" not in what[len("setxattr ROOT/"):]
            rec_ok = steps == ["step:COMPLETED"] and (
                jobs == ["job:COMPLETED"] or (removal_unmarked and jobs == ["job:NODE_FAIL"]))
        else:
            rec_ok = failed and steps in ([], ["step:FAILED"]) and (
                jobs == ["job:FAILED"] or (jobs == [] and steps == []))
        ok((said_why(r) if failed else True) and g.returncode == 0 and after == base and rec_ok,
           f"{m}: run without --job {'failing' if failed else 'with'} change {n} ({what}) "
           f"{'says why; ' if failed else 'ran; '}after gc nothing of it is left, records "
           f"{recs} ({r.stderr.strip()}; {g.stderr.strip()}; {differences(base, after)})")

    n = walk(e, f"{m}: run --gres gpu:1 without --job",
             ["run", "--gres", "gpu:1", "--", "sh", "-c", f"echo >> {trace}"],
             lambda n, what, r: judge(n, what, r, True),
             lambda n, what, r: judge(n, what, r, False))
    diag(f"{m}: a throwaway job's step with a GPU makes {n} changes")


def check_daemon(e, m, side):
    """A step through `jobcg daemon`, the changes of one side failing (the daemon's: a daemon
    started for each run with JOBCG_TEST_FAIL_AT; or its client's): the client says why when
    it fails, the daemon goes on serving and stops cleanly, and once gc has run the job is as
    it was, with one COMPLETED record for each step whose task ran."""
    r = e.run("alloc", "47", "--gres", "gpu:2")
    ok(r.returncode == 0, f"{m}: alloc 47 --gres gpu:2 ({r.stderr.strip()})")
    before = e.snapshot(records=False)
    sock = os.path.join(e.tmp, "daemon.sock")
    trace = os.path.join(e.tmp, "ran")
    seen = [len(step_records(e, "47"))]
    for n in range(1, MAX_CHANGES + 1):
        try:
            os.unlink(e.fail_log)
        except FileNotFoundError:
            pass
        inject = dict(JOBCG_TEST_FAIL_AT=str(n), JOBCG_TEST_FAIL_LOG=e.fail_log)
        denv = dict(e.env, **(inject if side == "daemon" else {}))
        denv.pop("JOBCG_DAEMON_SOCKET", None)
        with open(os.path.join(e.tmp, "daemon.log"), "w+") as dlog:
            d = subprocess.Popen([e.jobcg, "daemon", "--socket", sock], env=denv, stdout=dlog,
                                 stderr=dlog, stdin=subprocess.DEVNULL, start_new_session=True)
            for _ in range(500):
                if os.path.exists(sock) or d.poll() is not None:
                    break
                time.sleep(0.01)
            cenv = dict(e.env, JOBCG_DAEMON_SOCKET=sock, **(inject if side == "client" else {}))
            r = e.run("run", "--job", "47", "--gres", "gpu:1", "--", "sh", "-c",
                      f"echo >> {trace}", env=cenv)
            served = d.poll() is None
            d.send_signal(signal.SIGTERM)
            try:
                d.wait(60)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()
            dlog.seek(0)
            dtext = dlog.read()
        try:
            with open(e.fail_log) as f:
                what = f.readline().split(" ", 1)[1].strip()
        except (FileNotFoundError, IndexError):
            what = None
        what = what and what.replace(e.root, "ROOT").replace(e.tmp, "TMP")
        ran = os.path.exists(trace)
        if ran:
            os.unlink(trace)
        g = e.run("gc")
        after = e.snapshot(records=False)
        recs = step_records(e, "47")
        new = [x.get("state") for x in recs[seen[0]:]]
        seen[0] = len(recs)
        if what is None:
            ok(r.returncode == 0 and ran and new == ["COMPLETED"] and n > 1,
               f"{m}: through the daemon, with none of the {side}'s {n - 1} changes failing, "
               f"the step runs ({r.stderr.strip()})")
            diag(f"{m}: the {side} makes {n - 1} changes for a step through the daemon")
            break
        # (the client names the step's directory, not the descriptor the daemon lent it)
        ok((r.returncode == 0 or said_why(r)) and "/proc/self/fd" not in r.stderr and
           served and d.returncode == 0 and
           g.returncode == 0 and after == before and
           new == (["COMPLETED"] if ran else ["FAILED"] if "task_0" in what else []),
           f"{m}: through the daemon, the {side}'s change {n} failing ({what}): rc "
           f"{r.returncode}, {'ran' if ran else 'did not run'}, daemon served and stopped "
           f"({d.returncode}); after gc the job is as it was, records {new} "
           f"({r.stderr.strip()}; {g.stderr.strip()}; {differences(before, after)}; "
           f"{dtext.strip()[-300:] if d.returncode else ''})")
    else:
        ok(False, f"{m}: the daemon walk ended (more than {MAX_CHANGES} changes)")
    e.run("release", "47")


def check_adopt(e, m):
    """`jobcg adopt PID --job J` (a login's process into the job's extern step): a failure
    leaves the process where it was and the job as it was."""
    r = e.run("alloc", "50", "--gres", "gpu:1")
    ok(r.returncode == 0, f"{m}: alloc 50 --gres gpu:1 ({r.stderr.strip()})")
    e.mkcg("parking")
    procs = []

    def prepare():
        p = subprocess.Popen(["sleep", "300"])
        procs.append(p)
        with open(os.path.join(e.root, "parking", "cgroup.procs"), "w") as f:
            f.write(str(p.pid))
        state["before"] = e.snapshot(records=False)

    def cgroup_of(p):
        """@p's cgroup v2 directory, relative to the root."""
        with open(f"/proc/{p.pid}/cgroup") as f:
            v2 = [x[3:] for x in f.read().splitlines() if x.startswith("0::")]
        rel = os.path.relpath(os.path.join(e.mount, v2[0].lstrip("/")), e.root) if v2 else None
        return rel

    def failed(n, what, r):
        p = procs[-1]
        where = cgroup_of(p)
        after = e.snapshot(records=False)
        ok(said_why(r) and where == "parking" and after == state["before"],
           f"{m}: adopt failing at change {n} ({what}) says why, leaves the process where it "
           f"was ({where}) and the job as it was ({r.stderr.strip()}; "
           f"{differences(state['before'], after)})")
        p.kill()
        p.wait()

    def passed(n, what, r):
        p = procs[-1]
        where = cgroup_of(p)
        ok(where == "job_50/step_extern/user/task_special",
           f"{m}: adopt with change {n} failing ({what}) moved the process ({where})")
        p.kill()
        p.wait()

    state = {}
    walk(e, f"{m}: adopt into job 50", ["adopt", "PID", "--job", "50"], failed, passed,
         before_each=prepare, args_of=lambda a: [str(procs[-1].pid) if x == "PID" else x
                                                  for x in a])
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    e.run("release", "50")
    e.rmcg("parking")


def check_release(e, m):
    """A job's removal: a release that fails is finished by the next one; the job has one
    record and its GPUs are free."""
    base = e.snapshot(records=False)
    count = [0]

    def prepare():
        r = e.run("alloc", "42", "--gres", "gpu:2")
        s = e.run("run", "--job", "42", "--", "true")
        if r.returncode != 0 or s.returncode != 0:
            diag(f"alloc 42: {r.stderr.strip()}; run: {s.stderr.strip()}")
        count[0] += 1

    def records42():
        return [r for r in e.records() if r.get("type") == "job" and str(r.get("job")) == "42"]

    def failed(n, what, r):
        again = e.run("release", "42")
        if again.returncode != 0 and "no job" in again.stderr:
            again = e.run("gc")
        after = e.snapshot(records=False)
        recs = records42()
        ok(said_why(r) and again.returncode == 0 and after == base and len(recs) == count[0],
           f"{m}: release 42 failing at change {n} ({what}) says why; the next release "
           f"finishes it with one record ({r.stderr.strip()}; {again.stderr.strip()}; "
           f"{len(recs)} records for {count[0]} jobs; {differences(base, after)})")

    def passed(n, what, r):
        g = e.run("gc")
        after = e.snapshot(records=False)
        recs = records42()
        ok(g.returncode == 0 and after == base and len(recs) == count[0],
           f"{m}: release 42 with change {n} failing ({what}) removed the job; one record "
           f"once gc ran ({len(recs)} records for {count[0]} jobs; {r.stderr.strip()}; "
           f"{differences(base, after)})")

    n = walk(e, f"{m}: release 42", ["release", "42"], failed, passed, before_each=prepare)
    diag(f"{m}: a release of a job with a GPU makes {n} changes")
    r = e.run("alloc", "43", "--gres", f"gpu:{NGPU}")
    ok(r.returncode == 0, f"{m}: then every GPU is free ({r.stderr.strip()})")
    e.run("release", "43")


def check_resv(e, m):
    """A reservation of two GPUs: a creation that fails leaves nothing (no directory, no
    device withheld from the pool); a deletion that fails is finished by the next one; at the
    end every GPU is free for a job."""
    base = e.snapshot(records=False)

    def failed_create(n, what, r):
        after = e.snapshot(records=False)
        ok(said_why(r) and after == base,
           f"{m}: resv create failing at change {n} ({what}) says why and leaves nothing "
           f"({r.stderr.strip()}; {differences(base, after)})")

    def passed_create(n, what, r):
        d = e.run("resv", "delete", "r1")
        after = e.snapshot(records=False)
        ok(d.returncode == 0 and after == base,
           f"{m}: resv create with change {n} failing ({what}) made a whole reservation, "
           f"deleted cleanly ({d.stderr.strip()}; {differences(base, after)})")

    n = walk(e, f"{m}: resv create r1 --devices gpu:0,1",
             ["resv", "create", "r1", "--devices", "gpu:0,1"], failed_create, passed_create)
    diag(f"{m}: a reservation of two GPUs takes {n} changes to make")
    e.run("resv", "delete", "r1")

    # Every change from the Nth on failing, the undo's too: gc removes what is left.
    def onward(n, what, r):
        g = e.run("gc")
        d = e.run("resv", "delete", "r1") if r.returncode == 0 else None
        after = e.snapshot(records=False)
        ok((said_why(r) or r.returncode == 0) and g.returncode == 0 and
           (d is None or d.returncode == 0) and after == base,
           f"{m}: resv create with every change from {n} on failing ({what}): rc "
           f"{r.returncode}; after gc nothing of it is left ({r.stderr.strip()}; "
           f"{g.stderr.strip()}; {differences(base, after)})")

    walk(e, f"{m}: resv create r1, every change from the Nth on failing",
         ["resv", "create", "r1", "--devices", "gpu:0,1"], onward, onward, onward=True)
    e.run("resv", "delete", "r1")

    def prepare():
        r = e.run("resv", "create", "r1", "--devices", "gpu:0,1")
        if r.returncode != 0:
            diag(f"resv create r1: {r.stderr.strip()}")

    def failed_delete(n, what, r):
        again = e.run("resv", "delete", "r1")
        after = e.snapshot(records=False)
        ok(said_why(r) and again.returncode == 0 and after == base,
           f"{m}: resv delete failing at change {n} ({what}) says why; the next delete "
           f"finishes it ({r.stderr.strip()}; {again.stderr.strip()}; "
           f"{differences(base, after)})")

    def passed_delete(n, what, r):
        after = e.snapshot(records=False)
        ok(after == base, f"{m}: resv delete with change {n} failing ({what}) deleted it "
           f"({r.stderr.strip()}; {differences(base, after)})")

    n = walk(e, f"{m}: resv delete r1", ["resv", "delete", "r1"], failed_delete, passed_delete,
             before_each=prepare)
    diag(f"{m}: deleting it takes {n} changes")
    r = e.run("alloc", "45", "--gres", f"gpu:{NGPU}")
    ok(r.returncode == 0, f"{m}: then every GPU is free for a job ({r.stderr.strip()})")
    e.run("release", "45")


def check_gc(e, m):
    """gc finishing what a killed `jobcg run` left (its step, its record set aside; and a
    throwaway job), every change of it failing in turn: a gc that fails says why, the next
    one finishes (what the first could not write, kept, included), and each step gets one
    record, as its runner saw it end; the throwaway job, whose runner died before saying how
    it ended, NODE_FAIL."""
    r = e.run("alloc", "48", "--gres", "gpu:2")
    ok(r.returncode == 0, f"{m}: alloc 48 --gres gpu:2 ({r.stderr.strip()})")
    base = e.snapshot(records=False)
    crash = dict(e.env, JOBCG_TEST_CRASH="step-end-set-aside")
    seen = [len(e.records())]

    def prepare():
        a = e.run("run", "--job", "48", "--gres", "gpu:1", "--", "true", env=crash)
        b = e.run("run", "--gres", "gpu:1", "--", "true", env=crash)
        if a.returncode != -9 or b.returncode != -9:
            diag(f"runs to crash: {a.returncode} {a.stderr.strip()}; {b.returncode} "
                 f"{b.stderr.strip()}")

    def judge(n, what, r, failed):
        again = e.run("gc")
        after = e.snapshot(records=False)
        recs = e.records()
        new = sorted(f"{x.get('type')}:{x.get('state')}" for x in recs[seen[0]:])
        seen[0] = len(recs)
        want = ["job:NODE_FAIL", "step:COMPLETED", "step:COMPLETED"]
        ok((said_why(r) if failed else True) and again.returncode == 0 and after == base and
           new == want,
           f"{m}: gc {'failing at' if failed else 'with'} change {n} ({what}) "
           f"{'says why, the next one finishes' if failed else 'finishes'}: records {new} "
           f"({r.stderr.strip()}; {again.stderr.strip()}; "
           f"{differences(base, after)})")

    n = walk(e, f"{m}: gc of a killed run's step and throwaway job", ["gc"],
             lambda n, w, r: judge(n, w, r, True), lambda n, w, r: judge(n, w, r, False),
             before_each=prepare)
    diag(f"{m}: that gc makes {n} changes")
    e.run("release", "48")


def check_init(e, m):
    """The tree's set-up: whatever change of `jobcg init` fails, the next job is contained."""
    for n in range(1, MAX_CHANGES + 1):
        e.wipe()
        r, what = e.failing(n, "init")
        if what is None:
            ok(r.returncode == 0 and n > 1,
               f"{m}: init with no change failing works ({n - 1} changes)")
            diag(f"{m}: init makes {n - 1} changes")
            return
        if r.returncode != 0:
            ok(said_why(r), f"{m}: init failing at change {n} ({what}) says why "
               f"({r.stderr.strip()})")
        a = e.run("alloc", "44", "--gres", "gpu:1")
        e.mkcg("handmade")
        own = e.opens("job_44") if a.returncode == 0 else None
        other = e.opens("handmade")
        e.rmcg("handmade")
        rel = e.run("release", "44")
        ok(a.returncode == 0 and own is not None and len(own) == 1 and other == [] and
           rel.returncode == 0,
           f"{m}: after init failed at change {n} ({what}), the next job opens one GPU "
           f"({own}) and a cgroup made by hand none ({other}) ({a.stderr.strip()})")
    ok(False, f"{m}: init's walk ended (more than {MAX_CHANGES} changes)")


def check_teardown(e, m):
    """`jobcg teardown --force` of a tree with a job holding a GPU and a reservation, every
    change failing in turn: a teardown that fails says why, the next one finishes (no tree,
    no pins left), and the job has exactly one record (once gc ran, when the log refused it:
    gc works without a tree, and makes none)."""
    pin_dir = e.env["JOBCG_BPF_PIN_DIR"]
    count = [0]

    def prepare():
        e.wipe()
        a = e.run("alloc", "49", "--gres", "gpu:1")
        b = e.run("resv", "create", "r2", "--devices", "gpu:2") if e.mode == "node" else a
        if a.returncode != 0 or b.returncode != 0:
            diag(f"alloc 49: {a.stderr.strip()}; resv create r2: {b.stderr.strip()}")
        count[0] += 1

    def judge(n, what, r, failed):
        again = e.run("teardown", "--force") if failed else None
        # A record the log refused waits in the state directory for gc, which writes it
        # without a tree.
        g = e.run("gc")
        gone = not os.path.exists(e.root)
        pins = [f for _, _, fs in os.walk(pin_dir) for f in fs]
        recs = [x for x in e.records() if x.get("type") == "job" and str(x.get("job")) == "49"]
        states = [x.get("state") for x in recs]
        ok((said_why(r) and again.returncode == 0 if failed else True) and gone and
           pins == [] and states == ["CANCELLED"] and g.returncode == 0,
           f"{m}: teardown --force {'failing at' if failed else 'with'} change {n} ({what})"
           f"{' says why; the next one' if failed else ''} removes the tree and its pins, "
           f"job 49 recorded once ({r.stderr.strip()}; "
           f"{again.stderr.strip() if again else ''}; gc: {g.returncode} {g.stderr.strip()}; "
           f"tree gone: {gone}, pins {pins}, "
           f"records {states})")

    n = walk(e, f"{m}: teardown --force", ["teardown", "--force"],
             lambda n, w, r: judge(n, w, r, True), lambda n, w, r: judge(n, w, r, False),
             before_each=prepare)
    diag(f"{m}: that teardown makes {n} changes")


def body(e):
    if not pytap.test_hooks():
        pytap.skip("failures are made by JOBCG_TEST_FAIL_AT: a build without test hooks")
        return
    envs = [e]
    try:
        for mode in ("node", "linear"):
            x = e if mode == "node" else Env("faultwalk-linear")
            if x is not e:
                envs.append(x)
            x.setup(mode)
            check_alloc(x, mode)
            check_alloc_onward(x, mode)
            check_step(x, mode)
            check_throwaway(x, mode)
            check_run_onward(x, mode)
            if mode == "node":
                check_daemon(x, mode, "daemon")
                check_daemon(x, mode, "client")
            check_release(x, mode)
            if mode == "node":
                check_adopt(x, mode)
            check_gc(x, mode)
            if mode == "node":  # (a reservation's devices need the node program)
                check_resv(x, mode)
            check_init(x, mode)
            check_teardown(x, mode)
    finally:
        for x in envs[1:]:
            x.cleanup()


if __name__ == "__main__":
    sys.exit(pytap.kernel_main("faultwalk", body, env_class=Env))
