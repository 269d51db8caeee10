"""python3 -m halformer ARGS: the `halformer` command (docs/README.md's
commands), installed with the package by pip (halformer/bin/halformer), or
the one on PATH for a package imported from a CMake build tree."""
import os
import shutil
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "halformer")
    if not os.path.exists(exe):
        exe = shutil.which("halformer")
    if exe is None:
        sys.exit("python3 -m halformer: the halformer command is not in this package (pip install . puts it "
                 "there) nor on PATH (a CMake build makes it as build/halformer)")
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
