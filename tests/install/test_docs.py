#!/usr/bin/env python3
"""The install documentation (docs/install.md, docs/migration.md,
scheduler-config/README.md) refers to things that exist: repository paths,
gpu-quota-admission flags and GQA_ variables (against --help), the scripts'
options (against their --help), object names in manifests/; and its YAML
snippets that patch the manifests name real objects and paths."""

import glob
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_docs")
DOCS = [("docs", "install.md"), ("docs", "migration.md"), ("scheduler-config", "README.md")]


def text(s, parts):
    with open(s.path(*parts), encoding="utf-8") as f:
        return f.read()


@suite.test
def paths_exist(s):
    pattern = re.compile(r"`((?:manifests|scheduler-config|scripts|docs|examples|tests)/[A-Za-z0-9_./*-]*)`")
    for parts in DOCS:
        t = text(s, parts)
        for p in sorted(set(pattern.findall(t))):
            p = p.rstrip("/")
            if "*" in p:
                s.check(bool(glob.glob(s.path(p))), "%s: %s matches files" % ("/".join(parts), p))
            else:
                s.check(os.path.exists(s.path(p)), "%s: %s exists" % ("/".join(parts), p))
        for link in re.findall(r"\]\(([^)#:]+)\)", t):
            target = os.path.normpath(os.path.join(os.path.dirname(s.path(*parts)), link))
            s.check(os.path.exists(target), "%s: link %s resolves" % ("/".join(parts), link))


REPO_PATH = re.compile(r"(?<![\w/.-])((?:manifests|scheduler-config|scripts|docs|examples|tests|plugins|krew|cmd)/"
                       r"[A-Za-z0-9_./*-]*[A-Za-z0-9_*/])")
# Arguments that name a file a command reads: kubectl -f, simulate --pod/--state-file, curl -d @FILE.
FILE_ARG = re.compile(r"(?:(?<=\s)-f|--pod|--state-file|--filename)[ =]([^\s`'\"|;)]+)|(?<=\s)(?:-d|--data-binary) @([^\s`'\"|;)]+)")
def shell_blocks(t):
    """The fenced code blocks of a Markdown text that are shell (or untyped)."""
    blocks, lang, lines = [], None, None
    for line in t.splitlines():
        if line.lstrip().startswith("```"):
            if lines is None:
                lang, lines = line.strip()[3:].strip(), []
            else:
                if lang in ("", "sh", "bash", "console", "shell"):
                    blocks.append("\n".join(lines) + "\n")
                lines = None
        elif lines is not None:
            lines.append(line)
    return blocks


# Names the reader supplies (their own pod, their own cluster dump).
PLACEHOLDERS = {"pod.yaml", "POD.yaml", "my-gpu-pod.yaml", "-", "FILE"}


@suite.test
def examples_named_in_docs_exist(s):
    """Every repository path the README and docs name exists, and every file
    their shell examples read is shipped (a reader who copies the command
    finds it), unless the same example writes it first or it is the
    reader's own (a placeholder, an absolute path)."""
    docs = [("README.md",), ("scheduler-config", "README.md")]
    docs += [("docs", f) for f in sorted(os.listdir(s.path("docs"))) if f.endswith(".md")]
    for parts in docs:
        where = "/".join(parts)
        t = text(s, parts)
        # HAMi's own documents ("HAMi `docs/config.md`") are not this repository's.
        named = {m.group(1) for m in REPO_PATH.finditer(t) if "HAMi" not in t[max(0, m.start() - 6):m.start()]}
        for p in sorted(named):
            p = p.rstrip("/")
            found = glob.glob(s.path(p)) if "*" in p else os.path.exists(s.path(p))
            s.check(bool(found), "%s: %s exists" % (where, p))
        for block in shell_blocks(t):
            written = set(re.findall(r">\s*([^\s>|;]+)", block))
            for m in FILE_ARG.finditer(block):
                f = m.group(1) or m.group(2)
                if f in PLACEHOLDERS or f in written or f.startswith(("/", "$", "<", "-")) or "DIR" in f:
                    continue
                s.check(os.path.exists(s.path(f)), "%s: the example reads %s, which is shipped" % (where, f))


@suite.test
def flags_and_variables_exist(s):
    flags = ic.help_flags(s.args.binary)
    s.require(len(flags) > 10, "--help lists the flags")
    for parts in DOCS:
        t = text(s, parts)
        for var in sorted(set(re.findall(r"\bGQA_([A-Z_]+)\b", t))):
            if var == "NAME" or var.endswith("_"):
                continue
            flag = var.lower().replace("_", "-")
            s.check(flag in flags, "%s: GQA_%s is the variable of a flag" % ("/".join(parts), var))
        # Flags in the service's command lines.
        joined = t.replace("\\\n", " ")
        for line in re.findall(r"(?:build/release/|/usr/local/bin/|^[ \t]*)gpu-quota-admission (?:simulate |validate-crl )?"
                               r"(--[^\n`|]*)", joined, re.M):
            for flag in re.findall(r"--([a-z][a-z0-9-]+)", line):
                s.check(flag in flags, "%s: --%s is a flag of gpu-quota-admission" % ("/".join(parts), flag))
    scripts = {"scripts/gen-certs.sh": ic.run(["bash", s.path("scripts", "gen-certs.sh"), "--help"]).stdout,
               "scheduler-config/render.sh": ic.run(["bash", s.path("scheduler-config", "render.sh"), "--help"]).stdout}
    for parts in DOCS:
        t = text(s, parts)
        for script, helptext in scripts.items():
            for m in re.finditer(re.escape(script) + r"([^\n`]*)", t):
                for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", m.group(1)):
                    s.check(flag in helptext, "%s: %s %s is an option" % ("/".join(parts), script, flag))


@suite.test
def patches_name_real_objects(s):
    objs = ic.manifest_objects(s.src)
    for parts in DOCS:
        t = text(s, parts)
        for block in re.findall(r"```ya?ml\n(.*?)```", t, re.S):
            for doc in ic.yaml.safe_load_all(block):
                if not isinstance(doc, dict):
                    continue
                for p in doc.get("patches") or []:
                    target = p.get("target") or {}
                    obj = ic.find(objs, target.get("kind"), target.get("name"))
                    s.check(obj is not None, "%s: patch target %s/%s exists" % ("/".join(parts), target.get("kind"),
                                                                             target.get("name")))
                    if obj is None or not isinstance(p.get("patch"), str):
                        continue
                    ops = ic.yaml.safe_load(p["patch"])
                    if not isinstance(ops, list):
                        continue
                    for op in ops:
                        path = [x for x in op["path"].split("/") if x]
                        cur = obj
                        for i, key in enumerate(path):
                            last = i == len(path) - 1
                            if last and op["op"] == "add":
                                break
                            if isinstance(cur, list):
                                cur = cur[int(key)] if key.isdigit() and int(key) < len(cur) else None
                            elif isinstance(cur, dict):
                                cur = cur.get(key)
                            if cur is None:
                                break
                        s.check(cur is not None, "%s: %s %s exists in %s" % ("/".join(parts), op["op"], op["path"],
                                                                           target.get("name")))


if __name__ == "__main__":
    sys.exit(suite.main())
