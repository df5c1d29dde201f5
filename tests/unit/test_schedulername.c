/*
 * test_schedulername.c - unit tests for admission/schedulername.c: which
 * pods the scheduler-name webhook sends to --set-scheduler-name's scheduler
 * (a managed GPU resource in requests or limits of any container or init
 * container; no scheduler or the default one named), which it leaves alone
 * (no GPU, another resource, another scheduler, wrong shapes), the patch
 * text, and the name check.
 *
 * JSON in this file is written with single quotes; q() swaps them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "admission/schedulername.h"
#include "tests/unit/support.h"

#define NAME "gpu-scheduler"

static enum schedname_verdict decide(const char *single_quoted)
{
    char *text = q(single_quoted);
    cJSON *pod = cJSON_Parse(text);
    free(text);
    assert_non_null(pod);
    enum schedname_verdict v = schedname_decide(pod, NAME);
    cJSON_Delete(pod);
    return v;
}

static void test_gpu_in_limits_or_requests(void **state)
{
    (void)state;
    assert_int_equal(decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"),
                     SCHEDNAME_SET);
    assert_int_equal(
        decide("{'spec':{'containers':[{'name':'a','resources':{'requests':{'tencent.com/vcuda-memory':'4'}}}]}}"),
        SCHEDNAME_SET);
    assert_int_equal(
        decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/mps-core':'25'}}}]}}"),
        SCHEDNAME_SET);
    assert_int_equal(
        decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/mps-memory':'1'}}}]}}"),
        SCHEDNAME_SET);
    /* The second container, beside CPU and memory. */
    assert_int_equal(decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'cpu':'1'}}},"
                            "{'name':'b','resources':{'limits':{'memory':'1Gi','tencent.com/vcuda-core':'50'}}}]}}"),
                     SCHEDNAME_SET);
    /* Zero is still a request the extender must judge. */
    assert_int_equal(decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'0'}}}]}}"),
                     SCHEDNAME_SET);
}

static void test_init_containers_count(void **state)
{
    (void)state;
    assert_int_equal(decide("{'spec':{'containers':[{'name':'a'}],"
                            "'initContainers':[{'name':'i','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"),
                     SCHEDNAME_SET);
}

static void test_default_scheduler_is_replaced(void **state)
{
    (void)state;
    assert_int_equal(decide("{'spec':{'schedulerName':'default-scheduler','containers':[{'name':'a',"
                            "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"),
                     SCHEDNAME_SET);
    assert_int_equal(decide("{'spec':{'schedulerName':'','containers':[{'name':'a',"
                            "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"),
                     SCHEDNAME_SET);
    assert_int_equal(decide("{'spec':{'schedulerName':null,'containers':[{'name':'a',"
                            "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"),
                     SCHEDNAME_SET);
}

static void test_left_alone(void **state)
{
    (void)state;
    /* No GPU, or a resource the extender does not manage. */
    assert_int_equal(decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'cpu':'2'}}}]}}"),
                     SCHEDNAME_NO_GPU);
    assert_int_equal(decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'example.com/fpga':'1'}}}]}}"),
                     SCHEDNAME_NO_GPU);
    assert_int_equal(decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'amd.com/gpu':'1'}}}]}}"),
                     SCHEDNAME_NO_GPU);
    /* A GPU named in the wrong place (annotations, env) is not a request. */
    assert_int_equal(decide("{'metadata':{'annotations':{'nvidia.com/gpu':'1'}},'spec':{'containers':[{'name':'a',"
                            "'env':[{'name':'nvidia.com/gpu','value':'1'}]}]}}"),
                     SCHEDNAME_NO_GPU);
    assert_int_equal(decide("{'spec':{'containers':[]}}"), SCHEDNAME_NO_GPU);
    /* Another scheduler chosen by the pod's author (HAMi's, volcano, ...). */
    assert_int_equal(decide("{'spec':{'schedulerName':'hami-scheduler','containers':[{'name':'a',"
                            "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"),
                     SCHEDNAME_OTHER_SCHEDULER);
    assert_int_equal(decide("{'spec':{'schedulerName':'gpu-scheduler','containers':[{'name':'a',"
                            "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"),
                     SCHEDNAME_ALREADY);
}

static void test_hostile_shapes(void **state)
{
    (void)state;
    assert_int_equal(decide("{}"), SCHEDNAME_NOT_A_POD);
    assert_int_equal(decide("{'spec':[]}"), SCHEDNAME_NOT_A_POD);
    assert_int_equal(decide("{'spec':{'schedulerName':7,'containers':[]}}"), SCHEDNAME_NOT_A_POD);
    assert_int_equal(decide("{'spec':{'containers':{'a':1}}}"), SCHEDNAME_NO_GPU);
    assert_int_equal(decide("{'spec':{'containers':[7,'x',null,{'resources':[1]},{'resources':{'limits':[1]}}]}}"),
                     SCHEDNAME_NO_GPU);
    assert_int_equal(decide("{'spec':{'initContainers':'x','containers':null}}"), SCHEDNAME_NO_GPU);
    cJSON *arr = cJSON_CreateArray();
    assert_int_equal(schedname_decide(arr, NAME), SCHEDNAME_NOT_A_POD);
    assert_int_equal(schedname_decide(NULL, NAME), SCHEDNAME_NOT_A_POD);
    cJSON_Delete(arr);
}

static void test_patch_text(void **state)
{
    (void)state;
    char *p = schedname_patch(NAME);
    assert_non_null(p);
    assert_string_equal(p, "[{\"op\":\"add\",\"path\":\"/spec/schedulerName\",\"value\":\"gpu-scheduler\"}]");
    free(p);
    /* Escaped, should a caller ever pass something odd. */
    p = schedname_patch("a\"b");
    assert_non_null(p);
    assert_non_null(strstr(p, "\"value\":\"a\\\"b\""));
    free(p);
}

static void test_valid_names(void **state)
{
    (void)state;
    assert_true(schedname_valid("gpu-scheduler"));
    assert_true(schedname_valid("a"));
    assert_true(schedname_valid("gpu.example.com"));
    assert_true(schedname_valid("0gpu"));
    assert_false(schedname_valid(""));
    assert_false(schedname_valid(NULL));
    assert_false(schedname_valid("GPU"));
    assert_false(schedname_valid("-gpu"));
    assert_false(schedname_valid("gpu-"));
    assert_false(schedname_valid("gpu..x"));
    assert_false(schedname_valid(".gpu"));
    assert_false(schedname_valid("gpu.-x"));
    assert_false(schedname_valid("gpu scheduler"));
    assert_false(schedname_valid("gpu\"x"));
    char longname[300];
    memset(longname, 'a', sizeof(longname));
    longname[253] = '\0';
    assert_true(schedname_valid(longname));
    longname[253] = 'a';
    longname[254] = '\0';
    assert_false(schedname_valid(longname));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_in_limits_or_requests),
        cmocka_unit_test(test_init_containers_count),
        cmocka_unit_test(test_default_scheduler_is_replaced),
        cmocka_unit_test(test_left_alone),
        cmocka_unit_test(test_hostile_shapes),
        cmocka_unit_test(test_patch_text),
        cmocka_unit_test(test_valid_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
