"""What the peer bench seeds, and the status faker that stands in for kubelet and controller-manager.

Engine world, per application `app-NNNN` in namespace `bench-NN` (10 namespaces):
  - binding Secrets `<app>-uaa` and `<app>-db` (a `credentials` JSON key, as the stories use);
  - a CAPApplication with `rolloutOnCredentialUpdate: true` and both services;
  - a CAPApplicationVersion `<app>-v1` with one CAP Deployment workload `srv` reading both.
The Go operator makes the Deployment `<app>-v1-srv` and its VCAP Secret. The rest of the Secrets
are unreferenced filler (`filler-NNNNNN`, three small keys) spread over the same namespaces.

Console world: one CAPApplication and `--tenants` CAPTenants in namespace `bench-tenants`.
"""

import base64
import json
import threading

NAMESPACES = 10
TENANT_NS = "bench-tenants"
CAP = "/apis/sme.sap.com/v1alpha1"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def app_name(index: int) -> str:
    return f"app-{index:04d}"


def namespace_of(index: int) -> str:
    return f"bench-{index % NAMESPACES:02d}"


def deployment_of(index: int) -> str:
    return f"{app_name(index)}-v1-srv"


def credentials(app: str, service: str, generation: int) -> dict:
    return {"credentials": b64(json.dumps({"clientid": f"sb-{app}-{service}", "clientsecret": f"s-{generation}",
                                           "url": f"https://{service}.example.com"}, separators=(",", ":")))}


def namespaces(extra=()) -> list[tuple[str, dict]]:
    names = [f"bench-{n:02d}" for n in range(NAMESPACES)] + list(extra)
    return [("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}) for n in names]


def application_objects(first: int, last: int) -> tuple[list, list]:
    """(Secrets, CAP objects) of applications first..last-1 (CAP objects after the Secrets they read)."""
    secrets, caps = [], []
    for index in range(first, last):
        app, ns = app_name(index), namespace_of(index)
        for service in ("uaa", "db"):
            secrets.append((f"/api/v1/namespaces/{ns}/secrets",
                            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{app}-{service}", "namespace": ns},
                             "data": credentials(app, service, 1)}))
        services = [{"name": "uaa", "class": "xsuaa", "secret": f"{app}-uaa"},
                    {"name": "db", "class": "hana", "secret": f"{app}-db"}]
        caps.append((f"{CAP}/namespaces/{ns}/capapplications",
                     {"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
                      "metadata": {"name": app, "namespace": ns},
                      "spec": {"btpAppName": app, "globalAccountId": "ga", "providerSubaccountId": f"{app}-sub",
                               "rolloutOnCredentialUpdate": True, "btp": {"services": services}}}))
        caps.append((f"{CAP}/namespaces/{ns}/capapplicationversions",
                     {"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion",
                      "metadata": {"name": f"{app}-v1", "namespace": ns},
                      "spec": {"capApplicationInstance": app, "version": "1.0.0",
                               "workloads": [{"name": "srv", "consumedBTPServices": ["uaa", "db"],
                                              "deploymentDefinition": {"type": "CAP",
                                                                       "image": "registry.invalid/app:1"}}]}}))
    return secrets, caps


def filler_secrets(first: int, last: int) -> list:
    items = []
    for index in range(first, last):
        ns = f"bench-{index % NAMESPACES:02d}"
        items.append((f"/api/v1/namespaces/{ns}/secrets",
                      {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"filler-{index:06d}", "namespace": ns},
                       "data": {"user": b64(f"user-{index}"), "password": b64(f"pw-{index:012d}"),
                                "host": b64("db.internal.example.com")}}))
    return items


def tenant_objects(count: int) -> list:
    ns = TENANT_NS
    items = [(f"{CAP}/namespaces/{ns}/capapplications",
              {"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
               "metadata": {"name": "tenant-app", "namespace": ns},
               "spec": {"btpAppName": "tenant-app", "globalAccountId": "ga", "providerSubaccountId": "tenant-app-sub",
                        "btp": {"services": []}}})]
    for index in range(count):
        items.append((f"{CAP}/namespaces/{ns}/captenants",
                      {"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant",
                       "metadata": {"name": f"tenant-{index:05d}", "namespace": ns},
                       "spec": {"capApplicationInstance": "tenant-app", "subDomain": f"tenant-{index:05d}",
                                "tenantId": f"00000000-0000-4000-8000-{index:012d}", "version": "1.0.0",
                                "versionUpgradeStrategy": "always"}}))
    return items


class Faker:
    """Marks every Deployment available at its generation, as controller-manager would with running Pods.

    Runs as `admin` (not in the audit log) on a watch of all Deployments, for the whole bench.
    """

    def __init__(self, kube):
        self.kube = kube
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        listed = self.kube.ok("GET", "/apis/apps/v1/deployments?limit=1")
        version = listed.get("metadata", {}).get("resourceVersion", "")
        for item in self.kube.list_all("/apis/apps/v1/deployments"):
            self.mark(item)
        for event in self.kube.watch_lines("/apis/apps/v1/deployments", version):
            if event.get("type") in ("ADDED", "MODIFIED"):
                self.mark(event["object"])

    def mark(self, deployment: dict) -> None:
        meta, spec, status = deployment["metadata"], deployment.get("spec", {}), deployment.get("status", {})
        generation, replicas = meta.get("generation", 1), spec.get("replicas", 1)
        if status.get("observedGeneration") == generation and status.get("availableReplicas") == replicas:
            return
        body = {"status": {"observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
                           "readyReplicas": replicas, "availableReplicas": replicas,
                           "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                                           "message": "Deployment has minimum availability."},
                                          {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                                           "message": f"ReplicaSet \"{meta['name']}-1\" has successfully progressed."}]}}
        path = f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}/status"
        try:
            self.kube.ok("PATCH", path, body, content_type="application/merge-patch+json", allow=(404, 409))
        except Exception as error:  # a failed mark is retried on the next event; say it once
            print(f"faker: {meta['namespace']}/{meta['name']}: {error}", flush=True)
