#!/usr/bin/env python3
"""Kernel test: `jobcg metrics`, `jobcg daemon --metrics-listen` and `jobcg top` on a node with
stand-in GPUs (ConstrainDevices=yes). promtool accepts the text of a node with no jobs and with
jobs, a step and GPUs; the GPUs each job and step may open are those who-has finds in the
kernel's programs; series of files this host lacks are absent. A real Prometheus server scrapes
the daemon and a PromQL query names the job holding a GPU, until that job is released. Idle,
oversized, 50 concurrent and 140 slow-drip clients do not hold up scrapes or launches, and
malformed requests do not flood the daemon's log. With --allow (--metrics-allow), clients from
other addresses are closed unanswered as they connect, take no slot and are logged once a
minute. The process that talks HTTP (the daemon's child, or `jobcg metrics --listen`) runs as
nobody, no new privileges nor capabilities, and its one child, the collector, as root; garbage
on their channels leaves the collector running and answering. A metrics server killed is logged
and started again on the same port, later when that port is taken, its collector gone and the
new one separated likewise; its relay ends with it (so does that of `jobcg metrics --listen`),
though a process of nobody holds their pipe; a collector killed ends its HTTP process, even one
started with SIGCHLD ignored; answers not taken make the collector give up their channel after
10 s, and the HTTP process then exit; a reading that never ends (NSS not answering) does not
hold up SIGTERM. `--listen` on port 0 names the port the kernel chose; another path is 404,
another method than GET and HEAD 405 with an Allow header; a connection is kept for the next
scrape. Without Prometheus only these and the next are checked. `metrics` and `top`
refuse another user than root. `jobcg top` shows the job and its GPU under tmux and quits on q.
Makes its own cgroup subtree, state, configuration, ports and Prometheus storage; kills only the
processes it started."""
import ctypes
import http.client
import json
import os
import pty
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pytap import KernelEnv, diag, kernel_main, ok  # noqa: E402
import pytap  # noqa: E402

NGPU = 4
# Bounds this test holds the server to (seconds).
SCRAPES_BOUND = 20  # 50 concurrent scrapes, with an idle and an oversized client connected
LAUNCH_BOUND = 10  # a launch through the daemon meanwhile
IDLE_CLOSE_BOUND = 12  # the server closes a client that sends nothing (its timeout is 5 s)
DRIPS = 140  # clients that drip a header line a second and never end their request
DRIP_BOUND = 10  # they hold up a scrape no longer than this (the deadline is 5 s)
PROM_BOUND = 40  # Prometheus sees a change within this
HELD_STOP_BOUND = 8  # SIGTERM ends the server with a reading that never ends
HELD_STOPS = 3  # servers stopped so


class Env(KernelEnv):
    def __init__(self, name):
        super().__init__(name)
        self.stand_in_gpus(NGPU, "ConstrainDevices=yes\n")
        # NVIDIA's proc files, as the driver writes them, for GPU 0 only.
        proc = os.path.join(self.tmp, "nvproc")
        os.makedirs(os.path.join(proc, "0000:3b:00.0"))
        with open(os.path.join(proc, "0000:3b:00.0", "information"), "w") as f:
            f.write("Model: \t\t Stand-in\nDevice Minor: \t 0\nGPU UUID: \t GPU-5e1f-0000\n")
        self.env.update(JOBCG_NVIDIA_PROC_DIR=proc, JOBCG_DAEMON_SOCKET="")
        self.procs = []
        self.tmux = f"jobcg-test-{os.getpid()}"

    def spawn(self, args, log, **kw):
        p = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                             start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def cleanup(self):
        subprocess.run(["tmux", "-L", self.tmux, "kill-server"], capture_output=True)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        super().cleanup()


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def parse(text):
    """Samples as (name, labels, value)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            out.append(("<unparsed>", {"line": line}, None))
            continue
        labels = {k: v for k, v in LABEL.findall(m.group(3) or "")}
        out.append((m.group(1), labels, m.group(4)))
    return out


def promtool(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    if r.returncode:
        diag(r.stdout + r.stderr)
    return r.returncode == 0


def holders(samples):
    """{(gpu, job, step)} of jobcg_gpu_info."""
    return {(s[1]["gpu"], s[1]["job"], s[1]["step"]) for s in samples
            if s[0] == "jobcg_gpu_info"}


def value(samples, name, **labels):
    for n, lab, v in samples:
        if n == name and all(lab.get(k) == w for k, w in labels.items()):
            return v
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def who_has(e):
    """{(gpu, job, step)} from `jobcg who-has` on each GPU: what the kernel lets open."""
    got = set()
    for i in range(NGPU):
        r = e.run("who-has", os.path.join(e.gpus, f"nvidia{i}"), "--root", e.root, "--json")
        for c in json.loads(r.stdout)["cgroups"]:
            rel = os.path.relpath(c["cgroup"], e.root)
            if re.fullmatch(r"job_\d+(/step_[^/]+)?", rel) and "r" in c["access"]:
                got.add((str(i), str(c["job"]), c["step"] or ""))
    return got


def hostile_clients(e, port, sock, up, dlog):
    """Idle, oversized, 50 concurrent and slow-drip clients against the daemon's server on
    @port: none holds up a scrape or a launch beyond its bound, nor floods the daemon's log."""
    url = f"http://127.0.0.1:{port}/metrics"
    idle = socket.create_connection(("127.0.0.1", port), timeout=30)
    big = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        big.sendall(b"GET /" + b"a" * (1 << 20) + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    except OSError:
        pass  # the server may close it before it has all of it
    results = []

    def scrape():
        t = time.time()
        try:
            st_, txt = http_get(url, SCRAPES_BOUND)
            results.append((st_ == 200 and "jobcg_jobs" in txt, time.time() - t))
        except OSError as x:
            results.append((False, repr(x)))
    t0 = time.time()
    threads = [threading.Thread(target=scrape) for _ in range(50)]
    for t in threads:
        t.start()
    env = dict(e.env, JOBCG_DAEMON_SOCKET=sock)
    t1 = time.time()
    r = subprocess.run([e.jobcg, "run", "--", "true"], env=env, capture_output=True, text=True,
                       timeout=60)
    launch = time.time() - t1
    for t in threads:
        t.join()
    took = time.time() - t0
    good = [x for x in results if x[0]]
    ok(len(good) == 50 and took < SCRAPES_BOUND,
       f"50 concurrent scrapes with an idle and an oversized client connected: {len(good)} "
       f"good in {took:.1f} s (bound {SCRAPES_BOUND} s)")
    if len(good) != 50:
        diag(str([x for x in results if not x[0]][:3]))
    ok(r.returncode == 0 and launch < LAUNCH_BOUND,
       f"a launch through the daemon meanwhile: rc {r.returncode} in {launch:.2f} s "
       f"(bound {LAUNCH_BOUND} s)")
    big.settimeout(10)
    try:
        answer = big.recv(64)
    except OSError:
        answer = b""
    ok(answer == b"" or re.match(rb"HTTP/1\.[01] (4\d\d)", answer) is not None,
       f"the oversized request gets a 4xx or a closed connection ({answer[:20]!r})")
    t = time.time()
    idle.settimeout(IDLE_CLOSE_BOUND)
    try:
        gone = idle.recv(1) == b""
    except OSError:
        gone = False
    ok(gone, f"the idle client is closed by the server ({time.time() - t:.1f} s)")
    idle.close()
    big.close()
    ok(up(), "and the server still answers")

    # Slow drip: each sends a header line every second, so it is never idle, and never ends
    # its request. They fill the connection slots (the per-address limit: all come from
    # 127.0.0.1, as the scraper does); the deadline for a whole request frees them.
    drips = []
    for _ in range(DRIPS):
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            drips.append(c)
        except OSError:
            pass
    stop = threading.Event()

    def drip():
        n = 0
        while not stop.wait(1):
            n += 1
            for c in drips:
                try:
                    c.sendall(b"X-Drip-%d: y\r\n" % n)
                except OSError:
                    pass
    dripper = threading.Thread(target=drip)
    dripper.start()
    t = time.time()
    got, why = False, ""
    while not got and time.time() - t < DRIP_BOUND:
        try:
            st_, txt = http_get(url, 2)
            got = st_ == 200 and "jobcg_jobs" in txt
        except OSError as x:
            why = repr(x)
            time.sleep(0.2)
    took = time.time() - t
    stop.set()
    dripper.join()
    for c in drips:
        c.close()
    ok(got, f"{len(drips)} dripping clients hold up a scrape {took:.1f} s only "
       f"(bound {DRIP_BOUND} s; {why})")

    # A malformed request is logged by libmicrohttpd: not once per request.
    dlog.flush()
    before = os.path.getsize(dlog.name)
    for _ in range(20):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                c.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                c.recv(512)
        except OSError:
            pass
    time.sleep(0.5)
    grew = os.path.getsize(dlog.name) - before
    ok(grew < 600, f"20 malformed requests add {grew} bytes to the daemon's log (bound 600)")
    ok(up(), "and the server still answers")


def proc_status(pid):
    """/proc/PID/status as {key: [fields]}; {} when it is gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.split()
    except OSError:
        pass
    return out


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def gone(pid):
    return not os.path.exists(f"/proc/{pid}") or pytap.zombie(pid) or \
        proc_status(pid).get("State", [""])[0] == "Z"


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def collector_of(pid):
    """The collector of the HTTP process @pid (its child named jobcg-collector), or None."""
    kids = [k for k in children(pid) if comm(k) == "jobcg-collector"]
    return kids[0] if len(kids) == 1 else None


def relay_of(pid):
    """The relay of the HTTP process @pid (its child named jobcg-http-log), or None."""
    kids = [k for k in children(pid) if comm(k) == "jobcg-http-log"]
    return kids[0] if len(kids) == 1 else None


def held_pipe(http, log, what):
    """A process of nobody's holds a copy of the HTTP process @http's standard output, as a
    child forked by a compromised HTTP process would (handed over here by root, through
    /proc/PID/fd/1). @http killed, its relay still copies the line @http left in the pipe, then
    ends within seconds, the holder still alive: no root relay outlives its HTTP process."""
    relay = relay_of(http)
    fd = os.open(f"/proc/{http}/fd/1", os.O_WRONLY | os.O_CLOEXEC)
    holder = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               "sleep", "300"], pass_fds=(fd,), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        ok(relay is not None and wait_for(
            lambda: proc_status(holder.pid).get("Uid") == ["65534"] * 4
            and fd_link(holder.pid, fd) == fd_link(http, 1), 5),
           f"{what}: a process of nobody ({holder.pid}) holds the HTTP process's pipe "
           f"(relay {relay})")
        # In the pipe when the HTTP process ends: the relay stopped meanwhile.
        if relay:
            os.kill(relay, signal.SIGSTOP)
        os.write(fd, b"its last line\n")
        os.close(fd)
        fd = -1
        os.kill(http, signal.SIGKILL)
        ok(wait_for(lambda: gone(http), 5), f"{what}: the HTTP process ({http}) killed")
        if relay:
            os.kill(relay, signal.SIGCONT)
        ok(relay and wait_for(lambda: gone(relay), 5) and holder.poll() is None,
           f"{what}: its relay ({relay}) ends with it, though another process holds the "
           f"pipe ({holder.pid}, {'alive' if holder.poll() is None else 'ended'})")
        text = pytap.wait_file(log.name, lambda t: f"http[{http}]: its last line" in t, 5)
        ok(f"jobcg: metrics: http[{http}]: its last line\n" in text,
           f"{what}: after copying what the HTTP process left in the pipe")
    finally:
        if fd >= 0:
            os.close(fd)
        holder.kill()
        holder.wait()
        if relay and not gone(relay):
            os.kill(relay, signal.SIGCONT)


def tty_nr(pid):
    """The controlling terminal of @pid (/proc/PID/stat's tty_nr; 0: none), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rpartition(")")[2].split()[4])
    except (OSError, IndexError, ValueError):
        return None


def fd_link(pid, fd):
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None


def detached(pid, what):
    """The HTTP process @pid has no controlling terminal, standard input /dev/null and standard
    output and error a pipe whose reading end only its relay (root) holds; it is named
    jobcg-metrics. The relay's pid, or None."""
    relay = relay_of(pid)
    links = [fd_link(pid, fd) for fd in range(3)]
    pipe = links[2] if links[2] and links[2].startswith("pipe:[") else None
    ok(tty_nr(pid) == 0, f"{what}: the HTTP process has no controlling terminal "
       f"(tty_nr {tty_nr(pid)})")
    ok(links[0] == "/dev/null" and pipe and links[1] == pipe,
       f"{what}: its standard input is /dev/null, its output and error a pipe ({links})")
    ok(relay is not None and proc_status(relay).get("Uid") == ["0"] * 4
       and pipe in [fd_link(relay, x) for x in os.listdir(f"/proc/{relay}/fd")],
       f"{what}: the other end of that pipe is its child the relay, jobcg-http-log, root "
       f"({children(pid)}, {[comm(k) for k in children(pid)]})")
    ok(comm(pid) == "jobcg-metrics", f"{what}: the HTTP process is named jobcg-metrics "
       f"({comm(pid)})")
    return relay


def separated(pid, what, user="nobody"):
    """The HTTP-serving process @pid runs as @user (every uid and gid, no supplementary group,
    no capability, no new privileges); its children, the collector and the relay, are root, and
    it holds no descriptor of the terminal or log of whoever started it. The collector's pid,
    or None."""
    pw = pwd.getpwnam(user)
    st = proc_status(pid)
    uid, gid = str(pw.pw_uid), str(pw.pw_gid)
    ok(st.get("Uid") == [uid] * 4 and st.get("Gid") == [gid] * 4
       and st.get("Groups") == [] and st.get("NoNewPrivs") == ["1"]
       and (user == "root" or int(st.get("CapEff", ["1"])[0], 16) == 0
            and int(st.get("CapPrm", ["1"])[0], 16) == 0),
       f"{what}: the HTTP process (pid {pid}) runs as {user}: real, effective, saved and "
       f"file system uid {st.get('Uid')}, gid {st.get('Gid')}, groups {st.get('Groups')}, "
       f"NoNewPrivs {st.get('NoNewPrivs')}, CapEff {st.get('CapEff')}")
    kids = children(pid)
    coll = collector_of(pid)
    ok(len(kids) == 2 and coll is not None and proc_status(coll).get("Uid") == ["0"] * 4,
       f"{what}: its children are the collector, root, and the relay ({kids})")
    extra = [] if coll is None else [
        fd_link(coll, x) for x in os.listdir(f"/proc/{coll}/fd") if int(x) > 2]
    ok(coll is not None and len(extra) == 4 and all(x.startswith("socket:[") for x in extra),
       f"{what}: the collector holds its 4 channels and nothing else ({extra})")
    detached(pid, what)
    return coll


def channels(pid):
    """The descriptors above 2 of @pid that are Unix sockets (the HTTP process's channels to
    the collector, or the collector's), duplicated here (pidfd_getfd), as sockets, lowest
    descriptor first."""
    with open("/proc/net/unix") as f:
        next(f)
        unix = {line.split()[6] for line in f if len(line.split()) > 6}
    libc = ctypes.CDLL(None, use_errno=True)
    pfd = os.pidfd_open(pid)
    out = []
    try:
        for name in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if int(name) < 3 or not link.startswith("socket:[") or link[8:-1] not in unix:
                continue
            fd = libc.syscall(438, pfd, int(name), 0)  # pidfd_getfd
            if fd >= 0:
                out.append(socket.socket(fileno=fd))
    finally:
        os.close(pfd)
    return out


def garbage(pid, collector, dlog, up):
    """What a compromised HTTP process could send the collector that is not the one request,
    on every channel: the collector ignores it, says so once, and still answers."""
    chans = channels(pid)
    junk = bytes(b for b in range(256) if b != ord("S")) * 64
    for c in chans:
        try:
            c.sendall(junk)
        except OSError:
            pass
        c.close()
    ok(len(chans) == 4, f"the HTTP process holds 4 channels to the collector ({len(chans)})")
    time.sleep(0.5)
    ok(collector is not None and not gone(collector) and collector_of(pid) == collector,
       "the collector survives garbage on its channels")
    ok(all(up() for _ in range(8)), "and scrapes are still answered")
    text = pytap.wait_file(dlog.name, lambda t: "that are not a request" in t)
    ok("ignored" in text and f"from the HTTP process (pid {pid}) that are not a request" in text
       and text.count("that are not a request") == 1,
       "the collector logs the garbage, once")


def held_reading(e):
    """A reading that does not end (NSS, through getent, not answering: a stand-in that waits
    on a FIFO) does not hold up the server's stop: SIGTERM ends the HTTP process within a
    bound with a scrape waiting on that reading, and its collector too (root: the HTTP process
    cannot signal it), without that reading. Repeated: the stop is never held."""
    if not pytap.test_hooks():
        pytap.skip("a reading held by NSS: a build without test hooks has no stand-in getent")
        return
    fifo = os.path.join(e.tmp, "held-nss")
    getent = os.path.join(e.tmp, "getent-held")
    os.mkfifo(fifo)
    # A uid (the owner of a job) waits; names (the server's user) are looked up as ever.
    with open(getent, "w") as f:
        f.write(f"#!/bin/sh\ncase \"$2\" in\n*[!0-9]*) exec /usr/bin/getent \"$@\" ;;\n"
                f"esac\nexec cat {fifo} >/dev/null\n")
    os.chmod(getent, 0o755)
    r = e.run("alloc", "33")
    ok(r.returncode == 0, f"alloc 33 ({r.stderr.strip()})")
    log = open(os.path.join(e.tmp, "held.log"), "w+")
    took = []
    try:
        for _ in range(HELD_STOPS):
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            p = e.spawn([e.jobcg, "metrics", "--listen", f"127.0.0.1:{port}"], log,
                        env=dict(e.env, JOBCG_TEST_GETENT=getent))

            def answers():
                try:
                    http_get(base + "/", 5)
                except urllib.error.HTTPError:
                    return True
                except OSError:
                    return False
                return True
            scrape = threading.Thread(target=lambda: answers_or_not(base + "/metrics"),
                                      daemon=True)
            held = None
            if wait_for(answers, 20):
                coll = collector_of(p.pid)
                scrape.start()
                if coll and wait_for(lambda: thread_children(coll), 10):
                    held = coll
            ok(held is not None, f"a scrape waits on the held reading (collector {held})")
            t = time.monotonic()
            p.terminate()
            try:
                rc = p.wait(timeout=HELD_STOP_BOUND)
            except subprocess.TimeoutExpired:
                rc = None
            took.append(time.monotonic() - t)
            ok(rc == 0, f"SIGTERM ends the HTTP process while a reading is held, within "
               f"{HELD_STOP_BOUND} s (rc {rc}, {took[-1]:.1f} s)")
            ok(held is None or wait_for(lambda: gone(held), 5), "and its collector ends")
            if rc is None:
                p.kill()
                p.wait()
                break
    finally:
        # The stand-ins still waiting end: the FIFO's one writer comes and goes.
        fd = os.open(fifo, os.O_RDWR)
        os.close(fd)
        r = e.run("release", "33")
        ok(r.returncode == 0, f"release 33 ({r.stderr.strip()})")
    diag(f"stops with a held reading took {', '.join(f'{x:.2f}' for x in took)} s")


def thread_children(pid):
    """The children of every thread of @pid (children() sees the main thread's only)."""
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def answers_or_not(url):
    try:
        http_get(url, HELD_STOP_BOUND + 10)
    except OSError:
        pass


def slow_reader(e):
    """A compromised HTTP process that asks and does not take the answer holds a collector's
    thread 10 s, not for ever: the collector gives up that channel, says so, and the HTTP
    process, finding the channel broken, exits 1 (the daemon would start both again)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    log = open(os.path.join(e.tmp, "slow.log"), "w+")
    p = e.spawn([e.jobcg, "metrics", "--listen", f"127.0.0.1:{port}"], log, env=e.env)

    def up():
        try:
            return http_get(url, 5)[0] == 200
        except OSError:
            return False
    ok(wait_for(up, 20), "a server for the slow reader serves")
    kids = [k for k in [collector_of(p.pid)] if k]
    coll = channels(kids[0]) if len(kids) == 1 else []
    http = channels(p.pid)
    # The collector's ends with the smallest send buffer, so that answers fill it at once.
    for c in coll:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1)
        c.close()
    if http:
        http[0].sendall(b"S" * 32)
    for c in http:
        c.close()
    t = time.time()
    text = pytap.wait_file(log.name, lambda x: "did not take an answer" in x, 20)
    took = time.time() - t
    ok(len(http) == 4 and "did not take an answer within 10 s" in text and 8 < took < 16,
       f"the collector gives up a channel whose answers are not taken, after {took:.1f} s")
    ok(kids and not gone(kids[0]), "and runs on")
    for _ in range(8):
        up()
        if p.poll() is not None:
            break
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    # Through the relay, which copies the HTTP process's last lines after its end.
    text = pytap.wait_file(log.name, lambda x: "failed: stopping" in x, 5)
    ok(rc == 1 and "the channel to the collector" in text and "failed: stopping" in text,
       f"the HTTP process finds that channel broken and exits 1 (rc {rc})")
    ok(kids and wait_for(lambda: gone(kids[0]), 5), "and its collector ends")


def forged(pid):
    """What a compromised HTTP process @pid could write on its standard error (taken here with
    pidfd_getfd, then written as its user): a line with escape sequences, one too long, many
    at once. It does not block."""
    libc = ctypes.CDLL(None, use_errno=True)
    pfd = os.pidfd_open(pid)
    fd = libc.syscall(438, pfd, 2, 0)  # pidfd_getfd
    os.close(pfd)
    ok(fd >= 0 and os.get_blocking(fd) is False,
       f"the HTTP process's standard error does not block its writer ({fd})")
    if fd < 0:
        return
    data = b"\x1b]0;owned\x07forged line\r\n" + b"A" * 2000 + b"\n" + b"x\n" * 2000
    try:
        os.write(fd, data)
    except OSError as err:
        diag(f"writing to the HTTP process's standard error: {err}")
    os.close(fd)


def users(e, port):
    """--user (and the daemon's --metrics-user) that would give the HTTP side a group it should
    not have: a number without a passwd entry (its group is whatever group has that number:
    kmem, sudo...) and a user whose primary group is root's."""
    def run(*args, env=e.env):
        # A server that starts instead of refusing is stopped, not waited for.
        try:
            return subprocess.run([e.jobcg, *args], env=env, capture_output=True, text=True,
                                  timeout=15)
        except subprocess.TimeoutExpired as x:
            return subprocess.CompletedProcess(x.cmd, None, "", str(x.stderr))
    uid = next(u for u in range(4711, 60000) if not has_uid(u))
    r = run("metrics", "--listen", f"127.0.0.1:{port}", "--user", str(uid))
    ok(r.returncode == 1 and f"--user {uid}: no passwd entry has uid {uid}" in r.stderr
       and "metrics on http" not in r.stderr,
       f"--user with a uid no passwd entry has is refused ({r.returncode}, "
       f"{r.stderr.strip()})")
    r = run("daemon", "--socket", os.path.join(e.tmp, "u.sock"), "--metrics-listen",
            f"127.0.0.1:{port}", "--metrics-user", str(uid))
    ok(r.returncode == 1 and f"--metrics-user {uid}: no passwd entry" in r.stderr,
       f"so is daemon --metrics-user ({r.returncode}, {r.stderr.strip()})")
    if not pytap.test_hooks():
        pytap.skip("a user whose primary group is root's: a build without test hooks has no "
                   "stand-in getent")
        return
    getent = os.path.join(e.tmp, "getent-gid0")
    with open(getent, "w") as f:
        f.write("#!/bin/sh\n[ \"$1 $2\" = \"passwd jcg-gid0\" ] || exec /usr/bin/getent \"$@\"\n"
                "echo 'jcg-gid0:x:4712:0::/:/bin/sh'\n")
    os.chmod(getent, 0o755)
    r = run("metrics", "--listen", f"127.0.0.1:{port}", "--user", "jcg-gid0",
            env=dict(e.env, JOBCG_TEST_GETENT=getent))
    ok(r.returncode == 1 and "has root's group (gid 0) as its primary group" in r.stderr
       and "metrics on http" not in r.stderr,
       f"a user whose primary group is root's is refused ({r.returncode}, "
       f"{r.stderr.strip()})")


def has_uid(u):
    try:
        pwd.getpwuid(u)
        return True
    except KeyError:
        return False


def under_terminal(e):
    """Started from a root shell on a terminal, as a shell starts a command (its own process
    group, in the foreground: setsid() would fail there), the HTTP process gives up the
    terminal: no controlling terminal (on which TIOCSTI would type into root's shell), none of
    its descriptors; its messages reach the terminal through the relay, sanitised; Ctrl-C still
    stops it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    argv = [e.jobcg, "metrics", "--listen", f"127.0.0.1:{port}"]
    pid, master = pty.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            k = os.fork()
            if k == 0:
                os.setpgid(0, 0)
                os.tcsetpgrp(0, os.getpgrp())
                signal.signal(signal.SIGTTOU, signal.SIG_DFL)
                os.execve(e.jobcg, argv, e.env)
            os.setpgid(k, k)
            st = os.waitpid(k, 0)[1]
            os._exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))
        except BaseException:
            os._exit(127)
    out = bytearray()

    def drain():
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:
                return
            if not b:
                return
            out.extend(b)
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    status = [None]
    http = None

    def reaped():
        if status[0] is None:
            w, st = os.waitpid(pid, os.WNOHANG)
            if w == pid:
                status[0] = os.waitstatus_to_exitcode(st)
        return status[0] is not None

    def up():
        try:
            return http_get(url, 5)[0] == 200
        except OSError:
            return False
    try:
        serves = wait_for(up, 20)
        # (what it said, and how it ended, when it did not come up: a port taken meanwhile?)
        ok(serves, "started on a terminal, it serves"
           + ("" if serves else f" (exit {status[0] if reaped() else 'none yet'}: "
                                 f"{bytes(out[-300:])!r})"))
        shell = children(pid)
        http = shell[0] if len(shell) == 1 else None
        ok(http is not None and tty_nr(pid) not in (0, None),
           f"the process that started it has the terminal ({tty_nr(pid)})")
        if http is None:
            return
        pts = os.readlink(f"/proc/{pid}/fd/0")
        separated(http, "started on a terminal")
        links = [fd_link(http, fd) for fd in os.listdir(f"/proc/{http}/fd")]
        ok(pts.startswith("/dev/pts/") and pts not in links
           and not any(x and x.startswith(("/dev/pts", "/dev/tty")) for x in links),
           f"the HTTP process holds no descriptor of the terminal {pts} ({links})")
        coll, relay = collector_of(http), relay_of(http)
        ok(tty_nr(coll) == 0 and tty_nr(relay) == 0,
           "nor do its collector and relay keep it as their controlling terminal")
        forged(http)
        tag = f"jobcg: metrics: http[{http}]: "
        ok(wait_for(lambda: f"{tag}?]0;owned?forged line?".encode() in out, 5)
           and b"\x1b]0;owned" not in out,
           f"what it writes reaches the terminal through the relay, sanitised "
           f"({bytes(out[:200])!r})")
        os.write(master, b"\x03")
        ok(wait_for(lambda: reaped(), 20) and status[0] == 0,
           f"Ctrl-C on the terminal stops it (exit status {status[0]})")
        ok(wait_for(lambda: gone(coll) and gone(relay), 5), "its collector and relay too")
    finally:
        if not reaped():
            for x in (http, pid):
                if x:
                    try:
                        os.kill(x, 9)
                    except OSError:
                        pass
            os.waitpid(pid, 0)
        os.close(master)


def standalone(e):
    """`jobcg metrics --listen` alone: the same separation, --user root when asked, a user
    that does not exist refused; SIGTERM ends both processes."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    log = open(os.path.join(e.tmp, "listen.log"), "w+")
    # A pipe its starter left open: no process of the server may keep it (a reader of it, a
    # shell's $(...) for one, would wait for the server's end).
    leak_r, leak_w = os.pipe()
    p = e.spawn([e.jobcg, "metrics", "--listen", f"127.0.0.1:{port}"], log, env=e.env,
                pass_fds=(leak_w,))
    os.close(leak_w)

    def up():
        try:
            st_, txt = http_get(url, 5)
            return st_ == 200 and "jobcg_jobs" in txt
        except OSError:
            return False
    ok(wait_for(up, 20), "jobcg metrics --listen serves GET /metrics")
    collector = separated(p.pid, "metrics --listen")
    os.set_blocking(leak_r, False)
    try:
        leaked = os.read(leak_r, 1) != b""
    except BlockingIOError:
        leaked = True
    os.close(leak_r)
    ok(not leaked, "no process of the server keeps a pipe its starter left open")
    relay = relay_of(p.pid)
    before = len(log_text(log))
    forged(p.pid)
    p.terminate()
    ok(p.wait(timeout=30) == 0, f"SIGTERM ends it (rc {p.returncode})")
    ok(collector is None or wait_for(lambda: gone(collector), 5), "and its collector")
    text = pytap.wait_file(log.name, lambda t: "more lines left out" in t)
    new = text[before:]
    tag = f"jobcg: metrics: http[{p.pid}]: "
    ok(f"{tag}?]0;owned?forged line?" in new and "\x1b" not in new and "\x07" not in new
       and "\r" not in new, f"a line the HTTP process writes reaches the log prefixed, its "
       f"control characters replaced ({new[:300]!r})")
    ok(f"{tag}{'A' * 512} [cut]\n" in new, "a long line is cut at 512 bytes")
    copied = new.count(f"{tag}x\n")
    if pytap.coverage():
        # Its own lines at exit (a coverage build's, as nobody) count among those left out.
        pytap.skip("2000 lines at once: a coverage build's HTTP process writes more")
    else:
        ok(copied <= 60 and re.search(r"\((\d+) more lines left out\)", new)
           and copied + int(re.search(r"\((\d+) more lines left out\)", new)[1]) == 2000,
           f"2000 lines at once: {copied} copied, the rest counted as left out")
    ok(len(new) < 60 * 600, f"the log grew {len(new)} bytes for them")
    ok(relay is not None and wait_for(lambda: gone(relay), 5), "and the relay ends")
    p = e.spawn([e.jobcg, "metrics", "--listen", f"127.0.0.1:{port}", "--user", "root"], log,
                env=e.env)
    ok(wait_for(up, 20), "--user root: it serves")
    separated(p.pid, "metrics --listen --user root", "root")
    p.terminate()
    p.wait(timeout=30)
    log.seek(0)
    ok("serving HTTP as root (--user root)" in log.read(), "--user root is warned about")
    # The collector's end ends the HTTP process (the daemon would start both again), even
    # when whoever started it ignores SIGCHLD, which children inherit across an exec.
    p = e.spawn([e.jobcg, "metrics", "--listen", f"127.0.0.1:{port}"], log, env=e.env,
                preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    ok(wait_for(up, 20), "started with SIGCHLD ignored, it serves")
    kids = [k for k in [collector_of(p.pid)] if k]
    if kids:
        os.kill(kids[0], 9)
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    text = pytap.wait_file(log.name, lambda x: "was killed by signal 9" in x, 5)
    ok(len(kids) == 1 and rc == 1
       and f"http[{p.pid}]: jobcg: metrics: the collector (pid {kids[0]}) was killed by "
       f"signal 9" in text,
       f"its collector killed, the HTTP process logs it and exits 1 ({kids}, rc {rc})")
    # The relay ends with its HTTP process, whoever else holds their pipe; so it does on a
    # kernel without pidfds (a test build can act as on one).
    for flags in ("", "no-pidfd") if pytap.test_hooks() else ("",):
        p = e.spawn([e.jobcg, "metrics", "--listen", f"127.0.0.1:{port}"], log,
                    env=dict(e.env, JOBCG_TEST_FLAGS=flags))
        what = "metrics --listen" + (f" ({flags})" if flags else "")
        ok(wait_for(up, 20), f"{what}: it serves")
        held_pipe(p.pid, log, what)
        p.wait(timeout=10)
    r = e.run("metrics", "--listen", f"127.0.0.1:{port}", "--user", "no-such-user-jcg")
    ok(r.returncode == 1 and "no user 'no-such-user-jcg'" in r.stderr
       and "metrics on http" not in r.stderr,
       f"a --user that does not exist is refused, before anything is said to be served "
       f"({r.returncode}, {r.stderr.strip()})")
    users(e, port)
    r = e.run("metrics", "--user", "nobody")
    ok(r.returncode == 2 and "--user goes with --listen" in r.stderr,
       f"--user without --listen is a usage error ({r.stderr.strip()})")
    slow_reader(e)
    held_reading(e)
    under_terminal(e)
    allowlist(e)
    http_answers(e)


def http_answers(e):
    """`jobcg metrics --listen 127.0.0.1:0` names the port the kernel chose, which serves; GET
    and HEAD of /metrics are answered, another path is 404 and another method 405 with the
    Allow header naming GET and HEAD; a connection serves one scrape after another."""
    log = open(os.path.join(e.tmp, "listen0.log"), "w+")
    p = e.spawn([e.jobcg, "metrics", "--listen", "127.0.0.1:0"], log, env=e.env)
    text = pytap.wait_file(log.name, lambda t: "metrics on http" in t, 20)
    m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics \(pid (\d+)\)", text)
    port = int(m[1]) if m else 0
    ok(port != 0 and int(m[2]) == p.pid, f"--listen on port 0 says the port chosen ({text!r})")
    answers = {}
    for method, path in (("GET", "/metrics"), ("HEAD", "/metrics"), ("GET", "/"),
                         ("POST", "/metrics"), ("DELETE", "/metrics")):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            c.request(method, path)
            r = c.getresponse()
            answers[(method, path)] = (r.status, r.getheader("Allow"), r.read().decode())
        except OSError as x:
            answers[(method, path)] = (None, None, str(x))
        finally:
            c.close()
    get = answers[("GET", "/metrics")]
    ok(get[0] == 200 and "jobcg_jobs" in get[2], f"GET /metrics there is 200 ({get[:2]})")
    head = answers[("HEAD", "/metrics")]
    ok(head[0] == 200 and head[2] == "", f"HEAD /metrics is 200 without a body ({head})")
    ok(answers[("GET", "/")][0] == 404, f"GET / is 404 ({answers[('GET', '/')]})")
    for method in ("POST", "DELETE"):
        a = answers[(method, "/metrics")]
        ok(a[0] == 405 and a[1] == "GET, HEAD",
           f"{method} /metrics is 405 with Allow: GET, HEAD ({a})")
    # A scraper reuses its connection (Prometheus does): the server keeps it for the next.
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        r1 = c.getresponse()
        r1.read()
        first = c.sock
        c.request("GET", "/metrics")
        r2 = c.getresponse()
        r2.read()
        kept = (r1.status, r1.getheader("Connection"), r2.status, first is not None
                and c.sock is first)
    except OSError as x:
        kept = (None, str(x))
    finally:
        c.close()
    ok(kept == (200, None, 200, True), f"two scrapes on one connection ({kept})")
    p.terminate()
    ok(p.wait(timeout=30) == 0, f"SIGTERM ends it (rc {p.returncode})")


def get_from(src, dst, port, timeout=10, family=socket.AF_INET):
    """GET /metrics on @dst:@port from the source address @src: the HTTP status, None when the
    server closed the connection without an answer, 0 when it did not answer within @timeout,
    -1 when nothing listens there."""
    c = socket.socket(family, socket.SOCK_STREAM)
    c.settimeout(timeout)
    try:
        c.bind((src, 0))
        try:
            c.connect((dst, port))
        except ConnectionRefusedError:
            return -1
        c.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        data = b""
    except socket.timeout:
        return 0
    finally:
        c.close()
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", data)
    return int(m[1]) if m else None


def allowlist(e):
    """--allow (and the daemon's --metrics-allow): a client from an address not on the list is
    closed as it connects, unanswered, and does not take a slot; one on it is served; IPv4
    items match IPv4-mapped peers of a dual-stack socket; the refusals are logged once a minute;
    a list that does not parse is a usage error naming the option and the item."""
    port = free_port()
    log = open(os.path.join(e.tmp, "allow.log"), "w+")
    p = e.spawn([e.jobcg, "metrics", "--listen", f"127.0.0.1:{port}", "--allow", "127.0.0.2"],
                log, env=e.env)
    ok(wait_for(lambda: get_from("127.0.0.2", "127.0.0.1", port, 5) == 200, 20),
       "--allow 127.0.0.2: a client from 127.0.0.2 gets 200")
    got = [get_from("127.0.0.1", "127.0.0.1", port) for _ in range(20)]
    ok(got == [None] * 20, f"one from 127.0.0.1 is closed without an HTTP answer ({got})")
    # Clients from three other addresses, more than all 128 slots (64 from each at most),
    # holding their ends open: without the list they would keep the scraper out until their
    # idle timeout (5 s); refused as they connect, none takes a slot.
    held = []
    for src in ("127.0.0.1", "127.0.0.3", "127.0.0.4"):
        for _ in range(48):
            c = socket.socket()
            c.bind((src, 0))
            c.connect(("127.0.0.1", port))
            held.append(c)
    time.sleep(0.5)
    st_ = get_from("127.0.0.2", "127.0.0.1", port, 3)
    ok(st_ == 200, f"144 connections from 3 other addresses do not lock out 127.0.0.2 ({st_})")
    for c in held:
        c.close()
    text = pytap.wait_file(log.name, lambda t: "refused a connection" in t)
    time.sleep(1)
    text = log_text(log)
    n = text.count("refused a connection from")
    ok(n == 1 and "refused a connection from 127.0.0.1: not on the allowlist" in text,
       f"164 refusals are logged once in the minute ({n} lines)")
    p.terminate()
    if not ok(p.wait(timeout=30) == 0 and "Sanitizer" not in log_text(log),
              f"SIGTERM ends it cleanly (rc {p.returncode})"):
        diag(log_text(log))

    # A dual-stack socket handed over (--listen-fd): 127.0.0.2 arrives as ::ffff:127.0.0.2.
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    ls.bind(("::ffff:127.0.0.1", 0))
    ls.listen(16)
    port6 = ls.getsockname()[1]
    p = e.spawn([e.jobcg, "metrics", "--listen-fd", str(ls.fileno()), "--allow",
                 "10.9.9.9,127.0.0.2/32"], log, env=e.env, pass_fds=(ls.fileno(),))
    ls.close()
    ok(wait_for(lambda: get_from("127.0.0.2", "127.0.0.1", port6, 5) == 200, 20),
       "on a dual-stack socket, the IPv4 item 127.0.0.2 lets ::ffff:127.0.0.2 in")
    ok(get_from("127.0.0.1", "127.0.0.1", port6) is None, "and not ::ffff:127.0.0.1")
    p.terminate()
    p.wait(timeout=30)

    # --listen [::]: every address, IPv4 ones (mapped) included, whatever bindv6only says.
    port = free_port()
    p = e.spawn([e.jobcg, "metrics", "--listen", f"[::]:{port}", "--allow", "127.0.0.2,::1"],
                log, env=e.env)
    ok(wait_for(lambda: get_from("127.0.0.2", "127.0.0.1", port, 5) == 200, 20),
       "--listen [::]: an IPv4 client on the list (127.0.0.2) gets 200")
    st6 = get_from("::1", "::1", port, 5, socket.AF_INET6)
    ok(st6 == 200, f"so does an IPv6 one (::1): {st6}")
    ok(get_from("127.0.0.1", "127.0.0.1", port) is None, "and 127.0.0.1, off the list, not")
    p.terminate()
    p.wait(timeout=30)
    port = free_port()
    p = e.spawn([e.jobcg, "metrics", "--listen", f"[::1]:{port}"], log, env=e.env)
    ok(wait_for(lambda: get_from("::1", "::1", port, 5, socket.AF_INET6) == 200, 20),
       "--listen [::1] serves ::1")
    ok(get_from("127.0.0.1", "127.0.0.1", port) == -1, "and nothing of IPv4")
    p.terminate()
    p.wait(timeout=30)

    # The daemon hands the list to its server, across the exec of `metrics --listen-fd`.
    port = free_port()
    dlog = open(os.path.join(e.tmp, "daemon-allow.log"), "w+")
    daemon = e.spawn([e.jobcg, "daemon", "--socket", os.path.join(e.tmp, "allow.sock"),
                      "--metrics-listen", f"127.0.0.1:{port}", "--metrics-allow",
                      "fd00::/8,127.0.0.2"], dlog, env=e.env)
    ok(wait_for(lambda: get_from("127.0.0.2", "127.0.0.1", port, 5) == 200, 20),
       "daemon --metrics-allow 127.0.0.2: 127.0.0.2 gets 200")
    ok(get_from("127.0.0.1", "127.0.0.1", port) is None, "and 127.0.0.1 no answer")
    out = stop_daemon(daemon, dlog)
    ok(daemon.returncode == 0 and "Sanitizer" not in out,
       f"that daemon ends cleanly (rc {daemon.returncode})")

    for args, want in (
            (["metrics", "--listen", "127.0.0.1:1", "--allow", "10.1.2.3/16"],
             "--allow: '10.1.2.3/16' has bits set past its prefix length"),
            (["metrics", "--listen", "127.0.0.1:1", "--allow", "10.1.2.3/33"],
             "--allow: '10.1.2.3/33': prefix length out of range"),
            (["metrics", "--listen", "127.0.0.1:1", "--allow", "::1,,::2"],
             "--allow: empty item"),
            (["metrics", "--listen", "127.0.0.1:1", "--allow", ""],
             "--allow: empty address list"),
            (["metrics", "--listen", "127.0.0.1:1", "--allow", "::1", "--allow", "::2"],
             "--allow given twice"),
            (["metrics", "--allow", "::1"], "--allow goes with --listen"),
            (["daemon", "--socket", os.path.join(e.tmp, "x.sock"), "--metrics-listen",
              "127.0.0.1:1", "--metrics-allow", "host.example"],
             "--metrics-allow: 'host.example' is not an IPv4 or IPv6 address"),
            (["daemon", "--metrics-allow", "::1"], "--metrics-allow goes with --metrics-listen"),
            # the daemon's own command and option, not metrics' (whose help has no such one)
            (["daemon", "--socket", os.path.join(e.tmp, "x.sock"), "--metrics-listen",
              "localhost:9810"],
             "jobcg daemon: --metrics-listen 'localhost:9810': not a numeric address"),
            (["daemon", "--socket", os.path.join(e.tmp, "x.sock"), "--metrics-listen", "9810"],
             "jobcg daemon: --metrics-listen '9810': expected ADDRESS:PORT"),
            (["metrics", "--listen", "127.0.0.1:65536"],
             "jobcg metrics: --listen '127.0.0.1:65536': the port must be")):
        r = e.run(*args)
        ok(r.returncode == 2 and want in r.stderr and "metrics on http" not in r.stderr,
           f"{' '.join(args[1:])}: a usage error ({r.returncode}, {r.stderr.strip()})")


def log_text(dlog):
    with open(dlog.name) as f:
        return f.read()


def server_pids(dlog):
    """The metrics servers' pids, in the order the daemon's log started them."""
    return [int(p) for p in re.findall(r"metrics on http://\S+ \(pid (\d+)\)", log_text(dlog))]


def listen_on(s, port):
    """Bind and listen @s on 127.0.0.1:@port; False while the port is taken."""
    try:
        s.bind(("127.0.0.1", port))
        s.listen()
        return True
    except OSError:
        return False


def killed_server(daemon, dlog, port, up):
    """kill -9 the daemon's metrics server: the daemon reaps it, says so, and a new one serves
    the same port within seconds. Killed again at once while something else takes its port,
    the new bind's failure is logged and tried again after a delay that doubled."""
    first = server_pids(dlog)
    ok(len(first) == 1, f"one metrics server started, its pid logged ({first})")
    if len(first) != 1:
        return
    old_collector = [k for k in [collector_of(first[0])] if k]
    held_pipe(first[0], dlog, "the daemon's metrics server")
    text = pytap.wait_file(dlog.name, lambda t: len(server_pids(dlog)) > 1)
    ok(f"the metrics server (pid {first[0]}) was killed by signal 9" in text
       and "starting the metrics server again in 1 s" in text,
       f"the daemon logs the server's death and its restart ({text.strip()[-400:]})")
    pids = server_pids(dlog)
    ok(len(pids) == 2 and pids[1] != first[0] and os.path.exists(f"/proc/{pids[1]}"),
       f"a new metrics server runs ({pids})")
    ok(wait_for(up, 10), f"it serves GET /metrics on the same port ({port})")
    ok(not pytap.zombie(first[0]), "the dead server was reaped (no zombie)")
    ok(len(old_collector) == 1 and wait_for(lambda: gone(old_collector[0]), 5),
       f"its collector ended with it ({old_collector})")
    if len(pids) == 2:
        separated(pids[1], "the new metrics server")
    ok(daemon.poll() is None, "the daemon kept running")
    if len(pids) != 2:
        return
    os.kill(pids[1], 9)
    squat = socket.socket()
    squat.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        # Taken before the daemon binds it again (2 s after the death).
        ok(wait_for(lambda: listen_on(squat, port), 1), f"port {port} taken meanwhile")
        text = pytap.wait_file(dlog.name, lambda t: "did not start: trying again in 4 s" in t)
        ok(f"(pid {pids[1]}) was killed by signal 9" in text
           and "starting the metrics server again in 2 s" in text
           and f"cannot listen on 127.0.0.1:{port}" in text
           and "the metrics server did not start: trying again in 4 s" in text,
           f"dead again at once, and its port taken: the failed bind is logged and tried "
           f"again later ({text.strip()[-500:]})")
    finally:
        squat.close()
    ok(wait_for(up, 10) and len(server_pids(dlog)) == 3,
       f"once the port is free, a new server serves it ({server_pids(dlog)})")
    ok(not pytap.zombie(pids[1]) and daemon.poll() is None, "no zombie, the daemon still runs")


def as_nobody():
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def not_root(e):
    """The owners are in trusted.* xattrs, which only root reads: another user's reading
    would name no owner, so `metrics` and `top` refuse it, saying why. So do `list` and
    `show`, which would call every job orphaned, and `policy`, which reads bpffs and bpf(2)
    and would find no constrained cgroup."""
    r = e.run("alloc", "31")
    ok(r.returncode == 0, f"alloc 31 ({r.stderr.strip()})")
    # The configuration readable to the user, as /etc/jobcg is: what is refused is the
    # reading of the jobs, not the configuration.
    mode = os.stat(e.tmp).st_mode & 0o7777
    os.chmod(e.tmp, 0o755)
    try:
        refused(e)
    finally:
        os.chmod(e.tmp, mode)
    r = e.run("release", "31")
    ok(r.returncode == 0, f"release 31 ({r.stderr.strip()})")


def refused(e):
    for cmd, why in ((["metrics"], "trusted.*"), (["top", "-b", "-n", "1"], "trusted.*"),
                     (["list"], "trusted.*"), (["list", "--json"], "trusted.*"),
                     (["show", "31"], "trusted.*"), (["policy"], "bpffs"),
                     (["policy", "--json"], "bpffs")):
        r = subprocess.run([e.jobcg, *cmd], env=e.env, capture_output=True, text=True,
                           timeout=60, preexec_fn=as_nobody)
        ok(r.returncode == 1 and "needs root" in r.stderr and why in r.stderr
           and r.stdout == "",
           f"{' '.join(cmd)} as uid 65534 is refused, saying why ({r.returncode}, "
           f"{r.stderr.strip()[:200]!r}, {r.stdout[:100]!r})")


def escapes(e):
    """A user name from NSS (LDAP) and a cgroup name (a user's delegated subtree) are nobody's
    choice here: control characters in them are shown escaped by `top` and `who-has`, never
    sent to the terminal."""
    getent = os.path.join(e.tmp, "getent-esc")
    with open(getent, "w") as f:
        f.write("#!/bin/sh\n[ \"$1\" = passwd ] || exit 2\n"
                "printf 'e\\033]0;x\\007v:x:%s:0::/:/bin/sh\\n' \"$2\"\n")
    os.chmod(getent, 0o755)
    r = e.run("alloc", "32")
    ok(r.returncode == 0, f"alloc 32 ({r.stderr.strip()})")
    if pytap.test_hooks():
        r = subprocess.run([e.jobcg, "top", "-b", "-n", "1", "-d", "0.1"],
                           env=dict(e.env, JOBCG_TEST_GETENT=getent), capture_output=True,
                           text=True, timeout=60)
        row = [x for x in r.stdout.splitlines() if x.startswith("32 ")]
        ok(r.returncode == 0 and row and "e\\x1b]0;x" in row[0]
           and not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", r.stdout),
           f"top shows a user name's control characters escaped ({row!r}, "
           f"{r.stderr.strip()})")
    else:
        pytap.skip("top and a user name's control characters: a build without test hooks has "
                   "no stand-in getent")
    evil = os.path.join(e.root, "x\x1b[2Jy")
    os.mkdir(evil)
    try:
        r = e.run("who-has", "/dev/null", "--root", e.root)
        ok(r.returncode == 0 and "x\\x1b[2Jy" in r.stdout
           and not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", r.stdout),
           f"who-has shows a cgroup name's control characters escaped ({r.stdout[-300:]!r})")
    finally:
        os.rmdir(evil)
    r = e.run("release", "32")
    ok(r.returncode == 0, f"release 32 ({r.stderr.strip()})")


def start_daemon(e, port):
    """jobcg daemon serving /metrics on @port, once it answers: (daemon, its socket, its log,
    the metrics URL, a function telling whether it answers)."""
    sock = os.path.join(e.tmp, "daemon.sock")
    dlog = open(os.path.join(e.tmp, "daemon.log"), "w+")
    daemon = e.spawn([e.jobcg, "daemon", "--socket", sock,
                      "--metrics-listen", f"127.0.0.1:{port}"], dlog, env=e.env)
    url = f"http://127.0.0.1:{port}/metrics"

    def up():
        try:
            return http_get(url, 5)[0] == 200
        except OSError:
            return False
    ok(wait_for(up, 20), "jobcg daemon --metrics-listen serves GET /metrics")
    return daemon, sock, dlog, url, up


def stop_daemon(daemon, dlog):
    """Stop it; what it logged."""
    daemon.terminate()
    daemon.wait(timeout=30)
    dlog.seek(0)
    return dlog.read()


def ended_cleanly(daemon, out):
    ok(daemon.returncode == 0 and "Sanitizer" not in out,
       f"the daemon and its metrics server end cleanly (rc {daemon.returncode})")
    if "Sanitizer" in out:
        diag(out[-3000:])
    ok("EXTERNAL_LOGGER is not the first option" not in out,
       "libmicrohttpd logs through jobcg's logger from its start (no warning at each start)")


def server_only(e):
    """Without Prometheus: the refusal as another user than root, and the daemon's server
    against hostile clients."""
    diag("promtool/prometheus not installed (Debian package prometheus): the daemon's server "
         "is checked against hostile clients only")
    port = free_port()
    daemon, sock, dlog, _, up = start_daemon(e, port)
    collector = separated(server_pids(dlog)[0], "daemon --metrics-listen")
    garbage(server_pids(dlog)[0], collector, dlog, up)
    standalone(e)
    not_root(e)
    escapes(e)
    hostile_clients(e, port, sock, up, dlog)
    killed_server(daemon, dlog, port, up)
    out = stop_daemon(daemon, dlog)
    ended_cleanly(daemon, out)


def main():
    if shutil.which("promtool") is None or shutil.which("prometheus") is None:
        if os.environ.get("JOBCG_MUST_WORK") == "1" and not pytap.kernel_skip():
            print("1..0 # SKIP promtool/prometheus not installed (Debian package prometheus)")
            return 1
        return kernel_main("metrics", server_only, Env)
    return kernel_main("metrics", body, Env)


def body(e):
    # --- a node with no jobs ---
    r = e.run("metrics")
    ok(r.returncode == 0, f"jobcg metrics on a node with no jobs ({r.stderr.strip()})")
    ok(promtool(r.stdout), "promtool check metrics accepts it")
    s = parse(r.stdout)
    ok(value(s, "jobcg_jobs") == "0" and value(s, "jobcg_gpus") == str(NGPU),
       "no jobs, four GPUs configured")
    ok(holders(s) == {(str(i), "", "") for i in range(NGPU)},
       f"every GPU is listed with job=\"\" ({sorted(holders(s))})")
    g0 = [lab for n, lab, _ in s if n == "jobcg_gpu_info" and lab["gpu"] == "0"]
    ok(g0 and g0[0]["uuid"] == "GPU-5e1f-0000" and g0[0]["pci_bus_id"] == "0000:3b:00.0"
       and g0[0]["device"] == os.path.join(e.gpus, "nvidia0"),
       f"GPU 0 carries its UUID, PCI bus id and device from the driver's files ({g0})")

    # --- jobs, a step, GPUs ---
    for job, gres in (("11", "gpu:1"), ("12", "gpu:2")):
        r = e.run("alloc", job, "--gres", gres)
        ok(r.returncode == 0, f"alloc {job} --gres {gres} ({r.stderr.strip()})")
    log = open(os.path.join(e.tmp, "step.log"), "w")
    step = e.spawn([e.jobcg, "run", "--job", "11", "--", "sleep", "120"], log, env=e.env)
    ok(wait_for(lambda: os.path.isdir(os.path.join(e.root, "job_11", "step_0")), 20),
       "a step of job 11 runs")
    time.sleep(0.3)
    r = e.run("metrics")
    ok(r.returncode == 0, "jobcg metrics with jobs and a step")
    ok(promtool(r.stdout), "promtool check metrics accepts it")
    s = parse(r.stdout)
    ok(not [x for x in s if x[0] == "<unparsed>"], "every line parses")
    ok(value(s, "jobcg_jobs") == "2" and value(s, "jobcg_steps") == "1",
       "two jobs, one step")
    ok(value(s, "jobcg_gpus_free") == "1", "one GPU free")
    kernel = who_has(e)
    got = {h for h in holders(s) if h[1]}
    ok(got == kernel and len(got) == 4,
       f"the GPUs each job and step may open are who-has's ({sorted(got)} vs {sorted(kernel)})")
    free = {h[0] for h in holders(s) if not h[1]}
    ok(len(free) == 1 and free.isdisjoint({h[0] for h in got}),
       f"the GPU nobody may open is listed with job=\"\" ({free})")
    for job, st in (("11", ""), ("11", "0"), ("12", "")):
        ok(value(s, "jobcg_cpu_user_seconds_total", job=job, step=st) is not None,
           f"CPU seconds of job {job} step '{st}'")
    ok(value(s, "jobcg_cpu_user_seconds_total", job="11", step="")
       and value(s, "jobcg_cpu_user_seconds_total", job="11")
       and [lab["user"] for n, lab, _ in s if n == "jobcg_cpu_user_seconds_total"][0] == "root",
       "series carry the owner's user name")
    with open(os.path.join(e.root, "job_11", "cgroup.controllers")) as f:
        ctl = f.read().split()
    has_mem = value(s, "jobcg_memory_usage_bytes", job="11", step="") is not None
    ok(has_mem == ("memory" in ctl),
       f"memory series are there exactly where the memory controller is ({ctl})")
    has_pids = value(s, "jobcg_pids", job="11", step="0") is not None
    ok(has_pids == ("pids" in ctl), "pids series likewise")
    ok(value(s, "jobcg_device_mode_info", mode="node") == "1", "device mode node")

    # --- textfile ---
    d = os.path.join(e.tmp, "textfile")
    os.mkdir(d)
    r = e.run("metrics", "--textfile", d)
    files = os.listdir(d)
    ok(r.returncode == 0 and files == ["jobcg.prom"],
       f"--textfile writes jobcg.prom and leaves no temporary file ({files})")
    with open(os.path.join(d, "jobcg.prom")) as f:
        text = f.read()
    ok(promtool(text) and "jobcg_gpu_info" in text, "the file is valid exposition text")
    ok(os.stat(os.path.join(d, "jobcg.prom")).st_mode & 0o777 == 0o644,
       "readable by node_exporter (0644)")
    r = e.run("metrics", "--textfile", os.path.join(e.tmp, "absent"))
    ok(r.returncode == 2 and "not a directory" in r.stderr,
       f"--textfile of a missing directory is refused ({r.stderr.strip()})")
    r = e.run("metrics", "--listen", "localhost:1")
    ok(r.returncode == 2 and "numeric" in r.stderr,
       f"--listen takes a numeric address only ({r.stderr.strip()})")

    # --- the daemon serves /metrics; Prometheus scrapes it ---
    port, pport = free_port(), free_port()
    daemon, sock, dlog, url, up = start_daemon(e, port)
    st, text = http_get(url)
    ok(st == 200 and promtool(text) and any(h[1] == "12" for h in holders(parse(text))),
       "the daemon's scrape is valid and has job 12's GPUs")
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=5)
        ok(False, "another path is 404")
    except urllib.error.HTTPError as x:
        ok(x.code == 404, f"another path is 404 ({x.code})")
    collector = separated(server_pids(dlog)[0], "daemon --metrics-listen")
    garbage(server_pids(dlog)[0], collector, dlog, up)
    standalone(e)

    gpu12 = sorted(h[0] for h in holders(parse(text)) if h[1] == "12" and h[2] == "")[0]
    pdir = os.path.join(e.tmp, "prometheus")
    os.mkdir(pdir)
    with open(os.path.join(pdir, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: jobcg\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{port}']\n")
    plog = open(os.path.join(pdir, "log"), "w+")
    e.spawn(["prometheus", f"--config.file={pdir}/prometheus.yml",
             f"--storage.tsdb.path={pdir}/data", f"--web.listen-address=127.0.0.1:{pport}"],
            plog, cwd=pdir)
    # Prometheus keeps `job` for its scrape job: jobcg's job label is stored as exported_job.
    q = f'jobcg_gpu_info{{gpu="{gpu12}",exported_job!="",step=""}}'

    def query():
        try:
            u = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            st, body_ = http_get(u, 5)
            res = json.loads(body_)["data"]["result"]
            return [x["metric"]["exported_job"] for x in res]
        except (OSError, ValueError, KeyError):
            return None
    ok(wait_for(lambda: query() == ["12"], PROM_BOUND),
       f"PromQL {q} names job 12 (got {query()})")
    # The dashboard's and the documentation's queries are valid PromQL and find data here.
    src = os.environ.get("JOBCG_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "../.."))
    with open(os.path.join(src, "examples", "grafana-jobcg.json")) as f:
        exprs = [t["expr"] for p_ in json.load(f)["panels"] for t in p_["targets"]]
    exprs.append('sum by (user) (sum_over_time((count by (user, instance, gpu) '
                 '(jobcg_gpu_info{exported_job!="", step=""}))[1d:1m])) / 60')
    bad = []
    for x in exprs:
        u = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode(
            {"query": x.replace("$node", ".*")})
        try:
            if json.loads(http_get(u, 10)[1]).get("status") != "success":
                bad.append(x)
        except (OSError, ValueError) as err:
            bad.append(f"{x}: {err}")
    ok(not bad and len(exprs) >= 8, f"the dashboard's {len(exprs)} queries run ({bad})")

    r = e.run("release", "12")
    ok(r.returncode == 0, f"jobcg release 12 ({r.stderr.strip()})")
    ok(wait_for(lambda: query() == [], PROM_BOUND),
       f"after the release, a later scrape no longer has it (got {query()})")
    if query() != []:
        plog.seek(0)
        diag(plog.read()[-3000:])

    hostile_clients(e, port, sock, up, dlog)
    killed_server(daemon, dlog, port, up)

    # --- jobcg top ---
    not_root(e)
    escapes(e)
    r = e.run("top", "-b", "-n", "1", "-d", "0.2")
    lines = r.stdout.splitlines()
    ok(r.returncode == 0 and lines and lines[0].startswith("jobcg top") and
       lines[1].split() == ["JOB", "STEP", "USER", "CPU%", "MEMORY", "PIDS", "GPUS"],
       f"top -b -n 1: a header and the columns ({lines[:2]})")
    rows = {(x.split()[0], x.split()[1]): x.split() for x in lines[2:] if x.strip()}
    ok(("11", "0") in rows and rows[("11", "0")][-1] == "0" and rows[("11", "-")][2] == "root",
       f"... job 11's step with GPU 0 and the job's owner ({rows.get(('11', '0'))})")
    ok(len(rows) == 2 and ("12", "-") not in rows, f"... and no released job ({sorted(rows)})")
    if shutil.which("tmux") is None:
        ok(True, "tmux is not installed: the terminal checks are skipped")
        return
    envs = " ".join(f"{k}='{v}'" for k, v in e.env.items() if k.startswith("JOBCG_"))
    cmd = f"env {envs} {e.jobcg} top -d 0.3; echo TOP-EXIT=$?; sleep 60"
    subprocess.run(["tmux", "-L", e.tmux, "new-session", "-d", "-s", "t", "-x", "100", "-y",
                    "20", cmd], check=True, env=dict(os.environ, TERM="xterm"))

    def pane():
        return subprocess.run(["tmux", "-L", e.tmux, "capture-pane", "-p", "-t", "t"],
                              capture_output=True, text=True).stdout
    shown = wait_for(lambda: re.search(r"^11 +0 +root .* 0 *$", pane(), re.M) is not None, 15)
    ok(shown, "top in a terminal shows job 11's step with its GPU")
    if not shown:
        diag(pane())
    ok(all(len(x) <= 100 for x in pane().splitlines()), "its lines fit the terminal's width")
    subprocess.run(["tmux", "-L", e.tmux, "send-keys", "-t", "t", "q"], check=True)
    ok(wait_for(lambda: "TOP-EXIT=0" in pane(), 10), "q quits it (exit status 0)")

    r = e.run("release", "11")
    ok(r.returncode == 0, "release 11")
    step.wait(timeout=30)
    out = stop_daemon(daemon, dlog)
    ok(not up(), "the metrics server stops with the daemon")
    ok("metrics on http://127.0.0.1" in out, "the daemon says where it serves metrics")
    ended_cleanly(daemon, out)


if __name__ == "__main__":
    sys.exit(main())
