"""What the peer bench seeds. Kubernetes' own controllers roll what the programs write: the plane runs
kube-controller-manager, kube-scheduler and kwok (tools/envtest/up.sh), and every Pod becomes ready
`READY_DELAY` after it started, up to `READY_JITTER` (kwok's `pod-ready` stage reads the Pod
template's annotations, which the Go operator copies from the version's workload).

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

NAMESPACES = 10
# A realistic start: each Pod ready 5-20 s after it started (set from --ready-delay).
READY_DELAY, READY_JITTER = "5s", "20s"
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
                                              "annotations": ready_annotations(),
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


def ready_annotations() -> dict:
    """The Pod template annotations kwok's `pod-ready` stage takes its delay from."""
    return {"pod-ready.stage.kwok.x-k8s.io/delay": READY_DELAY,
            "pod-ready.stage.kwok.x-k8s.io/jitter-delay": READY_JITTER}
