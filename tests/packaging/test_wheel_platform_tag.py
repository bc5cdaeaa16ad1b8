# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""scripts/wheel-platform-tag.py on a wheel made here: two shared objects
built on the fly (C calling arc4random, glibc 2.36's newest symbol on
bookworm; C++ with std::string and exceptions, which needs GLIBCXX and CXXABI)
and a pure-Python module. What the script reads from the ELF files itself is
checked against binutils' readelf, parsed here in another way; the retagged
wheel must still pass wheel's own RECORD check and install with pip."""
import csv
import io
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest
from wheel.wheelfile import WheelFile

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "wheel-platform-tag.py")
ARCH = platform.machine()

C_SOURCE = r"""
#include <stdlib.h>
#include <string.h>
unsigned demo_random(void) { return arc4random(); }
size_t demo_length(const char* s) { return strlen(s); }
"""
CXX_SOURCE = r"""
#include <stdexcept>
#include <string>
extern "C" int demo_cxx(int n) {
  std::string s = std::to_string(n) + "!";
  if (s.empty()) throw std::runtime_error("empty");
  return static_cast<int>(s.size());
}
"""


def run(*args, **kwargs):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    """The two shared objects: {name in the wheel: path}."""
    for tool in ("gcc", "g++", "readelf"):
        assert shutil.which(tool), f"{tool} is needed (build-essential, binutils)"
    d = tmp_path_factory.mktemp("elf")
    (d / "c.c").write_text(C_SOURCE)
    (d / "cxx.cc").write_text(CXX_SOURCE)
    run("gcc", "-shared", "-fPIC", "-O1", "-o", str(d / "libdemo_c.so"), str(d / "c.c"))
    run("g++", "-shared", "-fPIC", "-O1", "-o", str(d / "libdemo_cxx.so"), str(d / "cxx.cc"))
    return {"tagdemo/libdemo_c.so": d / "libdemo_c.so", "tagdemo/_cxx.so": d / "libdemo_cxx.so"}


def make_wheel(directory, objects, platform_tag=f"linux_{ARCH}", name="tagdemo"):
    """A wheel written with wheel's WheelFile (which writes RECORD): the objects, mode 0755, and a module."""
    path = directory / f"{name}-1.0-py3-none-{platform_tag}.whl"
    with WheelFile(str(path), "w") as wf:
        def add(arcname, data, mode=0o644):
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wf.writestr(info, data)
        add(f"{name}/__init__.py", "ANSWER = 42\n")
        for arcname, source in objects.items():
            add(arcname, source.read_bytes(), 0o755)
        add(f"{name}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        add(f"{name}-1.0.dist-info/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-{platform_tag}\n")
    return path


def readelf_maxima(path):
    """The highest GLIBC/GLIBCXX/CXXABI versions in `readelf -V`'s version-needs listing, read as text."""
    found = {"GLIBC": [], "GLIBCXX": [], "CXXABI": []}
    for name in re.findall(r"Name: ([A-Z]+_[0-9][0-9.]*)\s", run("readelf", "-V", "-W", str(path)).stdout):
        family, version = name.split("_", 1)
        if family in found:
            found[family].append([int(x) for x in version.split(".")])
    return {f.lower(): ".".join(map(str, max(v))) if v else None for f, v in found.items()}


def report(wheel, *extra):
    result = run(sys.executable, SCRIPT, str(wheel), "--report-only", *extra)
    return json.loads(result.stdout)


def test_report_matches_readelf(tmp_path, objects):
    wheel = make_wheel(tmp_path, objects)
    got = report(wheel)
    expected = {arcname: readelf_maxima(path) for arcname, path in objects.items()}
    assert set(got["files"]) == set(objects)  # the .py and the metadata are not ELF files
    for arcname, want in expected.items():
        entry = got["files"][arcname]
        assert entry["machine"] == ARCH
        assert {k: entry[k] for k in want} == want, arcname
    def key(v):
        return [int(x) for x in v.split(".")]
    for family in ("glibc", "glibcxx", "cxxabi"):
        versions = [e[family] for e in expected.values() if e[family]]
        assert got[family] == (max(versions, key=key) if versions else None), family
    assert got["glibcxx"] and got["cxxabi"]  # std::string and exceptions
    assert expected["tagdemo/libdemo_c.so"]["glibcxx"] is None
    # arc4random's own version, from the dynamic symbol table rather than the version needs
    syms = run("readelf", "--dyn-syms", "-W", str(objects["tagdemo/libdemo_c.so"])).stdout
    arc4random = re.search(r"\barc4random@GLIBC_([0-9.]+)", syms).group(1)
    assert key(got["glibc"]) >= key(arc4random)
    minor = max(key(got["glibc"])[1], 17)
    assert got["platform_tag"] == f"manylinux_2_{minor}_{ARCH}"
    assert report(wheel, "--min-glibc", "2.99")["platform_tag"] == f"manylinux_2_99_{ARCH}"


def test_retag_installs_and_validates(tmp_path, objects):
    wheel = make_wheel(tmp_path, objects)
    before = {i.filename: i.external_attr for i in zipfile.ZipFile(wheel).infolist()}
    glibc = report(wheel)["glibc"]
    result = run(sys.executable, SCRIPT, str(wheel))
    new = result.stdout.splitlines()[-1]
    minor = max(int(glibc.split(".")[1]), 17)
    assert os.path.basename(new) == f"tagdemo-1.0-py3-none-manylinux_2_{minor}_{ARCH}.whl"
    assert os.path.dirname(new) == str(tmp_path)
    assert not wheel.exists()  # replaced, as `wheel tags --remove` does
    assert f"GLIBC {glibc}" in result.stdout  # the maxima line

    # wheel's own check: WheelFile verifies every member against RECORD while reading it
    with WheelFile(new) as wf:
        members = [i for i in wf.infolist() if not i.is_dir()]
        for info in members:
            wf.read(info)
        record = list(csv.reader(io.StringIO(wf.read(wf.record_path).decode())))
        tags = [l for l in wf.read("tagdemo-1.0.dist-info/WHEEL").decode().splitlines() if l.startswith("Tag:")]
    assert sorted(r[0] for r in record) == sorted(i.filename for i in members)
    assert tags == [f"Tag: py3-none-manylinux_2_{minor}_{ARCH}"]
    assert {i.filename: i.external_attr for i in zipfile.ZipFile(new).infolist()
            if not i.filename.endswith("RECORD")} == {k: v for k, v in before.items() if not k.endswith("RECORD")}

    # pip accepts the tag on this machine and installs it
    target = tmp_path / "site"
    run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(target), new)
    assert os.access(target / "tagdemo" / "_cxx.so", os.X_OK)
    check = ("import ctypes, tagdemo; assert tagdemo.ANSWER == 42; "
             "print(ctypes.CDLL(tagdemo.__path__[0] + '/_cxx.so').demo_cxx(1234))")
    assert run(sys.executable, "-c", check, env={**os.environ, "PYTHONPATH": str(target)}).stdout == "5\n"

    # a second run finds the tag right and leaves the wheel as it is
    again = run(sys.executable, SCRIPT, new)
    assert again.stdout.splitlines()[-1] == new and os.path.exists(new)


def test_refuses_a_foreign_architecture_and_a_pure_wheel(tmp_path, objects):
    other = tmp_path / "other.so"
    data = bytearray(objects["tagdemo/libdemo_c.so"].read_bytes())
    data[18:20] = (183 if ARCH != "aarch64" else 62).to_bytes(2, "little" if data[5] == 1 else "big")
    other.write_bytes(bytes(data))
    wheel = make_wheel(tmp_path, {"tagdemo/other.so": other})
    result = subprocess.run([sys.executable, SCRIPT, str(wheel)], capture_output=True, text=True)
    assert result.returncode != 0 and f"the wheel is tagged for {ARCH}" in result.stderr
    assert wheel.exists()

    pure = make_wheel(tmp_path, {}, name="puredemo")
    result = subprocess.run([sys.executable, SCRIPT, str(pure)], capture_output=True, text=True)
    assert result.returncode != 0 and "no ELF file" in result.stderr
    assert report(pure) == {"glibc": None, "glibcxx": None, "cxxabi": None, "platform_tag": None, "files": {}}
