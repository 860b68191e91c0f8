#!/usr/bin/env python3
"""funclen.py - no function of the project is over 80 lines (STYLE.md: a
function reads as one idea), from its signature's first line to its closing
brace, but one that is a single table or template and says so in a comment
above it ("one table", "one template").

Functions are found as the project writes them: the body's opening brace
alone at the start of a line, the closing one likewise, the signature on
the lines just above. tests/ and bench/ are left out.
Usage: funclen.py SOURCE_DIR; exit 0 when none is over, 1 naming each.
"""
import os
import re
import subprocess
import sys

MAX = 80


def functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            j = i - 1
            while (j > 0 and lines[j - 1].strip() and not lines[j - 1].startswith(("}", "/*", " *", "#"))
                   and not lines[j - 1].endswith(";")):
                j -= 1
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            m = re.search(r"(\w+)\s*\(", " ".join(lines[j:i]))
            above = "\n".join(lines[max(0, j - 6):j])
            yield (m.group(1) if m else "?"), j + 1, k - j + 1, above
            i = k
        i += 1


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: funclen.py SOURCE_DIR")
    src = sys.argv[1]
    files = subprocess.run(["git", "-C", src, "ls-files", "-co", "--exclude-standard", "*.c", "*.cu"],
                           capture_output=True, text=True).stdout.split()
    files = [f for f in files if not f.startswith(("tests/", "bench/")) and os.path.exists(os.path.join(src, f))]
    if len(files) < 50:
        sys.exit(f"FAIL: only {len(files)} source files found under {src}; is the scan working?")
    bad, seen = [], 0
    for f in files:
        for name, line, n, above in functions(os.path.join(src, f)):
            seen += 1
            if n > MAX and not re.search(r"one (table|template)", above):
                bad.append(f"{f}:{line}: {name} is {n} lines (at most {MAX}; a single table or template says so above it)")
    if seen < 500:
        sys.exit(f"FAIL: only {seen} functions found; is the scan working?")
    for b in bad:
        print("FAIL:", b)
    if not bad:
        print(f"ok: {seen} functions in {len(files)} files, none over {MAX} lines")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
