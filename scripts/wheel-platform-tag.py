#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""Tags a binary wheel with the manylinux platform its ELF files really need.

    scripts/wheel-platform-tag.py WHEEL [--min-glibc 2.17]   retag; the new path is stdout's last line
    scripts/wheel-platform-tag.py WHEEL --report-only        the table on stderr, JSON on stdout

Why: a wheel built here is tagged `linux_x86_64`, which PyPI refuses and pip
installs anywhere. Its true floor is the highest glibc symbol version any of
its ELF files requires (GLIBC_2.34 for code linked against glibc 2.34 or later
that uses pthread or dlopen, for example); `manylinux_2_<minor>_<arch>` (PEP
600) says exactly that, so pip on an older glibc picks the sdist instead of a
wheel that cannot load. auditwheel does this and more (it also copies outside
libraries in), but Debian bookworm does not package it; joule's wheels link
only the C and C++ runtimes, so reading the versions is enough.

How: every member of the wheel that starts with the ELF magic is read from the
zip (RECORD's hashes checked by wheel's WheelFile while reading) and its
version-needs section (SHT_GNU_verneed, `.gnu.version_r`) is parsed here with
struct rather than by running readelf/objdump: stdlib only, nothing extracted,
and tests/packaging/test_wheel_platform_tag.py can then check the result
against `readelf -V` as an independent reader. Reported per file and as maxima:
GLIBC_x.y[.z], GLIBCXX_3.4.z and CXXABI_1.3.z (libstdc++). The tag follows the
glibc maximum (never below --min-glibc); libstdc++ is not part of it, so a
GLIBCXX requirement is reported for the caller to judge (a distribution with
that glibc may ship an older libstdc++).

The architecture is the wheel's current platform tag's (linux_x86_64 ->
x86_64) and must agree with every ELF header's machine. Retagging rewrites
each Tag line of .dist-info/WHEEL, RECORD (WheelFile writes it from the
written files) and the file name; the original wheel is removed once the new
one is written and read back (as `wheel tags --remove` would: bookworm's
python3-wheel 0.38 has no `wheel tags`, which came with wheel 0.40).

JSON (--report-only): {"glibc": "2.34", "glibcxx": "3.4.30" or null,
"cxxabi": "1.3.13" or null, "platform_tag": "manylinux_2_34_x86_64" or null,
"files": {PATH: {"machine": ..., "glibc": ..., "glibcxx": ..., "cxxabi": ...,
"needs": ["libc.so.6:GLIBC_2.34", ...]}}}.
"""
import argparse
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import zipfile

from wheel.cli import WheelError
from wheel.wheelfile import WHEEL_INFO_RE, WheelFile

SHT_GNU_VERNEED = 0x6FFFFFFE
# e_machine -> the architecture's name in platform tags
MACHINES = {3: "i686", 40: "armv7l", 62: "x86_64", 183: "aarch64", 243: "riscv64", 22: "s390x", 21: "ppc64"}
FAMILIES = {"GLIBC": "glibc", "GLIBCXX": "glibcxx", "CXXABI": "cxxabi"}
VERSION_RE = re.compile(r"^(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)+)$")


class ElfError(Exception):
    pass


def elf_version_needs(data: bytes):
    """(machine name, [(library, version name)]) from an ELF image's SHT_GNU_verneed sections."""
    if len(data) < 0x40 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    klass, encoding = data[4], data[5]
    if klass not in (1, 2) or encoding not in (1, 2):
        raise ElfError(f"unknown ELF class {klass} or data encoding {encoding}")
    end = "<" if encoding == 1 else ">"
    (machine,) = struct.unpack_from(end + "H", data, 18)
    if klass == 2:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
        sh_fmt = end + "IIQQQQIIQQ"
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
        sh_fmt = end + "IIIIIIIIII"
    name = MACHINES.get(machine, f"e_machine {machine}")
    if machine == 21 and encoding == 1:
        name = "ppc64le"
    if shoff == 0:
        raise ElfError("no section headers (stripped with sstrip?): its version needs cannot be read")
    if shentsize < struct.calcsize(sh_fmt):
        raise ElfError(f"section header entries of {shentsize} bytes")

    def section(i):
        off = shoff + i * shentsize
        if off + shentsize > len(data):
            raise ElfError("section header table past the end of the file")
        _, sh_type, _, _, sh_offset, sh_size, sh_link, sh_info, _, _ = struct.unpack_from(sh_fmt, data, off)
        return sh_type, sh_offset, sh_size, sh_link, sh_info

    if shnum == 0:  # extended numbering: the count is section 0's sh_size
        shnum = section(0)[2]
    needs = []
    for i in range(shnum):
        sh_type, offset, size, link, count = section(i)
        if sh_type != SHT_GNU_VERNEED:
            continue
        _, str_offset, str_size, _, _ = section(link)

        def string(at):
            if at >= str_size:
                raise ElfError("version name outside its string table")
            start = str_offset + at
            stop = data.index(b"\0", start, str_offset + str_size)
            return data[start:stop].decode("ascii", "replace")

        at = offset
        for _ in range(count):  # Elf_Verneed: vn_version, vn_cnt, vn_file, vn_aux, vn_next
            if at + 16 > offset + size:
                raise ElfError("version needs past the end of their section")
            _, cnt, file_name, aux, nxt = struct.unpack_from(end + "HHIII", data, at)
            library = string(file_name)
            a = at + aux
            for _ in range(cnt):  # Elf_Vernaux: vna_hash, vna_flags, vna_other, vna_name, vna_next
                _, _, _, version_name, anext = struct.unpack_from(end + "IHHII", data, a)
                needs.append((library, string(version_name)))
                if anext == 0:
                    break
                a += anext
            if nxt == 0:
                break
            at += nxt
    return name, needs


def version_key(text: str):
    return tuple(int(p) for p in text.split("."))


def highest(versions):
    return max(versions, key=version_key) if versions else None


def analyse(wheel_path: str):
    """Per ELF member: machine, the highest version per family, every need."""
    files = {}
    with WheelFile(wheel_path) as wf:
        for info in wf.infolist():
            if info.is_dir():
                continue
            data = wf.read(info)  # WheelFile checks the member against RECORD
            if data[:4] != b"\x7fELF":
                continue
            try:
                machine, needs = elf_version_needs(data)
            except (ElfError, struct.error, ValueError) as e:
                raise SystemExit(f"wheel-platform-tag.py: {info.filename}: {e}")
            entry = {"machine": machine}
            found = {family: [] for family in FAMILIES.values()}
            for _, version in needs:
                m = VERSION_RE.match(version)
                if m:
                    found[FAMILIES[m.group(1)]].append(m.group(2))
            for family, versions in found.items():
                entry[family] = highest(versions)
            entry["needs"] = sorted({f"{lib}:{ver}" for lib, ver in needs})
            if any(ver == "GLIBC_PRIVATE" for _, ver in needs):
                entry["glibc_private"] = True
            files[info.filename] = entry
    return files


def wheel_tags(wheel_path: str):
    """The Tag lines of .dist-info/WHEEL."""
    with WheelFile(wheel_path) as wf:
        text = wf.read(f"{wf.dist_info_path}/WHEEL").decode("utf-8")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]


def architecture_of(platforms):
    """x86_64 from linux_x86_64, manylinux_2_17_x86_64, manylinux2014_x86_64; None for `any`."""
    archs = set()
    for plat in platforms:
        m = re.match(r"^(?:linux|manylinux\d+|manylinux_\d+_\d+)_(.+)$", plat)
        if m:
            archs.add(m.group(1))
        elif plat != "any":
            raise SystemExit(f"wheel-platform-tag.py: platform tag {plat!r} is not a Linux one")
    if len(archs) > 1:
        raise SystemExit(f"wheel-platform-tag.py: the wheel's tags name several architectures: {sorted(archs)}")
    return archs.pop() if archs else None


def retag(wheel_path: str, platform: str) -> str:
    """Writes the wheel again with every tag's platform replaced; returns its path."""
    directory = os.path.dirname(os.path.abspath(wheel_path))
    parsed = WHEEL_INFO_RE.match(os.path.basename(wheel_path))
    build = f"-{parsed.group('build')}" if parsed.group("build") else ""
    new_name = f"{parsed.group('namever')}{build}-{parsed.group('pyver')}-{parsed.group('abi')}-{platform}.whl"
    new_path = os.path.join(directory, new_name)
    if os.path.abspath(wheel_path) == new_path:
        return new_path
    staging = tempfile.mkdtemp(dir=directory, prefix=".retag-")
    try:
        staged = os.path.join(staging, new_name)
        with WheelFile(wheel_path) as src, WheelFile(staged, "w") as dst:
            wheel_file = f"{src.dist_info_path}/WHEEL"
            for info in src.infolist():
                if info.filename in (src.record_path, src.record_path + ".jws", src.record_path + ".p7s"):
                    continue  # RECORD is written anew; a signature would no longer match
                data = src.read(info)
                if info.filename == wheel_file:
                    lines, seen = [], set()
                    for line in data.decode("utf-8").splitlines():
                        if line.startswith("Tag:"):
                            python, abi, _ = line.split(":", 1)[1].strip().split("-")
                            line = f"Tag: {python}-{abi}-{platform}"
                            if line in seen:
                                continue
                            seen.add(line)
                        lines.append(line)
                    data = ("\n".join(lines) + "\n").encode("utf-8")
                out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                out.external_attr = info.external_attr
                out.create_system = info.create_system
                out.compress_type = info.compress_type
                dst.writestr(out, data)
        with WheelFile(staged) as check:  # read back: every member against the new RECORD
            for info in check.infolist():
                if not info.is_dir():
                    check.read(info)
        os.replace(staged, new_path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    os.remove(wheel_path)
    return new_path


def print_table(files, out):
    rows = [("file", "machine", "GLIBC", "GLIBCXX", "CXXABI")]
    for path, e in sorted(files.items()):
        rows.append((path, e["machine"], e["glibc"] or "-", e["glibcxx"] or "-", e["cxxabi"] or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel")
    parser.add_argument("--min-glibc", default="2.17", help="the lowest glibc the tag names (default 2.17)")
    parser.add_argument("--report-only", action="store_true",
                        help="print the table (stderr) and the maxima as JSON (stdout); change nothing")
    args = parser.parse_args()
    if not re.fullmatch(r"2\.\d+", args.min_glibc):
        parser.error(f"--min-glibc {args.min_glibc!r}: expected 2.<minor>")

    files = analyse(args.wheel)
    maxima = {family: highest([e[family] for e in files.values() if e[family]]) for family in FAMILIES.values()}
    arch = architecture_of(t.split("-")[2] for t in wheel_tags(args.wheel))
    for path, e in files.items():
        if arch is None:
            arch = e["machine"]
        if e["machine"] != arch:
            raise SystemExit(f"wheel-platform-tag.py: {path} is for {e['machine']}, the wheel is tagged for {arch}")
    platform = None
    if maxima["glibc"]:
        major, minor = version_key(maxima["glibc"])[:2]
        if major != 2:
            raise SystemExit(f"wheel-platform-tag.py: GLIBC_{maxima['glibc']}: not a glibc 2 version")
        platform = f"manylinux_2_{max(minor, version_key(args.min_glibc)[1])}_{arch}"
    private = sorted(p for p, e in files.items() if e.get("glibc_private"))

    if args.report_only:
        print_table(files, sys.stderr)
        print(json.dumps({**maxima, "platform_tag": platform, "files": files}, indent=2, sort_keys=True))
        return
    print_table(files, sys.stdout)
    print(f"highest: GLIBC {maxima['glibc'] or '-'}, GLIBCXX {maxima['glibcxx'] or '-'}, CXXABI {maxima['cxxabi'] or '-'}")
    if not files:
        raise SystemExit("wheel-platform-tag.py: no ELF file in the wheel: nothing to tag by")
    if platform is None:
        raise SystemExit("wheel-platform-tag.py: no ELF file of the wheel needs a GLIBC version: no manylinux floor")
    if private:
        raise SystemExit(f"wheel-platform-tag.py: {', '.join(private)} need GLIBC_PRIVATE: no manylinux tag is honest")
    if maxima["glibcxx"] or maxima["cxxabi"]:
        print(f"wheel-platform-tag.py: note: {platform} covers glibc only; the wheel also needs a libstdc++ with "
              f"GLIBCXX_{maxima['glibcxx'] or '-'} and CXXABI_{maxima['cxxabi'] or '-'}", file=sys.stderr)
    print(retag(args.wheel, platform))


if __name__ == "__main__":
    try:
        main()
    except (WheelError, OSError, zipfile.BadZipFile) as e:
        raise SystemExit(f"wheel-platform-tag.py: {e}")
