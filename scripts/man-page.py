#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Fills a hand-written man page template with options taken from a program's --help.

Usage: scripts/man-page.py TEMPLATE OUTPUT VERSION PROGRAM
In TEMPLATE, @VERSION@ becomes VERSION, a line `@OPTIONS@` becomes PROGRAM's
own options and a line `@COMMANDS@` becomes one subsection per subcommand
(its summary, usage, options and examples, from `PROGRAM SUB --help`), so the
pages stay true to the binaries. The help text is CLI11's: sections ending in
':', options indented two spaces with descriptions from column 30.
"""
import re
import subprocess
import sys


def roff(text):
    """Text safe in a roff line: backslashes escaped, no leading control character."""
    text = text.replace("\\", "\\e")
    if text[:1] in (".", "'"):
        text = "\\&" + text
    return text


def text_roff(text):
    """Running text: also option names' hyphens as minus signs (so that they can be searched and pasted)."""
    return re.sub(r"(?<![\w-])(--?)(?=[A-Za-z])", lambda m: m.group(1).replace("-", "\\-"), roff(text))


def option_tag(text):
    """An option's name and value, e.g. `-o,--output TEXT`: names bold, values italic."""
    names, _, value = text.partition(" ")
    parts = [r"\fB" + roff(n).replace("-", r"\-") + r"\fR" for n in names.split(",")]
    tag = ", ".join(parts)
    if value:
        tag += " " + r"\fI" + roff(value.strip()) + r"\fR"
    return tag


def help_text(argv):
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, check=True).stdout
    # The usage line names the binary by the path it was run from.
    return out.replace(argv[0], "joule" if len(argv) > 1 or argv[0].endswith("joule") else argv[0].rsplit("/", 1)[-1])


def parse(text):
    """(summary, usage, [(section, [(tag, [description])])], examples, notes)."""
    lines = text.splitlines()
    summary = lines[0].strip() if lines else ""
    usage, sections, examples, notes = "", [], [], []
    mode, items, item = None, None, None
    for line in lines[1:]:
        if not line.strip():
            continue
        if line.startswith("Usage: "):
            usage = line[len("Usage: "):].strip()
        elif not line.startswith(" ") and line.rstrip().endswith(":"):
            name = line.rstrip()[:-1]
            if name in ("Example", "Examples"):
                mode = "examples"
            else:
                mode, items, item = "options", [], None
                sections.append((name, items))
        elif mode == "examples" and line.startswith("  "):
            examples.append(line.strip())
        elif mode == "options" and line.startswith("    ") and item is not None:
            item[1].append(line.strip())
        elif mode == "options" and line.startswith("  "):
            if len(line) > 30 and line[29] == " " and line[30] != " ":  # a name that fills its column
                parts = [line[:29].strip(), line[30:].strip()]
            else:
                parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            item = (parts[0], parts[1:])
            items.append(item)
        else:
            mode = "notes"
            notes.append(line.strip())
    return summary, usage, sections, examples, notes


def options_roff(sections, skip_help=True):
    out = []
    labelled = len(sections) > 1
    for name, items in sections:
        items = [i for i in items if not (skip_help and i[0].startswith("-h,--help"))]
        if not items:
            continue
        if labelled:
            out.append(".PP")
            out.append(r"\fI" + roff(name) + r"\fR:")
        for tag, desc in items:
            out.append(".TP")
            out.append(option_tag(tag))
            out.append(text_roff(" ".join(desc)))
    return out


def examples_roff(examples):
    if not examples:
        return []
    out = [".PP", "Example" + ("s" if len(examples) > 1 else "") + ":", ".RS", ".nf"]
    out += [roff(e).replace("-", "\\-") for e in examples]
    out += [".fi", ".RE"]
    return out


def commands(program):
    top = subprocess.run([program, "--help"], capture_output=True, text=True, check=True).stdout
    names = []
    in_subs = False
    for line in top.splitlines():
        if line.startswith("Subcommands:"):
            in_subs = True
            continue
        if in_subs:
            if not line.startswith("  "):
                break
            names.append(line.split()[0])
    out = []
    for name in names:
        summary, usage, sections, examples, notes = parse(help_text([program, name]))
        out.append(".SS " + '"' + roff(name) + '"')
        out.append(".B " + roff(usage).replace("-", r"\-"))
        out.append(".PP")
        out.append(text_roff(summary[:1].upper() + summary[1:]) + ".")
        out += options_roff(sections)
        out += examples_roff(examples)
        for note in notes:
            out += [".PP", text_roff(note)]
    return out


def main():
    template, output, version, program = sys.argv[1:5]
    lines = []
    for line in open(template, encoding="utf-8").read().splitlines():
        if line.strip() == "@COMMANDS@":
            lines += commands(program)
        elif line.strip() == "@OPTIONS@":
            lines += options_roff(parse(help_text([program]))[2], skip_help=False)
        else:
            lines.append(line.replace("@VERSION@", version))
    with open(output, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
