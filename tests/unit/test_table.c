/*
 * test_table.c - lib/table.c (kubectl-style columns, widths that ignore
 * colour and count UTF-8 characters) and json_to_yaml (lib/yamljson.c),
 * which must read back as the same data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/strbuf.h"
#include "lib/table.h"
#include "lib/yamljson.h"

static char *print_to_string(const struct table *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    table_print(t, f);
    fclose(f);
    return buf;
}

static void test_columns(void **state)
{
    (void)state;
    static const char *const h[] = {"NAME", "GPUS", "BAR"};
    struct table *t = table_new(3, h);
    assert_non_null(t);
    static const char *const r1[] = {"gpu-a100-0", "3/8", "\033[32m###\033[0m-------"};
    static const char *const r2[] = {"n", "10/16", "ü"};
    assert_int_equal(table_add_row(t, r1), 0);
    assert_int_equal(table_add_row(t, r2), 0);
    char *out = print_to_string(t);
    assert_string_equal(out, "NAME         GPUS    BAR\n"
                             "gpu-a100-0   3/8     \033[32m###\033[0m-------\n"
                             "n            10/16   ü\n");
    free(out);
    table_free(t);
    assert_int_equal(table_text_width("\033[31mab\033[0mc"), 3);
    assert_int_equal(table_text_width("ünï"), 3);
}

static void round_trip(const char *json)
{
    cJSON *in = cJSON_Parse(json);
    assert_non_null(in);
    struct strbuf sb;
    strbuf_init(&sb);
    json_to_yaml(in, &sb);
    char *err = NULL;
    cJSON *back = yaml_to_json(sb.data, sb.len, &err);
    if (!back || !cJSON_Compare(in, back, 1))
        fail_msg("%s\nprinted as:\n%s\n%s", json, sb.data, err ? err : "differs");
    cJSON_Delete(back);
    cJSON_Delete(in);
    strbuf_free(&sb);
}

static void test_yaml_reads_back(void **state)
{
    (void)state;
    round_trip("[{\"node\":\"gpu-a100-0\",\"model\":\"\",\"gpus\":[{\"index\":0,\"pods\":[\"team-a/x\"]},{\"index\":1,"
               "\"pods\":[]}],\"unattributed\":{}}]");
    round_trip("{\"yes\":\"no\",\"n\":\"true\",\"num\":\"123\",\"float\":\"1.5\",\"colon\":\"a: b\",\"hash\":\"a #b\","
               "\"lead\":\" x\",\"quote\":\"say \\\"hi\\\"\",\"nl\":\"a\\nb\",\"null\":null,\"t\":true,\"d\":-2.25,"
               "\"e\":{},\"l\":[[1,2],[]],\"k:ey\":1,\"- dash\":\"- x\",\"star\":\"*x\",\"tilde\":\"~\"}");
    round_trip("\"just a string\"");
    round_trip("[]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_columns),
        cmocka_unit_test(test_yaml_reads_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
