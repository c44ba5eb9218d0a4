"""Generates the demo seed (assets/demo/*.yaml), the cluster `capdeck --demo` and
`capdeck sandbox --seed demo` start with. Not run by the build; the YAML is checked in.
    cargo build && python3 assets/demo/generate.py
VCAP Secrets are computed with `capdeck plan --show-secrets` (byte-compatible with the Go
operator), so every Deployment starts current, except hr-portal's router, whose credentials
rotated "while capdeck was down": the start-up re-check finds it and opens a batch.
"""
import base64, hashlib, json, os, random, subprocess, sys, tempfile, yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
rng = random.Random(7)
T0 = "2026-11-20T08:00:00Z"

def b64(text):
    return base64.b64encode(text.encode()).decode()

def cond(status, reason, message=""):
    return [{"type": "Ready", "status": status, "reason": reason, "message": message, "lastTransitionTime": T0}]

def suffix():
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))

def md(name, ns, **extra):
    return dict({"name": name, "namespace": ns}, **extra)

def cav_uid(ns, cav):
    """A fixed uid for a version (derived, so the seed's random draws stay as they were)."""
    h = hashlib.sha1(f"{ns}/{cav}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

def owned_by(ns, cav):
    """The controller reference the CAP Operator gives a version's Deployments and VCAP Secrets."""
    return [{"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion", "name": cav,
             "uid": cav_uid(ns, cav), "controller": True, "blockOwnerDeletion": True}]

BTP_META = json.dumps({
    "metaDataProperties": [{"name": n, "format": "text"} for n in ["instance_name", "instance_guid", "plan", "label", "type"]]
                          + [{"name": "tags", "format": "json"}],
    "credentialProperties": [{"name": "clientid", "format": "text"}, {"name": "clientsecret", "format": "text"},
                             {"name": "url", "format": "text"}, {"name": "xsappname", "format": "text"},
                             {"name": "uaa", "format": "json"}]})

def binding(ns, name, layout, label, plan="standard", xsappname=None, extra=None):
    """A binding Secret in one of the three layouts capdeck reads."""
    secret = f"sk-{rng.getrandbits(48):012x}"
    xsappname = xsappname or f"{name}!b{rng.randint(10, 99)}"
    if layout == "metadata":
        data = {".metadata": BTP_META, "instance_name": name, "instance_guid": f"{rng.getrandbits(64):016x}",
                "plan": plan, "label": label, "type": label, "tags": json.dumps([label]),
                "clientid": f"sb-{name}", "clientsecret": secret, "url": f"https://{name}.auth.example.com",
                "xsappname": xsappname, "uaa": json.dumps({"xsappname": xsappname, "url": "https://auth.example.com"})}
    elif layout == "credentials":
        creds = {"clientid": f"sb-{name}", "clientsecret": secret, "url": f"https://{name}.example.com", "xsappname": xsappname}
        creds.update(extra or {})
        data = {"credentials": json.dumps(creds)}
    else:  # servicebinding.io flat key/value
        data = {"type": label, "uri": f"https://{name}.example.com", "username": f"u-{name}", "password": secret}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": md(name + "-bind", ns, labels={"app.kubernetes.io/managed-by": "btp-operator"}),
            "type": "Opaque", "data": {k: b64(v) for k, v in data.items()}}

def workloads(spec):
    out = []
    for name, kind, services, extra in spec:
        if kind in ("CAP", "Router", "Additional"):
            definition = dict({"type": kind, "image": f"registry.example.com/{name}:stable", "replicas": extra.get("replicas", 2)})
            out.append({"name": name, "consumedBTPServices": services, "deploymentDefinition": definition})
        else:
            out.append({"name": name, "consumedBTPServices": services,
                        "jobDefinition": {"type": kind, "image": f"registry.example.com/{name}:stable"}})
    return out

APPS = [
    # name, namespace, opt-in ("spec"|"annotation"|None), approval, services [(name, class, layout, extra)], versions, tenants
    dict(name="bookshop", ns="cap-shop", optin="spec", approval=None,
         services=[("uaa", "xsuaa", "metadata", {}), ("saas", "saas-registry", "credentials", {"saasregistryenabled": True}),
                   ("sm", "service-manager", "credentials", {"saasregistryenabled": True}),
                   ("dest", "destination", "credentials", {}), ("html5-host", "html5-apps-repo", "credentials", {}),
                   ("html5-rt", "html5-apps-repo", "credentials", {"saasregistryenabled": True})],
         workloads=[("app-router", "Router", ["uaa", "dest", "html5-host", "html5-rt"], {}),
                    ("srv", "CAP", ["uaa", "saas", "sm", "dest"], {"replicas": 3}),
                    ("mtx", "TenantOperation", ["uaa", "sm"], {}), ("content", "Content", ["html5-host"], {}),
                    ("notify", "CustomTenantOperation", [], {})],
         versions=[("1.8.2", "Ready"), ("1.9.0", "Ready"), ("1.10.0", "Ready")],
         tenants=[("provider", "1.10.0", "Ready")] + [(f"t{i}", "1.10.0", "Ready") for i in range(1, 8)]
                 + [("t8", "1.9.0", "Upgrading:2"), ("t9", "1.9.0", "Upgrading:1"), ("t10", "1.8.2", "UpgradeError"),
                    ("t11", "1.9.0", "Ready:never")]),
    dict(name="hr-portal", ns="cap-hr", optin="annotation", approval="manual",
         services=[("uaa", "xsuaa", "metadata", {}), ("dest", "destination", "credentials", {}),
                   ("conn", "connectivity", "credentials", {}), ("audit", "auditlog", "metadata", {"plan": "oauth2"}),
                   ("saas", "saas-registry", "credentials", {"saasregistryenabled": True})],
         workloads=[("router", "Router", ["uaa", "dest"], {}), ("srv", "CAP", ["uaa", "dest", "conn", "audit"], {}),
                    ("mtx", "TenantOperation", ["uaa"], {})],
         versions=[("2.3.0", "Ready"), ("2.4.0", "Processing")],
         tenants=[("provider", "2.3.0", "Ready")] + [(f"emea-{i}", "2.3.0", "Ready") for i in range(1, 4)]
                 + [("apj-1", None, "Provisioning"), ("us-1", None, "ProvisioningError")],
         stale=["router"]),
    dict(name="travel", ns="cap-shop", optin="spec", approval=None,
         services=[("uaa", "xsuaa", "metadata", {}), ("db", "hana", "keyvalue", {})],
         workloads=[("srv", "CAP", ["uaa", "db"], {}), ("worker", "Additional", ["db"], {}), ("mtx", "TenantOperation", ["db"], {})],
         versions=[("1.2.0", "Ready")],
         tenants=[("provider", "1.2.0", "Ready")] + [(f"agency-{i}", "1.2.0", "Ready") for i in range(1, 4)],
         stall=["srv"]),
    dict(name="analytics", ns="cap-hr", optin=None, approval=None,
         services=[("uaa", "xsuaa", "metadata", {})],
         workloads=[("srv", "CAP", ["uaa"], {}), ("mtx", "TenantOperation", ["uaa"], {})],
         versions=[("0.9.0", "Ready")],
         tenants=[("provider", "0.9.0", "Ready"), ("finance", "0.9.0", "Ready"), ("sales", "0.9.0", "Ready")]),
]

def cav_name(app, version):
    return f"{app}-{version.replace('.', '-')}"

docs = {"00-cluster.yaml": [], }
for ns in ["cap-shop", "cap-hr", "capdeck-system"]:
    docs["00-cluster.yaml"].append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
docs["00-cluster.yaml"].append({"apiVersion": "sme.sap.com/v1alpha1", "kind": "ClusterDomain", "metadata": {"name": "shared-domain"},
    "spec": {"domain": "apps.example.com", "ingressSelector": {"app": "istio-ingressgateway"}, "dnsMode": "Wildcard"},
    "status": {"state": "Ready", "conditions": cond("True", "Ready")}})

planned = []  # (ns, app, cav, workload, deployment, replicas, stall, stale)
for app in APPS:
    name, ns = app["name"], app["ns"]
    out = docs.setdefault(f"{name}.yaml", [])
    annotations = {}
    if app["optin"] == "annotation":
        annotations["capdeck.dev/rollout-on-credential-update"] = "true"
    if app["approval"]:
        annotations["capdeck.dev/approval"] = app["approval"]
    spec = {"btpAppName": name, "providerSubaccountId": f"{name}-provider-subaccount",
            "btp": {"services": [{"name": s, "class": c, "secret": f"{name}-{s}-bind"} for s, c, _, _ in app["services"]]},
            "domainRefs": [{"kind": "ClusterDomain", "name": "shared-domain"}],
            "provider": {"subDomain": f"{name}-provider", "tenantId": f"{name}-provider-tenant"}}
    if app["optin"] == "spec":
        spec["rolloutOnCredentialUpdate"] = True
    latest = max((v for v, s in app["versions"] if s == "Ready"), key=lambda v: tuple(map(int, v.split("."))))
    all_ready = all(state.split(":")[0] == "Ready" for _, _, state in app["tenants"])
    out.append({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
                "metadata": md(name, ns, annotations=annotations) if annotations else md(name, ns), "spec": spec,
                "status": {"state": "Consistent" if all_ready else "Processing",
                           "conditions": cond("True", "VersionExists") + [
                               {"type": "AllTenantsReady", "status": "True" if all_ready else "False",
                                "reason": "AllTenantsReady" if all_ready else "NotAllTenantsReady", "message": "", "lastTransitionTime": T0}]}})
    for s, c, layout, extra in app["services"]:
        extra = dict(extra)
        plan = extra.pop("plan", "standard")
        out.append(binding(ns, f"{name}-{s}", layout, c, plan=plan, extra=extra))
    for version, state in app["versions"]:
        cav = cav_name(name, version)
        status = {"state": state, "conditions": cond("True", "WorkloadsReady") if state == "Ready"
                  else cond("False", "WaitingForWorkloads", "waiting for deployments to become ready")}
        if state == "Ready":
            status["finishedJobs"] = [f"{cav}-content"]
        out.append({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion", "metadata": md(cav, ns, uid=cav_uid(ns, cav)),
                    "spec": {"capApplicationInstance": name, "version": version, "registrySecrets": ["regcred"],
                             "workloads": workloads(app["workloads"]),
                             "tenantOperations": {"upgrade": [{"workloadName": "notify", "continueOnFailure": True},
                                                              {"workloadName": "mtx"}]} if name == "bookshop" else None}})
        if out[-1]["spec"]["tenantOperations"] is None:
            del out[-1]["spec"]["tenantOperations"]
        out[-1]["status"] = status
    in_use = {latest}
    for tname, current, state in app["tenants"]:
        kind, _, detail = state.partition(":")
        cat = f"{name}-{tname}"
        ready = "False" if kind in ("Provisioning", "ProvisioningError") else "True"
        reason = {"Ready": "ProvisioningCompleted", "Upgrading": "UpgradeOperationCreated", "UpgradeError": "UpgradeFailed",
                  "Provisioning": "ProvisioningOperationCreated", "ProvisioningError": "ProvisioningFailed"}[kind]
        status = {"state": kind, "conditions": cond(ready, reason)}
        if current:
            status["currentCAPApplicationVersionInstance"] = cav_name(name, current)
            if ready == "True":
                in_use.add(current)
        spec = {"capApplicationInstance": name, "subDomain": f"{tname}-{name}", "tenantId": f"{rng.getrandbits(64):016x}",
                "version": latest if detail != "never" else current}
        if detail == "never":
            spec["versionUpgradeStrategy"] = "never"
        labels = {"sme.sap.com/tenant-type": "provider" if tname == "provider" else "consumer"}
        out.append({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant", "metadata": md(cat, ns, labels=labels), "spec": spec, "status": status})
        # Tenant operations: in progress for Upgrading/Provisioning, failed for errors, completed otherwise for a few.
        steps = [{"name": "notify", "type": "CustomTenantOperation", "continueOnFailure": True},
                 {"name": "mtx", "type": "TenantOperation"}] if name == "bookshop" else [{"name": "mtx", "type": "TenantOperation"}]
        op = None
        if kind == "Upgrading":
            step = int(detail)
            job = f"{cat}-{steps[step-1]['name']}-{suffix()}"
            op = ("upgrade", cav_name(name, latest), {"state": "Processing", "currentStep": step, "activeJob": job,
                   "conditions": cond("False", "StepProcessing", f"step {step}/{len(steps)} : waiting for job {ns}.{job}")})
        elif kind == "UpgradeError":
            job = f"{cat}-mtx-{suffix()}"
            op = ("upgrade", cav_name(name, latest), {"state": "Failed",
                   "conditions": cond("True", "StepFailed", f"step {len(steps)}/{len(steps)} : job {ns}.{job} failed")})
        elif kind == "Provisioning":
            job = f"{cat}-mtx-{suffix()}"
            op = ("provisioning", cav_name(name, latest), {"state": "Processing", "currentStep": 1, "activeJob": job,
                   "conditions": cond("False", "StepInitiated", f"step 1/{len(steps)} : job {ns}.{job} created")})
        elif kind == "ProvisioningError":
            job = f"{cat}-mtx-{suffix()}"
            op = ("provisioning", cav_name(name, latest), {"state": "Failed",
                   "conditions": cond("True", "StepFailed", f"step 1/{len(steps)} : job {ns}.{job} failed")})
        elif tname in ("t1", "emea-1"):
            op = ("provisioning", cav_name(name, current), {"state": "Completed",
                   "conditions": cond("True", "StepCompleted", f"step {len(steps)}/{len(steps)} : job {ns}.{cat}-mtx-{suffix()} completed")})
        if op:
            operation, cav, ostatus = op
            out.append({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenantOperation",
                        "metadata": md(f"{cat}-{suffix()}", ns, labels={"sme.sap.com/tenant-operation-type": operation}),
                        "spec": {"operation": operation, "subDomain": spec["subDomain"], "tenantId": spec["tenantId"],
                                 "capApplicationVersionInstance": cav, "steps": steps}, "status": ostatus})
    for version in sorted(in_use):
        cav = cav_name(name, version)
        for wname, kind, services, extra in app["workloads"]:
            if kind in ("CAP", "Router", "Additional") and services:
                planned.append((ns, name, cav, wname, f"{cav}-{wname.lower()}", extra.get("replicas", 2),
                                wname in app.get("stall", []), wname in app.get("stale", [])))

def rolled_out(replicas):
    """What the deployment controller reports once its template has rolled out: the seed is a cluster
    at rest, so its Pods run the VCAP Secret the template references."""
    available = [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "lastTransitionTime": T0},
                 {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "lastTransitionTime": T0}]
    return {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas, "readyReplicas": replicas,
            "availableReplicas": replicas, "conditions": available}

# Payloads come from capdeck itself: write the seed so far, plan it, then add VCAP Secrets and Deployments.
with tempfile.TemporaryDirectory() as tmp:
    for file, items in docs.items():
        planning = json.loads(json.dumps(items))
        for item in planning:  # every app opted in, only for computing payloads
            if item["kind"] == "CAPApplication":
                item["spec"]["rolloutOnCredentialUpdate"] = True
        with open(os.path.join(tmp, file), "w") as out:
            yaml.safe_dump_all(planning, out, sort_keys=False)
    binary = os.path.join(ROOT, "target", "debug", "capdeck")
    result = subprocess.run([binary, "plan", "-f", tmp, "-o", "json", "--show-secrets"], capture_output=True, check=True)
    plan = {d["deployment"]: d["vcapServices"] for d in json.loads(result.stdout)["deployments"]}

for ns, app, cav, workload, deployment, replicas, stall, stale in planned:
    out = docs[f"{app}.yaml"]
    secret = f"{deployment}-{suffix()}"
    payload = plan.get(deployment)
    if stale:
        payload = payload.replace("sk-", "sk-old-", 1)
    owner_hash = hashlib.sha1((ns + cav + deployment).encode()).hexdigest()
    out.append({"apiVersion": "v1", "kind": "Secret", "metadata": md(secret, ns, labels={"sme.sap.com/secret-owner-hash": owner_hash},
                                                                        ownerReferences=owned_by(ns, cav)),
                "type": "Opaque", "data": {"VCAP_SERVICES": b64(payload)}})
    annotations = {"sandbox.capdeck.dev/stall": "true"} if stall else {}
    labels = {"app": deployment, "sme.sap.com/category": "Workload", "sme.sap.com/workload-name": workload}
    container = {"name": workload.lower(), "image": f"registry.example.com/{workload}:stable",
                 "envFrom": [{"secretRef": {"name": secret, "optional": True}}]}
    meta = md(deployment, ns, labels=labels, ownerReferences=owned_by(ns, cav))
    if annotations:
        meta["annotations"] = annotations
    out.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": deployment}},
                         "template": {"metadata": {"labels": {"app": deployment}}, "spec": {"containers": [container]}}},
                "status": rolled_out(replicas)})

for file, items in docs.items():
    with open(os.path.join(HERE, file), "w") as out:
        out.write("# Demo seed for capdeck; generated by assets/demo/generate.py.\n")
        yaml.safe_dump_all(items, out, sort_keys=False, width=120)
print("wrote", ", ".join(f"{f} ({len(d)})" for f, d in docs.items()))
