# syntax=docker/dockerfile:1
# gpu-quota-admission and gpu-topology, built on Debian bookworm.
#
#   docker build -t registry.example.com/gpu-quota-admission:0.1.0 .
#   docker build --build-arg GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t ... .
#
# The manifests use this one image for both binaries: the Deployment runs the
# entrypoint (gpu-quota-admission), the gpu-topology DaemonSet sets its command.
#
# Base images are pinned by digest (the tag stays for readers and for the
# refresh script): a rebuilt tag cannot change what this file builds. Both are
# the multi-platform index digests Docker Hub served for the tags while Debian
# 12.12 was current (bookworm-slim: the same index as debian:12.12-slim and
# debian:12-slim). They were not read from a registry here (none is reachable
# from the development machines) but taken from public Dockerfiles and notes
# that pin the same tags, several independent ones agreeing, one of them
# recording a `docker buildx imagetools inspect` of debian:12.12-slim.
# Refresh (security updates of the base): scripts/pin-base-images.sh, online;
# see docs/install.md, "Base images".

# ---- build ----------------------------------------------------------------------
FROM debian:bookworm@sha256:6337ad82d5c764a8b6a16cde86b157fdce353e36d8ca06fc1b16d4f34d29960e AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev make cmake pkg-config \
      libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev libssl-dev libyaml-dev libgnutls28-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# /version reports this commit (.git is not in the build context).
ARG GIT_COMMIT=unknown
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DGQA_BUILD_TESTS=OFF -DGQA_GIT_COMMIT="${GIT_COMMIT}" \
 && cmake --build /build -j"$(nproc)" --target gpu-quota-admission gpu-topology \
 && mkdir -p /out \
 && install -m 0755 -s /build/gpu-quota-admission /build/gpu-topology /out/

# ---- runtime ----------------------------------------------------------------------
FROM debian:bookworm-slim@sha256:d5d3f9c23164ea16f31852f95bd5959aad1c5e854332fe00f7b3a20fcc9f635c
# Only the shared libraries the binaries link (readelf -d: libmicrohttpd,
# libcjson, libcurl, libyaml, libgnutls; libssl through OpenSSL and libcurl).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12 libcjson1 libcurl4 libssl3 libyaml-0-2 libgnutls30 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
# Fail the build if a library is missing.
RUN for b in /usr/local/bin/gpu-quota-admission /usr/local/bin/gpu-topology; do \
      if ldd "$b" | grep -q 'not found'; then ldd "$b"; exit 1; fi; \
    done
USER 65532:65532
EXPOSE 3456 3443
ENTRYPOINT ["/usr/local/bin/gpu-quota-admission"]
