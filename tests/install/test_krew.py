#!/usr/bin/env python3
"""plugins/gpu.yaml is a krew Plugin manifest krew accepts: apiVersion
krew.googlecontainertools.github.com/v1alpha2, kind Plugin, metadata.name the
file's name, spec.version the project's version with krew's "v", a short
description within krew's limit, and per platform an os/arch selector, an
https uri, a 64-hex sha256, bin kubectl-gpu and files that take it out of the
tarball cpack makes (its name and its usr/bin layout). The uri and sha256
are placeholders filled at release, and the manifest says so."""

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_krew")
ARCH = {"amd64": "x86_64", "arm64": "aarch64"}  # krew's arch -> CMAKE_SYSTEM_PROCESSOR in cpack's file name


def project_version(s):
    with open(s.path("CMakeLists.txt")) as f:
        return re.search(r"project\(\s*gpu-quota-admission\s+VERSION\s+([0-9.]+)", f.read()).group(1)


@suite.test
def manifest_is_a_krew_plugin(s):
    path = s.path("plugins", "gpu.yaml")
    with open(path) as f:
        text = f.read()
    m = ic.yaml.safe_load(text)
    s.check_eq((m.get("apiVersion"), m.get("kind")), ("krew.googlecontainertools.github.com/v1alpha2", "Plugin"),
               "apiVersion and kind")
    s.check_eq(m["metadata"]["name"], os.path.splitext(os.path.basename(path))[0], "metadata.name is the file's name")
    s.check_eq(set(m["metadata"]), {"name"}, "metadata holds only the name")
    spec = m["spec"]
    version = project_version(s)
    s.check_eq(spec.get("version"), "v" + version, "spec.version is the project's, with krew's v prefix")
    s.check(0 < len(spec.get("shortDescription", "")) <= 50 and "\n" not in spec["shortDescription"],
            "a one-line shortDescription", spec.get("shortDescription"))
    s.check(spec.get("description") and spec.get("homepage", "").startswith("https://"), "description and homepage")
    s.check("filled at release" in text.lower() or "filled at release" in text, "the placeholders are documented")
    platforms = spec.get("platforms") or []
    s.require(platforms, "platforms are listed")
    seen = set()
    for p in platforms:
        labels = p.get("selector", {}).get("matchLabels", {})
        os_, arch = labels.get("os"), labels.get("arch")
        s.check(os_ == "linux" and arch in ARCH, "selector names linux and a known arch", labels)
        seen.add(arch)
        tarball = "gpu-quota-admission-%s-%s" % (version, ARCH.get(arch, "?"))
        s.check(p.get("uri", "").startswith("https://") and p["uri"].endswith("/" + tarball + ".tar.gz"),
                "%s: the uri names cpack's tarball %s.tar.gz" % (arch, tarball), p.get("uri"))
        s.check(re.fullmatch(r"[0-9a-f]{64}", str(p.get("sha256", ""))), "%s: sha256 is 64 hex digits" % arch)
        s.check_eq(p.get("bin"), "kubectl-gpu", "%s: bin" % arch)
        s.check_eq(p.get("files"), [{"from": tarball + "/usr/bin/kubectl-gpu", "to": "."}],
                   "%s: files take kubectl-gpu out of the tarball's usr/bin" % arch)
    s.check_eq(sorted(seen), ["amd64", "arm64"], "both Linux architectures")
    # The layout the files rule relies on: cpack's archive name and install paths.
    with open(s.path("CMakeLists.txt")) as f:
        cmake = f.read()
    s.check("set(CPACK_PACKAGE_FILE_NAME ${CPACK_PACKAGE_NAME}-${PROJECT_VERSION}-${CMAKE_SYSTEM_PROCESSOR})" in cmake,
            "cpack names the tarball NAME-VERSION-PROCESSOR")
    s.check("set(CPACK_PACKAGING_INSTALL_PREFIX /usr)" in cmake, "cpack installs under usr/")


if __name__ == "__main__":
    suite.main()
