/* test_families.c - unit tests for the device-family registry
 * (cluster/families.c) and the contract every registered family keeps
 * (cluster/family.h): complete tables, one key per resource name, one
 * family per container, distinct bits, and a node's offer read through the
 * table. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cluster/family.h"
#include "cluster/nodespec.h"
#include "cluster/podinfo.h"
#include "family_names.h"

static void test_every_family_is_complete(void **state)
{
    (void)state;
    assert_true(gpu_family_count() >= 5);
    uint32_t bits = 0;
    for (size_t i = 0; i < gpu_family_count(); i++) {
        const struct gpu_family *f = gpu_family_at(i);
        assert_non_null(f->name);
        assert_non_null(f->core_resource);
        assert_true(f->resources[0].name || f->resource_prefix);
        assert_non_null(f->claims);
        assert_non_null(f->classify);
        assert_non_null(f->offered);
        assert_true(f->memory_pool >= -1 && f->memory_pool < GPU_MEMORY_POOLS);
        if (f->memory_pool >= 0)
            assert_true(f->memory_resource && f->memory_unit_bytes > 0);
        if (f->flags & GPU_FAMILY_SHARES)
            assert_true(f->memory_pool >= 0);
        assert_ptr_equal(gpu_family_named(f->name), f);
        assert_int_equal(gpu_family_index(f), i);
        assert_false(bits & gpu_family_bit(f));
        bits |= gpu_family_bit(f);
    }
    assert_null(gpu_family_at(gpu_family_count()));
    assert_null(gpu_family_named("no-such-family"));
}

/* The keys are every family's container resources, each once, in the
 * order the families list them (the order errors are reported in); MIG's
 * are read by prefix. */
static void test_keys_follow_the_table(void **state)
{
    (void)state;
    static const char *const want[] = {"tencent.com/vcuda-core", "tencent.com/vcuda-memory", "nvidia.com/mps-core",
                                       "nvidia.com/mps-memory",  "nvidia.com/gpu",           "nvidia.com/gpumem",
                                       "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"};
    /* Families registered after these append their keys. */
    assert_true(gpu_amount_key_count() >= (int)(sizeof(want) / sizeof(want[0])));
    for (int k = 0; k < (int)(sizeof(want) / sizeof(want[0])); k++) {
        assert_string_equal(gpu_amount_key_name(k), want[k]);
        assert_int_equal(gpu_amount_key_of(want[k], strlen(want[k])), k);
    }
    assert_int_equal(gpu_amount_key_of("nvidia.com/gp", 13), -1);
    assert_null(gpu_amount_key_name(-1));
    assert_true(gpu_family_names_resource("nvidia.com/priority", 19)); /* interest only */
    assert_true(gpu_family_names_resource("nvidia.com/mig-1g.5gb", 21)); /* by prefix */
    assert_false(gpu_family_names_resource("nvidia.com/mig-", 15));     /* the prefix alone names nothing */
    assert_false(gpu_family_names_resource("cpu", 3));
}

static void set(struct gpu_amounts *a, const char *name, int64_t v)
{
    gpu_amounts_set(a, gpu_amount_key_of(name, strlen(name)), v);
}

/* Given at 0 only where the family says so (HAMi's gpucores: 0 is a request). */
static void test_given_follows_the_resource(void **state)
{
    (void)state;
    struct gpu_amounts a = {0};
    bool given = true;
    set(&a, RES_VCUDA_CORE, 0);
    set(&a, RES_HAMI_CORES, 0);
    assert_int_equal(gpu_amount(&a, RES_VCUDA_CORE, &given), 0);
    assert_false(given);
    gpu_amount(&a, RES_HAMI_CORES, &given);
    assert_true(given);
    gpu_amount(&a, "not-a-key", &given);
    assert_false(given);
    gpu_amounts_set(&a, GPU_AMOUNT_KEYS_MAX + 3, 1); /* out of range: ignored */
}

static const struct gpu_family *classified(struct gpu_amounts *a, struct strbuf *err)
{
    struct container_request c = {.name = "main"};
    if (gpu_family_classify(a, &c, err) != 0)
        return NULL;
    assert_int_equal(c.family_bit, c.family ? gpu_family_bit(c.family) : 0);
    return c.family;
}

static void test_one_family_per_container(void **state)
{
    (void)state;
    struct strbuf err;
    strbuf_init(&err);
    struct gpu_amounts a = {0};
    assert_null(classified(&a, &err)); /* nothing asked: no family, no error */
    assert_null(err.data);
    set(&a, RES_NVIDIA_GPU, 2);
    assert_ptr_equal(classified(&a, &err), GPU_FAMILY_PGPU);
    set(&a, RES_HAMI_MEMORY, 1024);
    assert_ptr_equal(classified(&a, &err), GPU_FAMILY_HAMI); /* one kind, the more specific family */
    set(&a, RES_MPS_CORE, 10);
    assert_null(classified(&a, &err));
    assert_string_equal(err.data, "container \"main\" mixes GPU resources of different kinds (nvidia.com/mps-core and "
                                  "nvidia.com/gpu); a container uses one kind");
    strbuf_free(&err);
}

static void test_node_offer_through_the_table(void **state)
{
    (void)state;
    cJSON *node = cJSON_Parse("{\"metadata\":{\"name\":\"n\"},\"status\":{\"allocatable\":{"
                              "\"nvidia.com/mps-core\":\"200\",\"nvidia.com/mps-memory\":\"30\"}}}");
    char *err = NULL;
    struct node_spec *s = node_spec_from_json(node, &err);
    assert_non_null(s);
    assert_int_equal(s->gpu_count, 2);
    assert_int_equal(node_spec_offer(s, GPU_FAMILY_MPS), 200);
    assert_int_equal(node_spec_offer(s, GPU_FAMILY_VCUDA), 0);
    assert_int_equal(s->gpus[1].memory[POOL_MPS], 15);
    assert_int_equal(s->offers, gpu_family_bit(GPU_FAMILY_MPS));
    assert_ptr_equal(gpu_family_primary(s), GPU_FAMILY_MPS);
    struct strbuf names;
    strbuf_init(&names);
    gpu_family_list_core_resources(&names, true);
    assert_string_equal(names.data, "tencent.com/vcuda-core, nvidia.com/mps-core or nvidia.com/gpu");
    assert_string_equal(gpu_memory_pool_name(POOL_MPS), "mps-memory");
    strbuf_free(&names);
    node_spec_free(s);
    cJSON_Delete(node);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family_is_complete),
        cmocka_unit_test(test_keys_follow_the_table),
        cmocka_unit_test(test_given_follows_the_resource),
        cmocka_unit_test(test_one_family_per_container),
        cmocka_unit_test(test_node_offer_through_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
