/* test_wire.c - unit tests for extender/serve/wire.c: decoding ExtenderArgs in both
 * forms, every malformed body, and the encoded answers read back as JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/decide/placement.h"
#include "extender/serve/wire.h"
#include "lib/ascii.h"
#include "lib/strbuf.h"
#include "tests/unit/support.h"

static const char POD[] = "{'metadata':{'name':'p','namespace':'ns'},'spec':{'containers':[{'name':'c',"
                          "'resources':{'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'10'}}}]}}";

/* Parse a fixture that must be accepted; *body is kept for the spans. */
static void parse_ok(const char *fixture, char **body, struct extender_args *a)
{
    *body = q(fixture);
    char *err = (char *)"untouched";
    if (wire_parse_args(*body, strlen(*body), a, &err) != 0)
        fail_msg("rejected: %s\nbody: %s", err ? err : "(null)", *body);
    assert_null(err);
}

/* The error for body[0..len) (fixture quotes converted). */
static char *parse_error_n(const char *fixture, size_t len)
{
    char *body = q(fixture);
    struct extender_args a;
    char *err = NULL;
    if (wire_parse_args(body, len, &a, &err) == 0)
        fail_msg("accepted: %.*s", (int)len, body);
    assert_non_null(err);
    assert_null(a.pod);
    assert_null(a.names);
    assert_int_equal(a.count, 0);
    free(body);
    return err;
}

static void expect_error(const char *fixture, const char *message)
{
    char *err = parse_error_n(fixture, strlen(fixture));
    if (strcmp(err, message) != 0)
        fail_msg("body %s\n  error: %s\n  expected: %s", fixture, err, message);
    free(err);
}

static void expect_error_containing(const char *fixture, const char *part)
{
    char *err = parse_error_n(fixture, strlen(fixture));
    if (!strstr(err, part))
        fail_msg("body %s\n  error: %s\n  expected to contain: %s", fixture, err, part);
    free(err);
}

static void args_with(char *buf, size_t size, const char *rest)
{
    int n = snprintf(buf, size, "{'Pod':%s,%s}", POD, rest);
    assert_true(n > 0 && (size_t)n < size);
}

/* ---- decoding ------------------------------------------------------------- */

static void test_node_names_form(void **state)
{
    (void)state;
    char fixture[2048], *body;
    struct extender_args a;
    args_with(fixture, sizeof(fixture), "'Nodes':null,'NodeNames':['gpu-0','cpu-1','x']");
    parse_ok(fixture, &body, &a);
    assert_int_equal(a.form, ARGS_NODE_NAMES);
    assert_int_equal(a.count, 3);
    assert_string_equal(a.names[0], "gpu-0");
    assert_string_equal(a.names[1], "cpu-1");
    assert_string_equal(a.names[2], "x");
    assert_non_null(a.pod);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(a.pod, "metadata");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(meta, "name")->valuestring, "p");
    /* The Pod is usable as is. */
    struct pod_info *p = pod_info_from_json(a.pod, NULL);
    assert_non_null(p);
    assert_int_equal(p->containers[0].cores, 50);
    pod_info_free(p);
    wire_args_free(&a);
    assert_null(a.pod);
    free(body);

    /* Empty list, key order reversed, other keys ignored. */
    parse_ok("{'NodeNames':[],'Extra':{'a':[1,2,{}]},'Pod':{'metadata':{'name':'p'}}}", &body, &a);
    assert_int_equal(a.form, ARGS_NODE_NAMES);
    assert_int_equal(a.count, 0);
    assert_non_null(a.names);
    wire_args_free(&a);
    free(body);
}

/* Parse body (already JSON) with the memo; it must be accepted. */
static void parse_memo_ok(struct name_list_memo *m, const char *body, struct extender_args *a)
{
    char *err = NULL;
    if (wire_parse_args_memo(body, strlen(body), m, a, &err) != 0)
        fail_msg("rejected: %s\nbody: %s", err ? err : "(null)", body);
}

static void expect_names(const struct extender_args *a, const char *const *names, size_t n)
{
    assert_int_equal(a->form, ARGS_NODE_NAMES);
    assert_int_equal(a->count, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(a->names[i], names[i]);
}

/* A NodeNames array byte for byte the last one is that list again: not
 * scanned again, shared, and still its own once the first request is gone;
 * any other array (one byte apart, or longer) is scanned. */
static void test_repeated_node_list_parsed_once(void **state)
{
    (void)state;
    struct name_list_memo m;
    assert_int_equal(name_list_memo_init(&m), 0);
    static const char *const names[] = {"n1", "n2", "\xc3\xa9"};
    char *b1 = q("{'Pod':{'metadata':{'name':'p'}},'NodeNames':['n1','n\\u0032','\xc3\xa9']}");
    char *b2 = q("{ 'NodeNames' : ['n1','n\\u0032','\xc3\xa9'] ,'Pod':{'metadata':{'name':'other'}}}");
    struct extender_args a1, a2, a3;
    parse_memo_ok(&m, b1, &a1);
    expect_names(&a1, names, 3);
    assert_int_equal(atomic_load(&m.misses), 1);
    parse_memo_ok(&m, b2, &a2);
    assert_int_equal(atomic_load(&m.hits), 1);
    assert_ptr_equal(a2.list, a1.list);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(a2.pod, "metadata"), "name")->valuestring[0], 'o');
    /* The tokens are the list's own copy, the request is not needed. */
    assert_non_null(a2.raw_names[0].ptr);
    assert_memory_equal(a2.raw_names[0].ptr, "\"n1\"", 4);
    assert_null(a2.raw_names[1].ptr); /* escaped: decoded and escaped again when answered */
    assert_null(a2.raw_names[2].ptr); /* not ASCII */
    wire_args_free(&a1);
    free(b1);
    expect_names(&a2, names, 3);
    uint64_t serial = a2.list->serial;

    /* One byte apart, then longer: scanned, a new list with a new serial. */
    char *b3 = q("{'Pod':{},'NodeNames':['n1','n3','\xc3\xa9']}");
    parse_memo_ok(&m, b3, &a3);
    assert_int_equal(atomic_load(&m.hits), 1);
    assert_string_equal(a3.names[1], "n3");
    assert_true(a3.list->serial != serial);
    wire_args_free(&a3);
    char *b4 = q("{'Pod':{},'NodeNames':['n1','n3','\xc3\xa9','n4']}");
    parse_memo_ok(&m, b4, &a3);
    assert_int_equal(atomic_load(&m.hits), 1);
    assert_int_equal(a3.count, 4);
    wire_args_free(&a3);
    wire_args_free(&a2);
    free(b2);
    free(b3);

    /* The remembered bytes followed by what is not JSON: still refused. */
    char *err = NULL;
    char *b5 = q("{'Pod':{},'NodeNames':['n1','n3','\xc3\xa9','n4']]");
    assert_int_equal(wire_parse_args_memo(b5, strlen(b5), &m, &a3, &err), -1);
    assert_int_equal(atomic_load(&m.hits), 2);
    assert_non_null(strstr(err, "malformed JSON"));
    free(err);
    free(b4);
    free(b5);
    name_list_memo_destroy(&m);
}

/* A key given twice counts the last time, as Go's encoding/json decodes
 * it on kube-scheduler's side. */
static void test_repeated_keys_last_counts(void **state)
{
    (void)state;
    char *body;
    struct extender_args a;
    parse_ok("{'Pod':{},'NodeNames':['a'],'NodeNames':['b','c']}", &body, &a);
    expect_names(&a, (const char *const[]){"b", "c"}, 2);
    wire_args_free(&a);
    free(body);
    expect_error("{'Pod':{},'NodeNames':['a'],'NodeNames':null}", "ExtenderArgs has neither Nodes nor NodeNames");
    parse_ok("{'Pod':{},'NodeNames':['a'],'NodeNames':null,'Nodes':{'items':[{'metadata':{'name':'n'}}]}}", &body, &a);
    assert_int_equal(a.form, ARGS_NODES);
    assert_int_equal(a.count, 1);
    wire_args_free(&a);
    free(body);
}

static void test_nodes_form(void **state)
{
    (void)state;
    char fixture[4096], *body;
    struct extender_args a;
    args_with(fixture, sizeof(fixture),
              "'NodeNames':null,'Nodes':{'kind':'NodeList','metadata':{'resourceVersion':'9'},'items':["
              "{'kind':'Node','metadata':{'name':'n1','labels':{'a':'b'},'uid':'u1'},'status':{'capacity':{}}},"
              "{'status':{'x':[1,2]},'metadata':  { 'uid' : 'u2' , 'name' : 'n2' } },"
              "{'metadata':{'name':'n3','name2':'zz'},'spec':{}}]}");
    parse_ok(fixture, &body, &a);
    assert_int_equal(a.form, ARGS_NODES);
    assert_int_equal(a.count, 3);
    assert_string_equal(a.names[0], "n1");
    assert_string_equal(a.names[1], "n2");
    assert_string_equal(a.names[2], "n3");
    wire_args_free(&a);
    free(body);

    /* A NodeList without items (or null items) has no nodes. */
    args_with(fixture, sizeof(fixture), "'Nodes':{'items':null}");
    parse_ok(fixture, &body, &a);
    assert_int_equal(a.form, ARGS_NODES);
    assert_int_equal(a.count, 0);
    wire_args_free(&a);
    free(body);
}

/* ---- large Nodes forms: the items scanned on two threads -------------------- */

#define BIG_ITEMS 600
enum big_variant { BIG_PLAIN, BIG_NESTED_ITEM_START, BIG_NO_NAME, BIG_CONTROL_BYTE, BIG_TRAILING_COMMA };

/* A Nodes form of BIG_ITEMS items of about 4 KB (2.4 MB in all). With
 * BIG_NESTED_ITEM_START every item ends with an array whose second object
 * begins like an item, with a name, so the guessed boundary falls inside an
 * item. *mark is set to the byte a broken variant broke. */
static char *big_nodes_form(enum big_variant v, size_t *len, size_t *mark)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"Pod\":");
    char *pod = q(POD);
    strbuf_puts(&sb, pod);
    free(pod);
    strbuf_puts(&sb, ",\"Nodes\":{\"metadata\":{},\"items\":[");
    *mark = 0;
    for (int i = 0; i < BIG_ITEMS; i++) {
        bool nameless = v == BIG_NO_NAME && i == 500;
        strbuf_printf(&sb, "%s{\"metadata\":{\"%s\":\"n-%04d\",\"labels\":{\"zone\":\"z%d\"}},\"status\":{", i ? "," : "",
                      nameless ? "nome" : "name", i, i % 3);
        strbuf_puts(&sb, "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},{\"type\":\"DiskPressure\"}],"
                         "\"note\":\"{\\\"a\\\":[{},{\\\"metadata\\\":1}]}\",\"pad\":\"");
        if (v == BIG_CONTROL_BYTE && i == 550)
            *mark = sb.len + 1000;
        for (int k = 0; k < 3900; k++)
            strbuf_putc(&sb, (char)('a' + k % 26));
        strbuf_puts(&sb, "\"}");
        if (v == BIG_NESTED_ITEM_START)
            strbuf_puts(&sb, ",\"inner\":[{\"a\":1},{\"metadata\":{\"name\":\"inner\"}}]");
        strbuf_putc(&sb, '}');
    }
    if (v == BIG_TRAILING_COMMA) {
        *mark = sb.len;
        strbuf_putc(&sb, ',');
    }
    strbuf_puts(&sb, "],\"after\":{\"k\":[1,2]}},\"NodeNames\":null}");
    assert_false(strbuf_failed(&sb));
    if (v == BIG_CONTROL_BYTE)
        sb.data[*mark] = '\t';
    *len = sb.len;
    return strbuf_detach(&sb, NULL);
}

/* Every item's name and exact bytes, whichever way the items were scanned. */
static void expect_big_items(enum big_variant v, unsigned long long want_taken, unsigned long long want_dropped)
{
    size_t len, mark;
    char *body = big_nodes_form(v, &len, &mark);
    unsigned long long t0, d0, t1, d1;
    wire_items_splits(&t0, &d0);
    struct extender_args a;
    char *err = NULL;
    if (wire_parse_args(body, len, &a, &err) != 0)
        fail_msg("rejected: %s", err);
    wire_items_splits(&t1, &d1);
    assert_int_equal(t1 - t0, want_taken);
    assert_int_equal(d1 - d0, want_dropped);
    assert_int_equal(a.count, BIG_ITEMS);
    for (int i = 0; i < BIG_ITEMS; i++) {
        char name[16], head[40];
        snprintf(name, sizeof name, "n-%04d", i);
        snprintf(head, sizeof head, "{\"metadata\":{\"name\":\"%s\"", name);
        assert_string_equal(a.names[i], name);
        const struct jscan_span *sp = &a.items[i];
        assert_true(sp->len > strlen(head));
        assert_memory_equal(sp->ptr, head, strlen(head));
        assert_true(sp->ptr[sp->len - 1] == '}' && (sp->ptr[sp->len] == ',' || sp->ptr[sp->len] == ']'));
        if (i > 0)
            assert_ptr_equal(a.items[i - 1].ptr + a.items[i - 1].len + 1, sp->ptr);
    }
    wire_args_free(&a);
    free(body);
}

/* A break in the second half: the helper's half is dropped, and the error
 * is the serial walk's. */
static void expect_big_error(enum big_variant v, const char *want_fmt)
{
    size_t len, mark;
    char *body = big_nodes_form(v, &len, &mark);
    char want[160];
    snprintf(want, sizeof want, want_fmt, mark);
    struct extender_args a;
    char *err = NULL;
    unsigned long long t0, d0, t1, d1;
    wire_items_splits(&t0, &d0);
    assert_int_equal(wire_parse_args(body, len, &a, &err), -1);
    wire_items_splits(&t1, &d1);
    assert_int_equal(t1 - t0, 0);
    assert_int_equal(d1 - d0, 1);
    assert_non_null(err);
    assert_string_equal(err, want);
    free(err);
    free(body);
}

/* The second half is scanned on another thread when the guessed boundary
 * between two items holds; when it falls inside an item (even on text that
 * scans as an item) the items are scanned on one thread. Either way the
 * names, the spans and every error are the serial walk's. */
static void test_large_nodes_form_two_threads(void **state)
{
    (void)state;
    expect_big_items(BIG_PLAIN, 1, 0);
    expect_big_items(BIG_NESTED_ITEM_START, 0, 1);
    expect_big_error(BIG_NO_NAME, "Nodes.items[500] has no metadata.name");
    expect_big_error(BIG_CONTROL_BYTE, "malformed JSON at byte %zu: unescaped control character in string");
    expect_big_error(BIG_TRAILING_COMMA, "malformed JSON at byte %zu: trailing comma");
}

static void test_escaped_names(void **state)
{
    (void)state;
    char fixture[2048], *body;
    struct extender_args a;
    args_with(fixture, sizeof(fixture), "'NodeNames':['a\\'b','\\u00e9x','n\\\\1','tab\\there','\\ud83d\\ude00']");
    parse_ok(fixture, &body, &a);
    assert_int_equal(a.count, 5);
    assert_string_equal(a.names[0], "a\"b");
    assert_string_equal(a.names[1], "\xc3\xa9x");
    assert_string_equal(a.names[2], "n\\1");
    assert_string_equal(a.names[3], "tab\there");
    assert_string_equal(a.names[4], "\xf0\x9f\x98\x80");
    wire_args_free(&a);
    free(body);

    /* In the Nodes form the name is decoded; escaped keys count. */
    args_with(fixture, sizeof(fixture), "'Nodes':{'items':[{'metadata':{'n\\u0061me':'x\\/y'}}]}");
    parse_ok(fixture, &body, &a);
    assert_int_equal(a.count, 1);
    assert_string_equal(a.names[0], "x/y");
    wire_args_free(&a);
    free(body);
}

static void test_malformed(void **state)
{
    (void)state;
    char f[2048];
    expect_error("", "malformed JSON at byte 0: empty input");
    expect_error("   ", "malformed JSON at byte 3: empty input");
    expect_error_containing("hello", "malformed JSON at byte 0: ");
    expect_error("[]", "ExtenderArgs must be a JSON object");
    expect_error("'args'", "ExtenderArgs must be a JSON object");
    expect_error("{}", "ExtenderArgs has no Pod");
    expect_error("{'NodeNames':['a']}", "ExtenderArgs has no Pod");
    expect_error("{'Pod':null,'NodeNames':['a']}", "ExtenderArgs has no Pod");
    expect_error("{'Pod':'p','NodeNames':['a']}", "Pod must be a Pod object");
    expect_error("{'Pod':[],'NodeNames':['a']}", "Pod must be a Pod object");
    expect_error("{'Pod':7,'NodeNames':['a']}", "Pod must be a Pod object");
    expect_error("{'Pod':{}}", "ExtenderArgs has neither Nodes nor NodeNames");
    expect_error("{'Pod':{},'Nodes':null,'NodeNames':null}", "ExtenderArgs has neither Nodes nor NodeNames");
    expect_error("{'Pod':{},'NodeNames':'a'}", "NodeNames must be an array of node names");
    expect_error("{'Pod':{},'NodeNames':{'a':1}}", "NodeNames must be an array of node names");
    expect_error("{'Pod':{},'NodeNames':['a',1]}", "NodeNames must be an array of node names");
    expect_error("{'Pod':{},'NodeNames':[null]}", "NodeNames must be an array of node names");
    expect_error("{'Pod':{},'Nodes':[]}", "Nodes must be a NodeList object");
    expect_error("{'Pod':{},'Nodes':{'items':{}}}", "Nodes.items must be an array of Node objects");
    expect_error("{'Pod':{},'Nodes':{'items':['n1']}}", "Nodes.items must be an array of Node objects");
    expect_error("{'Pod':{},'Nodes':{'items':[{'metadata':{'name':'a'}},{'metadata':{'uid':'x'}}]}}",
                 "Nodes.items[1] has no metadata.name");
    expect_error("{'Pod':{},'Nodes':{'items':[{'kind':'Node'}]}}", "Nodes.items[0] has no metadata.name");
    expect_error("{'Pod':{},'Nodes':{'items':[{'metadata':null}]}}", "Nodes.items[0] has no metadata.name");
    expect_error("{'Pod':{},'Nodes':{'items':[{'metadata':{'name':5}}]}}", "Nodes.items[0] has no metadata.name");
    expect_error("{'Pod':{},'Nodes':{'items':[]},'NodeNames':[]}",
                 "ExtenderArgs carries both Nodes and NodeNames; kube-scheduler sends one of them");
    expect_error("{'NodeNames':['a'],'Nodes':{'items':[{'metadata':{'name':'a'}}]},'Pod':{}}",
                 "ExtenderArgs carries both Nodes and NodeNames; kube-scheduler sends one of them");

    /* Syntax errors carry the byte offset. */
    args_with(f, sizeof(f), "'NodeNames':['a']");
    size_t end = strlen(f);
    char msg[256];
    snprintf(msg, sizeof(msg), "malformed JSON at byte %zu: unexpected data after the top-level value", end + 1);
    strcat(f, " x");
    expect_error(f, msg);
    f[end] = '\0';
    strcat(f, "{}");
    snprintf(msg, sizeof(msg), "malformed JSON at byte %zu: unexpected data after the top-level value", end);
    expect_error(f, msg);
    f[end] = '\0';
    strcat(f, "\n\t ");   /* trailing whitespace is fine */
    char *body;
    struct extender_args ok;
    parse_ok(f, &body, &ok);
    assert_int_equal(ok.count, 1);
    wire_args_free(&ok);
    free(body);
    expect_error("{'Pod':{},'NodeNames':['a',]}", "malformed JSON at byte 26: trailing comma");
    expect_error("{'Pod':{'metadata':tru},'NodeNames':[]}",
                 "malformed JSON at byte 22: invalid literal (expected true, false or null)");
    expect_error("{'Pod':{} 'NodeNames':[]}", "malformed JSON at byte 10: expected ',' or '}' after object member");
    expect_error("{'Pod':{},'NodeNames':['a'", "malformed JSON at byte 26: unexpected end of input");
    expect_error("{'Pod':{},'NodeNames':['a' 'b']}",
                 "malformed JSON at byte 27: expected ',' or ']' after array element");

    /* Truncated anywhere: an error, never a crash or a partial success. */
    args_with(f, sizeof(f), "'Nodes':{'items':[{'metadata':{'name':'n1'}},{'metadata':{'name':'n\\u00e9'}}]}");
    size_t full = strlen(f);
    for (size_t len = 0; len < full; len++) {
        char *err = parse_error_n(f, len);
        if (strncmp(err, "malformed JSON at byte ", 23) != 0)
            fail_msg("truncated at %zu: %s", len, err);
        free(err);
    }
}

/* ---- encoding ------------------------------------------------------------- */

/* A hand-made evaluation over the request's names: v[i] is 'f' (fits with
 * score), 'r' (fails, resolvable), 'u' (fails, unresolvable). */
static void make_evaluation(struct evaluation *ev, const struct extender_args *a, const char *kinds,
                            const char *const *reasons, const int *scores)
{
    memset(ev, 0, sizeof(*ev));
    strbuf_init(&ev->text);
    ev->chosen = -1;
    ev->count = a->count;
    ev->verdicts = calloc(a->count ? a->count : 1, sizeof(*ev->verdicts));
    assert_non_null(ev->verdicts);
    for (size_t i = 0; i < a->count; i++) {
        struct verdict *v = &ev->verdicts[i];
        v->name = a->names[i];
        v->known = true;
        v->fits = kinds[i] == 'f';
        v->unresolvable = kinds[i] == 'u';
        v->score = scores[i];
        if (reasons[i]) {
            v->reason_off = ev->text.len;
            v->reason_len = strlen(reasons[i]);
            strbuf_puts(&ev->text, reasons[i]);
            strbuf_putc(&ev->text, '\0');
        }
    }
}

/* len is read only after text was produced (argument order is unspecified). */
static cJSON *parse_answer(char *text, const size_t *lenp)
{
    assert_non_null(text);
    size_t len = *lenp;
    assert_int_equal(strlen(text), len);
    cJSON *v = cJSON_ParseWithLength(text, len);
    if (!v)
        fail_msg("answer is not JSON: %s", text);
    free(text);
    return v;
}

static const cJSON *field(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v)
        fail_msg("no field %s", name);
    return v;
}

static void expect_string_field(const cJSON *obj, const char *name, const char *value)
{
    const cJSON *v = field(obj, name);
    assert_true(cJSON_IsString(v));
    assert_string_equal(v->valuestring, value);
}

static void test_filter_result_names(void **state)
{
    (void)state;
    char fixture[2048], *body;
    struct extender_args a;
    args_with(fixture, sizeof(fixture), "'NodeNames':['a','b\\'q','c','d']");
    parse_ok(fixture, &body, &a);
    struct evaluation ev;
    const char *reasons[] = {NULL, "too \"small\"\n", "no GPUs", "gone"};
    make_evaluation(&ev, &a, "frur", reasons, (int[]){500, 0, 0, 0});
    size_t len;
    cJSON *r = parse_answer(wire_filter_result(&a, &ev, &len), &len);
    assert_true(cJSON_IsNull(field(r, "Nodes")));
    const cJSON *names = field(r, "NodeNames");
    assert_int_equal(cJSON_GetArraySize(names), 1);
    assert_string_equal(cJSON_GetArrayItem(names, 0)->valuestring, "a");
    const cJSON *failed = field(r, "FailedNodes");
    assert_int_equal(cJSON_GetArraySize(failed), 2);
    expect_string_field(failed, "b\"q", "too \"small\"\n");
    expect_string_field(failed, "d", "gone");
    const cJSON *unres = field(r, "FailedAndUnresolvableNodes");
    assert_int_equal(cJSON_GetArraySize(unres), 1);
    expect_string_field(unres, "c", "no GPUs");
    expect_string_field(r, "Error", "");
    assert_int_equal(cJSON_GetArraySize(r), 5);
    cJSON_Delete(r);

    /* Nothing fits: an empty list, not null. */
    for (size_t i = 0; i < ev.count; i++)
        ev.verdicts[i].fits = false;
    ev.error = strdup("something \"bad\"");
    r = parse_answer(wire_filter_result(&a, &ev, &len), &len);
    names = field(r, "NodeNames");
    assert_true(cJSON_IsArray(names));
    assert_int_equal(cJSON_GetArraySize(names), 0);
    assert_int_equal(cJSON_GetArraySize(field(r, "FailedNodes")), 3);
    expect_string_field(field(r, "FailedNodes"), "a", "");
    expect_string_field(r, "Error", "something \"bad\"");
    cJSON_Delete(r);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);
}

/* The text of the kept items in a Nodes-form answer, between "items":[ and ]}. */
static char *answer_items_text(const char *answer)
{
    const char *start = strstr(answer, "\"items\":[");
    const char *end = strstr(answer, "]},\"NodeNames\":null");
    assert_non_null(start);
    assert_non_null(end);
    start += strlen("\"items\":[");
    assert_true(end >= start);
    char *out = malloc((size_t)(end - start) + 1);
    assert_non_null(out);
    memcpy(out, start, (size_t)(end - start));
    out[end - start] = '\0';
    return out;
}

/* lib/ascii.h's ascii_only, which decides that: a byte with its high bit
 * anywhere in a name of any length up to 40 is seen. */
static void test_ascii_only(void **state)
{
    (void)state;
    char b[40];
    for (size_t n = 0; n < sizeof b; n++) {
        for (size_t k = 0; k <= n; k++) {
            for (size_t i = 0; i < n; i++)
                b[i] = (char)('a' + i % 26);
            if (k < n)
                b[k] = (char)0xc3;
            if (ascii_only(b, n) != (k == n))
                fail_msg("length %zu, high byte at %zu", n, k);
        }
    }
}

/* Names go back as the request carried them when they can (no escapes, all
 * ASCII), neighbours as one stretch; escaped and non-ASCII names through the
 * escaper; in every list of the answer, filter and prioritize alike. */
static void test_names_answered_as_they_came(void **state)
{
    (void)state;
    static const char body_text[] = "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\":"
                                    "[\"a\",\"b\", \"c\",\"d\\u0065\",\"\xc3\xa9\",\"f\",\"g\",\"h\"]}";
    char *body = strdup(body_text);
    assert_non_null(body);
    struct extender_args a;
    char *err = NULL;
    assert_int_equal(wire_parse_args(body, strlen(body), &a, &err), 0);
    assert_int_equal(a.count, 8);
    assert_non_null(a.raw_names);
    assert_memory_equal(a.raw_names[0].ptr, "\"a\"", 3);
    assert_null(a.raw_names[3].ptr); /* escaped */
    assert_null(a.raw_names[4].ptr); /* not ASCII */
    struct evaluation ev;
    const char *reasons[] = {NULL, NULL, NULL, NULL, NULL, "full", NULL, "gone"};
    /* Every fitting node scores above the failing ones (0), so each is answered. */
    make_evaluation(&ev, &a, "ffffffuu", reasons, (int[]){100, 200, 300, 400, 500, 600, 700, 800});
    ev.verdicts[5].fits = false;
    ev.verdicts[5].unresolvable = false;
    ev.verdicts[6].fits = true;
    ev.verdicts[6].unresolvable = false;
    size_t len;
    char *text = wire_filter_result(&a, &ev, &len);
    assert_non_null(strstr(text, "\"NodeNames\":[\"a\",\"b\",\"c\",\"de\",\"\xc3\xa9\",\"g\"]"));
    assert_non_null(strstr(text, "\"FailedNodes\":{\"f\":\"full\"}"));
    assert_non_null(strstr(text, "\"FailedAndUnresolvableNodes\":{\"h\":\"gone\"}"));
    cJSON *r = parse_answer(text, &len);
    assert_int_equal(cJSON_GetArraySize(field(r, "NodeNames")), 6);
    assert_string_equal(cJSON_GetArrayItem(field(r, "NodeNames"), 3)->valuestring, "de");
    cJSON_Delete(r);
    text = wire_priority_list(&a, &ev, &len);
    assert_non_null(strstr(text, "{\"Host\":\"a\",\"Score\":"));
    assert_non_null(strstr(text, "{\"Host\":\"de\",\"Score\":"));
    assert_non_null(strstr(text, "{\"Host\":\"g\",\"Score\":"));
    assert_non_null(strstr(text, "\"\\u00e9\"") || strstr(text, "\"\xc3\xa9\""));
    r = parse_answer(text, &len);
    assert_int_equal(cJSON_GetArraySize(r), 6); /* f, h: the lowest (0), left out */
    cJSON_Delete(r);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);
}

static void test_filter_result_nodes(void **state)
{
    (void)state;
    char fixture[4096], *body;
    struct extender_args a;
    /* Odd spacing, escapes and key order are kept as they came. */
    args_with(fixture, sizeof(fixture),
              "'Nodes':{'items':[{'metadata':{'name':'n1','labels':{'k':'v'}},'status':{'big':[1,2,3]}},"
              "{'metadata':{'name':'n2'}},  { 'metadata' : {'uid':'x','name':'n3','annotations':{'a':'\\u00e9'}} } ]}");
    parse_ok(fixture, &body, &a);
    assert_non_null(a.items);
    struct evaluation ev;
    const char *reasons[] = {NULL, "full", NULL};
    make_evaluation(&ev, &a, "frf", reasons, (int[]){10, 0, 20});
    size_t len;
    char *text = wire_filter_result(&a, &ev, &len);
    assert_non_null(text);
    /* Each kept item is the request's bytes of that item, nothing else. */
    char *items = answer_items_text(text);
    char *want = q("{'metadata':{'name':'n1','labels':{'k':'v'}},'status':{'big':[1,2,3]}},"
                   "{ 'metadata' : {'uid':'x','name':'n3','annotations':{'a':'\\u00e9'}} }");
    assert_string_equal(items, want);
    free(items);
    free(want);
    cJSON *r = parse_answer(text, &len);
    assert_true(cJSON_IsNull(field(r, "NodeNames")));
    const cJSON *list = field(field(r, "Nodes"), "items");
    assert_int_equal(cJSON_GetArraySize(list), 2);
    const char *names[] = {"n1", "n3"};
    for (int i = 0; i < 2; i++) {
        const cJSON *meta = field(cJSON_GetArrayItem(list, i), "metadata");
        expect_string_field(meta, "name", names[i]);
    }
    expect_string_field(field(field(cJSON_GetArrayItem(list, 0), "metadata"), "labels"), "k", "v");
    expect_string_field(r, "Error", "");
    expect_string_field(field(r, "FailedNodes"), "n2", "full");
    assert_int_equal(cJSON_GetArraySize(field(r, "FailedAndUnresolvableNodes")), 0);
    cJSON_Delete(r);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);
}

/* No node fits, or the list is empty: an empty items array, valid JSON. */
static void test_filter_result_nodes_none_kept(void **state)
{
    (void)state;
    char fixture[1024], *body;
    struct extender_args a;
    args_with(fixture, sizeof(fixture), "'Nodes':{'items':[{'metadata':{'name':'n1'}}]}");
    parse_ok(fixture, &body, &a);
    struct evaluation ev;
    const char *reasons[] = {"full"};
    make_evaluation(&ev, &a, "r", reasons, (int[]){0});
    size_t len;
    char *text = wire_filter_result(&a, &ev, &len);
    assert_non_null(strstr(text, "\"items\":[]}"));
    cJSON *r = parse_answer(text, &len);
    assert_int_equal(cJSON_GetArraySize(field(field(r, "Nodes"), "items")), 0);
    cJSON_Delete(r);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);
    args_with(fixture, sizeof(fixture), "'Nodes':{'items':null}");
    parse_ok(fixture, &body, &a);
    assert_int_equal(a.count, 0);
    make_evaluation(&ev, &a, "", reasons, (int[]){0});
    text = wire_filter_result(&a, &ev, &len);
    r = parse_answer(text, &len);
    assert_int_equal(cJSON_GetArraySize(field(field(r, "Nodes"), "items")), 0);
    cJSON_Delete(r);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);
}

static void test_priority_list(void **state)
{
    (void)state;
    char fixture[2048], *body;
    struct extender_args a;
    args_with(fixture, sizeof(fixture), "'NodeNames':['a','b','c','d\\\\e']");
    parse_ok(fixture, &body, &a);
    struct evaluation ev;
    const char *reasons[] = {NULL, NULL, "no", NULL};
    /* Scores 0..1000 map to 0..10, rounded; a failing node scores 0, the
     * lowest here, so it is left out and the others keep theirs. */
    make_evaluation(&ev, &a, "ffrf", reasons, (int[]){1000, 449, 900, 50});
    size_t len;
    cJSON *r = parse_answer(wire_priority_list(&a, &ev, &len), &len);
    assert_true(cJSON_IsArray(r));
    assert_int_equal(cJSON_GetArraySize(r), 3);
    const char *hosts[] = {"a", "b", "d\\e"};
    int scores[] = {10, 4, 1};
    for (int i = 0; i < 3; i++) {
        const cJSON *e = cJSON_GetArrayItem(r, i);
        expect_string_field(e, "Host", hosts[i]);
        const cJSON *s = field(e, "Score");
        assert_true(cJSON_IsNumber(s));
        assert_int_equal(s->valueint, scores[i]);
    }
    cJSON_Delete(r);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);

    /* Every node fits: the answer is relative to the lowest (2 here), the
     * nodes at it are left out, the order of the others is the request's. */
    args_with(fixture, sizeof(fixture), "'NodeNames':['a','b','c','d']");
    parse_ok(fixture, &body, &a);
    make_evaluation(&ev, &a, "ffff", (const char *[]){NULL, NULL, NULL, NULL}, (int[]){200, 700, 200, 1000});
    r = parse_answer(wire_priority_list(&a, &ev, &len), &len);
    assert_int_equal(cJSON_GetArraySize(r), 2);
    expect_string_field(cJSON_GetArrayItem(r, 0), "Host", "b");
    assert_int_equal(field(cJSON_GetArrayItem(r, 0), "Score")->valueint, 5);
    expect_string_field(cJSON_GetArrayItem(r, 1), "Host", "d");
    assert_int_equal(field(cJSON_GetArrayItem(r, 1), "Score")->valueint, 8);
    cJSON_Delete(r);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);

    /* Every node at one score: nothing stands out, an empty list. */
    parse_ok("{'Pod':{},'NodeNames':['a','b']}", &body, &a);
    make_evaluation(&ev, &a, "ff", (const char *[]){NULL, NULL}, (int[]){600, 600});
    char *same = wire_priority_list(&a, &ev, &len);
    assert_string_equal(same, "[]");
    assert_int_equal(len, 2);
    free(same);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);

    /* No nodes: an empty list. */
    parse_ok("{'Pod':{},'NodeNames':[]}", &body, &a);
    make_evaluation(&ev, &a, "", NULL, NULL);
    char *text = wire_priority_list(&a, &ev, &len);
    assert_string_equal(text, "[]");
    free(text);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);
}

static void test_filter_error(void **state)
{
    (void)state;
    size_t len;
    cJSON *r = parse_answer(wire_filter_error("bad \"body\"\n\x01", &len), &len);
    expect_string_field(r, "Error", "bad \"body\"\n\x01");
    assert_true(cJSON_IsNull(field(r, "Nodes")));
    assert_true(cJSON_IsNull(field(r, "NodeNames")));
    assert_int_equal(cJSON_GetArraySize(field(r, "FailedNodes")), 0);
    assert_int_equal(cJSON_GetArraySize(field(r, "FailedAndUnresolvableNodes")), 0);
    cJSON_Delete(r);
}

/* ---- round trip through placement ----------------------------------------- */

struct world {
    struct cluster_cache cache;
    struct placement pl;
};

static void world_init(struct world *w, enum placement_mode mode, enum pack_policy gpu)
{
    struct cache_config cc = {.assume_ttl_ns = 60LL * 1000000000LL};
    assert_int_equal(cache_init(&w->cache, &cc), 0);
    struct placement_config pc = {.mode = mode, .policy = {.gpu = gpu, .node = POLICY_BINPACK}};
    assert_int_equal(placement_init(&w->pl, &w->cache, &pc), 0);
    const char *nodes[] = {
        "{'metadata':{'name':'gpu-a'},'status':{'allocatable':{'tencent.com/vcuda-core':'200',"
        "'tencent.com/vcuda-memory':'80'}}}",
        "{'metadata':{'name':'gpu-b'},'status':{'allocatable':{'tencent.com/vcuda-core':'200',"
        "'tencent.com/vcuda-memory':'80'}}}",
        "{'metadata':{'name':'cpu'},'status':{'allocatable':{'cpu':'4'}}}",
    };
    for (size_t i = 0; i < 3; i++) {
        char *text = q(nodes[i]);
        cJSON *obj = cJSON_Parse(text);
        free(text);
        struct node_spec *spec = node_spec_from_json(obj, NULL);
        cJSON_Delete(obj);
        assert_non_null(spec);
        assert_int_equal(cache_apply_node(&w->cache, spec), 0);
    }
    /* gpu-a is busier: binpack prefers it. */
    char *text = q("{'metadata':{'name':'busy','namespace':'x','annotations':{'tencent.com/predicate-gpu-idx-0':'0',"
                   "'tencent.com/predicate-node':'gpu-a'}},'spec':{'nodeName':'gpu-a','containers':[{'name':'c',"
                   "'resources':{'limits':{'tencent.com/vcuda-core':'50','tencent.com/vcuda-memory':'10'}}}]}}");
    cJSON *obj = cJSON_Parse(text);
    free(text);
    assert_int_equal(cache_apply_pod(&w->cache, pod_info_from_json(obj, NULL), clock_realtime_ns()), 0);
    cJSON_Delete(obj);
}

static void world_free(struct world *w)
{
    placement_destroy(&w->pl);
    cache_destroy(&w->cache);
}

static const char UNKNOWN[] = "node is not in the extender's cache (not yet seen, or deleted)";
static const char NO_GPUS[] = "node advertises no GPUs (no tencent.com/vcuda-core, nvidia.com/mps-core or "
                              "nvidia.com/gpu capacity and no gpu-admission.io/topology annotation)";

/* Parse args, filter, encode, decode. The verdicts point at a's names, so a
 * and *body stay alive until the caller is done with ev. */
static cJSON *filter_round_trip(struct world *w, const char *rest, struct extender_args *a, char **body,
                                struct evaluation *ev)
{
    char fixture[4096];
    args_with(fixture, sizeof(fixture), rest);
    parse_ok(fixture, body, a);
    struct pod_info *pod = pod_info_from_json(a->pod, NULL);
    assert_non_null(pod);
    assert_int_equal(placement_filter(&w->pl, pod, a->names, a->count, ev), 0);
    size_t len;
    cJSON *r = parse_answer(wire_filter_result(a, ev, &len), &len);
    pod_info_free(pod);
    return r;
}

static void round_trip_done(struct extender_args *a, char *body, struct evaluation *ev)
{
    evaluation_free(ev);
    wire_args_free(a);
    free(body);
}

static void test_round_trip_bind_mode(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, PLACEMENT_BIND, POLICY_BINPACK);
    struct evaluation ev;
    struct extender_args a;
    char *body;
    cJSON *r = filter_round_trip(&w, "'NodeNames':['cpu','gpu-b','ghost','gpu-a']", &a, &body, &ev);
    const cJSON *names = field(r, "NodeNames");
    assert_int_equal(cJSON_GetArraySize(names), 2);
    assert_string_equal(cJSON_GetArrayItem(names, 0)->valuestring, "gpu-b");
    assert_string_equal(cJSON_GetArrayItem(names, 1)->valuestring, "gpu-a");
    expect_string_field(field(r, "FailedNodes"), "ghost", UNKNOWN);
    assert_int_equal(cJSON_GetArraySize(field(r, "FailedNodes")), 1);
    expect_string_field(field(r, "FailedAndUnresolvableNodes"), "cpu", NO_GPUS);
    assert_int_equal(cJSON_GetArraySize(field(r, "FailedAndUnresolvableNodes")), 1);
    expect_string_field(r, "Error", "");
    cJSON_Delete(r);
    assert_int_equal(ev.chosen, -1);
    assert_false(ev.decided);
    /* Bind mode records nothing. */
    assert_null(cache_find_pod(&w.cache, "ns/p"));

    /* Prioritize the same verdicts: gpu-a 100 of 200 cores -> 5, gpu-b 50 of
     * 200 -> 3; cpu and ghost do not fit (0, the lowest, left out). */
    size_t len;
    r = parse_answer(wire_priority_list(&a, &ev, &len), &len);
    assert_int_equal(cJSON_GetArraySize(r), 2);
    const char *hosts[] = {"gpu-b", "gpu-a"};
    int scores[] = {3, 5};
    for (int i = 0; i < 2; i++) {
        expect_string_field(cJSON_GetArrayItem(r, i), "Host", hosts[i]);
        assert_int_equal(field(cJSON_GetArrayItem(r, i), "Score")->valueint, scores[i]);
    }
    cJSON_Delete(r);
    round_trip_done(&a, body, &ev);
    world_free(&w);
}

static void test_round_trip_filter_mode(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, PLACEMENT_FILTER, POLICY_BINPACK);
    struct evaluation ev;
    struct extender_args a;
    char *body;
    cJSON *r = filter_round_trip(&w,
                                 "'Nodes':{'items':[{'metadata':{'name':'gpu-b'}},{'metadata':{'name':'cpu'}},"
                                 "{'metadata':{'name':'gpu-a','labels':{}}}]}",
                                 &a, &body, &ev);
    assert_true(cJSON_IsNull(field(r, "NodeNames")));
    const cJSON *items = field(field(r, "Nodes"), "items");
    assert_int_equal(cJSON_GetArraySize(items), 1);
    expect_string_field(field(cJSON_GetArrayItem(items, 0), "metadata"), "name", "gpu-a");
    /* The kept item is the request's node, labels included. */
    assert_non_null(cJSON_GetObjectItemCaseSensitive(field(cJSON_GetArrayItem(items, 0), "metadata"), "labels"));
    expect_string_field(field(r, "FailedNodes"), "gpu-b", "pod assigned to node gpu-a");
    expect_string_field(field(r, "FailedAndUnresolvableNodes"), "cpu", NO_GPUS);
    expect_string_field(r, "Error", "");
    cJSON_Delete(r);
    assert_int_equal(ev.chosen, 2);
    assert_true(ev.decided);
    round_trip_done(&a, body, &ev);

    /* The decision is an assumption in the cache: GPU 0 of gpu-a (binpack). */
    const struct pod_entry *e = cache_find_pod(&w.cache, "ns/p");
    assert_non_null(e);
    assert_false(e->bound);
    assert_string_equal(e->node->name, "gpu-a");
    assert_int_equal(e->node->gpus[0].core_used, 100);
    assert_string_equal(e->info->decision.node, "gpu-a");
    assert_int_equal(e->info->decision.idx_count[0], 1);
    assert_int_equal(e->info->decision.idx[0][0], 0);

    /* A re-filter answers the same node without deciding again. */
    r = filter_round_trip(&w, "'NodeNames':['gpu-b','gpu-a']", &a, &body, &ev);
    const cJSON *names = field(r, "NodeNames");
    assert_int_equal(cJSON_GetArraySize(names), 1);
    assert_string_equal(cJSON_GetArrayItem(names, 0)->valuestring, "gpu-a");
    expect_string_field(field(r, "FailedNodes"), "gpu-b", "pod assigned to node gpu-a");
    assert_false(ev.decided);
    cJSON_Delete(r);
    round_trip_done(&a, body, &ev);
    world_free(&w);
}

static void test_round_trip_request_errors(void **state)
{
    (void)state;
    struct world w;
    /* Spread is refused for vcuda shares: the answer's Error says why. */
    world_init(&w, PLACEMENT_BIND, POLICY_SPREAD);
    struct evaluation ev;
    struct extender_args a;
    char *body;
    cJSON *r = filter_round_trip(&w, "'NodeNames':['gpu-a']", &a, &body, &ev);
    const cJSON *err = field(r, "Error");
    assert_non_null(strstr(err->valuestring, "tencent.com/vcuda-core shares are refused here"));
    assert_int_equal(cJSON_GetArraySize(field(r, "NodeNames")), 0);
    cJSON_Delete(r);
    round_trip_done(&a, body, &ev);
    world_free(&w);

    /* An invalid request fails every node as unresolvable with its reason. */
    world_init(&w, PLACEMENT_FILTER, POLICY_BINPACK);
    char fixture[2048];
    snprintf(fixture, sizeof(fixture), "{'Pod':{'metadata':{'name':'bad'},'spec':{'containers':[{'name':'c',"
                                       "'resources':{'limits':{'tencent.com/vcuda-core':'150'}}}]}},"
                                       "'NodeNames':['gpu-a','cpu']}");
    parse_ok(fixture, &body, &a);
    struct pod_info *pod = pod_info_from_json(a.pod, NULL);
    assert_int_equal(placement_filter(&w.pl, pod, a.names, a.count, &ev), 0);
    size_t len;
    r = parse_answer(wire_filter_result(&a, &ev, &len), &len);
    const char *why = "container \"c\": tencent.com/vcuda-core 150 is neither below 100 (a share of one GPU) nor a "
                      "multiple of 100 (whole GPUs)";
    expect_string_field(field(r, "FailedAndUnresolvableNodes"), "gpu-a", why);
    expect_string_field(field(r, "FailedAndUnresolvableNodes"), "cpu", why);
    assert_int_equal(cJSON_GetArraySize(field(r, "NodeNames")), 0);
    expect_string_field(r, "Error", "");
    cJSON_Delete(r);
    evaluation_free(&ev);
    pod_info_free(pod);
    wire_args_free(&a);
    free(body);

    /* A pod without GPUs passes every node, known or not. */
    snprintf(fixture, sizeof(fixture), "{'Pod':{'metadata':{'name':'plain'}},'NodeNames':['cpu','ghost']}");
    parse_ok(fixture, &body, &a);
    pod = pod_info_from_json(a.pod, NULL);
    assert_int_equal(placement_filter(&w.pl, pod, a.names, a.count, &ev), 0);
    r = parse_answer(wire_filter_result(&a, &ev, &len), &len);
    assert_int_equal(cJSON_GetArraySize(field(r, "NodeNames")), 2);
    assert_int_equal(cJSON_GetArraySize(field(r, "FailedNodes")), 0);
    cJSON_Delete(r);
    evaluation_free(&ev);
    pod_info_free(pod);
    wire_args_free(&a);
    free(body);
    world_free(&w);
}

/* The answer in pieces: joined, it equals the flat answer; kept items point
 * into the request body (never copied), and a run of neighbouring kept items
 * is one piece. Of two "items" arrays the last counts, as in Go. */
static char *join_pieces(const struct http_piece *p, size_t n)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n; i++)
        strbuf_append(&sb, p[i].ptr, p[i].len);
    return strbuf_detach(&sb, NULL);
}

static void test_filter_result_pieces(void **state)
{
    (void)state;
    char fixture[4096], *body;
    struct extender_args a;
    args_with(fixture, sizeof(fixture),
              "'Nodes':{'items':[{'metadata':{'name':'n0'}}],'items':[{'metadata':{'name':'n1'}} , "
              "{'metadata':{'name':'n2'}},{'metadata':{'name':'n3'}},{'metadata':{'name':'n4'}},"
              "{'metadata':{'name':'n5'}}]}");
    parse_ok(fixture, &body, &a);
    assert_int_equal(a.count, 5);
    assert_string_equal(a.names[0], "n1");
    struct evaluation ev;
    const char *reasons[] = {NULL, NULL, "full", NULL, NULL};
    make_evaluation(&ev, &a, "ffrff", reasons, (int[]){1, 1, 0, 1, 1});
    size_t len;
    char *flat = wire_filter_result(&a, &ev, &len);
    char *text = NULL;
    struct http_piece *pieces = NULL;
    size_t n = 0;
    assert_int_equal(wire_filter_result_pieces(&a, &ev, &text, &pieces, &n), 0);
    char *joined = join_pieces(pieces, n);
    assert_string_equal(joined, flat);
    /* n1+n2 (neighbours, separator kept as sent), then n4+n5: two pieces
     * inside the request body. */
    size_t in_request = 0;
    const char *end = body + strlen(body);
    for (size_t i = 0; i < n; i++)
        in_request += pieces[i].ptr >= body && pieces[i].ptr < end;
    assert_int_equal(in_request, 2);
    assert_null(strstr(flat, "n0"));
    assert_non_null(strstr(flat, "{\"metadata\":{\"name\":\"n1\"}} , {\"metadata\":{\"name\":\"n2\"}}"));
    assert_non_null(strstr(flat, "{\"name\":\"n2\"}},{\"metadata\":{\"name\":\"n4\"}},{\"metadata\":{\"name\":\"n5\"}}]}"));
    cJSON *r = parse_answer(flat, &len);
    assert_int_equal(cJSON_GetArraySize(field(field(r, "Nodes"), "items")), 4);
    cJSON_Delete(r);
    free(joined);
    free(text);
    free(pieces);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);
}

/* Kept and refused nodes alternating: every kept item is a run of its own.
 * The pieces stay within WIRE_MAX_PIECES (libmicrohttpd cannot send more
 * than IOV_MAX iovec entries), the first runs are still sent from the
 * request, and joined they equal the flat answer, every kept node in it. */
static void test_filter_result_pieces_bounded(void **state)
{
    (void)state;
    const size_t count = 2047;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "{'Pod':%s,'Nodes':{'items':[", POD);
    for (size_t i = 0; i < count; i++)
        strbuf_printf(&sb, "%s{'metadata':{'name':'n%zu'}}", i ? "," : "", i);
    strbuf_puts(&sb, "]}}");
    char *fixture = strbuf_detach(&sb, NULL), *body;
    struct extender_args a;
    parse_ok(fixture, &body, &a);
    assert_int_equal(a.count, count);
    char *kinds = calloc(count + 1, 1);
    const char **reasons = calloc(count, sizeof(*reasons));
    int *scores = calloc(count, sizeof(*scores));
    assert_true(kinds && reasons && scores);
    for (size_t i = 0; i < count; i++) {
        kinds[i] = i % 2 ? 'r' : 'f';
        reasons[i] = i % 2 ? "no GPU" : NULL;
    }
    struct evaluation ev;
    make_evaluation(&ev, &a, kinds, reasons, scores);
    size_t len;
    char *flat = wire_filter_result(&a, &ev, &len);
    char *text = NULL;
    struct http_piece *pieces = NULL;
    size_t n = 0;
    assert_int_equal(wire_filter_result_pieces(&a, &ev, &text, &pieces, &n), 0);
    assert_true(n <= WIRE_MAX_PIECES);
    size_t in_request = 0;
    const char *end = body + strlen(body);
    for (size_t i = 0; i < n; i++)
        in_request += pieces[i].ptr >= body && pieces[i].ptr < end;
    assert_true(in_request > 0);
    char *joined = join_pieces(pieces, n);
    assert_string_equal(joined, flat);
    cJSON *r = parse_answer(flat, &len);
    const cJSON *items = field(field(r, "Nodes"), "items");
    assert_int_equal(cJSON_GetArraySize(items), (count + 1) / 2);
    for (int i = 0; i < cJSON_GetArraySize(items); i++) {
        char want[32];
        snprintf(want, sizeof(want), "n%d", 2 * i);
        const cJSON *name = field(field(cJSON_GetArrayItem(items, i), "metadata"), "name");
        assert_string_equal(cJSON_GetStringValue(name), want);
    }
    cJSON_Delete(r);
    free(joined);
    free(text);
    free(pieces);
    evaluation_free(&ev);
    wire_args_free(&a);
    free(body);
    free(fixture);
    free(kinds);
    free(reasons);
    free(scores);
}

/* NumPDBViolations never exceeds the victims returned. */
static void test_pdb_violations(void **state)
{
    (void)state;
    assert_int_equal(wire_pdb_violations(2, 3, 3), 2); /* every victim kept: as requested */
    assert_int_equal(wire_pdb_violations(5, 3, 3), 5);
    assert_int_equal(wire_pdb_violations(2, 1, 3), 1); /* trimmed: the smaller */
    assert_int_equal(wire_pdb_violations(1, 2, 3), 1);
    assert_int_equal(wire_pdb_violations(0, 1, 2), 0);
}

static void test_preemption_result(void **state)
{
    (void)state;
    char *body = q("{'Pod':{'metadata':{'name':'p'}},'NodeNameToMetaVictims':{"
                   "'a':{'Pods':[{'UID':'u1'},{'UID':'u2'},{'UID':'u3'}],'NumPDBViolations':3},"
                   "'b':{'Pods':[{'UID':'u4'}],'NumPDBViolations':1},'c':{'Pods':[{'UID':'u5'}]}}}");
    struct preemption_args a;
    char *err = NULL;
    assert_int_equal(wire_parse_preemption(body, strlen(body), &a, &err), 0);
    assert_int_equal(a.count, 3);
    a.nodes[0].keep = true; /* a: u2 spared */
    a.nodes[0].keep_victim[0] = a.nodes[0].keep_victim[2] = true;
    a.nodes[1].keep = true; /* b: all kept */
    a.nodes[1].keep_victim[0] = true;
    size_t len;
    char *text = wire_preemption_result(&a, &len);
    assert_string_equal(text, "{\"NodeNameToMetaVictims\":{\"a\":{\"Pods\":[{\"UID\":\"u1\"},{\"UID\":\"u3\"}],"
                              "\"NumPDBViolations\":2},\"b\":{\"Pods\":[{\"UID\":\"u4\"}],\"NumPDBViolations\":1}}}");
    assert_null(strstr(text, "Error"));
    free(text);
    wire_preemption_free(&a);
    free(body);
    /* NumPDBViolations must be a whole number >= 0. */
    const char *bad[] = {"-1", "1.5", "'2'", "1e10", "true"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text2[256];
        snprintf(text2, sizeof(text2), "{'Pod':{},'NodeNameToMetaVictims':{'a':{'Pods':[],'NumPDBViolations':%s}}}",
                 bad[i]);
        body = q(text2);
        err = NULL;
        assert_int_equal(wire_parse_preemption(body, strlen(body), &a, &err), -1);
        assert_non_null(err);
        assert_non_null(strstr(err, "NumPDBViolations of node a"));
        free(err);
        free(body);
    }
}

/* Text quoted from requests need not be UTF-8; the answer must be. */
static void test_invalid_utf8_replaced(void **state)
{
    (void)state;
    size_t len = 0;
    char *body = wire_filter_error("bad \xfe byte, cut \xc3 and fine \xc3\xa9", &len);
    assert_non_null(body);
    assert_non_null(strstr(body, "bad \\ufffd byte, cut \\ufffd and fine \xc3\xa9"));
    cJSON *r = cJSON_ParseWithLength(body, len);
    assert_non_null(r);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "Error")->valuestring,
                        "bad \xef\xbf\xbd byte, cut \xef\xbf\xbd and fine \xc3\xa9");
    cJSON_Delete(r);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_names_form),
        cmocka_unit_test(test_repeated_node_list_parsed_once),
        cmocka_unit_test(test_repeated_keys_last_counts),
        cmocka_unit_test(test_nodes_form),
        cmocka_unit_test(test_escaped_names),
        cmocka_unit_test(test_large_nodes_form_two_threads),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_filter_result_names),
        cmocka_unit_test(test_ascii_only),
        cmocka_unit_test(test_names_answered_as_they_came),
        cmocka_unit_test(test_filter_result_nodes),
        cmocka_unit_test(test_filter_result_nodes_none_kept),
        cmocka_unit_test(test_priority_list),
        cmocka_unit_test(test_filter_error),
        cmocka_unit_test(test_invalid_utf8_replaced),
        cmocka_unit_test(test_round_trip_bind_mode),
        cmocka_unit_test(test_round_trip_filter_mode),
        cmocka_unit_test(test_round_trip_request_errors),
        cmocka_unit_test(test_filter_result_pieces),
        cmocka_unit_test(test_filter_result_pieces_bounded),
        cmocka_unit_test(test_pdb_violations),
        cmocka_unit_test(test_preemption_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
