"""pip install . (pyproject.toml): the halformer package from a CMake build.

The extension `halformer._halformer` and the `halformer` command are
CMake targets of this tree; setuptools only packages them. The build
directory is $HALFORMER_BUILD_DIR if set, else build/ when scripts/build.sh
has configured it (nothing is rebuilt that is up to date), else build-pip/,
configured here for this interpreter (the whole build: every kernel, minutes
on 2 cores, with CMake's progress on the terminal under `pip install -v`).
The command goes into the package (halformer/bin/halformer) and runs as
`python3 -m halformer`.
"""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def build_dir():
    given = os.environ.get("HALFORMER_BUILD_DIR")
    if given:
        return os.path.abspath(given)
    main = os.path.join(ROOT, "build")
    if os.path.exists(os.path.join(main, "CMakeCache.txt")):
        return main
    return os.path.join(ROOT, "build-pip")


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = build_dir()
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DPython3_EXECUTABLE=" + sys.executable, "-DHALFORMER_TESTS=OFF",
                                   "-DHALFORMER_BENCH=OFF"])
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call(["cmake", "--build", build, "--target", "_halformer", "halformer", "-j", jobs])
        package = os.path.join(build, "python", "halformer")
        built = [f for f in os.listdir(package) if f.startswith("_halformer") and f.endswith(".so")]
        if not built:
            raise RuntimeError(f"{package}: CMake built no _halformer module (pybind11-dev, python3-dev and "
                               "python3-numpy are needed: CMake's output says what is missing)")
        suffix = self.get_ext_filename("_halformer")[len("_halformer"):]
        if not any(f.endswith(suffix) for f in built):
            raise RuntimeError(f"{package} holds {built}, not a module for this Python ({suffix}): set "
                               "HALFORMER_BUILD_DIR to a build configured with -DPython3_EXECUTABLE=" +
                               sys.executable)
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(package, next(f for f in built if f.endswith(suffix))), target)
        os.chmod(target, 0o755)
        command = os.path.join(os.path.dirname(target), "bin", "halformer")
        os.makedirs(os.path.dirname(command), exist_ok=True)
        shutil.copyfile(os.path.join(build, "halformer"), command)
        os.chmod(command, 0o755)


# setuptools' own files (its build/ would be CMake's, its egg-info would land
# in python/) go under the build directory too: the source tree stays as it was.
staging = os.path.join(build_dir(), "setuptools")
os.makedirs(staging, exist_ok=True)
setup(ext_modules=[Extension("halformer._halformer", sources=[])], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": staging}, "egg_info": {"egg_base": staging}})
