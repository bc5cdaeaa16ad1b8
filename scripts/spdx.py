#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule's own source files carry an SPDX header (Apache-2.0, see LICENSE).

    scripts/spdx.py          add the header where it is missing
    scripts/spdx.py --check  list the files without it and exit 1 if any

Which files: C/C++ sources and headers, Python, shell, CMake, TOML, the
systemd unit templates, the Debian maintainer scripts, bash completion and
the man page templates, as git tracks them. Not: data/ (third-party, with
its own licences: data/*/README.md, packaging/deb/copyright), bench/results/,
JSON, CSV, Markdown, generated examples and fuzz corpora.
"""
import pathlib
import re
import subprocess
import sys

TEXT = "SPDX-FileCopyrightText: 2026 the joule developers"
LICENSE = "SPDX-License-Identifier: Apache-2.0"
SCRIPTS = ("packaging/deb/postinst", "packaging/deb/postrm", "packaging/deb/prerm", "packaging/bash-completion/joule",
           ".ci/run")


def comment_of(path: str):
    """The line comment a file takes its header in, or None for files without one."""
    if path.startswith(("data/", "bench/results/")) or "/corpus" in path:
        return None
    p = pathlib.PurePosixPath(path)
    if p.suffix in (".cc", ".h", ".cpp", ".hpp", ".c"):
        return "//"
    if p.suffix in (".py", ".pyi", ".sh", ".toml", ".cmake") or p.name == "CMakeLists.txt":
        return "#"
    if path.endswith(".service.in") or path in SCRIPTS:
        return "#"
    if path.startswith("packaging/man/") and path.endswith(".in"):
        return '.\\"'
    return None


def has_header(text: str) -> bool:
    return LICENSE in text[:600]


def add_header(text: str, comment: str) -> str:
    lines = text.splitlines(keepends=True)
    at = 1 if lines and lines[0].startswith("#!") else 0
    if comment == "#" and at < len(lines) and re.match(r"#.*coding[:=]", lines[at]):
        at += 1
    lines.insert(at, f"{comment} {TEXT}\n{comment} {LICENSE}\n")
    return "".join(lines)


def main() -> int:
    check = "--check" in sys.argv[1:]
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    missing = []
    for f in files:
        comment = comment_of(f)
        if comment is None:
            continue
        path = pathlib.Path(f)
        text = path.read_text(encoding="utf-8")
        if has_header(text):
            continue
        missing.append(f)
        if not check:
            path.write_text(add_header(text, comment), encoding="utf-8")
    if check:
        for f in missing:
            print(f"{f}: no SPDX header (scripts/spdx.py adds it)")
        return 1 if missing else 0
    print(f"headers added to {len(missing)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
