#!/usr/bin/env python3
"""The module graph of capdeck's library: which top-level module uses which.

    python3 tools/modgraph.py            # edges, cycles and upward edges (and cycles one level
                                         # down, inside every module); exit 1 if any
    python3 tools/modgraph.py --dot      # Graphviz
    python3 tools/modgraph.py --inside console   # the same one level down

An edge A -> B means a file of module A names `crate::B` (or, inside a module, `super::B`).
Modules sit in layers (LAYERS below, lowest first); a module may use its own layer's peers only
where PEERS allows it, and lower layers freely. Anything else is an upward edge; FORBIDDEN and
ONLY_USED_BY close some edges the layers would allow. CI runs this.
"""

import re
import sys
from pathlib import Path

# Lowest first. A module uses modules of lower layers; same-layer use needs an entry in PEERS.
LAYERS = [
    # types of the CRDs and upstream objects; printing; runtime and signals; what logs may hold
    ["api", "output", "process", "logging"],
    ["lookup"],  # point lookups of Secrets and Deployments, the CAP objects by application
    ["vcap", "cluster"],  # the VCAP_SERVICES format; kube client, stores, error descriptions
    ["plan"],  # the pure planner: which Deployment needs which payload
    # objects from files; subscription dependencies; credential safety; the user's batch actions
    # and freezes
    ["manifest", "deps", "credentials", "actions", "freezes"],
    # the engine's Lease, the one-leader check, and who leads a cluster (for the engine, the
    # console, doctor)
    ["leadership"],
    ["decide"],  # the engine's pure decision for a batch (the core's), with its gate and status
    # how credentials are judged here: the core's judgement over the stores, with the settings a
    # leading engine published or the flags given
    ["judging"],
    ["engine", "sandbox"],  # the reconcile engine; the embedded API server (never imports the engine)
    ["fleet"],  # every kube context at once: what is open where
    ["readmodel"],  # rows for the console and `capdeck tenants`
    ["cli"],  # clap argument types, read by `commands` only (ONLY_USED_BY)
    ["daemon", "console"],  # front ends
    ["demo"],  # composition root of `--demo`: sandbox + engine + console
    ["bench"],
    ["commands"],  # dispatch: the only module that knows every front end
]
# Same-layer edges that are allowed (none today).
PEERS: set[tuple[str, str]] = set()
# Edges the layers would allow but that must not exist: what the views and the fleet show is read
# from the cluster and `api`, never from the engine's internals (its config, its reconcile code).
FORBIDDEN: set[tuple[str, str]] = {("readmodel", "engine"), ("fleet", "engine")}
# Modules only the named ones may use, whatever the layers allow. The command line is turned into
# each front end's own config in `commands` (and parsed in main.rs, which is not in the graph):
# the front ends (console, daemon, demo), the engine and the benchmarks take those configs, never
# clap's types.
ONLY_USED_BY: dict[str, set[str]] = {"cli": {"commands"}}

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "src"
# The workspace's other crates, read as the modules they were (crates/core/src/api.rs is `api`,
# crates/sandbox/src/store.rs is `sandbox::store`): the crate boundaries now keep their edges
# (the core cannot name the application, the sandbox neither), the script keeps the layers.
CORE = REPO / "crates" / "core" / "src"
SANDBOX = REPO / "crates" / "sandbox" / "src"
CORE_MODULES = {path.stem for path in CORE.glob("*.rs")} - {"lib"}


def sources() -> list[tuple[tuple[str, ...], str]]:
    """Every product file as (its module path as if in src/, its text with `crate::` paths
    spelled as from src/)."""
    out = []
    for path in sorted(ROOT.rglob("*.rs")):
        out.append((path.relative_to(ROOT).with_suffix("").parts, path.read_text()))
    for path in sorted(CORE.rglob("*.rs")):
        out.append((path.relative_to(CORE).with_suffix("").parts, path.read_text()))
    for path in sorted(SANDBOX.rglob("*.rs")):
        rel = path.relative_to(SANDBOX).with_suffix("").parts
        rel = ("sandbox",) if rel == ("lib",) else ("sandbox", *rel)
        text = re.sub(r"\bcrate::(?!(" + "|".join(CORE_MODULES) + r")\b)", "crate::sandbox::", path.read_text())
        out.append((rel, text))
    return out


def top_modules(inside: str | None) -> set[str]:
    """The modules one level below the root, or below `inside`."""
    names = set()
    for rel, _ in sources():
        if inside is None:
            names.add(rel[0])
        elif rel[0] == inside and len(rel) > 1:
            names.add(rel[1])
    return names - {"lib", "main"}


def module_of(path: Path, depth: int) -> tuple[str, ...]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    return tuple(parts[:depth]) if len(parts) >= depth else tuple(parts)


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] if not line.lstrip().startswith("//") else "" for line in text.splitlines())


def paths_after(text: str, prefix: str) -> list[list[str]]:
    """Every path named after `prefix::`, expanding `prefix::{a::b, c}` groups."""
    found = []
    for match in re.finditer(re.escape(prefix) + r"::", text):
        rest = text[match.end():]
        found.extend(expand(rest))
    return found


def expand(rest: str) -> list[list[str]]:
    if rest.startswith("{"):
        depth, items, current = 0, [], ""
        for ch in rest[1:]:
            if ch == "{":
                depth += 1
            elif ch == "}":
                if depth == 0:
                    items.append(current)
                    break
                depth -= 1
            if ch == "," and depth == 0:
                items.append(current)
                current = ""
            else:
                current += ch
        out = []
        for item in items:
            item = item.strip()
            if item:
                out.extend(expand(item))
        return out
    match = re.match(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_{][A-Za-z0-9_]*)*", rest)
    if not match:
        return []
    head = match.group(0).split("::")
    if rest[match.end():match.end() + 3] == "::{":
        return [head + tail for tail in expand(rest[match.end() + 2:])]
    return [head]


def graph(inside: str | None) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    modules = top_modules(inside)
    for rel, full_text in sources():
        if rel[0] in ("lib", "main"):
            continue
        # Unit tests (a `#[cfg(test)]` module at the end of a file) may reach anywhere: only the
        # product's edges count.
        text = strip_comments(full_text.split("#[cfg(test)]", 1)[0])
        if inside is None:
            source = rel[0]
            targets = [p[0] for p in paths_after(text, "crate") if p]
        else:
            if rel[0] != inside or len(rel) < 2:
                continue
            source = rel[1]
            targets = [p[1] for p in paths_after(text, f"crate::{inside}") if len(p) > 1 and p[1][0].islower()]
            if len(rel) == 2:  # console/update.rs: super:: is the console module
                targets += [p[0] for p in paths_after(text, "super") if p and p[0][0].islower()]
            else:  # console/update/x.rs: super::super:: is the console module
                targets += [p[0] for p in paths_after(text, "super::super") if p and p[0][0].islower()]
        edges.setdefault(source, set())
        for target in targets:
            if target not in modules:
                continue
            if target != source and target not in ("self", "super", "crate"):
                edges[source].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return out


def upward(edges: dict[str, set[str]]) -> list[str]:
    layer = {module: level for level, modules in enumerate(LAYERS) for module in modules}
    problems = []
    for source, targets in sorted(edges.items()):
        if source not in layer:
            problems.append(f"{source}: not in a layer (add it to LAYERS in tools/modgraph.py)")
            continue
        for target in sorted(targets):
            if target not in layer:
                problems.append(f"{target}: not in a layer (used by {source})")
            elif (source, target) in FORBIDDEN:
                problems.append(f"{source} -> {target} (forbidden: see FORBIDDEN in tools/modgraph.py)")
            elif target in ONLY_USED_BY and source not in ONLY_USED_BY[target]:
                users = ", ".join(sorted(ONLY_USED_BY[target]))
                problems.append(f"{source} -> {target} (only {users} may use {target}: see ONLY_USED_BY in tools/modgraph.py)")
            elif layer[target] > layer[source] or (
                layer[target] == layer[source] and (source, target) not in PEERS
            ):
                problems.append(f"{source} -> {target} (layer {layer[source]} uses layer {layer[target]})")
    return problems


def main(argv: list[str]) -> int:
    inside = argv[argv.index("--inside") + 1] if "--inside" in argv else None
    if inside is not None and not top_modules(inside):
        print(f"{inside} has no submodules: --inside takes a module with submodules", file=sys.stderr)
        return 2
    edges = graph(inside)
    if "--dot" in argv:
        print("digraph capdeck {")
        for source, targets in sorted(edges.items()):
            for target in sorted(targets):
                print(f'  "{source}" -> "{target}";')
        print("}")
        return 0
    for source, targets in sorted(edges.items()):
        print(f"{source:10} -> {', '.join(sorted(targets)) or '(nothing)'}")
    found = cycles(edges)
    up = [] if inside else upward(edges)
    print(f"\n{sum(len(t) for t in edges.values())} edges, {len(found)} cycles, {len(up)} upward or forbidden edges")
    for cycle in found:
        print(f"cycle: {' <-> '.join(cycle)}")
    for problem in up:
        print(f"upward: {problem}")
    failed = bool(found or up)
    if inside is None:
        # One level down, every module with submodules must be free of cycles too.
        for directory in sorted({rel[0] for rel, _ in sources() if len(rel) > 1}):
            inner = cycles(graph(directory))
            for cycle in inner:
                print(f"cycle inside {directory}: {' <-> '.join(cycle)}")
            failed = failed or bool(inner)
        print("inside every module: " + ("cycles above" if failed else "no cycles"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
