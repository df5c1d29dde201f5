#!/usr/bin/env python3
"""scripts/bootstrap.sh installs per purpose: --build (what scripts/run-demo.sh
uses) names only the compiler, the build tools and the -dev package of every
library CMake links, never a test tool or a browser; the default adds the
test tools, --fuzz clang as well; run-demo.sh asks for --build and the full
test run for everything. Checked through --list, which installs nothing."""

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_bootstrap")
TEST_ONLY = {"chromium", "valgrind", "clang-format", "libcmocka-dev", "python3-kubernetes", "python3-yaml"}


def listed(s, *args):
    r = ic.run(["bash", s.path("scripts", "bootstrap.sh")] + list(args) + ["--list"])
    s.check_eq(r.returncode, 0, "bootstrap.sh %s --list exits 0" % " ".join(args), r.stderr)
    return set(r.stdout.split())


def cmake_dev_packages(s):
    with open(s.path("CMakeLists.txt")) as f:
        modules = re.findall(r"pkg_check_modules\(\s*\w+\s+REQUIRED\s+IMPORTED_TARGET\s+([^\s)]+)", f.read())
    with open(s.path("scripts", "bootstrap.sh")) as f:
        block = re.search(r"declare -A modules=\((.*?)\)", f.read(), re.S).group(1)
    mapping = dict(re.findall(r"\[([^\]]+)\]=([a-z0-9.+-]+)", block))
    s.check(len(modules) >= 5 and all(m in mapping for m in modules), "every CMake module has a package", modules)
    return {mapping.get(m) for m in modules}


@suite.test
def build_mode_is_the_build_only(s):
    build, full, fuzz = listed(s, "--build"), listed(s), listed(s, "--fuzz")
    s.check_eq(sorted(build & TEST_ONLY), [], "--build installs no test tool, browser or test library")
    for pkg in sorted(cmake_dev_packages(s) | {"gcc", "make", "cmake", "pkg-config"}):
        s.check(pkg in build, "--build has %s" % pkg, sorted(build))
    s.check(TEST_ONLY <= full, "the default (tests) adds the test tools", sorted(full))
    s.check(build <= full and full <= fuzz and "clang" in fuzz, "--fuzz adds clang to the tests' packages")
    r = ic.run(["bash", s.path("scripts", "bootstrap.sh"), "--nonsense"])
    s.check_eq(r.returncode, 2, "an unknown option is refused", r.stderr)


@suite.test
def scripts_ask_for_their_mode(s):
    with open(s.path("scripts", "run-demo.sh")) as f:
        demo = f.read()
    s.check(re.search(r"bootstrap\.sh --build\b", demo), "run-demo.sh bootstraps the build only")
    s.check("GQA_BUILD_TESTS=OFF" in demo, "run-demo.sh builds without the tests (no cmocka needed)")
    with open(s.path("scripts", "test.sh")) as f:
        s.check(re.search(r"bootstrap\.sh\s*$", f.read(), re.M), "test.sh bootstraps everything")


if __name__ == "__main__":
    suite.main()
