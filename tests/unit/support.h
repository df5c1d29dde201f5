/*
 * support.h - what the cmocka unit tests share.
 *
 * Fixtures are JSON written with single quotes so they stay readable in C
 * strings (none needs a literal '); q() turns them into JSON. The builders
 * parse a fixture and fail the running test, with the fixture and the
 * error, when it does not parse: a broken fixture never passes as a
 * behaviour. Include after <cmocka.h>.
 */
#ifndef GQA_TEST_SUPPORT_H
#define GQA_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "cluster/cache.h"
#include "cluster/nodespec.h"
#include "cluster/podspec.h"

#define SEC 1000000000LL

/* A malloc'd copy of text with every ' turned into ". */
char *q(const char *text);
/* The fixture parsed (single quotes allowed). */
cJSON *json_of(const char *fixture);
/* snprintf that fails the test when the text does not fit. */
void fmt(char *buf, size_t size, const char *f, ...) __attribute__((format(printf, 3, 4)));
/* The text of a file of the repository (relpath under GQA_SOURCE_DIR, "."
 * when unset), malloc'd; fails the running test when it cannot be read. */
char *source_text(const char *relpath);

/* cmocka setup/teardown: a cluster_cache with a 60 s assume TTL as *state. */
int cache_setup(void **state);
int cache_teardown(void **state);

/* A Pod fixture parsed into a pod_info (pod_info_from_json must succeed
 * and leave *err NULL). */
struct pod_info *pod_of(const char *fixture);
/* Parse a Node fixture and apply it to the cache. */
void add_node(struct cluster_cache *c, const char *fixture);
/* Parse a Pod fixture and apply it to the cache at time now. */
void add_pod(struct cluster_cache *c, const char *fixture, int64_t now);
/* A node with gpus GPUs of GPU-Manager (vcuda) or MPS capacity: 100 cores
 * and mem_per_gpu memory units each, no topology annotation. */
void add_vcuda_node(struct cluster_cache *c, const char *name, int gpus, int mem_per_gpu);
void add_mps_node(struct cluster_cache *c, const char *name, int gpus, int mem_per_gpu);

/* DGX-1 (8x V100, hybrid cube-mesh), as nvidia-smi topo -m prints it: the
 * gpu-admission.io/topology value inside a q() fixture. */
#define SUPPORT_DGX1_TOPOLOGY \
    "{\\'version\\':1,\\'gpus\\':[" \
    "{\\'index\\':0,\\'numa\\':0},{\\'index\\':1,\\'numa\\':0},{\\'index\\':2,\\'numa\\':0},{\\'index\\':3,\\'numa\\':0}," \
    "{\\'index\\':4,\\'numa\\':1},{\\'index\\':5,\\'numa\\':1},{\\'index\\':6,\\'numa\\':1},{\\'index\\':7,\\'numa\\':1}]," \
    SUPPORT_DGX1_LINKS

/* The same links, with GPUs 6 and 7 on no known NUMA node. */
#define SUPPORT_MIXED_NUMA_TOPOLOGY \
    "{\\'version\\':1,\\'gpus\\':[" \
    "{\\'index\\':0,\\'numa\\':0},{\\'index\\':1,\\'numa\\':0},{\\'index\\':2,\\'numa\\':0},{\\'index\\':3,\\'numa\\':0}," \
    "{\\'index\\':4,\\'numa\\':1},{\\'index\\':5,\\'numa\\':1},{\\'index\\':6},{\\'index\\':7}]," \
    SUPPORT_DGX1_LINKS

#define SUPPORT_DGX1_LINKS \
    "\\'links\\':[" \
    "[\\'X\\',\\'NV1\\',\\'NV1\\',\\'NV2\\',\\'NV2\\',\\'SYS\\',\\'SYS\\',\\'SYS\\']," \
    "[\\'NV1\\',\\'X\\',\\'NV2\\',\\'NV1\\',\\'SYS\\',\\'NV2\\',\\'SYS\\',\\'SYS\\']," \
    "[\\'NV1\\',\\'NV2\\',\\'X\\',\\'NV2\\',\\'SYS\\',\\'SYS\\',\\'NV1\\',\\'SYS\\']," \
    "[\\'NV2\\',\\'NV1\\',\\'NV2\\',\\'X\\',\\'SYS\\',\\'SYS\\',\\'SYS\\',\\'NV1\\']," \
    "[\\'NV2\\',\\'SYS\\',\\'SYS\\',\\'SYS\\',\\'X\\',\\'NV1\\',\\'NV1\\',\\'NV2\\']," \
    "[\\'SYS\\',\\'NV2\\',\\'SYS\\',\\'SYS\\',\\'NV1\\',\\'X\\',\\'NV2\\',\\'NV1\\']," \
    "[\\'SYS\\',\\'SYS\\',\\'NV1\\',\\'SYS\\',\\'NV1\\',\\'NV2\\',\\'X\\',\\'NV2\\']," \
    "[\\'SYS\\',\\'SYS\\',\\'SYS\\',\\'NV1\\',\\'NV2\\',\\'NV1\\',\\'NV2\\',\\'X\\']]}"

#endif
