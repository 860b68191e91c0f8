#!/usr/bin/env python3
"""gen_unicode_classes.py - writes unicode_classes.c: the code points of
Unicode's general categories L* (letters: Lu Ll Lt Lm Lo) and N* (numbers:
Nd Nl No) as sorted ranges, the \\p{L} and \\p{N} of the pre-tokenizers
(pretok.c); and for NFC's quick check (UAX #15), the code points whose
NFC_Quick_Check is No or Maybe and the canonical combining classes; from
this Python's unicodedata.

Usage: python3 runtime/data/gen_unicode_classes.py > runtime/data/unicode_classes.c
"""
import sys
import unicodedata


def ranges(prefix):
    out, start, prev = [], None, None
    for cp in range(0x110000):
        if unicodedata.category(chr(cp)).startswith(prefix):
            if start is not None and cp == prev + 1:
                prev = cp
                continue
            if start is not None:
                out.append((start, prev))
            start = prev = cp
    if start is not None:
        out.append((start, prev))
    return out


def nfc_unsure():
    """NFC_Quick_Check No (NFC changes the character alone) or Maybe (the
    second of a primary composite's canonical pair, Hangul's V and T jamo
    among them)."""
    out = set()
    for cp in range(0x110000):
        c = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if unicodedata.normalize("NFC", c) != c:
            out.add(cp)
        d = unicodedata.decomposition(c)
        if d and not d.startswith("<"):
            p = [int(x, 16) for x in d.split()]
            if len(p) == 2 and unicodedata.normalize("NFC", chr(p[0]) + chr(p[1])) == c:
                out.add(p[1])
    out |= set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    rs = []
    for cp in sorted(out):
        if rs and rs[-1][1] == cp - 1:
            rs[-1] = (rs[-1][0], cp)
        else:
            rs.append((cp, cp))
    return rs


def ccc_runs():
    """(first, last, class) of every run of one non-zero combining class."""
    rs = []
    for cp in range(0x110000):
        k = 0 if 0xD800 <= cp <= 0xDFFF else unicodedata.combining(chr(cp))
        if not k:
            continue
        if rs and rs[-1][1] == cp - 1 and rs[-1][2] == k:
            rs[-1] = (rs[-1][0], cp, k)
        else:
            rs.append((cp, cp, k))
    return rs


def table(name, rs, what):
    """A C table of rows rs: ranges (lo, hi), or (lo, hi, value)."""
    width = len(rs[0])
    lines = ["/* %s: %d ranges, one table */" % (what, len(rs)),
             "static const uint32_t %s[][%d] = {" % (name, width)]
    row = "\t"
    for r in rs:
        cell = "{ " + ", ".join(("0x%x" if i < 2 else "%d") % v for i, v in enumerate(r)) + " }, "
        if len(row) + len(cell) > 92:
            lines.append(row.rstrip())
            row = "\t"
        row += cell
    lines.append(row.rstrip())
    lines.append("};")
    return "\n".join(lines)


def main():
    w = sys.stdout.write
    w("/*\n")
    w(" * unicode_classes.c - GENERATED, do not edit: Unicode %s's general\n" % unicodedata.unidata_version)
    w(" * categories L* (letters) and N* (numbers) as sorted, disjoint ranges of\n")
    w(" * code points, for the \\p{L} and \\p{N} of the pre-tokenizers (bpe.h); and\n")
    w(" * NFC's quick check (UAX #15): NFC_Quick_Check No or Maybe, and the\n")
    w(" * canonical combining classes.\n")
    w(" * Made by: python3 runtime/data/gen_unicode_classes.py > runtime/data/unicode_classes.c\n")
    w(" * (Python %d.%d's unicodedata).\n" % sys.version_info[:2])
    w(" */\n")
    w('#include "runtime/data/bpe.h"\n\n#include <stddef.h>\n\n')
    w(table("letters", ranges("L"), "L*") + "\n\n")
    w(table("numbers", ranges("N"), "N*") + "\n\n")
    w(table("nfc_unsure", nfc_unsure(), "NFC_Quick_Check No or Maybe") + "\n\n")
    w(table("combining", ccc_runs(), "canonical combining classes but 0, in runs of one class") + "\n\n")
    w("""/* Whether cp lies in one of the ranges r [n]: a binary search. */
static bool in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cp < r[mid][0])
			hi = mid;
		else if (cp > r[mid][1])
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

bool rt_bpe_is_letter(uint32_t cp)
{
	if (cp < 0x80)
		return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
	return in_ranges(letters, sizeof(letters) / sizeof(letters[0]), cp);
}

bool rt_bpe_is_number(uint32_t cp)
{
	if (cp < 0x80)
		return cp >= '0' && cp <= '9';
	return in_ranges(numbers, sizeof(numbers) / sizeof(numbers[0]), cp);
}

bool rt_bpe_nfc_unsure(uint32_t cp)
{
	return cp >= 0x300 && in_ranges(nfc_unsure, sizeof(nfc_unsure) / sizeof(nfc_unsure[0]), cp);
}

int rt_bpe_combining_class(uint32_t cp)
{
	size_t lo = 0, hi = sizeof(combining) / sizeof(combining[0]);

	while (cp >= 0x300 && lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cp < combining[mid][0])
			hi = mid;
		else if (cp > combining[mid][1])
			lo = mid + 1;
		else
			return (int)combining[mid][2];
	}
	return 0;
}
""")


if __name__ == "__main__":
    main()
