#!/usr/bin/env python3
"""Dockerfile, statically (no container engine is needed): a multi-stage build
from Debian bookworm; the build stage installs the -dev packages CMake's
pkg_check_modules needs and builds Release; the runtime stage is
debian:bookworm-slim with only shared libraries, which cover every library
the real binary links (readelf + dpkg), every apt package exists (apt-cache,
when available); no ADD of URLs; a numeric non-root USER that the manifests
also run as; an exec-form ENTRYPOINT of the binary; .dockerignore keeps the
sources in and the build trees out."""

import fnmatch
import json
import os
import re
import shutil
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_dockerfile")

# In every Debian image: the Essential packages depend on them.
BASE_PACKAGES = {"libc6", "libgcc-s1", "zlib1g"}
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
                "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def parse(path):
    """[(stage_index, INSTRUCTION, argument text)], joining continuation lines."""
    out, stage, buf = [], -1, ""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for line in lines:
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        word, _, rest = buf.partition(" ")
        word = word.upper()
        if word == "FROM":
            stage += 1
        out.append((stage, word, rest.strip()))
        buf = ""
    return out


def apt_packages(run_text):
    """Packages of every `apt-get install` in a RUN."""
    pkgs = []
    for m in re.finditer(r"apt-get\s+install\s+(.*?)(?:&&|;|$)", run_text):
        pkgs += [w for w in m.group(1).split() if not w.startswith("-")]
    return pkgs


@suite.test
def every_base_image_pinned_by_digest(s):
    """Every FROM names an image by tag and digest (name:tag@sha256:<64 hex>),
    or an earlier stage; scripts/pin-base-images.sh refreshes the digests."""
    ins = parse(s.path("Dockerfile"))
    stages = set()
    for _, word, arg in ins:
        if word != "FROM":
            continue
        words = arg.split()
        image = [w for w in words if not w.startswith("--")][0]
        if image in stages:
            continue
        s.check(re.match(r"^[a-z0-9./_-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$", image) is not None,
                "FROM %s carries a tag and a sha256 digest" % image)
        m = re.search(r"\sAS\s+(\S+)", arg, re.I)
        if m:
            stages.add(m.group(1))
    with open(s.path("scripts", "pin-base-images.sh"), encoding="utf-8") as f:
        script = f.read()
    s.check("imagetools inspect" in script and "skopeo inspect" in script,
            "the refresh script resolves tags with docker buildx or skopeo")


@suite.test
def structure(s):
    path = s.path("Dockerfile")
    s.require(os.path.exists(path), "Dockerfile exists")
    ins = parse(path)
    for _, word, _ in ins:
        s.check(word in INSTRUCTIONS, "%s is a Dockerfile instruction" % word)
    froms = [(st, arg) for st, w, arg in ins if w == "FROM"]
    s.require(len(froms) >= 2, "multi-stage (%d FROM)" % len(froms))
    first, last = froms[0][1], froms[-1][1]
    s.check(re.match(r"^debian:bookworm@sha256:[0-9a-f]{64}\s+AS\s+build$", first, re.I) is not None,
            "build stage: debian:bookworm AS build", first)
    s.check(re.match(r"^debian:bookworm-slim@sha256:[0-9a-f]{64}(\s|$)", last) is not None,
            "runtime stage: debian:bookworm-slim", last)
    for _, arg in froms:
        s.check(":latest" not in arg and ":" in arg.split()[0], "base image tag pinned (%s)" % arg)
    stage_names = {re.split(r"\s+AS\s+", arg, flags=re.I)[1].strip(): st for st, arg in froms if re.search(r"\sAS\s", arg, re.I)}
    final = froms[-1][0]
    for st, w, arg in ins:
        if w == "ADD":
            s.check(not re.search(r"(https?|ftp)://", arg), "no ADD of a URL (%s)" % arg)
            s.check(False, "COPY rather than ADD (%s)" % arg)
        m = re.search(r"--from=(\S+)", arg) if w == "COPY" else None
        if m:
            s.check(m.group(1) in stage_names or m.group(1).isdigit(), "COPY --from=%s names a stage" % m.group(1))
        if w == "RUN" and "apt-get install" in arg:
            s.check("--no-install-recommends" in arg, "stage %d: apt-get install --no-install-recommends" % st)
            s.check("rm -rf /var/lib/apt/lists" in arg, "stage %d: apt lists removed in the same layer" % st)
            s.check("apt-get update" in arg, "stage %d: apt-get update in the same layer" % st)
        if w == "RUN" and re.search(r"(^|[;&|]\s*)(curl|wget)\s", arg) and st == final:
            s.check(False, "the runtime stage downloads nothing (%s)" % arg)
    users = [arg for st, w, arg in ins if st == final and w == "USER"]
    s.require(users, "the runtime stage sets USER")
    user = users[-1]
    uid = user.split(":")[0]
    s.check(uid.isdigit() and int(uid) != 0, "USER is a numeric non-root uid (%s)" % user)
    last_user = max(i for i, (st, w, _) in enumerate(ins) if w == "USER")
    s.check(not [w for st, w, _ in ins[last_user + 1:] if w == "RUN"], "no RUN after USER (nothing runs as root later)")
    eps = [arg for st, w, arg in ins if st == final and w == "ENTRYPOINT"]
    s.require(eps, "ENTRYPOINT is set")
    try:
        ep = json.loads(eps[-1])
    except ValueError:
        ep = None
    s.check(isinstance(ep, list) and ep and ep[0].endswith("/gpu-quota-admission"),
            "exec-form ENTRYPOINT of gpu-quota-admission", eps[-1])
    # The build: Release, both binaries, into the directory ENTRYPOINT uses.
    build_runs = " ".join(arg for st, w, arg in ins if st == 0 and w == "RUN")
    s.check("-DCMAKE_BUILD_TYPE=Release" in build_runs, "Release build")
    s.check("-DGQA_BUILD_TESTS=OFF" in build_runs, "tests are not built into the image")
    for target in ("gpu-quota-admission", "gpu-topology"):
        s.check(re.search(r"--target[^&]*\b%s\b" % re.escape(target), build_runs) is not None, "builds %s" % target)
    copies = [arg for st, w, arg in ins if st == final and w == "COPY"]
    s.check(any("/usr/local/bin" in c for c in copies), "binaries copied to /usr/local/bin", copies)
    # The manifests run as this user and these binaries.
    objs = ic.manifest_objects(s.src)
    for kind, name, binary in (("Deployment", "gpu-quota-admission", ep[0] if ep else ""),
                               ("DaemonSet", "gpu-topology", "/usr/local/bin/gpu-topology")):
        o = ic.find(objs, kind, name, "kube-system")
        pod = o["spec"]["template"]["spec"]
        s.check_eq(str((pod.get("securityContext") or {}).get("runAsUser")), uid, "%s runs as the image's user" % name)
        c = pod["containers"][0]
        s.check_eq((c.get("command") or [binary])[0], binary, "%s runs %s" % (name, binary))


@suite.test
def packages(s):
    ins = parse(s.path("Dockerfile"))
    final = max(st for st, _, _ in ins)
    build_pkgs = [p for st, w, arg in ins if st == 0 and w == "RUN" for p in apt_packages(arg)]
    run_pkgs = [p for st, w, arg in ins if st == final and w == "RUN" for p in apt_packages(arg)]
    s.require(build_pkgs and run_pkgs, "both stages install packages")
    s.check(not [p for p in run_pkgs if p.endswith("-dev") or p in ("gcc", "cmake", "make", "build-essential")],
            "the runtime stage installs no -dev package or compiler", run_pkgs)
    # CMake's pkg_check_modules modules -> the -dev packages scripts/bootstrap.sh maps them to.
    with open(s.path("CMakeLists.txt")) as f:
        cmake = f.read()
    modules = re.findall(r"pkg_check_modules\(\s*\w+\s+REQUIRED\s+IMPORTED_TARGET\s+([^\s)]+)", cmake)
    with open(s.path("scripts", "bootstrap.sh")) as f:
        boot = f.read()
    block = re.search(r"declare -A modules=\((.*?)\)", boot, re.S)
    s.require(block is not None, "scripts/bootstrap.sh maps pkg-config modules to packages")
    mapping = dict(re.findall(r"\[([^\]]+)\]=([a-z0-9.+-]+)", block.group(1)))
    s.check(len(modules) >= 5, "found CMake's modules", modules)
    for mod in modules:
        pkg = mapping.get(mod)
        s.check(pkg in build_pkgs, "build stage installs %s for pkg-config module %s" % (pkg, mod), build_pkgs)
    for tool in ("cmake", "pkg-config", "make"):
        s.check(tool in build_pkgs, "build stage installs %s" % tool)
    apt_cache = shutil.which("apt-cache")
    if not apt_cache:
        s.skip("apt-cache show", "apt-cache is not installed")
        return
    wanted = sorted(set(build_pkgs + run_pkgs))
    r = ic.run([apt_cache, "show", "--no-all-versions"] + wanted)
    known = set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))
    for p in wanted:
        s.check(p in known, "apt-cache knows %s" % p, r.stderr[-300:])


@suite.test
def runtime_libraries_cover_the_binary(s):
    readelf, dpkg = shutil.which("readelf"), shutil.which("dpkg")
    if not readelf or not dpkg:
        s.skip("shared libraries", "readelf or dpkg missing")
        return
    ins = parse(s.path("Dockerfile"))
    final = max(st for st, _, _ in ins)
    run_pkgs = {p for st, w, arg in ins if st == final and w == "RUN" for p in apt_packages(arg)}
    r = ic.run([readelf, "-d", s.args.binary])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout)
    s.require(needed, "readelf lists the binary's libraries", r.stdout[-500:])
    ldd = ic.run(["ldd", s.args.binary]).stdout
    for lib in needed:
        m = re.search(r"^\s*%s => (\S+)" % re.escape(lib), ldd, re.M)
        if not m:
            s.check(lib.startswith("libc.so") or lib.startswith("libm.so") or lib.startswith("ld-linux"),
                    "%s resolves" % lib)
            continue
        owner = None
        for candidate in (m.group(1), os.path.realpath(m.group(1)), m.group(1).replace("/usr/lib/", "/lib/"),
                          os.path.realpath(m.group(1)).replace("/usr/lib/", "/lib/")):
            q = ic.run([dpkg, "-S", candidate])
            if q.returncode == 0:
                owner = q.stdout.split(":")[0].strip()
                break
        if owner is None:
            s.skip(lib, "no Debian package owns %s" % m.group(1))
            continue
        prio = ic.run(["dpkg-query", "-W", "-f=${Priority} ${Essential}", owner]).stdout
        in_base = "required" in prio or "yes" in prio or owner in BASE_PACKAGES
        s.check(owner in run_pkgs or in_base, "runtime stage provides %s (package %s)" % (lib, owner), sorted(run_pkgs))


@suite.test
def dockerignore(s):
    path = s.path(".dockerignore")
    s.require(os.path.exists(path), ".dockerignore exists")
    with open(path) as f:
        patterns = [line.strip() for line in f if line.strip() and not line.startswith("#")]

    def ignored(rel):
        top = rel.split("/")[0]
        hit = False
        for p in patterns:
            neg = p.startswith("!")
            q = p[1:] if neg else p
            if fnmatch.fnmatch(rel, q) or fnmatch.fnmatch(top, q) or (q.startswith("**/") and fnmatch.fnmatch(
                    os.path.basename(rel), q[3:])):
                hit = not neg
        return hit

    for p in (".git", "build", "build-e2e"):
        s.check(ignored(p), "%s is left out of the build context" % p)
    with open(s.path("CMakeLists.txt")) as f:
        cmake = f.read()
    sources = set(re.findall(r"\b([a-z_]+/[a-z_]+\.(?:c|h|in))\b", cmake))
    s.check(len(sources) >= 10, "found the sources CMake builds", sources)
    for src in sorted(sources) + ["CMakeLists.txt"]:
        s.check(not ignored(src), "%s is in the build context" % src)
    for d in ("extender", "admission", "topology"):
        if os.path.isdir(s.path(d)):
            s.check(not ignored(d + "/x.c"), "%s/ is in the build context" % d)


@suite.test
def hadolint(s):
    h = shutil.which("hadolint")
    if not h:
        s.skip("hadolint", "not installed")
        return
    r = ic.run([h, "--failure-threshold", "warning", s.path("Dockerfile")])
    s.check(r.returncode == 0, "hadolint", r.stdout + r.stderr)


if __name__ == "__main__":
    sys.exit(suite.main())
