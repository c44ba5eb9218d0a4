"""One kube-apiserver 1.34 + etcd for the peer bench, with an audit log that counts each client's requests,
and its workload plane: kube-controller-manager, kube-scheduler and kwok on `NODES` fake Nodes
(tools/envtest/up.sh), so the Deployments the programs write really roll.

Every measured program runs as its own token user (all in system:masters, so RBAC never limits one
and not another). The audit policy logs those users alone, at `Metadata`, at the `RequestReceived`
stage: one line per request as it arrives, counted by the API server and not by the client. The
seeding runs as `admin`, and the workload plane as users of its own; none of them is logged (the
API server's own request counter, `apiserver_request_total`, counts everyone).
"""

import base64
import http.client
import json
import os
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Who is who in the audit log (each gets a token and a kubeconfig of its own).
USERS = ["go-operator", "capdeck-engine", "capdeck-console", "k9s", "kdash", "rotator"]
# kwok's fake Nodes (1,000 Pods each, as kwok's stage gives them).
NODES = 8


class ApiError(Exception):
    """A request the API server answered with an error (the message names the object)."""


class Plane:
    """The running control plane: its directory, server URL, CA and kubeconfigs per user."""

    def __init__(self, directory: Path, assets: Path, extra_args: list[str] | None = None):
        self.dir = directory
        self.assets = assets
        self.audit_log = directory / "audit.log"
        policy = directory / "audit-policy.yaml"
        directory.mkdir(parents=True, exist_ok=True)
        policy.write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\n"
            "omitStages: [ResponseStarted, ResponseComplete, Panic]\n"
            "rules:\n"
            f"- level: Metadata\n  users: {json.dumps(USERS)}\n"
            "- level: None\n"
        )
        extra = " ".join(
            [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                # Never rotated: kube-apiserver before 1.36 reads 0 as lumberjack's default, 100 MB
                # (kubernetes#136478), and `Audit` follows one file.
                "--audit-log-maxsize=1000000",
                "--audit-log-mode=blocking",
                # The Go operator makes a Service per Deployment: 1,000 applications fill up.sh's /24.
                "--service-cluster-ip-range=10.96.0.0/16",
                *(extra_args or []),
            ]
        )
        env = dict(os.environ, KUBEBUILDER_ASSETS=str(assets), CAPDECK_ENVTEST_ADMINS=" ".join(USERS),
                   CAPDECK_ENVTEST_APISERVER_ARGS=extra, CAPDECK_ENVTEST_WORKLOADS="1",
                   CAPDECK_ENVTEST_NODES=str(NODES))
        out = subprocess.run(["bash", str(REPO / "tools/envtest/up.sh"), str(directory)], env=env,
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"the control plane did not start: {out.stderr.strip()}")
        self.admin_kubeconfig = directory / "kubeconfig"
        text = self.admin_kubeconfig.read_text()
        self.server = next(line.split('"')[1] for line in text.splitlines() if "server:" in line)
        self.ca_file = directory / "certs/ca.crt"
        self.admin_token = next(line.split(",")[0] for line in (directory / "certs/tokens.csv").read_text().splitlines()
                                if line.split(",")[1] == "admin")
        self.admin = Kube(self.server, self.ca_file, self.admin_token)

    def apiserver_pid(self) -> int:
        return int((self.dir / "kube-apiserver.pid").read_text().strip())

    def kubeconfig(self, user: str, server: str | None = None) -> Path:
        """A kubeconfig for `user` (its token from up.sh's tokens.csv), all namespaces' default `default`;
        through `server` (a relay in front of the API server) when given."""
        path = self.dir / f"kubeconfig-{user}"
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: bench\n  cluster: {{server: \"{server or self.server}\", certificate-authority-data: {ca}}}\n"
            f"contexts:\n- name: bench\n  context: {{cluster: bench, user: {user}, namespace: default}}\n"
            "current-context: bench\n"
            f"users:\n- name: {user}\n  user: {{token: capdeck-envtest-token-{user}}}\n"
        )
        return path

    def client(self, user: str) -> "Kube":
        return Kube(self.server, self.ca_file, f"capdeck-envtest-token-{user}")

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        # Its own discovery cache: kubectl's default (~/.kube/cache, keyed by host:port) would be read by
        # k9s too, and a cache taken before the CRDs were installed hides them from k9s for hours.
        env = dict(os.environ, KUBECACHEDIR=str(self.dir / "kubectl-cache"))
        out = subprocess.run([str(self.assets / "kubectl"), "--kubeconfig", str(self.admin_kubeconfig), *args],
                             input=stdin, capture_output=True, text=True, check=False, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def stop(self) -> None:
        subprocess.run(["bash", str(REPO / "tools/envtest/up.sh"), str(self.dir), "stop"], capture_output=True,
                       check=False)


class Kube:
    """A small JSON client over keep-alive HTTPS connections, one per thread."""

    def __init__(self, server: str, ca_file: Path, token: str):
        url = urllib.parse.urlparse(server)
        self.host, self.port = url.hostname, url.port
        self.context = ssl.create_default_context(cafile=str(ca_file))
        self.token = token
        self.local = threading.local()

    def connection(self, timeout: float = 60) -> http.client.HTTPSConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=timeout)
            self.local.conn = conn
        return conn

    def request(self, method: str, path: str, body=None, content_type: str = "application/json"):
        """(status, parsed body); retries a dropped keep-alive connection once."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in range(3):
            conn = self.connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
                status = response.status
                if status == 429 and attempt < 2:
                    time.sleep(0.5)
                    continue
                return status, (json.loads(raw) if raw else {})
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
        raise ApiError(f"{method} {path}: no answer")

    def text(self, path: str) -> str:
        """A GET whose answer is text (the API server's /metrics)."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=30)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
            response = conn.getresponse()
            raw = response.read().decode()
            if response.status != 200:
                raise ApiError(f"GET {path}: {response.status}")
            return raw
        finally:
            conn.close()

    def ok(self, method: str, path: str, body=None, content_type: str = "application/json", allow=()):
        status, answer = self.request(method, path, body, content_type)
        if status >= 300 and status not in allow:
            raise ApiError(f"{method} {path}: {status} {answer.get('message', answer)}")
        return answer

    def create(self, path: str, body) -> None:
        """Create, or leave as it is when it exists (seeding grows a world in steps)."""
        self.ok("POST", path, body, allow=(409,))

    def create_all(self, items: list[tuple[str, dict]], threads: int = 12) -> None:
        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(self.create, path, body) for path, body in items]:
                future.result()

    def list_all(self, path: str) -> list[dict]:
        items, token = [], ""
        while True:
            sep = "&" if "?" in path else "?"
            answer = self.ok("GET", f"{path}{sep}limit=1000" + (f"&continue={urllib.parse.quote(token)}" if token else ""))
            items.extend(answer.get("items", []))
            token = answer.get("metadata", {}).get("continue", "")
            if not token:
                return items

    def watch_lines(self, path: str, resource_version: str):
        """Yield watch events for ever (a dedicated connection; reconnects from the last version seen)."""
        while True:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=400)
            try:
                sep = "&" if "?" in path else "?"
                conn.request("GET", f"{path}{sep}watch=true&allowWatchBookmarks=true&resourceVersion={resource_version}"
                             "&timeoutSeconds=300", headers={"Authorization": f"Bearer {self.token}"})
                response = conn.getresponse()
                if response.status != 200:
                    raise ApiError(f"watch {path}: {response.status}")
                while True:
                    line = response.readline()
                    if not line:
                        break
                    event = json.loads(line)
                    version = event.get("object", {}).get("metadata", {}).get("resourceVersion")
                    if version:
                        resource_version = version
                    if event.get("type") == "ERROR":
                        resource_version = ""
                        break
                    yield event
            except (http.client.HTTPException, OSError):
                time.sleep(0.2)
            finally:
                conn.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
