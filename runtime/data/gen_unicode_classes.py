#!/usr/bin/env python3
"""gen_unicode_classes.py - writes unicode_classes.c: the code points of
Unicode's general categories L* (letters: Lu Ll Lt Lm Lo) and N* (numbers:
Nd Nl No) as sorted ranges, the \\p{L} and \\p{N} of GPT-2's pre-tokenizer
(bpe.c), from this Python's unicodedata.

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


def table(name, rs, what):
    lines = ["/* %s: %d ranges, one table */" % (what, len(rs)),
             "static const uint32_t %s[][2] = {" % name]
    row = "\t"
    for lo, hi in rs:
        cell = "{ 0x%x, 0x%x }, " % (lo, hi)
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
    w(" * code points, for the \\p{L} and \\p{N} of GPT-2's pre-tokenizer (bpe.h).\n")
    w(" * Made by: python3 runtime/data/gen_unicode_classes.py > runtime/data/unicode_classes.c\n")
    w(" * (Python %d.%d's unicodedata).\n" % sys.version_info[:2])
    w(" */\n")
    w('#include "runtime/data/bpe.h"\n\n#include <stddef.h>\n\n')
    w(table("letters", ranges("L"), "L*") + "\n\n")
    w(table("numbers", ranges("N"), "N*") + "\n\n")
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
""")


if __name__ == "__main__":
    main()
