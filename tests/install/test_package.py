#!/usr/bin/env python3
"""Packages: `cpack` in the build tree makes a tarball and a .deb with the
three binaries (stripped), each one's --help as text, the docs, the
manifests and the scheduler configurations; the .deb's Depends names the
Debian package of every shared library the service links (readelf + dpkg),
bar the Essential ones; and `cmake --install` puts the same files under a
prefix."""

import os
import re
import shutil
import subprocess
import sys
import tarfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_package")

BINARIES = ("gpu-quota-admission", "gpu-topology", "kubectl-gpu")
# In every Debian system: the Essential packages depend on them.
BASE_PACKAGES = {"libc6", "libgcc-s1", "zlib1g"}


def build_dir(s):
    return os.path.dirname(os.path.abspath(s.args.binary))


def expected_files():
    files = ["usr/bin/" + b for b in BINARIES]
    files += ["usr/share/doc/gpu-quota-admission/%s.txt" % b for b in BINARIES]
    files += ["usr/share/doc/gpu-quota-admission/README.md", "usr/share/doc/gpu-quota-admission/docs/reference.md",
              "usr/share/gpu-quota-admission/manifests/kustomization.yaml",
              "usr/share/gpu-quota-admission/scheduler-config/README.md"]
    return files


def run_cpack(s, generator, out):
    cpack = shutil.which("cpack")
    s.require(cpack, "cpack is installed")
    r = subprocess.run([cpack, "-G", generator, "-B", out, "--config",
                        os.path.join(build_dir(s), "CPackConfig.cmake")], capture_output=True, text=True,
                       timeout=600)
    s.require(r.returncode == 0, "cpack -G %s succeeds" % generator, r.stdout[-2000:] + r.stderr[-2000:])
    made = [f for f in os.listdir(out) if f.endswith(".tar.gz" if generator == "TGZ" else ".deb")]
    s.require(len(made) == 1, "cpack -G %s makes one package" % generator, os.listdir(out))
    return os.path.join(out, made[0])


def library_packages(s, binary):
    """Debian packages owning the shared libraries `binary` links, without the Essential ones."""
    readelf, dpkg = shutil.which("readelf"), shutil.which("dpkg")
    if not readelf or not dpkg:
        return None
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", ic.run([readelf, "-d", binary]).stdout)
    ldd = ic.run(["ldd", binary]).stdout
    owners = set()
    for lib in needed:
        m = re.search(r"^\s*%s => (\S+)" % re.escape(lib), ldd, re.M)
        if not m:
            continue
        for candidate in (m.group(1), os.path.realpath(m.group(1)), m.group(1).replace("/usr/lib/", "/lib/"),
                          os.path.realpath(m.group(1)).replace("/usr/lib/", "/lib/")):
            q = ic.run([dpkg, "-S", candidate])
            if q.returncode == 0:
                owner = q.stdout.split(":")[0].strip()
                prio = ic.run(["dpkg-query", "-W", "-f=${Priority} ${Essential}", owner]).stdout
                if not ("required" in prio or "yes" in prio or owner in BASE_PACKAGES):
                    owners.add(owner)
                break
    return owners


@suite.test
def tarball(s):
    path = run_cpack(s, "TGZ", s.tempdir("tgz"))
    with tarfile.open(path) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        for f in expected_files():
            s.check(f in names, "the tarball holds %s" % f)
        top = t.getnames()[0].split("/", 1)[0]
        member = t.extractfile("%s/usr/share/doc/gpu-quota-admission/gpu-quota-admission.txt" % top)
        shipped = member.read().decode()
    s.check_eq(shipped, ic.run([s.args.binary, "--help"]).stdout, "the shipped help text is the binary's --help")


@suite.test
def debian_package(s):
    if not shutil.which("dpkg-deb"):
        s.skip("the .deb", "dpkg-deb missing")
        return
    path = run_cpack(s, "DEB", s.tempdir("deb"))
    listing = ic.run(["dpkg-deb", "-c", path]).stdout
    for f in expected_files():
        s.check("./" + f in listing, "the .deb holds %s" % f)
    depends = {d.strip().split(" ")[0] for d in ic.run(["dpkg-deb", "-f", path, "Depends"]).stdout.split(",")}
    owners = library_packages(s, s.args.binary)
    if owners is None:
        s.skip("Depends", "readelf or dpkg missing")
        return
    s.check(owners, "the service links libraries outside the Essential set", owners)
    for owner in sorted(owners):
        s.check(owner in depends, "the .deb depends on %s" % owner, sorted(depends))
    extracted = s.tempdir("x")
    s.require(ic.run(["dpkg-deb", "-x", path, extracted]).returncode == 0, "the .deb unpacks")
    for b in BINARIES:
        out = ic.run(["file", os.path.join(extracted, "usr/bin", b)]).stdout if shutil.which("file") else ""
        if out:
            s.check("not stripped" not in out, "%s is stripped" % b, out)


@suite.test
def cmake_install(s):
    prefix = s.tempdir("prefix")
    r = subprocess.run([shutil.which("cmake"), "--install", build_dir(s), "--prefix", os.path.join(prefix, "usr")],
                       capture_output=True, text=True, timeout=300)
    s.require(r.returncode == 0, "cmake --install succeeds", r.stdout[-2000:] + r.stderr[-2000:])
    for f in expected_files():
        s.check(os.path.exists(os.path.join(prefix, f)), "cmake --install puts %s" % f)


if __name__ == "__main__":
    sys.exit(suite.main())
