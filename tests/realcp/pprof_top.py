#!/usr/bin/env python3
"""Top functions of a Go CPU profile (the gzipped profile.proto that
/debug/pprof/profile serves), without a Go toolchain: flat and cumulative
share of the samples per function, optionally summed by package prefix.

  python3 tests/realcp/pprof_top.py PROFILE.pb.gz [--top 40] [--focus encoding/json]

bench_schedule.py --profile DIR saves kube-scheduler's and kube-apiserver's
profiles of each round there. Shares are of the samples taken while the
profile ran; compare functions within one profile, not across machines.
"""

import argparse
import gzip
import sys


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def fields(buf):
    """(field number, wire type, value) of one protobuf message; value is an
    int (varint) or bytes (length-delimited)."""
    i, n = 0, len(buf)
    while i < n:
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 2:
            ln, i = varint(buf, i)
            v = buf[i:i + ln]
            i += ln
        elif wt == 1:
            v = int.from_bytes(buf[i:i + 8], "little")
            i += 8
        elif wt == 5:
            v = int.from_bytes(buf[i:i + 4], "little")
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def packed(wt, v):
    """A repeated integer field, packed (bytes) or one value."""
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def load(path):
    """(samples [(location ids, cpu value)], locations {id: [function ids]}, functions {id: name})."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    strings, samples, locations, functions = [], [], {}, {}
    for num, wt, v in fields(data):
        if num == 2:
            locs, vals = [], []
            for n2, w2, v2 in fields(v):
                if n2 == 1:
                    locs += packed(w2, v2)
                elif n2 == 2:
                    vals += packed(w2, v2)
            samples.append((locs, vals[-1] if vals else 0))
        elif num == 4:
            lid, funcs = 0, []
            for n2, w2, v2 in fields(v):
                if n2 == 1:
                    lid = v2
                elif n2 == 4:
                    for n3, _w3, v3 in fields(v2):
                        if n3 == 1:
                            funcs.append(v3)
            locations[lid] = funcs
        elif num == 5:
            fid, name = 0, 0
            for n2, _w2, v2 in fields(v):
                if n2 == 1:
                    fid = v2
                elif n2 == 2:
                    name = v2
            functions[fid] = name
        elif num == 6:
            strings.append(v.decode("utf-8", "replace"))
    return samples, locations, {k: strings[v] for k, v in functions.items()}


def top(path, n=40, focus=None):
    samples, locations, names = load(path)
    flat, cum, total = {}, {}, 0
    for locs, value in samples:
        total += value
        stack = [names.get(f, "?") for lid in locs for f in locations.get(lid, [])]
        if focus and not any(focus in s for s in stack):
            continue
        if stack:
            flat[stack[0]] = flat.get(stack[0], 0) + value
        for s in set(stack):
            cum[s] = cum.get(s, 0) + value
    lines = ["%s: %.2f s of CPU samples" % (path, total / 1e9)]
    lines.append("  cum%%   flat%%  function")
    for name, v in sorted(cum.items(), key=lambda kv: -kv[1])[:n]:
        lines.append("%6.1f %6.1f  %s" % (100.0 * v / total, 100.0 * flat.get(name, 0) / total, name))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="+")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--focus", help="only samples with a function containing this")
    a = ap.parse_args()
    for p in a.profiles:
        print(top(p, a.top, a.focus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
