#!/usr/bin/env python3
"""docrefs.py - the docs name only what exists.

Checks, over the files git tracks:
1. paths: every backticked path in a Markdown file, or in a comment of a
   source file (C, CUDA, Python, shell, CMake), names a file or folder of
   the tree: `folder/file` from the top of the tree, or from the file's own
   folder when its first folder is there (a bare `name.c` is not checked:
   it may be a system header or another project's file);
2. make targets: every `make TARGET` the Markdown files show is a target of
   the Makefile;
3. subcommands (with BUILD_DIR): every `dtrain-submit WORD`, `dtrain-ckpt
   WORD` and `dtrain-data WORD` the Markdown files show, WORD a subcommand's
   name, is named by that program's --help.

A path that only exists once a program ran is not checked: a build
folder's (RUN_TIME below), a run directory's (its first folder is none of the
tree's), or one holding a placeholder (<, *, $, {, ..., NAME in capitals).

Usage: docrefs.py SOURCE_DIR [BUILD_DIR]; exit 0 when every reference holds,
1 with each stale one named as file:line. docrefs.py --self-test plants a
dead path, a missing target and an unknown subcommand in a scratch tree and
checks that each is found.
"""
import os
import re
import subprocess
import sys
import tempfile

# the tree's top-level entries a path may start with (others are run-time
# files, system paths or someone else's tree)
TOP = ("base/", "bench/", "checkpoint/", "cmake/", "docs/", "jobs/", "launcher/", "runtime/",
       "site/", "tests/", ".ci/")
SOURCE_EXT = (".c", ".h", ".cu", ".py", ".sh", ".md")
# what only exists once the project was built or run
RUN_TIME = ("build/", "build-")
PLACEHOLDER = re.compile(r"[<>*${}]|\.\.\.|(^|/)[A-Z][A-Z0-9_]*[A-Z](/|$|\.)")
PROGRAMS = ("dtrain-submit", "dtrain-ckpt", "dtrain-data")
# a path written out without backticks (in code comments mostly): from a
# top-level folder to a file with an extension
BARE = re.compile(r"(?:^|(?<=[\s(\"']))((?:%s)[A-Za-z0-9_./-]*\.(?:c|h|cu|sh|py|md|json|txt|list))\b"
                  % "|".join(re.escape(t) for t in TOP))


def tracked(src):
    """the files git tracks; outside a git checkout (a release tarball) every
    file but build folders'"""
    out = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True, text=True)
    if out.returncode == 0 and os.path.exists(os.path.join(src, ".git")):
        return [f for f in out.stdout.splitlines() if os.path.exists(os.path.join(src, f))]
    files = []
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith(("build", ".")) or d == ".ci"]
        files += [os.path.relpath(os.path.join(root, n), src) for n in names]
    return files


def comment_text(path, text):
    """The parts of a source file the checks read: comments (and, for C,
    the string literals of usage texts, which show paths as docs do)."""
    if path.endswith(".md"):
        return text
    if path.endswith((".sh", ".py", "CMakeLists.txt", "Makefile")) or os.path.basename(path) == "run":
        return "\n".join(line if line.lstrip().startswith("#") else "" for line in text.splitlines())
    return text  # C and CUDA: backticks appear only in comments and strings


def spans(text):
    """(line, span) of each `...` on one line"""
    for n, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"`([^`\n]+)`", line):
            yield n, m.group(1)


def is_path(src, here, s):
    """a path of the tree: from its top, or from here through a folder here"""
    if " " in s or s.startswith(("/", "-", "~", "http") + RUN_TIME) or PLACEHOLDER.search(s):
        return False
    if "/" not in s or not re.fullmatch(r"[A-Za-z0-9_./-]+", s) or "//" in s:
        return False
    first = s.split("/")[0]
    return s.startswith(TOP) or (first not in ("", ".", "..") and os.path.isdir(os.path.join(src, here, first)))


def path_exists(src, here, s):
    return os.path.exists(os.path.join(src, s)) or os.path.exists(os.path.join(src, here, s))


def make_targets(src):
    targets = set()
    with open(os.path.join(src, "Makefile")) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.-]+(?: [A-Za-z0-9_.-]+)*):(?!=)", line)
            if m:
                targets.update(m.group(1).split())
    return targets


def helps(build):
    out = {}
    for prog in PROGRAMS:
        exe = os.path.join(build, "bin", prog)
        if os.path.exists(exe):
            r = subprocess.run([exe, "--help"], capture_output=True, text=True)
            out[prog] = r.stdout + r.stderr
    return out


def check(src, build=None):
    files = tracked(src)
    targets = make_targets(src)
    helptext = helps(build) if build else {}
    bad = []
    for f in files:
        if not (f.endswith((".md",) + SOURCE_EXT[:-1]) or os.path.basename(f) in ("CMakeLists.txt", "Makefile")):
            continue
        if f.startswith("tests/") and "fixtures" in f:
            continue
        with open(os.path.join(src, f), errors="replace") as fh:
            text = comment_text(f, fh.read())
        here = os.path.dirname(f)
        for n, line in enumerate(text.splitlines(), 1):
            for m in BARE.finditer(line):
                if not PLACEHOLDER.search(m.group(1)) and not path_exists(src, here, m.group(1)):
                    bad.append("%s:%d: %s names no file of the tree" % (f, n, m.group(1)))
        for n, s in spans(text):
            if is_path(src, here, s) and not path_exists(src, here, s):
                bad.append("%s:%d: `%s` names no file of the tree" % (f, n, s))
            if not f.endswith(".md"):
                continue
            for m in re.finditer(r"(?:^|\s)make ([a-z][a-z0-9-]*)", s):
                if m.group(1) not in targets:
                    bad.append("%s:%d: `make %s`: no such target in the Makefile" % (f, n, m.group(1)))
            for m in re.finditer(r"(dtrain-submit|dtrain-ckpt|dtrain-data) ([a-z][a-z-]*)(?=\s|$)", s):
                prog, word = m.groups()
                if prog in helptext and not re.search(r"\b%s\b" % re.escape(word), helptext[prog]):
                    bad.append("%s:%d: `%s %s`: %s --help names no such subcommand" % (f, n, prog, word, prog))
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "runtime"))
        os.makedirs(os.path.join(d, "bin"))
        with open(os.path.join(d, "Makefile"), "w") as f:
            f.write("demo: build\n\t@true\ntest build: deps\n")
        with open(os.path.join(d, "runtime", "a.c"), "w") as f:
            f.write("/* see `runtime/gone.c`, `a.c`, `runtime/` and `checkpoints/step-00000001`;\n"
                    " * runtime/a.c, and runtime/old.c, gone too */\n")
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write("`runtime/a.c`, `make demo`, `make tset`, `dtrain-submit stauts`, `dtrain-submit status`\n")
        with open(os.path.join(d, "bin", "dtrain-submit"), "w") as f:
            f.write("#!/bin/sh\necho 'usage: dtrain-submit status|cancel'\n")
        os.chmod(os.path.join(d, "bin", "dtrain-submit"), 0o755)
        subprocess.run(["git", "init", "-q", d], check=True)
        subprocess.run(["git", "-C", d, "add", "."], check=True)
        bad = check(d, d)
    want = ["runtime/a.c:1: `runtime/gone.c`", "runtime/a.c:2: runtime/old.c", "`make tset`",
            "`dtrain-submit stauts`"]
    missed = [w for w in want if not any(w in b for b in bad)]
    if missed or len(bad) != len(want):
        print("self-test FAILED: found %s, wanted %s" % (bad, want))
        return 1
    print("ok: self-test: a dead path, a missing make target and an unknown subcommand found")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) not in (2, 3):
        print(__doc__.split("\n\n")[-2], file=sys.stderr)
        return 2
    bad = check(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)
    for b in bad:
        print(b)
    if bad:
        print("%d stale references (hint: name what exists, or drop the backticks of a name that is no path)" % len(bad))
        return 1
    print("ok: every backticked path, make target and subcommand of the docs exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
