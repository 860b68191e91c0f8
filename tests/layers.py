#!/usr/bin/env python3
"""layers.py - the code's layers hold: what each folder may use, and no
circle between files.

Folders, from the bottom up: base/ uses no other folder; jobs/ site/
launcher/ checkpoint/ and runtime/ sit above it. Inside runtime/ every
folder's README.md says in a line starting "Uses:" which folders it may
include and call (runtime/README.md draws the picture); that line is the rule
checked here, so the docs cannot drift from the code.

Checks:
1. includes: every `#include "folder/..."` of a source file goes to its own
   folder or to one its rules allow (top level: no two folders include each
   other, base/ includes none);
2. calls (with BUILD_DIR): from the objects' symbols (nm), every call from one
   file to a function of another goes down the same rules, and the graph of
   calls between files has no cycle.

Usage: layers.py SOURCE_DIR [BUILD_DIR]; exit 0 when all hold, 1 with the
offending edges named.
"""
import collections
import os
import re
import subprocess
import sys

TOP = ["base", "jobs", "site", "launcher", "checkpoint", "runtime"]
# the top-level folders each may use (runtime/'s own folders: their READMEs)
TOP_USES = {
    "base": [],
    "jobs": ["base"],
    "site": ["base", "jobs"],
    "launcher": ["base", "jobs", "site"],
    "checkpoint": ["base", "jobs"],
    "runtime": ["base", "jobs", "checkpoint"],
}


def folder_of(path):
    """base, ..., or runtime/<folder> for a file under runtime/."""
    parts = path.split("/")
    if parts[0] == "runtime" and len(parts) > 2:
        return "runtime/" + parts[1]
    return parts[0]


def runtime_rules(src):
    """runtime/<f> -> the folders its README's 'Uses:' line names."""
    rules = {}
    for f in sorted(os.listdir(os.path.join(src, "runtime"))):
        d = os.path.join(src, "runtime", f)
        if not os.path.isdir(d):
            continue
        readme = os.path.join(d, "README.md")
        if not os.path.exists(readme):
            sys.exit(f"FAIL: runtime/{f}/ has no README.md saying what it may use")
        m = re.search(r"^Uses:(.*)$", open(readme).read(), re.M)
        if not m:
            sys.exit(f"FAIL: runtime/{f}/README.md has no 'Uses:' line")
        uses = []
        for name in re.findall(r"`([a-z_/]+)/`", m.group(1)):
            uses.append(name if name in TOP else "runtime/" + name)
        rules["runtime/" + f] = uses
    return rules


def allowed(rules, frm, to):
    if frm == to:
        return True
    if frm.startswith("runtime/"):
        return to in rules.get(frm, [])
    if frm == "runtime" or to.startswith("runtime"):
        return False
    return to in TOP_USES.get(frm, [])


def sources(src):
    out = subprocess.run(["git", "-C", src, "ls-files", "-co", "--exclude-standard",
                          "*.c", "*.h", "*.cu"], capture_output=True, text=True).stdout.split()
    return [f for f in out if f.split("/")[0] in TOP and os.path.exists(os.path.join(src, f))]


def check_includes(src, rules):
    bad, n = [], 0
    for f in sources(src):
        for inc in re.findall(r'^#include "([a-z_/]+\.h)"', open(os.path.join(src, f)).read(), re.M):
            n += 1
            if not allowed(rules, folder_of(f), folder_of(inc)):
                bad.append(f"{f} includes {inc}")
    return bad, n


def symbols(src, build):
    """source file -> (defined symbols, undefined symbols), from the objects."""
    out = {}
    for root, _, files in os.walk(build):
        if "/CMakeFiles/" not in root + "/" or ".dir" not in root:
            continue
        for o in files:
            if not o.endswith(".o"):
                continue
            path = os.path.join(root, o)
            rel = os.path.relpath(path, build)
            top, rest = ("/" + rel).split("/CMakeFiles/", 1)
            srcf = os.path.normpath(os.path.join(top.strip("/"), rest.split("/", 1)[1][:-2]))
            if srcf.split("/")[0] not in TOP or not os.path.exists(os.path.join(src, srcf)):
                continue  # tests, benchmarks, and objects of files since removed
            nm = subprocess.run(["nm", path], capture_output=True, text=True).stdout
            d, u = out.setdefault(srcf, (set(), set()))
            for line in nm.splitlines():
                p = line.split()
                if len(p) == 2 and p[0] == "U":
                    u.add(p[1])
                elif len(p) == 3 and p[1] in "TDBRVW":
                    d.add(p[2])
    return out


def cycles(graph):
    """The strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return comps


def check_calls(src, build, rules):
    syms = symbols(src, build)
    where = {}
    for f, (d, _) in syms.items():
        for s in d:
            where.setdefault(s, f)
    graph, via, bad = collections.defaultdict(set), {}, []
    for f, (_, u) in syms.items():
        for s in u:
            t = where.get(s)
            if not t or t == f:
                continue
            graph[f].add(t)
            via.setdefault((f, t), s)
            if not allowed(rules, folder_of(f), folder_of(t)):
                bad.append(f"{f} calls {s} of {t}")
    for comp in cycles(graph):
        arrows = [f"{a} -> {b} ({via[(a, b)]})" for a in comp for b in comp if (a, b) in via]
        bad.append("a call cycle: " + "; ".join(arrows))
    return bad, len(syms)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: layers.py SOURCE_DIR [BUILD_DIR]")
    src = sys.argv[1]
    rules = runtime_rules(src)
    bad, n = check_includes(src, rules)
    if n < 100:
        sys.exit(f"FAIL: only {n} includes found; is the scan working?")
    calls = 0
    if len(sys.argv) == 3:
        more, calls = check_calls(src, sys.argv[2], rules)
        bad += more
        if calls < 50:
            sys.exit(f"FAIL: only {calls} object files found under {sys.argv[2]}; is it built?")
    for b in sorted(set(bad)):
        print("FAIL:", b)
    if bad:
        return 1
    print(f"ok: {n} includes" + (f" and the calls of {calls} files" if calls else "") +
          f" keep to the layers ({', '.join(TOP)}; runtime/: {', '.join(sorted(rules))})" +
          (", no call cycle" if calls else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
