#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The README's commands, run as a newcomer would run them (CTest: docs.readme).

    JOULE_SOURCE_DIR=. JOULE_BUILD_DIR=build python3 tests/readme/test_readme.py [--list] [--show]

--list prints the blocks found, --show each block's output as it ran.

The convention, in README.md's source:

- Every fenced ```sh block is run, in order, by bash (-e -o pipefail), each in
  the same scratch directory that looks like the checkout: every top-level
  entry of the source tree is linked into it and `build` points at the build
  directory, so `./build/bin/joule` and `PYTHONPATH=build/python` work as
  written and what the commands write stays in the scratch directory. GPUs are
  simulated (the NVML and ROCm SMI libraries are pointed at files that do not
  exist), each block has a time limit, and whatever it leaves running is
  killed when it ends.
- A ```text block right after a ```sh block (blank lines between are fine) is
  the output the reader should see. Its lines must appear in the block's output
  (stdout and stderr together), in order, not necessarily adjacent. Numbers
  match any number (they vary from run to run), runs of spaces match any
  spacing, and `...` matches anything: a line that is only `...` stands for
  lines left out, and inside a line for text left out.
- `<!-- readme-test: skip: REASON -->` right before a block: not run, and the
  test prints the reason. A skip without a reason fails the test.
- `<!-- readme-test: run-table -->` right before a table: each cell of it that
  is one inline command starting with `./build/bin/` or `PYTHONPATH=` is run
  like a block and must succeed.

It also checks that README.md is under 250 lines, and that every relative link
in README.md and docs/README.md names a file that exists (and, for a link into
a Markdown page, a heading of that page).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

MAX_README_LINES = 250
BLOCK_TIMEOUT_S = 60
MARKER = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?")


class Block:
    def __init__(self, kind, line, text, marker):
        self.kind = kind  # "sh", "table-command"
        self.line = line  # 1-based line in README.md
        self.text = text
        self.marker = marker  # the readme-test marker before it, or None
        self.expected = None  # lines of the ```text block after it


def parse(readme_lines):
    """The README's runnable blocks and the problems found in its markers."""
    blocks, problems = [], []
    marker, marker_line = None, 0
    i = 0
    last_sh = None
    while i < len(readme_lines):
        line = readme_lines[i]
        m = MARKER.match(line.strip())
        if m:
            if marker is not None:
                problems.append(f"README.md:{marker_line}: marker '{marker}' is followed by another marker, not a block")
            marker, marker_line = m.group(1), i + 1
            i += 1
            continue
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence:
            lang = fence.group(1)
            start = i
            i += 1
            body = []
            while i < len(readme_lines) and not readme_lines[i].startswith("```"):
                body.append(readme_lines[i])
                i += 1
            i += 1  # the closing fence
            if lang == "sh":
                block = Block("sh", start + 1, "\n".join(body) + "\n", marker)
                blocks.append(block)
                last_sh = block
            elif lang == "text" and last_sh is not None and marker is None:
                last_sh.expected = body
                last_sh = None
            else:
                if marker is not None:
                    problems.append(f"README.md:{marker_line}: marker '{marker}' is before a ```{lang} block, which is never run")
                last_sh = None
            marker = None
            continue
        if line.startswith("|") and marker is not None:
            if marker != "run-table":
                problems.append(f"README.md:{marker_line}: marker '{marker}' before a table (only run-table is)")
            while i < len(readme_lines) and readme_lines[i].startswith("|"):
                for cell in readme_lines[i].strip().strip("|").split("|"):
                    cell = cell.strip()
                    c = re.fullmatch(r"`([^`]+)`", cell)
                    if c and (c.group(1).startswith("./build/bin/") or c.group(1).startswith("PYTHONPATH=")):
                        blocks.append(Block("table-command", i + 1, c.group(1) + "\n", None))
                i += 1
            marker = None
            last_sh = None
            continue
        if line.strip():
            if marker is not None:
                problems.append(f"README.md:{marker_line}: marker '{marker}' is not right before a block or a table")
                marker = None
            last_sh = None
        i += 1
    return blocks, problems


def normalise(line):
    return " ".join(NUMBER.sub("#", line).split())


def expected_pattern(line):
    parts = normalise(line).split("...")
    return re.compile(".*".join(re.escape(p.strip()) for p in parts).replace(r"\ ", r"\s*") if len(parts) > 1
                      else re.escape(normalise(line)))


def missing_lines(expected, output):
    """The expected lines not found, in order, in the output (empty: all found)."""
    got = [normalise(line) for line in output.splitlines()]
    at = 0
    for line in expected:
        if line.strip() in ("", "..."):
            continue
        pattern = expected_pattern(line)
        while at < len(got) and not pattern.fullmatch(got[at]):
            at += 1
        if at == len(got):
            return [line]
        at += 1
    return []


def scratch_checkout(source_dir, build_dir):
    work = tempfile.mkdtemp(prefix="joule-readme-")
    for name in os.listdir(source_dir):
        if name in ("build", ".git"):
            continue
        os.symlink(os.path.join(source_dir, name), os.path.join(work, name))
    os.symlink(build_dir, os.path.join(work, "build"))
    return work


def block_env():
    env = dict(os.environ)
    for name in ("JOULE_SIM", "JOULE_SERVICE_URL", "JOULE_SERVICE_TOKEN", "JOULE_NODE_NAME",
                 "JOULE_RANKS_PER_NODE", "PYTHONPATH"):
        env.pop(name, None)
    env["JOULE_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1"  # simulated GPUs, even on a GPU machine
    env["JOULE_ROCM_SMI_LIBRARY"] = "/nonexistent/librocm_smi64.so.1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing written into the source tree
    return env


def run_block(block, work):
    started = time.monotonic()
    proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=work, env=block_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BLOCK_TIMEOUT_S)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    try:  # what the block left running (a server in the background)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.returncode, timed_out, out.decode("utf-8", "replace"), time.monotonic() - started


def check_links(path, text, source_dir):
    problems = []
    base = os.path.dirname(path)
    for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(base, file_part)) if file_part else path
        rel = os.path.relpath(path, source_dir)
        if not os.path.exists(resolved):
            problems.append(f"{rel}: link '{target}' names no file ({os.path.relpath(resolved, source_dir)})")
            continue
        if anchor and resolved.endswith(".md"):
            with open(resolved, encoding="utf-8") as f:
                slugs = {slug(line) for line in f if line.startswith("#")}
            if anchor not in slugs:
                problems.append(f"{rel}: link '{target}' names no heading of {os.path.relpath(resolved, source_dir)}")
    return problems


def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    text = heading.lstrip("#").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def main():
    source_dir = os.path.abspath(os.environ.get("JOULE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))
    build_dir = os.path.abspath(os.environ.get("JOULE_BUILD_DIR", os.path.join(source_dir, "build")))
    readme_path = os.path.join(source_dir, "README.md")
    with open(readme_path, encoding="utf-8") as f:
        readme = f.read()
    lines = readme.splitlines()
    failures = []
    if len(lines) >= MAX_README_LINES:
        failures.append(f"README.md has {len(lines)} lines; the front door keeps under {MAX_README_LINES}")
    failures += check_links(readme_path, readme, source_dir)
    docs_index = os.path.join(source_dir, "docs", "README.md")
    with open(docs_index, encoding="utf-8") as f:
        failures += check_links(docs_index, f.read(), source_dir)

    blocks, problems = parse(lines)
    failures += problems
    show = "--show" in sys.argv  # each block's output, to update the README's
    if "--list" in sys.argv:
        for b in blocks:
            print(f"README.md:{b.line}: {b.kind} {b.marker or ''}\n{b.text}")
        return 0
    work = scratch_checkout(source_dir, build_dir)
    total_started = time.monotonic()
    try:
        for b in blocks:
            where = f"README.md:{b.line}"
            if b.marker is not None:
                m = re.fullmatch(r"skip:\s*(.*)", b.marker)
                if not m:
                    failures.append(f"{where}: unknown marker '{b.marker}' (skip: REASON)")
                elif not m.group(1).strip():
                    failures.append(f"{where}: skipped without a reason")
                else:
                    print(f"{where}: skipped: {m.group(1).strip()}")
                continue
            rc, timed_out, out, took = run_block(b, work)
            status = "timed out" if timed_out else f"exit {rc}"
            print(f"{where}: {b.kind}, {status}, {took:.1f} s")
            if show:
                print(out)
            if timed_out or rc != 0:
                failures.append(f"{where}: {status} after {took:.1f} s:\n{b.text}--- output:\n{out}")
                continue
            if b.expected:
                missing = missing_lines(b.expected, out)
                if missing:
                    failures.append(f"{where}: the output lacks the README's line\n  {missing[0]}\n"
                                    f"(after the lines before it, in order)\n--- output:\n{out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"README blocks run in {time.monotonic() - total_started:.1f} s")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
