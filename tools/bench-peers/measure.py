"""Readings the bench takes from outside the measured programs: the API server's audit log, /proc, tmux."""

import asyncio
import json
import os
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class CountingRelay:
    """A TCP relay between one measured program and the API server, counting the bytes each way.

    The bytes are TLS records as they cross the wire (the relay never decrypts), so they include TLS's
    few percent and HTTP/2 or HTTP/1.1 framing: the same for every program. The audit log cannot say
    how much a response weighed; this can, per program, without asking the program.
    """

    def __init__(self, upstream: str):
        host, _, port = upstream.removeprefix("https://").partition(":")
        self.upstream = (host, int(port))
        self.received = 0  # from the API server to the program
        self.sent = 0  # from the program to the API server
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.port = 0
        threading.Thread(target=self._run, args=(started,), daemon=True).start()
        if not started.wait(10):
            raise RuntimeError("the byte-counting relay did not start")

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(reader, up_writer, "sent"), self._pump(up_reader, writer, "received"))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, counter: str) -> None:
        try:
            while chunk := await reader.read(1 << 16):
                with self.lock:
                    setattr(self, counter, getattr(self, counter) + len(chunk))
                writer.write(chunk)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def counts(self) -> tuple[int, int]:
        """(received, sent) bytes so far."""
        with self.lock:
            return self.received, self.sent


class Audit:
    """The audit log, read incrementally: one entry per request as the API server received it."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.inode: int | None = None  # the file read; a rotation makes another
        self.rest = b""
        self.entries: list[dict] = []

    def refresh(self) -> list[dict]:
        if self.path.exists():
            stat = self.path.stat()
            self.inode = self.inode if self.inode is not None else stat.st_ino
            if stat.st_ino != self.inode or stat.st_size < self.offset:
                raise RuntimeError(f"the audit log {self.path} was rotated: every count after this would be short")
            with self.path.open("rb") as file:
                file.seek(self.offset)
                chunk = file.read()
            self.offset += len(chunk)
            lines = (self.rest + chunk).split(b"\n")
            self.rest = lines.pop()
            for line in lines:
                if not line.strip():
                    continue
                event = json.loads(line)
                ref = event.get("objectRef") or {}
                self.entries.append({
                    "at": datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp(),
                    "user": event.get("user", {}).get("username", ""),
                    "verb": event.get("verb", ""),
                    "resource": ref.get("resource", ""),
                    "subresource": ref.get("subresource", ""),
                    "namespace": ref.get("namespace", ""),
                    "name": ref.get("name", ""),
                    "uri": event.get("requestURI", ""),
                })
        return self.entries

    def of(self, user: str, since: float, until: float | None = None) -> list[dict]:
        until = until if until is not None else float("inf")
        return [e for e in self.refresh() if e["user"] == user and since <= e["at"] <= until]

    def wait_quiet(self, user: str, quiet: float, limit: float, ignore=lambda e: False) -> float:
        """Wait until `user` has sent nothing but ignored requests for `quiet` seconds; returns when."""
        started = time.time()
        while True:
            now = time.time()
            recent = [e for e in self.of(user, now - quiet) if not ignore(e)]
            if not recent and now - started >= quiet:
                return now
            if now - started > limit:
                raise TimeoutError(f"{user} did not go quiet for {quiet} s within {limit} s: "
                                   f"{[(e['verb'], e['resource'], e['name']) for e in recent[-5:]]}")
            time.sleep(0.5)


def summarize(entries: list[dict]) -> dict:
    """Counts by kind of request: list, watch, get, writes, and the whole by verb/resource."""
    by = {}
    for e in entries:
        key = f"{e['verb']} {e['resource']}" + (f"/{e['subresource']}" if e["subresource"] else "")
        by[key] = by.get(key, 0) + 1
    return {
        "requests": len(entries),
        "lists": sum(1 for e in entries if e["verb"] == "list"),
        "watches": sum(1 for e in entries if e["verb"] == "watch"),
        "gets": sum(1 for e in entries if e["verb"] == "get"),
        "writes": sum(1 for e in entries if e["verb"] in WRITE_VERBS),
        "by_request": dict(sorted(by.items(), key=lambda kv: -kv[1])),
    }


def per_bucket(times: list[float], start: float, seconds: float, until: float | None = None) -> list[int]:
    """How many of `times` fall in each `seconds`-long bucket from `start` (to `until`, else the last one)."""
    end = max(times, default=start) if until is None else until
    counts = [0] * (int(max(0.0, end - start) // seconds) + 1)
    for at in times:
        if start <= at <= end:
            counts[int((at - start) // seconds)] += 1
    return counts


def parse_metrics(text: str) -> list[tuple[str, dict, float]]:
    """(name, labels, value) of every sample in a Prometheus/OpenMetrics text exposition."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            body, value = rest.rsplit("}", 1)
            labels = {}
            for part in _label_pairs(body):
                key, _, quoted = part.partition("=")
                labels[key.strip()] = quoted.strip().strip('"')
        else:
            name, value = line.split(None, 1)
        try:
            samples.append((name.strip(), labels if "{" in line else {}, float(value.split()[0])))
        except (ValueError, IndexError):
            continue
    return samples


def _label_pairs(body: str) -> list[str]:
    """Split `a="x",b="y,z"` at the commas outside quotes."""
    parts, current, quoted, escaped = [], "", False, False
    for char in body:
        if escaped:
            current, escaped = current + char, False
        elif char == "\\":
            current, escaped = current + char, True
        elif char == '"':
            current, quoted = current + char, not quoted
        elif char == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def status_kib(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb(pid: int) -> float | None:
    kib = status_kib(pid, "VmRSS")
    return None if kib is None else round(kib / 1024, 1)


def rss_parts_mb(pid: int) -> dict:
    """RSS split into anonymous memory (heap, stacks) and file pages (mostly the program's own code)."""
    parts = {}
    for field, key in (("RssAnon", "anon_mb"), ("RssFile", "file_mb")):
        kib = status_kib(pid, field)
        parts[key] = None if kib is None else round(kib / 1024, 1)
    return parts


def peak_rss_mb(pid: int) -> float | None:
    kib = status_kib(pid, "VmHWM")
    return None if kib is None else round(kib / 1024, 1)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of the process (all its threads), from /proc/PID/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Tmux:
    """One detached tmux session on its own server socket, at a fixed size."""

    started_sessions = 0

    def __init__(self, name: str, width: int, height: int, command: str, env: dict):
        self.name = name
        # A server of its own per start: a killed server's socket can linger for a moment.
        Tmux.started_sessions += 1
        self.socket = f"capdeck-bench-{name}-{os.getpid()}-{Tmux.started_sessions}"
        exports = " ".join(f"{k}={v}" for k, v in env.items())
        self.started = time.time()
        subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", name,
                        "-x", str(width), "-y", str(height), f"exec env {exports} {command}"], check=True)
        pid = subprocess.run(["tmux", "-L", self.socket, "display-message", "-p", "-t", name, "#{pane_pid}"],
                             capture_output=True, text=True, check=True).stdout.strip()
        self.pid = int(pid)

    def screen(self) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p", "-t", self.name],
                             capture_output=True, text=True, check=False)
        return out.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, "send-keys", "-t", self.name, *keys], check=True)

    def literal(self, text: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, "send-keys", "-t", self.name, "-l", text], check=True)

    def until(self, what: str, limit: float, check) -> tuple[float, str]:
        """Poll the screen every 20 ms until `check(screen)`; returns (seconds since start, screen)."""
        deadline = time.time() + limit
        screen = ""
        while time.time() < deadline:
            screen = self.screen()
            if check(screen):
                return time.time() - self.started, screen
            time.sleep(0.02)
        raise TimeoutError(f"{self.name}: no {what} within {limit} s; the screen:\n{screen}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


class ApiServerLoad:
    """The API server's load while a program runs: every second its own request counter
    (`apiserver_request_total`, every client: the program, kube-controller-manager, kube-scheduler,
    kwok) and its CPU time, until `stop`. Requests per second and CPU cores per second, peak and mean."""

    def __init__(self, kube, pid: int):
        self.kube, self.pid = kube, pid
        self.samples: list[tuple[float, float, float]] = []  # (at, requests so far, CPU seconds so far)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                total = sum(v for n, _, v in parse_metrics(self.kube.text("/metrics")) if n == "apiserver_request_total")
                cpu = cpu_seconds(self.pid)
                if cpu is not None:
                    self.samples.append((time.time(), total, cpu))
            except Exception:  # a missed sample is a gap, not a failure; the next second samples again
                pass
            self.stopped.wait(1.0)

    def stop(self) -> dict:
        self.stopped.set()
        self.thread.join(timeout=35)
        rates, cores = [], []
        for (t0, r0, c0), (t1, r1, c1) in zip(self.samples, self.samples[1:]):
            if t1 > t0:
                rates.append((r1 - r0) / (t1 - t0))
                cores.append((c1 - c0) / (t1 - t0))
        span = self.samples[-1][0] - self.samples[0][0] if len(self.samples) > 1 else 0.0
        mean = lambda first, last: round((last - first) / span, 1) if span > 0 else None  # noqa: E731
        return {
            "seconds": round(span, 1),
            "peak_requests_per_s": round(max(rates), 1) if rates else None,
            "mean_requests_per_s": mean(self.samples[0][1], self.samples[-1][1]) if span else None,
            "peak_cpu_cores": round(max(cores), 2) if cores else None,
            "mean_cpu_cores": round((self.samples[-1][2] - self.samples[0][2]) / span, 2) if span else None,
            "peak_rss_mb": peak_rss_mb(self.pid),
        }
