# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The `joule` command of a pip install: it becomes the joule program the
package carries (joule/bin/joule), replacing this Python process, so exit
status, signals, terminal and process group are the program's own. The
program finds the data beside it (joule/share/joule)."""
import os
import sys


def program_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "joule")


def main() -> int:
    path = program_path()
    if not os.access(path, os.X_OK):
        sys.stderr.write(f"joule: this installation of the joule package has no joule program ({path}); "
                         "reinstall it from its sdist or wheel (docs/install.md)\n")
        return 127
    os.execv(path, ["joule", *sys.argv[1:]])
    return 127  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
