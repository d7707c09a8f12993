#!/usr/bin/env python3
"""Every example config in the docs, for t0212 to load.

    tests/doc_examples.py OUTDIR FILE...

A block is a Markdown code fence (```...```) or indented block (4 spaces,
after a blank line), or a roff .nf/.fi or .EX/.EE block, that holds a
line which is only a section header ("[remote]", a comment after it
allowed). Each goes to OUTDIR/N.ini as a file would hold it (Markdown's
indentation and roff's escapes taken off); OUTDIR/list gets "N FILE:LINE"
(the block's first line). A block that is deliberately not a config (a
key reference, a fragment) is marked on the nearest non-blank line
before it: `<!-- not-a-config -->` in Markdown (the generated key
reference, after `<!-- config-keys:start -->`, counts as marked), a roff
comment `.\\" not-a-config` in a man page (.PP, .RS, .sp between it and
the block do not count).
"""
import os
import re
import sys

HEADER = re.compile(r"^\s*\[[A-Za-z0-9_.-]+\]\s*([#;].*)?$")
MD_MARKS = ("<!-- not-a-config -->", "<!-- config-keys:start -->")


def has_header(lines):
    return any(HEADER.match(line) for line in lines)


def markdown_blocks(text):
    """(first line number, lines, marked) for each code block."""
    lines = text.split("\n")
    out = []
    i = 0

    def marked_before(k):
        j = k - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        return j >= 0 and lines[j].strip() in MD_MARKS

    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(\s*)(```+|~~~+)", line)
        if fence:
            indent, mark = len(fence.group(1)), fence.group(2)
            j = i + 1
            body = []
            while j < len(lines) and not lines[j].strip().startswith(mark):
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
                j += 1
            out.append((i + 2, body, marked_before(i)))
            i = j + 1
            continue
        prev_blank = i == 0 or not lines[i - 1].strip()
        if prev_blank and (line.startswith("    ") or line.startswith("\t")) and line.strip():
            j = i
            body = []
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith("    ")
                                      or lines[j].startswith("\t")):
                body.append(lines[j])
                j += 1
            while body and not body[-1].strip():
                body.pop()
            ind = min(len(b) - len(b.lstrip()) for b in body if b.strip())
            out.append((i + 1, [b[ind:] for b in body], marked_before(i)))
            i = j
            continue
        i += 1
    return out


def unroff(line):
    line = line.replace("\\&", "").replace("\\-", "-").replace("\\(aq", "'")
    line = line.replace("\\e", "\x00").replace("\\ ", " ").replace("\\(dq", '"')
    line = re.sub(r"\\f[BIRP]", "", line)
    return line.replace("\x00", "\\")


def roff_blocks(text):
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i] in (".nf", ".EX"):
            end = ".fi" if lines[i] == ".nf" else ".EE"
            j = i - 1
            while j >= 0 and (not lines[j].strip() or lines[j].split(" ")[0] in (".PP", ".RS", ".sp")):
                j -= 1
            marked = j >= 0 and re.match(r'^\.\\"\s*not-a-config', lines[j]) is not None
            k = i + 1
            body = []
            while k < len(lines) and lines[k] != end:
                if not lines[k].startswith('.\\"'):
                    body.append(unroff(lines[k]))
                k += 1
            out.append((i + 2, body, marked))
            i = k + 1
            continue
        i += 1
    return out


def main():
    outdir, files = sys.argv[1], sys.argv[2:]
    os.makedirs(outdir, exist_ok=True)
    n = 0
    with open(os.path.join(outdir, "list"), "w") as listing, \
            open(os.path.join(outdir, "skipped"), "w") as skipped:
        for path in files:
            text = open(path, encoding="utf-8").read()
            roff = re.search(r"\.(\d)$", path) is not None
            blocks = roff_blocks(text) if roff else markdown_blocks(text)
            name = os.path.basename(path)
            for first, body, marked in blocks:
                if not has_header(body):
                    continue
                if marked:
                    skipped.write("%s:%d\n" % (name, first))
                    continue
                n += 1
                with open(os.path.join(outdir, "%d.ini" % n), "w") as f:
                    f.write("\n".join(body) + "\n")
                listing.write("%d %s:%d\n" % (n, name, first))


if __name__ == "__main__":
    main()
