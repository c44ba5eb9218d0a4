#!/usr/bin/env python3
"""capdeck beside the programs it replaces, on one real kube-apiserver (1.34, or --kube 1.37), in one run.

  cargo build --profile dist      # the binary it measures by default: target/dist/capdeck (the image's profile)
  python3 tools/bench-peers/bench_peers.py [--smoke] [--out target/bench-peers.json]

kube-apiserver, etcd and the peers are built from Go modules by tools/envtest/build.sh,
tools/upstream/build.sh and tools/peers/build.sh (Go 1.26; cached after the first build; docs/TESTING.md).

Pairs (docs/PERFORMANCE.md, "Side by side with the peers"):
  engine:  `capdeck --daemon` against the Go CAP Operator v0.35.0 (tools/upstream/build.sh), on the
           same applications, for each --sizes APPS:SECRETS: peak and steady RSS, requests at rest
           over --rest-seconds, requests and writes per rotated Deployment, and the time from a
           Secret's change to the first Deployment write, both with a 30 s window.
  console: `capdeck --view tenants` against k9s and kdash (tools/peers/build.sh; --console-peers none
           runs capdeck's alone, as CI's smoke run does), in tmux at 160x40,
           on --tenants CAPTenants: time to the first frame showing the full count, RSS after 30 s,
           LIST and WATCH requests at rest, and CPU seconds while idle.
  storm:   the uaa Secrets of --storm-apps applications all rotate within --storm-spread-seconds, once
           for the Go operator and once for `capdeck --daemon` (its default pacing and storm guard, or
           what --capdeck-engine-args and --capdeck-storm-args set; the same 30 s window): peak and mean writes/s, total
           writes, time until every rotated Deployment is written and until every Pod of them runs
           on the new credentials (real ReplicaSets, Pods ready after --ready-delay..--ready-jitter),
           the API server's peak and mean load (requests/s from its own counter, every client; CPU
           cores), peak RSS, and for capdeck what its storm guard and pacing did (its /metrics,
           RotationBatches, Deployments written per 10 s).

The control plane runs its workload plane (tools/envtest/up.sh): kube-controller-manager,
kube-scheduler and kwok, so what the programs write rolls through real ReplicaSets.

Requests are counted by the API server (its audit log; each program has a user of its own), never by
the program. Writes the report as JSON to --out and a table on stdout. Exits 1 when a peer cannot be
built or started or a measurement cannot be taken: a missing peer is a failure, never a skip (a peer
left out with --console-peers is neither built nor run, and the report's settings say so).
"""

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import world  # noqa: E402
from measure import (WRITE_VERBS, ApiServerLoad, Audit, CountingRelay, Tmux, cpu_seconds,  # noqa: E402
                     parse_metrics, peak_rss_mb, per_bucket, rss_mb, rss_parts_mb, summarize)
from plane import NODES, REPO, Plane, free_port  # noqa: E402

WINDOW = "30s"  # the Go operator's minimum ROLLOUT_DELAY; capdeck gets the same
WINDOW_SECONDS = 30
# New applications at a time while the world grows, and the Go operator's settings while it builds
# them (never while measured).
GROW_STEP = 1000
SETUP_GO_ENV = {"MAX_CONCURRENT_RECONCILES_CAP_APPLICATION": "8", "MAX_CONCURRENT_RECONCILES_CAP_APPLICATION_VERSION": "8",
                "CLIENT_QPS": "200", "CLIENT_BURST": "400"}


def built(command: list[str], what: str) -> Path:
    """Run a build script that prints the binary's path last; a failure ends the bench."""
    out = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
    if out.returncode != 0 or not out.stdout.strip():
        sys.exit(f"bench-peers: {what} could not be built ({' '.join(command)}):\n{out.stderr.strip()[-2000:]}")
    path = Path(out.stdout.strip().splitlines()[-1])
    if not path.exists():
        sys.exit(f"bench-peers: {what}: {path} does not exist after the build")
    return path


def version_of(binary: Path, *args: str) -> str:
    out = subprocess.run([str(binary), *args], capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "?"


class Program:
    """A measured program in the background, its output in a log file; stopped with SIGTERM."""

    def __init__(self, name: str, command: list[str], env: dict, log: Path):
        self.name, self.log = name, log
        self.file = log.open("wb")
        self.started = time.time()
        self.process = subprocess.Popen(command, env=env, stdout=self.file, stderr=subprocess.STDOUT)
        self.pid = self.process.pid

    def alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}; its log:\n{self.tail()}")

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.file.close()


def wait(what: str, limit: float, check, program: Program | None = None) -> float:
    started = time.time()
    while not check():
        if program:
            program.alive()
        if time.time() - started > limit:
            raise TimeoutError(f"timed out after {limit} s waiting for {what}"
                               + (f"; {program.name}'s log:\n{program.tail()}" if program else ""))
        time.sleep(0.25)
    return time.time() - started


def is_deployment_write(entry: dict) -> bool:
    """A write to a Deployment's spec (a restart), not to its status."""
    return entry["resource"] == "deployments" and not entry["subresource"] and entry["verb"] in ("update", "patch")


def is_no_work(entry: dict) -> bool:
    """A request that is no work: a Lease renewal or a watch (what quiet and work counts leave out)."""
    return entry["resource"] == "leases" or entry["verb"] == "watch"


class EnginePair:
    """The Go operator and capdeck's daemon on the same applications, one after the other."""

    def __init__(self, plane: Plane, audit: Audit, args, binaries: dict, logs: Path):
        self.plane, self.audit, self.args, self.bin, self.logs = plane, audit, args, binaries, logs
        self.apps = 0
        self.secrets = 0
        self.generation = 1
        self.next_rotation = 0

    def grow(self, apps: int, secrets: int) -> None:
        """Add applications and filler Secrets up to `apps` and `secrets` in all (Go's VCAP Secrets count)."""
        kube = self.plane.admin
        filler = max(0, secrets - 3 * apps)
        kube.create_all(world.filler_secrets(self.secrets, filler))
        self.secrets = filler
        # The Go operator builds what it builds for new applications (Deployments, VCAP Secrets), then stops.
        go = self.start_go("setup", setup=True)
        try:
            wait("the Go operator's lease", 120, lambda: "Started leading" in go.log.read_text(errors="replace"), go)
            # At most GROW_STEP new applications at a time: 5,000 at once had not one version Ready
            # after 30 minutes (each round of the Go operator's queues went through all of them).
            while self.apps < apps:
                step = min(apps, self.apps + GROW_STEP)
                binding, caps = world.application_objects(self.apps, step)
                kube.create_all(binding)
                kube.create_all(caps)
                self.apps = step
                self.wait_versions_ready(step, go)
        finally:
            go.stop()

    def wait_versions_ready(self, apps: int, go: Program) -> None:
        """Until `apps` versions are Ready: however long that takes (about 45 a minute here), as long
        as more become Ready every 30 minutes (with thousands new at once, none is Ready for the first
        quarter of an hour: their content and tenant Jobs queue). Checked every 10 s: a list of
        thousands of versions 4 times a second would slow the API server the Go operator works with."""
        best, progressed = -1, time.time()
        while (ready := self.ready_versions()) < apps:
            go.alive()
            if ready > best:
                best, progressed = ready, time.time()
            elif time.time() - progressed > 1800:
                raise TimeoutError(f"{ready} of {apps} versions Ready, none more in 1800 s; "
                                   f"the Go operator's log:\n{go.tail()}")
            time.sleep(10)

    def ready_versions(self) -> int:
        items = self.plane.admin.list_all(f"{world.CAP}/capapplicationversions")
        return sum(1 for v in items if v.get("status", {}).get("state") == "Ready")

    def start_go(self, label: str, relay: CountingRelay | None = None, setup: bool = False) -> Program:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        server = relay.server() if relay else None
        env.update(KUBECONFIG=str(self.plane.kubeconfig("go-operator", server)), POD_NAMESPACE="default",
                   METRICS_PORT=str(free_port()), DNS_MANAGER="kubernetes", CERT_MANAGER="cert-manager.io",
                   ROLLOUT_DELAY=WINDOW)
        if setup:
            # Building the world only, never measured: the operator's own knobs for more workers and
            # requests (its defaults: 1 CAPApplication and 3 version workers, 25 requests a second).
            env.update(SETUP_GO_ENV)
        return Program("the Go CAP Operator", [str(self.bin["go"])], env, self.logs / f"go-operator-{label}.log")

    def start_capdeck(self, label: str, relay: CountingRelay | None = None,
                      extra: tuple[str, ...] = ()) -> tuple[Program, int]:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        server = relay.server() if relay else None
        env.update(KUBECONFIG=str(self.plane.kubeconfig("capdeck-engine", server)), RUST_LOG="info,kube=warn")
        command = [str(self.bin["capdeck"]), "--daemon", "-A", "--rollout-delay", WINDOW, "--lease-namespace",
                   "default", "--health-addr", f"127.0.0.1:{port}", *self.args.capdeck_engine_args, *extra]
        return Program("capdeck --daemon", command, env, self.logs / f"capdeck-engine-{label}.log"), port

    def rotate(self, count: int) -> list[int]:
        """Rotate the uaa Secret of `count` applications not rotated before, as the `rotator` user."""
        self.generation += 1
        chosen = [(self.next_rotation + i) % self.apps for i in range(count)]
        self.next_rotation += count
        rotator = self.plane.client("rotator")
        for index in chosen:
            app, ns = world.app_name(index), world.namespace_of(index)
            rotator.ok("PATCH", f"/api/v1/namespaces/{ns}/secrets/{app}-uaa",
                       {"data": world.credentials(app, "uaa", self.generation)},
                       content_type="application/merge-patch+json")
        return chosen

    def measure(self, who: str, user: str, program: Program, ready, relay: CountingRelay) -> dict:
        """Start-up, rest and one rotation of one program; the program is running when called."""
        a = self.args
        try:
            wait(f"{program.name} to lead", 180, ready, program)
            # Both decide at start only after one window (Go) or at once (capdeck): wait past it, then for quiet.
            wait("one window after start", WINDOW_SECONDS + 10, lambda: time.time() - program.started > WINDOW_SECONDS + 5,
                 program)
            # Quiet means no request for 10 s; from 2,000 applications 120 s, since one LIST of all
            # Secrets (an informer's first) is a single request that can take longer than 10 s, and
            # the Go operator's start looked quiet during it. A start-up that is not over by the limit
            # is measured as far as it went and said so (the Go operator's start lists every Secret of
            # a namespace once per application).
            quiet, limit = (10, 1800) if self.apps < 2000 else (120, 3600)
            try:
                self.audit.wait_quiet(user, quiet, limit, ignore=is_no_work)
                startup_over = True
            except TimeoutError as error:
                print(f"   {who}: {error}; measured as far as it went", flush=True)
                startup_over = False
            startup_entries = self.audit.of(user, program.started, time.time())
            startup = summarize(startup_entries)
            startup_deployment_writes = sum(1 for e in startup_entries if is_deployment_write(e))
            startup_received, startup_sent = relay.counts()
            startup_result = {
                "startup_over": startup_over,
                "startup_quiet_seconds": quiet,
                # From the program's start to its last start-up request (Lease renewals and watches aside).
                "startup_seconds": round(max((e["at"] for e in startup_entries if not is_no_work(e)),
                                             default=program.started) - program.started, 1),
                "startup_requests": startup["requests"],
                "startup_writes": startup["writes"],
                "startup_deployment_writes": startup_deployment_writes,
                # What the start-up requests were, by verb and resource (Lease renewals included).
                "startup_by_request": startup["by_request"],
                # The wire's bytes through the program's own relay (TLS included), from its start until quiet.
                "startup_bytes_received": startup_received,
                "startup_bytes_sent": startup_sent,
            }
            if a.engine_phases == "startup":
                return {"peak_rss_mb": peak_rss_mb(program.pid), "steady_rss_mb": rss_mb(program.pid),
                        "steady_rss_parts": rss_parts_mb(program.pid), **startup_result}
            rest_from = time.time()
            cpu_before = cpu_seconds(program.pid)
            time.sleep(a.rest_seconds)
            program.alive()
            rest_to = time.time()
            at_rest = summarize(self.audit.of(user, rest_from, rest_to))
            at_rest_received = relay.counts()[0] - startup_received
            cpu_idle = cpu_seconds(program.pid) - cpu_before
            steady = rss_mb(program.pid)
            steady_parts = rss_parts_mb(program.pid)

            changed_at = time.time()
            chosen = self.rotate(a.rotate)
            expected = {world.deployment_of(i) for i in chosen}

            def written() -> set:
                return {e["name"] for e in self.audit.of(user, changed_at) if is_deployment_write(e)}

            wait(f"{len(expected)} Deployment writes by {who}", WINDOW_SECONDS + 240,
                 lambda: expected <= written(), program)
            done_at = self.audit.wait_quiet(user, 10, 300, ignore=is_no_work)
            rotation = [e for e in self.audit.of(user, changed_at, done_at) if not is_no_work(e)]
            rotated_at = min(e["at"] for e in self.audit.of("rotator", changed_at - 1)
                             if e["resource"] == "secrets")
            deployment_writes = [e for e in rotation if is_deployment_write(e)]
            first_write = min(e["at"] for e in deployment_writes)
            stray = {e["name"] for e in deployment_writes} - expected
            summary = summarize(rotation)
            peak = peak_rss_mb(program.pid)
            return {
                "peak_rss_mb": peak,
                "steady_rss_mb": steady,
                "steady_rss_parts": steady_parts,
                **startup_result,
                "at_rest_bytes_received": at_rest_received,
                "at_rest": at_rest,
                "at_rest_seconds": round(rest_to - rest_from, 1),
                "idle_cpu_seconds": round(cpu_idle, 2),
                "rotated_deployments": len(expected),
                "deployment_writes": len(deployment_writes),
                "deployments_written_not_rotated": sorted(stray),
                "rotation": summary,
                "requests_per_rotated_deployment": round(summary["requests"] / len(expected), 2),
                "writes_per_rotated_deployment": round(summary["writes"] / len(expected), 2),
                "change_to_first_write_s": round(first_write - rotated_at, 2),
            }
        finally:
            program.stop()

    def run(self, apps: int, secrets: int) -> dict:
        print(f"== engine pair: {apps} CAPApplications, {secrets} Secrets", flush=True)
        started = time.time()
        self.grow(apps, secrets)
        total = len(self.plane.admin.list_all("/api/v1/secrets"))
        print(f"   seeded in {time.time() - started:.0f} s ({total} Secrets)", flush=True)
        label = f"{apps}"
        go_relay = CountingRelay(self.plane.server)
        go = self.start_go(label, go_relay)
        go_result = self.measure("the Go operator", "go-operator", go,
                                 lambda: "Started leading" in go.log.read_text(errors="replace"), go_relay)
        print(f"   go: {json.dumps({k: v for k, v in go_result.items() if not isinstance(v, dict)})}", flush=True)
        capdeck_relay = CountingRelay(self.plane.server)
        # The binary's version when it starts: a long seeding may outlive the build named at the bench's start.
        launched = version_of(self.bin["capdeck"], "--version")
        capdeck, port = self.start_capdeck(label, capdeck_relay)
        capdeck_result = self.measure("capdeck", "capdeck-engine", capdeck, lambda: readyz(port), capdeck_relay)
        capdeck_result["version"] = launched
        print(f"   capdeck: {json.dumps({k: v for k, v in capdeck_result.items() if not isinstance(v, dict)})}",
              flush=True)
        return {"applications": apps, "secrets": total, "window": WINDOW, "go_operator": go_result,
                "capdeck": capdeck_result}


class StormPair:
    """A rotation storm: the uaa Secret of every one of N applications changes within one minute, once
    for the Go operator and once for capdeck's daemon (its default pacing and storm guard), each alone
    on the same applications: N the engine pair did not rotate, its world grown to them when needed."""

    def __init__(self, engine: EnginePair, args):
        self.engine, self.plane, self.audit, self.args = engine, engine.plane, engine.audit, args
        # Applications the engine pair never rotated: capdeck rolled those minutes before, and its storm
        # guard (--min-rollout-interval 10m) would hold them for an approval for that, not for the storm.
        self.first = engine.next_rotation
        engine.next_rotation += args.storm_apps

    def world(self) -> None:
        """The storm's applications exist, with their Deployments (the Go operator builds them)."""
        last = self.first + self.args.storm_apps
        if self.engine.apps < last:
            # No filler beyond what is there: the storm is about the rotated applications.
            self.engine.grow(last, self.engine.secrets + 3 * last)

    def rotate_all(self) -> list[int]:
        """Every storm application's uaa Secret, spread evenly over --storm-spread-seconds, as `rotator`."""
        apps, spread = self.args.storm_apps, self.args.storm_spread_seconds
        self.engine.generation += 1
        rotator = self.plane.client("rotator")
        started = time.time()
        for step, index in enumerate(range(self.first, self.first + apps)):
            due = started + spread * step / apps
            time.sleep(max(0.0, due - time.time()))
            app, ns = world.app_name(index), world.namespace_of(index)
            rotator.ok("PATCH", f"/api/v1/namespaces/{ns}/secrets/{app}-uaa",
                       {"data": world.credentials(app, "uaa", self.engine.generation)},
                       content_type="application/merge-patch+json")
        return list(range(self.first, self.first + apps))

    def measure(self, who: str, user: str, program: Program, ready, port: int | None = None) -> dict:
        """Start-up to quiet, then the storm until every rotated Deployment is written (or capdeck holds
        the rest for an approval, or the time limit passes); the program is running when called."""
        try:
            wait(f"{program.name} to lead", 180, ready, program)
            wait("one window after start", WINDOW_SECONDS + 10, lambda: time.time() - program.started > WINDOW_SECONDS + 5,
                 program)
            self.audit.wait_quiet(user, 10, 1800, ignore=is_no_work)

            expected_now = {world.deployment_of(i) for i in range(self.first, self.first + self.args.storm_apps)}
            before = self.vcap_secrets(expected_now)
            load = ApiServerLoad(self.plane.admin, self.plane.apiserver_pid())
            changed_at = time.time()
            chosen = self.rotate_all()
            rotation_ended = time.time()
            program.alive()
            expected = {world.deployment_of(i) for i in chosen}
            outcome = self.wait_for_writes(user, program, port, expected, changed_at,
                                                                rotation_ended)
            # Until every Pod of a written Deployment runs on the new credentials (kwok's Pods become
            # ready 5-20 s after they start); the API server's load is measured over all of it.
            pods_done_at, on_new = self.wait_new_credentials(before, changed_at, program)
            try:
                done_at, quiet = self.audit.wait_quiet(user, 10, 300, ignore=is_no_work), True
            except TimeoutError:
                done_at, quiet = time.time(), False
            apiserver = load.stop()
            rotator = [e for e in self.audit.of("rotator", changed_at - 1) if e["resource"] == "secrets"]
            rotated_at, last_rotation = min(e["at"] for e in rotator), max(e["at"] for e in rotator)
            storm = [e for e in self.audit.of(user, changed_at, done_at) if not is_no_work(e)]
            writes = [e for e in storm if e["verb"] in WRITE_VERBS]
            deployment_writes = [e for e in storm if is_deployment_write(e)]
            names = [e["name"] for e in deployment_writes]
            last = max((e["at"] for e in writes), default=rotated_at)
            seconds = max(last - rotated_at, 1e-3)
            per_second = per_bucket([e["at"] for e in writes], rotated_at, 1)
            result = {
                "outcome": outcome,
                "quiet_after": quiet,
                "rotated_deployments": len(expected),
                "rotation_spread_s": round(last_rotation - rotated_at, 2),
                "deployment_writes": len(deployment_writes),
                "deployments_written": len(set(names) & expected),
                "deployments_written_more_than_once": sorted({n for n in names if names.count(n) > 1}),
                "deployments_written_not_rotated": sorted(set(names) - expected),
                "deployments_not_written": len(expected - set(names)),
                "peak_writes_per_s": max(per_second, default=0),
                "writes": len(writes),
                "requests": len(storm),
                "storm_seconds": round(seconds, 2),
                "mean_writes_per_s": round(len(writes) / seconds, 2),
                "all_deployments_written_s": (round(max(e["at"] for e in deployment_writes) - rotated_at, 2)
                                              if expected <= set(names) else None),
                "first_deployment_write_s": (round(min(e["at"] for e in deployment_writes) - rotated_at, 2)
                                             if deployment_writes else None),
                "deployment_writes_per_10s": per_bucket([e["at"] for e in deployment_writes], rotated_at, 10),
                "peak_rss_mb": peak_rss_mb(program.pid),
                "summary": summarize(storm),
                "deployments_on_new_credentials": on_new,
                "all_pods_on_new_credentials_s": (round(pods_done_at - rotated_at, 2)
                                                  if pods_done_at is not None else None),
                "apiserver": apiserver,
            }
            if port is not None:
                account = self.capdeck_account(port, rotated_at)
                held = set(account.pop("deployments_not_rolled")) & (expected - set(names))
                result["deployments_held"] = len(held)
                result["capdeck"] = account
            return result
        finally:
            program.stop()

    def vcap_secrets(self, names: set, deployments: list | None = None) -> dict:
        """The VCAP Secret each of the Deployments `names` reads now (the first container's envFrom)."""
        found = {}
        for d in deployments if deployments is not None else self.plane.admin.list_all("/apis/apps/v1/deployments"):
            name = d["metadata"]["name"]
            if name in names:
                containers = d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
                refs = [e.get("secretRef", {}).get("name") for c in containers[:1] for e in c.get("envFrom", [])]
                found[name] = next((r for r in refs if r), None)
        return found

    def wait_new_credentials(self, before: dict, changed_at: float, program: Program) -> tuple[float | None, int]:
        """Until every Deployment that now reads another VCAP Secret than `before` has rolled out (its
        Pods all on the new template, the old ones gone): when that was first seen (polled every second)
        and how many. `None` when some had not by --storm-timeout."""
        deadline = changed_at + self.args.storm_timeout
        while True:
            moved, done = 0, 0
            deployments = self.plane.admin.list_all("/apis/apps/v1/deployments")
            now_reading = self.vcap_secrets(set(before), deployments)
            rolled = {d["metadata"]["name"] for d in deployments if d["metadata"]["name"] in before and rolled_out(d)}
            for name, secret in now_reading.items():
                if secret != before.get(name):
                    moved += 1
                    done += name in rolled
            if moved and done == moved:
                return time.time(), done
            if time.time() > deadline:
                print(f"   {program.name}: {done} of {moved} rewritten Deployments rolled out by the time limit",
                      flush=True)
                return None, done
            time.sleep(1)

    def wait_for_writes(self, user: str, program: Program, port: int | None, expected: set, changed_at: float,
                        rotation_ended: float) -> str:
        """Until every expected Deployment is written ("all written"); or, for capdeck, nothing written for
        --storm-stall-seconds while it holds batches for an approval ("held"); or --storm-timeout ("timeout")."""
        a = self.args
        written: set = set()
        last_write = rotation_ended
        seen = 0
        while True:
            entries = self.audit.refresh()
            for e in entries[seen:]:
                if e["user"] == user and e["at"] >= changed_at and is_deployment_write(e):
                    written.add(e["name"])
                    last_write = max(last_write, e["at"])
            seen = len(entries)
            if expected <= written:
                return "all written"
            now = time.time()
            if now - changed_at > a.storm_timeout:
                print(f"   {program.name}: timed out after {a.storm_timeout:.0f} s with {len(written & expected)} of "
                      f"{len(expected)} Deployments written", flush=True)
                return "timeout"
            if port is not None and now - last_write > a.storm_stall_seconds:
                try:
                    held = waiting_for_approval(metrics_of(port))
                except OSError as error:  # a slow answer is not a verdict; the time limit still bounds the wait
                    print(f"   {program.name}: /metrics did not answer ({error}); waiting on", flush=True)
                    held = 0
                if held:
                    print(f"   {program.name}: nothing written for {now - last_write:.0f} s, {held} batches held or "
                          f"awaiting an approval; {len(written & expected)} of {len(expected)} written", flush=True)
                    return "held"
            program.alive()
            time.sleep(1)

    def capdeck_account(self, port: int, since: float) -> dict:
        """What the storm guard and pacing did, from capdeck's /metrics, its Lease and its RotationBatches."""
        samples = metrics_of(port)

        def total(name: str, **labels) -> float:
            return sum(v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items()))

        def by(name: str, label: str) -> dict:
            out: dict = {}
            for n, l, v in samples:
                if n == name:
                    out[l.get(label, "")] = out.get(l.get(label, ""), 0) + v
            return out

        awaiting = [(l, v) for n, l, v in samples if n == "capdeck_batch_awaiting_approval_seconds"]
        held = [l for n, l, v in samples if n == "capdeck_batch_held" and v]
        batches = [b for b in self.plane.admin.list_all("/apis/capdeck.dev/v1alpha1/rotationbatches")
                   if datetime.fromisoformat(b["metadata"]["creationTimestamp"].replace("Z", "+00:00")).timestamp()
                   >= since - 1]
        phases: dict = {}
        open_reasons: dict = {}
        not_rolled: list = []
        for b in batches:
            status = b.get("status") or {}
            phase = status.get("phase") or "Collecting"
            phases[phase] = phases.get(phase, 0) + 1
            if phase in ("AwaitingApproval", "Held", "Waiting"):
                ready = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), {})
                key = f"{phase}/{ready.get('reason', '?')}"
                entry = open_reasons.setdefault(key, {"batches": 0, "deployments": 0,
                                                      "example": ready.get("message", "")})
                names = [d.get("name", "") for d in status.get("deployments", [])]
                entry["batches"] += 1
                entry["deployments"] += len(names)
                not_rolled.extend(names)
        settings = {}
        for lease in self.plane.admin.list_all("/apis/coordination.k8s.io/v1/namespaces/default/leases"):
            text = (lease["metadata"].get("annotations") or {}).get("capdeck.dev/settings")
            if text:
                settings = json.loads(text)
        return {
            "settings": settings,
            "max_parallel_rollouts": settings.get("maxParallelRollouts"),
            "min_rollout_interval_seconds": settings.get("minRolloutIntervalSeconds"),
            "batches_opened": len(batches),
            "batch_phases": phases,
            "batches_not_rolled": open_reasons,
            "deployments_not_rolled": not_rolled,
            "metrics": {
                "rotations_total": total("capdeck_rotations_total"),
                "deployments_restarted_total": total("capdeck_deployments_restarted_total"),
                "restarts_skipped_total": by("capdeck_restarts_skipped_total", "reason"),
                "batches_by_phase": by("capdeck_batches", "phase"),
                "batch_held": len(held),
                "batch_held_by_reason": by("capdeck_batch_held", "reason"),
                "batch_awaiting_approval": len(awaiting),
                "batch_awaiting_approval_max_seconds": max((v for _, v in awaiting), default=0),
                "batches_waiting_for_window": total("capdeck_batches_waiting_for_window"),
                "approval_wait_count": total("capdeck_approval_wait_seconds_count"),
                "rollout_duration_count": total("capdeck_rollout_duration_seconds_count"),
                "rollout_duration_sum_seconds": round(total("capdeck_rollout_duration_seconds_sum"), 1),
                "api_writes_total": by("capdeck_api_writes_total", "resource"),
                "api_errors_total": total("capdeck_api_errors_total"),
            },
        }

    def run(self) -> dict:
        a = self.args
        print(f"== storm pair: {a.storm_apps} applications' uaa Secrets rotated over {a.storm_spread_seconds:g} s",
              flush=True)
        started = time.time()
        self.world()
        total = len(self.plane.admin.list_all("/api/v1/secrets"))
        print(f"   world ready in {time.time() - started:.0f} s ({self.engine.apps} applications, {total} Secrets; "
              f"the storm rotates {world.app_name(self.first)}..{world.app_name(self.first + a.storm_apps - 1)})",
              flush=True)
        label = f"storm-{a.storm_apps}"
        go = self.engine.start_go(label)
        go_result = self.measure("the Go operator", "go-operator", go,
                                 lambda: "Started leading" in go.log.read_text(errors="replace"))
        print(f"   go: {storm_brief(go_result)}", flush=True)
        capdeck, port = self.engine.start_capdeck(label, extra=tuple(a.capdeck_storm_args))
        capdeck_result = self.measure("capdeck", "capdeck-engine", capdeck, lambda: readyz(port), port)
        print(f"   capdeck: {storm_brief(capdeck_result)}", flush=True)
        return {"applications": a.storm_apps, "spread_seconds": a.storm_spread_seconds,
                "rotated_applications": [world.app_name(self.first), world.app_name(self.first + a.storm_apps - 1)],
                "applications_in_cluster": self.engine.apps, "secrets": total,
                "window": WINDOW, "timeout_seconds": a.storm_timeout, "stall_seconds": a.storm_stall_seconds,
                "go_operator": go_result, "capdeck": capdeck_result}


def rolled_out(deployment: dict) -> bool:
    """`kubectl rollout status` says done: observed, every replica updated and available, no old one."""
    want = deployment.get("spec", {}).get("replicas", 1)
    status = deployment.get("status", {})
    return (status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 1)
            and status.get("updatedReplicas", 0) == want and status.get("availableReplicas", 0) == want
            and status.get("replicas", 0) == want)


def storm_brief(result: dict) -> str:
    keys = ("outcome", "rotated_deployments", "deployments_written", "deployment_writes", "peak_writes_per_s", "writes",
            "mean_writes_per_s", "all_deployments_written_s", "all_pods_on_new_credentials_s", "peak_rss_mb",
            "apiserver")
    brief_result = {k: result[k] for k in keys}
    if "capdeck" in result:
        c = result["capdeck"]
        brief_result |= {"deployments_held": result["deployments_held"], "batches_opened": c["batches_opened"],
                         "batch_phases": c["batch_phases"]}
    return json.dumps(brief_result)


def metrics_of(port: int) -> list[tuple[str, dict, float]]:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return parse_metrics(response.read().decode())


def waiting_for_approval(samples: list) -> int:
    """Open batches capdeck holds or keeps for an approval (or a window), from its /metrics."""
    awaiting = sum(1 for n, _, _ in samples if n == "capdeck_batch_awaiting_approval_seconds")
    held = sum(v for n, _, v in samples if n in ("capdeck_batch_held", "capdeck_batches_waiting_for_window"))
    return int(awaiting + held)


def readyz(port: int) -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class ConsolePair:
    """capdeck's console, then k9s and kdash (those --console-peers names), one after the other, each in
    tmux at 160x40 on the tenants."""

    WIDTH, HEIGHT = 160, 40

    def __init__(self, plane: Plane, audit: Audit, args, binaries: dict, scratch: Path):
        self.plane, self.audit, self.args, self.bin, self.scratch = plane, audit, args, binaries, scratch

    def seed(self) -> None:
        kube = self.plane.admin
        kube.create_all(world.namespaces([world.TENANT_NS])[-1:])
        kube.create_all(world.tenant_objects(self.args.tenants))

    def home(self, name: str) -> dict:
        """A clean HOME and XDG dirs per program: no config, cache or history of an earlier run."""
        home = self.scratch / f"home-{name}"
        for sub in ("config", "cache", "state", "data"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"),
                "XDG_STATE_HOME": str(home / "state"), "XDG_DATA_HOME": str(home / "data"),
                # k9s keeps its discovery cache under the passwd home, not $HOME, unless told here.
                "KUBECACHEDIR": str(home / "cache/kube"), "TERM": "xterm-256color",
                "LANG": "C.UTF-8"}

    def one(self, name: str, user: str, command: str, first_frame, full_frame, navigate=None) -> dict:
        """Start `command` in tmux; time its first frame and its first frame with the full count (after
        `navigate` types the keys that reach the tenants, as soon as the program takes them)."""
        env = self.home(name)
        env["KUBECONFIG"] = str(self.plane.kubeconfig(user))
        if name == "k9s":
            # Its best case: no check for a newer release (this machine has no route to GitHub).
            config = self.scratch / f"home-{name}/config/k9s"
            config.mkdir(parents=True, exist_ok=True)
            (config / "config.yaml").write_text("k9s:\n  skipLatestRevCheck: true\n")
            env["K9S_CONFIG_DIR"] = str(config)
        # Twice: the first start has an empty HOME (k9s has no discovery cache yet); the second is
        # measured, as a user who has run it before on this cluster starts it.
        cold = {}
        for run in ("cold", "warm"):
            tmux = Tmux(name, self.WIDTH, self.HEIGHT, command, env)
            try:
                first, _ = tmux.until("a first frame", 120, first_frame)
                if navigate:
                    navigate(tmux)
                full, _ = tmux.until(f"the full count ({self.args.tenants})", 180, full_frame)
            except BaseException:
                tmux.kill()
                raise
            if run == "cold":
                cold = {"cold_first_frame_s": round(first, 3), "cold_first_full_frame_s": round(full, 3)}
                tmux.kill()
        try:
            time.sleep(max(0.0, self.args.rss_after - (time.time() - tmux.started)))
            rss = rss_mb(tmux.pid)
            rss_parts = rss_parts_mb(tmux.pid)
            # At rest: the count is on screen and nothing changes in the cluster.
            rest_from = time.time()
            cpu_before = cpu_seconds(tmux.pid)
            time.sleep(self.args.rest_seconds)
            rest_to = time.time()
            cpu_idle = cpu_seconds(tmux.pid) - cpu_before
            if not full_frame(tmux.screen()):
                raise RuntimeError(f"{name}: the full count left the screen while idle:\n{tmux.screen()}")
            return {
                "first_frame_s": round(first, 3),
                "first_full_frame_s": round(full, 3),
                **cold,
                "navigated": navigate is not None,
                "rss_mb": rss,
                "rss_parts": rss_parts,
                "idle_cpu_seconds": round(cpu_idle, 2),
                "at_rest_seconds": round(rest_to - rest_from, 1),
                "at_rest": summarize(self.audit.of(user, rest_from, rest_to)),
                "startup": summarize(self.audit.of(user, tmux.started, rest_from)),
            }
        finally:
            tmux.kill()

    def run(self) -> dict:
        n = self.args.tenants
        print(f"== console pair: {n} CAPTenants, tmux {self.WIDTH}x{self.HEIGHT}", flush=True)
        started = time.time()
        self.seed()
        print(f"   seeded in {time.time() - started:.0f} s", flush=True)
        results = {}

        capdeck_title = f"Tenants [{n}/{n}]"
        results["capdeck"] = self.one("capdeck", "capdeck-console", f"{self.bin['capdeck']} -A --view tenants",
                                      lambda screen: "capdeck" in screen and "ctx " in screen,
                                      lambda screen: capdeck_title in screen)
        print(f"   capdeck: {brief(results['capdeck'])}", flush=True)
        if "k9s" in self.args.console_peers:
            results["k9s"] = self.k9s(n)
        if "kdash" in self.args.console_peers:
            results["kdash"] = self.kdash(n)
        return {"tenants": n, "terminal": f"{self.WIDTH}x{self.HEIGHT}", **results}

    def k9s(self, n: int) -> dict:
        k9s_title = f"captenants(all)[{n}]"

        def k9s_to_tenants(tmux: Tmux) -> None:
            # `-c captenants` runs before k9s has loaded the CRDs' names ("command not found", then the
            # contexts view), so wait for its default view (pods) and type the command as a user would;
            # again (after OK on the error) until k9s knows it.
            tmux.until("k9s's pods view", 60, lambda s: "pods(all)[" in s.replace(" ", ""))
            deadline = time.time() + 120
            while time.time() < deadline:
                tmux.keys(":")
                tmux.until("k9s's prompt", 30, lambda s: "🐶>" in s)
                tmux.literal("captenants")
                tmux.keys("Enter")
                _, screen = tmux.until("the tenants or an error", 30,
                                       lambda s: "captenants(" in s.lower() or "command not found" in s)
                if "command not found" not in screen:
                    return
                tmux.keys("Enter")
                tmux.until("the error dismissed", 30, lambda s: "command not found" not in s)
            raise RuntimeError("k9s never knew the captenants command")

        result = self.one("k9s", "k9s", f"{self.bin['k9s']} -A --readonly --splashless",
                          lambda screen: "K9s Rev" in screen,
                          # k9s writes the count with a thousands separator: [10,000].
                          lambda screen: k9s_title in screen.lower().replace(" ", "").replace(",", ""),
                          navigate=k9s_to_tenants)
        print(f"   k9s: {brief(result)}", flush=True)
        return result

    def kdash(self, n: int) -> dict:
        kdash_title = f"CAPTenant (ns: all) [{n}]"

        def kdash_to_tenants(tmux: Tmux) -> None:
            # Its dynamic-resources menu ('-'), filtered ('/', lower case: it takes no capitals there)
            # to the kind, then Enter: each key as soon as kdash shows it is ready for it.
            tmux.until("kdash's resource tabs", 60, lambda s: "-:Dynamic" in s)
            tmux.keys("-")
            tmux.until("the dynamic resources menu", 60, lambda s: "Select Resource" in s)
            tmux.keys("/")
            tmux.until("the menu's filter", 30, lambda s: "[type to filter]" in s)
            tmux.literal("captenant")
            tmux.until("CAPTenant selected", 30, lambda s: "=> CAPTenant [" in s)
            tmux.keys("Enter")

        result = self.one("kdash", "kdash", f"{self.bin['kdash']}", lambda screen: "KDash v" in screen,
                          lambda screen: kdash_title in screen, navigate=kdash_to_tenants)
        print(f"   kdash: {brief(result)}", flush=True)
        return result


def brief(result: dict) -> str:
    return json.dumps({k: v for k, v in result.items() if not isinstance(v, dict)} |
                      {"at_rest": {k: result["at_rest"][k] for k in ("requests", "lists", "watches")}})


def ratio(a, b):
    return None if a is None or b in (None, 0) else round(a / b, 3)


def storm_cell(result: dict, key: str) -> str:
    """A storm figure; a missing time says how many Deployments were written and why the rest were not."""
    if result[key] is not None:
        return str(result[key])
    return f"{result['outcome']}: {result['deployments_written']}/{result['rotated_deployments']} written"


def table(report: dict) -> str:
    rows = ["| pair | measure | capdeck | peer | capdeck / peer | target |", "|---|---|---|---|---|---|"]
    for size in report["engine"]:
        c, g = size["capdeck"], size["go_operator"]
        label = f"engine vs Go operator, {size['applications']} apps / {size['secrets']} Secrets"
        # Issue 47: at 5,000 applications the peak is to be a quarter of the Go operator's.
        peak_target = "<= 1/4" if size["applications"] >= 5000 else "<= 1/3"
        for name, key, target in [("peak RSS MB", "peak_rss_mb", peak_target), ("steady RSS MB", "steady_rss_mb", "<= 1/3")]:
            rows.append(f"| {label} | {name} | {c[key]} | {g[key]} | {ratio(c[key], g[key])} | {target} |")
        rows.append(f"| {label} | start-up requests | {c['startup_requests']} | {g['startup_requests']} | "
                    f"{ratio(c['startup_requests'], g['startup_requests'])} | |")
        if "startup_seconds" in c and "startup_seconds" in g:
            def over(r: dict) -> str:
                return f"{r['startup_seconds']}" + ("" if r["startup_over"] else " (not over)")
            rows.append(f"| {label} | start-up to its last request, s | {over(c)} | {over(g)} | "
                        f"{ratio(c['startup_seconds'], g['startup_seconds'])} | |")
        if "startup_bytes_received" in c and "startup_bytes_received" in g:
            cb, gb = c["startup_bytes_received"], g["startup_bytes_received"]
            rows.append(f"| {label} | start-up MB received (wire, TLS) | {cb / 1e6:.1f} | {gb / 1e6:.1f} | "
                        f"{ratio(cb, gb)} | |")
        if "at_rest" not in c or "at_rest" not in g:
            continue  # --engine-phases startup
        cr, gr = c["at_rest"]["requests"], g["at_rest"]["requests"]
        rows.append(f"| {label} | requests at rest ({c['at_rest_seconds']:.0f} s) | {cr} | {gr} | {ratio(cr, gr)} | <= 1 |")
        for name, key, target in [("requests per rotated Deployment", "requests_per_rotated_deployment", ""),
                                  ("writes per rotated Deployment", "writes_per_rotated_deployment",
                                   "<= 6 (capdeck)"),
                                  ("Secret change to first Deployment write, s", "change_to_first_write_s", "")]:
            rows.append(f"| {label} | {name} | {c[key]} | {g[key]} | {ratio(c[key], g[key])} | {target} |")
    storm = report.get("storm")
    if storm:
        c, g = storm["capdeck"], storm["go_operator"]
        label = f"rotation storm, {storm['applications']} apps in {storm['spread_seconds']:g} s"
        flags = report["settings"].get("capdeck_engine_args", []) + report["settings"].get("capdeck_storm_args", [])
        if flags:
            label += f" (capdeck {' '.join(flags)})"
        # Issue 47's item 5: every Pod on the new credentials in half the Go operator's time, and never a
        # higher peak of writes a second.
        for name, key, target in [("peak writes/s", "peak_writes_per_s", "<= 1"), ("total writes", "writes", ""),
                                  ("mean writes/s", "mean_writes_per_s", ""),
                                  ("time to all Deployments written, s", "all_deployments_written_s", ""),
                                  ("time to every Pod on the new credentials, s", "all_pods_on_new_credentials_s",
                                   "<= 1/2"),
                                  ("peak RSS MB", "peak_rss_mb", "")]:
            cv, gv = storm_cell(c, key), storm_cell(g, key)
            r = ratio(c[key], g[key])
            rows.append(f"| {label} | {name} | {cv} | {gv} | {'' if r is None else r} | {target} |")
        for name, key in [("API server peak requests/s (every client)", "peak_requests_per_s"),
                          ("API server mean requests/s", "mean_requests_per_s"),
                          ("API server peak CPU cores", "peak_cpu_cores")]:
            cv, gv = c["apiserver"][key], g["apiserver"][key]
            r = ratio(cv, gv)
            rows.append(f"| {label} | {name} | {cv} | {gv} | {'' if r is None else r} | |")
    console = report["console"]
    if not console:
        return "\n".join(rows)
    c = console["capdeck"]
    if "k9s" not in console and "kdash" not in console:
        label = f"console alone (no peers), {console['tenants']} CAPTenants"
        rows.append(f"| {label} | first full frame, s | {c['first_full_frame_s']} | | | |")
        rows.append(f"| {label} | RSS MB after {report['settings']['rss_after_seconds']} s | {c['rss_mb']} | | | |")
        rows.append(f"| {label} | LISTs at rest | {c['at_rest']['lists']} | | | 0 (capdeck) |")
    for peer in [peer for peer in ("k9s", "kdash") if peer in console]:
        p = console[peer]
        label = f"console vs {peer}, {console['tenants']} CAPTenants"
        rows.append(f"| {label} | first full frame, s | {c['first_full_frame_s']} | {p['first_full_frame_s']} | "
                    f"{ratio(c['first_full_frame_s'], p['first_full_frame_s'])} | <= 1/2 |")
        rows.append(f"| {label} | RSS MB after {report['settings']['rss_after_seconds']} s | {c['rss_mb']} | {p['rss_mb']} | "
                    f"{ratio(c['rss_mb'], p['rss_mb'])} | <= 1/2 |")
        for name, key, target in [("LISTs at rest", "lists", "0 (capdeck)"), ("WATCHes at rest", "watches", "")]:
            rows.append(f"| {label} | {name} | {c['at_rest'][key]} | {p['at_rest'][key]} | | {target} |")
        rows.append(f"| {label} | idle CPU s | {c['idle_cpu_seconds']} | {p['idle_cpu_seconds']} | "
                    f"{ratio(c['idle_cpu_seconds'], p['idle_cpu_seconds'])} | |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes and short rests, so CI runs every pair (the numbers mean nothing)")
    parser.add_argument("--sizes", default=None, help="APPS:SECRETS,... (default 100:10000,1000:50000)")
    parser.add_argument("--tenants", type=int, default=None, help="CAPTenants for the console pair (default 10000)")
    parser.add_argument("--rest-seconds", type=float, default=None, help="the at-rest window (default 60)")
    parser.add_argument("--rss-after", type=float, default=None, help="console RSS read this long after start (default 30)")
    parser.add_argument("--rotate", type=int, default=None, help="applications rotated per measured run (default 10)")
    parser.add_argument("--capdeck", default=None, help="the capdeck binary (default target/dist/capdeck: the image's profile)")
    parser.add_argument("--out", default=None, help="the JSON report (default target/bench-peers.json)")
    parser.add_argument("--engine-phases", choices=("all", "startup"), default="all",
                        help="the engine pair's phases: start-up, rest and a rotation (all), or start-up only: "
                             "peak RSS, requests and bytes until quiet (startup)")
    parser.add_argument("--pairs", default="engine,console,storm",
                        help="which pairs to run, comma-separated (default engine,console,storm)")
    parser.add_argument("--storm-apps", type=int, default=None,
                        help="applications whose uaa Secrets all rotate in the storm pair (default 1000)")
    parser.add_argument("--storm-spread-seconds", type=float, default=None,
                        help="the storm's rotations are spread evenly over this long (default 60)")
    parser.add_argument("--storm-timeout", type=float, default=None,
                        help="longest wait, from the first rotation, for every rotated Deployment to be written "
                             "(default 1.8 s per application, at least 300 s: 30 min at 1000)")
    parser.add_argument("--storm-stall-seconds", type=float, default=None,
                        help="stop waiting for capdeck when it wrote no Deployment this long and holds batches for "
                             "an approval (default 120)")
    parser.add_argument("--console-peers", default="k9s,kdash",
                        help="the peers the console pair runs after capdeck's console, comma-separated, or none "
                             "(default k9s,kdash)")
    parser.add_argument("--capdeck-engine-args", type=shlex.split, default=[],
                        help="more flags for `capdeck --daemon` in the engine and storm pairs, in one quoted "
                             "string (default none: its defaults), e.g. \"--max-parallel-rollouts 200\"; one flag "
                             "alone needs the = form: --capdeck-engine-args=--write-qps=50")
    parser.add_argument("--capdeck-storm-args", type=shlex.split, default=[],
                        help="more flags for `capdeck --daemon` in the storm pair alone, besides "
                             "--capdeck-engine-args (default none; capdeck refuses a flag given in both), "
                             "e.g. \"--max-parallel-rollouts 200\"")
    parser.add_argument("--kube", choices=["1.34", "1.37"], default="1.34",
                        help="the kube-apiserver minor the pairs run on (default 1.34)")
    parser.add_argument("--no-watch-list", action="store_true",
                        help="start kube-apiserver with --feature-gates=WatchList=false: streaming lists are refused, "
                             "so clients list in pages (what a server before 1.32 does)")
    parser.add_argument("--ready-delay", default=None,
                        help="each Pod becomes ready this long after it started, up to --ready-jitter (kwok; "
                             "default 5s, 1s in a smoke run)")
    parser.add_argument("--ready-jitter", default=None, help="the longest such delay (default 20s, 2s in a smoke run)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, audit log)")
    args = parser.parse_args()
    smoke = args.smoke
    args.sizes = args.sizes or ("4:200" if smoke else "100:10000,1000:50000")
    args.tenants = args.tenants or (200 if smoke else 10000)
    args.rest_seconds = args.rest_seconds or (5 if smoke else 60)
    args.rss_after = args.rss_after or (5 if smoke else 30)
    args.rotate = args.rotate or (2 if smoke else 10)
    args.storm_apps = args.storm_apps or (6 if smoke else 1000)
    args.storm_spread_seconds = args.storm_spread_seconds or (5 if smoke else 60)
    args.storm_timeout = args.storm_timeout or max(300.0, 1.8 * args.storm_apps)
    args.storm_stall_seconds = args.storm_stall_seconds or (30 if smoke else 120)
    world.READY_DELAY = args.ready_delay or ("1s" if smoke else "5s")
    world.READY_JITTER = args.ready_jitter or ("2s" if smoke else "20s")
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    args.out = Path(args.out or target / "bench-peers.json")
    sizes = [tuple(int(x) for x in size.split(":")) for size in args.sizes.split(",")]

    for tool in ("tmux", "openssl", "curl"):
        if not shutil.which(tool):
            sys.exit(f"bench-peers: {tool} is not on PATH (the console pair runs each program in tmux)")
    capdeck = Path(args.capdeck) if args.capdeck else target / "dist/capdeck"
    if not capdeck.exists():
        sys.exit(f"bench-peers: no capdeck binary at {capdeck}; run `cargo build --profile dist` or pass --capdeck")
    print("== peers (built once, then reused from the cache)", flush=True)
    pairs = set(args.pairs.split(","))
    args.console_peers = set() if args.console_peers == "none" else set(args.console_peers.split(","))
    unknown = args.console_peers - {"k9s", "kdash"}
    if unknown:
        sys.exit(f"bench-peers: --console-peers takes k9s and kdash (comma-separated) or none, "
                 f"not {','.join(sorted(unknown))!r}")
    if not pairs or pairs - {"engine", "console", "storm"}:
        sys.exit(f"bench-peers: --pairs takes engine, console and storm (any of them, comma-separated), "
                 f"not {args.pairs!r}")
    binaries = {
        "capdeck": capdeck,
        "assets": built(["bash", "tools/envtest/build.sh", "k8s" if args.kube == "1.34" else "k8s-1.37"],
                        f"kube-apiserver {args.kube}"),
        "go": built(["bash", "tools/upstream/build.sh"], "the Go CAP Operator"),
    }
    versions = {
        "capdeck": version_of(capdeck, "--version"),
        "go_operator": "SAP/cap-operator v0.35.0 (../shared/peers tarball)",
        "kube_apiserver": version_of(binaries["assets"] / "kube-apiserver", "--version")
        + (" (--feature-gates=WatchList=false)" if args.no_watch_list else ""),
    }
    if "console" in pairs and "k9s" in args.console_peers:
        binaries["k9s"] = built(["bash", "tools/peers/build.sh", "k9s"], "k9s")
        versions["k9s"] = "k9s v0.50.16 (github.com/derailed/k9s, Go module proxy)"
    if "console" in pairs and "kdash" in args.console_peers:
        # A smoke run checks what kdash shows, never how fast: it takes the quick build.
        kdash = "kdash-smoke" if args.smoke else "kdash"
        binaries["kdash"] = built(["bash", "tools/peers/build.sh", kdash], kdash)
        versions["kdash"] = version_of(binaries["kdash"], "--version") + (" (smoke build: no LTO, opt-level 1)" if args.smoke else "")
    # The Go operator's own CRDs: the console pair's CAPTenants are upstream's resource too.
    crds = built(["bash", "tools/upstream/build.sh", "--crds"], "the Go CAP Operator's CRDs")

    scratch = Path(tempfile.mkdtemp(prefix="capdeck-bench-peers-"))
    plane = None
    started = time.time()
    try:
        gates = ["--feature-gates=WatchList=false"] if args.no_watch_list else []
        print(f"== kube-apiserver {args.kube} {' '.join(gates)} in {scratch}", flush=True)
        plane = Plane(scratch / "plane", binaries["assets"], gates)
        plane.kubectl("apply", "--server-side", "-f", str(crds))
        ours = json.loads(subprocess.run([str(capdeck), "crds", "-o", "json"], capture_output=True, text=True,
                                         check=True).stdout)
        ours_items = ours["items"] if "items" in ours else ours
        ours_items = [crd for crd in ours_items if crd["spec"]["group"] == "capdeck.dev"]
        plane.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                            "items": ours_items}))
        plane.kubectl("wait", "--for=condition=Established", "--timeout=90s", "crd", "--all")
        plane.admin.create_all(world.namespaces())
        audit = Audit(plane.audit_log)
        logs = scratch / "logs"
        logs.mkdir()

        engine_results, console_results, storm_results = [], None, None
        # One world of applications: the storm pair grows the engine pair's. It runs before the console
        # pair: the Go operator reconciles the console's CAPTenants, and those writes are not the storm's.
        engine = EnginePair(plane, audit, args, binaries, logs)
        if "engine" in pairs:
            engine_results = [engine.run(apps, secrets) for apps, secrets in sizes]
        if "storm" in pairs:
            storm_results = StormPair(engine, args).run()
        if "console" in pairs:
            console_results = ConsolePair(plane, audit, args, binaries, scratch).run()
        report = {
            "schema": 1,
            "smoke": smoke,
            "machine": {"cpus": os.cpu_count(), "memory_gib": round(os.sysconf("SC_PAGE_SIZE") *
                                                                       os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
                        "kernel": platform.release()},
            "versions": versions,
            "settings": {"sizes": args.sizes, "tenants": args.tenants, "rest_seconds": args.rest_seconds,
                         "rss_after_seconds": args.rss_after, "rotate": args.rotate, "window": WINDOW,
                         "storm_apps": args.storm_apps, "storm_spread_seconds": args.storm_spread_seconds,
                         "storm_timeout_seconds": args.storm_timeout,
                         "storm_stall_seconds": args.storm_stall_seconds,
                         "capdeck_engine_args": args.capdeck_engine_args,
                         "capdeck_storm_args": args.capdeck_storm_args, "engine_phases": args.engine_phases,
                         "console_peers": sorted(args.console_peers),
                         "pods_ready_after": f"{world.READY_DELAY}-{world.READY_JITTER}",
                         "workload_plane": f"kube-controller-manager, kube-scheduler, kwok on {NODES} Nodes"},
            "engine": engine_results,
            "console": console_results,
            "storm": storm_results,
            "seconds": round(time.time() - started),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(table(report))
        print(f"report: {args.out} ({report['seconds']} s)")
        return 0
    except Exception as error:  # every failure ends the bench with what failed, and the logs are kept
        print(f"bench-peers: {type(error).__name__}: {error}\n(logs kept in {scratch})", file=sys.stderr)
        args.keep = True
        return 1
    finally:
        if plane:
            plane.stop()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
