/* The JSON reader's lookup by key (core/json_parse.c: pp_json_get), which binary-searches
 * an index in objects of many keys (a model's per-initializer metadata): against a linear
 * scan of the keys, for objects below and above the index's threshold, keys in scrambled
 * order, a key written twice (the first wins) and keys that are absent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <onnxpipe/core.h>
#include <onnxpipe/core_util.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first member named key, by a scan: the reference. */
static const pp_jvalue *scan(const pp_jvalue *obj, const char *key)
{
    for (int i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return &obj->items[i];
    return NULL;
}

/* {"k<p(0)>": 0, "k<p(1)>": 1, ...} for n keys in a scrambled order, key "k<p(1)>" written
 * again at the end with value -1. */
static char *object_text(int n)
{
    char *s = malloc((size_t)n * 32 + 64), *o = s;
    o += sprintf(o, "{");
    for (int i = 0; i < n; i++) o += sprintf(o, "%s\"k%d\": %d", i ? ", " : "", (i * 7919) % n, i);
    sprintf(o, ", \"k%d\": -1}", 7919 % n);
    return s;
}

static void test_lookup_matches_scan(void **state)
{
    (void)state;
    const int sizes[] = {1, 3, 15, 16, 17, 100, 5003};
    int checked = 0;
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        const int n = sizes[t];
        char *text = object_text(n);
        pp_jvalue *v = NULL;
        pp_error err = {0};
        assert_int_equal(pp_json_parse(text, &v, &err), PP_OK);
        assert_int_equal(v->n, n + 1);
        char key[32];
        for (int i = -2; i < n + 2; i++) {   /* -2, -1, n, n + 1: absent */
            snprintf(key, sizeof key, "k%d", i);
            const pp_jvalue *got = pp_json_get(v, key), *want = scan(v, key);
            assert_ptr_equal(got, want);
            assert_true((got != NULL) == (i >= 0 && i < n));
            checked++;
        }
        snprintf(key, sizeof key, "k%d", 7919 % n);   /* written twice: the first (value 1 or 0) */
        assert_true(pp_json_get(v, key)->num >= 0);
        assert_null(pp_json_get(v, "k"));
        assert_null(pp_json_get(v, ""));
        pp_json_free(v);
        free(text);
    }
    print_message("%d lookups in objects of 1 to 5003 keys (with a key written twice) = a scan of the keys\n",
                  checked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_matches_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
