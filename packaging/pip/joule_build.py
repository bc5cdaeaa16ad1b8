# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule's build backend for pip (PEP 517), in the source tree.

Why our own: a GPU machine is often offline, and an offline pip can only use
the build tools that are already there. setuptools before 70.1 needs the
separate `wheel` package to make a wheel (Debian bookworm and Ubuntu 22.04
ship 66 and 59, and a fresh venv has no `wheel`); scikit-build-core is
packaged for neither. This backend needs nothing but the Python standard
library, CMake and a C++20 compiler, so

    python3 -m pip install joule-0.1.0.tar.gz

works offline in any venv, build isolation or not. It builds the project's
CMake targets (the module, the `joule` program, the C library) and packs
them with the Python files and the data into a wheel (PEP 427):

    joule/                 the Python package and joule._joule
    joule/bin/joule        the program; `joule` on PATH execs it (joule/_cli.py)
    joule/lib/libjoule_c.so
    joule/share/joule/     carbon table, bundled traces, example cluster trace
                           (the program finds them at <its dir>/../share/joule)

build_sdist packs the sources a build needs, and third_party/ (the code the
core needs when the system lacks it; scripts/collect-third-party.sh) from
$JOULE_THIRD_PARTY_DIR or ./third_party. docs/install.md has the rest.

Environment: JOULE_JOBS (parallel compiles; default: every core),
JOULE_CMAKE_ARGS (more -D options, e.g. -DJOULE_WITH_SERVICE=OFF as the
prebuilt wheel is made), JOULE_BUILD_DIR (where CMake builds; default
build/wheel-<python tag> under the source tree, so a rebuild is quick).
"""
import base64
import csv
import hashlib
import io
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "joule"
SUMMARY = "Measure and lower the energy of deep-learning training on GPUs"
REQUIRES_PYTHON = ">=3.9"
LICENSE = "Apache-2.0"
# What an sdist carries: enough to build and to read (no tests, benchmarks,
# Debian packaging or figures: the git repository has those).
SDIST_PATHS = ["pyproject.toml", "CMakeLists.txt", "LICENSE", "NOTICE", "README.md", "cmake", "src", "include",
               "python", "data", "examples", "packaging/pip", "docs/install.md"]
# Inside the package: built file -> its place in joule/.
PROGRAMS = {"bin/joule": "bin/joule", "lib/libjoule_c.so": "lib/libjoule_c.so"}
DATA = {"data/zeus-nsdi23": "share/joule/zeus-nsdi23", "data/cluster": "share/joule/cluster"}


def version() -> str:
    """The one version: CMakeLists.txt's project(joule VERSION ...)."""
    match = re.search(r"project\(joule VERSION ([0-9][0-9.]*)", (ROOT / "CMakeLists.txt").read_text())
    if not match:
        raise RuntimeError("CMakeLists.txt: project(joule VERSION x.y.z) not found")
    return match.group(1)


def metadata() -> str:
    lines = [
        "Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version()}", f"Summary: {SUMMARY}",
        f"License: {LICENSE}", f"Requires-Python: {REQUIRES_PYTHON}",
        "Classifier: License :: OSI Approved :: Apache Software License",
        "Classifier: Operating System :: POSIX :: Linux", "Classifier: Programming Language :: C++",
        "Classifier: Programming Language :: Python :: 3", "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + (ROOT / "README.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------- PEP 517
def get_requires_for_build_wheel(config_settings=None):
    return []  # nothing to download: CMake and the compiler are found on PATH


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    tag = wheel_tag()
    build_dir = Path(os.environ.get("JOULE_BUILD_DIR") or ROOT / "build" / f"wheel-{tag.split('-')[0]}")
    package_dir = build_dir / "python" / "joule"
    cmake_build(build_dir, package_dir)
    name = f"{NAME}-{version()}-{tag}.whl"
    write_wheel(Path(wheel_directory) / name, package_dir, build_dir, tag)
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{version()}"
    third_party = Path(os.environ.get("JOULE_THIRD_PARTY_DIR") or ROOT / "third_party")
    path = Path(sdist_directory) / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for relative in sdist_files():
            tar.add(ROOT / relative, f"{base}/{relative}", recursive=False, filter=_normalised)
        if third_party.is_dir():
            tar.add(third_party, f"{base}/third_party", filter=_normalised)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        payload = metadata().encode()
        info.size, info.mtime, info.mode = len(payload), int(time.time()), 0o644
        tar.addfile(info, io.BytesIO(payload))
    return path.name


# ---------------------------------------------------------------- the build
def wheel_tag() -> str:
    """cpXY-cpXY-<platform>: the module is built for this interpreter. The
    platform is the plain one (linux_x86_64); scripts/build-dist.sh retags a
    wheel it publishes by the symbol versions its files need."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{python}-{python}-{platform}"


def cmake_build(build_dir: Path, package_dir: Path) -> None:
    if shutil.which("cmake") is None:
        raise RuntimeError("building joule needs CMake >= 3.25 on PATH (your distribution's cmake package, or "
                           "`pip install cmake` into the environment that runs pip); docs/install.md")
    bundled = (ROOT / "third_party").is_dir()
    configure = [
        "cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
        "-DJOULE_BUILD_TESTS=OFF", "-DJOULE_BUILD_BENCH=OFF", "-DJOULE_BUILD_EXAMPLES=OFF",
        "-DJOULE_BUILD_PACKAGE=OFF", f"-DJOULE_BUNDLED_DEPS={'ON' if bundled else 'OFF'}",
        f"-DPython3_EXECUTABLE={sys.executable}", f"-DJOULE_PYTHON_PACKAGE_DIR={package_dir}",
    ] + shlex.split(os.environ.get("JOULE_CMAKE_ARGS", ""))
    # pip's build isolation puts its own site directory on PYTHONPATH, which
    # hides every installed package from Python programs run from here; the
    # `cmake` of the cmake package (pip install cmake) is such a program, and
    # failed to import itself that way on a GPU machine. CMake needs none of it.
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
    # pip shows a failed build's output; the compiler's go to stderr as well.
    subprocess.run(configure, check=True, stdout=sys.stderr, env=env)
    jobs = os.environ.get("JOULE_JOBS") or str(os.cpu_count() or 2)
    subprocess.run(["cmake", "--build", str(build_dir), "-j", jobs, "--target", "joule_python", "joule_cli", "joule_c"],
                   check=True, stdout=sys.stderr, env=env)


def wheel_entries(package_dir: Path, build_dir: Path):
    """(path in the wheel, file on disk) for everything the package holds."""
    for path in sorted(package_dir.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield f"joule/{path.relative_to(package_dir).as_posix()}", path
    for built, inside in PROGRAMS.items():
        yield f"joule/{inside}", build_dir / built
    for source, inside in DATA.items():
        for path in sorted((ROOT / source).rglob("*")):
            if path.is_file():
                yield f"joule/{inside}/{path.relative_to(ROOT / source).as_posix()}", path


def dist_info_entries(tag: str):
    """(path in the wheel, bytes) of the .dist-info directory but RECORD."""
    info = f"{NAME}-{version()}.dist-info"
    yield f"{info}/METADATA", metadata().encode()
    yield f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: joule_build {version()}\nRoot-Is-Purelib: false\n"
                            f"Tag: {tag}\n").encode()
    yield f"{info}/entry_points.txt", b"[console_scripts]\njoule = joule._cli:main\n"
    yield f"{info}/top_level.txt", b"joule\n"
    yield f"{info}/licenses/LICENSE", (ROOT / "LICENSE").read_bytes()
    yield f"{info}/licenses/NOTICE", (ROOT / "NOTICE").read_bytes()
    third_party = ROOT / "third_party"
    if third_party.is_dir():  # what the built files carry of it: its licences
        for path in sorted(third_party.rglob("*")):
            if path.is_file() and (path.name in ("copyright", "README.md")):
                yield f"{info}/licenses/third_party/{path.relative_to(third_party).as_posix()}", path.read_bytes()


def write_wheel(path: Path, package_dir: Path, build_dir: Path, tag: str) -> None:
    record = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        def add(name: str, payload: bytes, executable: bool = False) -> None:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            # A regular file's full mode: pip makes a file executable only where both show.
            info.external_attr = (stat.S_IFREG | (0o755 if executable else 0o644)) << 16
            wheel.writestr(info, payload)
            digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
            record.append((name, f"sha256={digest}", str(len(payload))))

        for name, source in wheel_entries(package_dir, build_dir):
            add(name, source.read_bytes(), executable=os.access(source, os.X_OK) and source.suffix != ".so")
        for name, payload in dist_info_entries(tag):
            add(name, payload)
        record_name = f"{NAME}-{version()}.dist-info/RECORD"
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(record + [(record_name, "", "")])
        wheel.writestr(zipfile.ZipInfo(record_name, date_time=(2026, 1, 1, 0, 0, 0)), text.getvalue())


def sdist_files():
    """The files of SDIST_PATHS: where this is a checkout, those git tracks
    or would (so nothing it ignores, such as a build, slips in); else every
    file under them."""
    if (ROOT / ".git").exists():
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                                 "--", *SDIST_PATHS], check=True,
                                capture_output=True).stdout.decode().split("\0")
        return sorted(path for path in listed if path and (ROOT / path).is_file())
    files = []
    for entry in SDIST_PATHS:
        path = ROOT / entry
        files += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sorted(p.relative_to(ROOT).as_posix() for p in files if "__pycache__" not in p.parts)


def _normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info
