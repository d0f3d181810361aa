/* A user's program for tests/test_symbols.sh: it defines its own iter_next, value_bytes,
 * shape_binary and load_tensor (names onnxpipe uses inside, with other types here), so it
 * links against libonnxpipe.a only while the library keeps those names local; then each
 * call must reach its own definition, the user's or the library's. */
#include <onnxpipe/onnxpipe.h>

#include <stdio.h>
#include <string.h>

int iter_next(int i) { return i + 1; }
double value_bytes(double kib) { return kib * 1024; }
const char *shape_binary(void) { return "the user's"; }
int load_tensor = 7;   /* a variable where the library has a function */

static int fail(const char *what, const pp_error *err)
{
    fprintf(stderr, "symbols_user: %s: %s\n", what, err ? err->msg : "wrong result");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: symbols_user SCRATCH.onnx\n");
        return 2;
    }
    if (iter_next(1) != 2 || value_bytes(2) != 2048 || strcmp(shape_binary(), "the user's") || load_tensor != 7)
        return fail("the program's own iter_next, value_bytes, shape_binary or load_tensor", NULL);

    /* the library's own: the example GPT is shape-inferred (shape_binary), saved and loaded
     * again (load_tensor), and partitioned (value_bytes) */
    pp_error err = {0};
    pp_gpt_config cfg = pp_gpt_config_default();
    cfg.batch = 2;   /* a fixed batch dim: the model loads without binding one */
    pp_graph *g = NULL, *back = NULL;
    pp_partition *p = NULL;
    if (pp_example_gpt(&cfg, &g, &err) != PP_OK) return fail("pp_example_gpt", &err);
    if (pp_graph_save(g, argv[1], NULL, &err) != PP_OK) return fail("pp_graph_save", &err);
    if (pp_graph_load(argv[1], NULL, &back, &err) != PP_OK) return fail("pp_graph_load", &err);
    if (pp_partition_create(back, 2, NULL, &p, &err) != PP_OK) return fail("pp_partition_create", &err);
    const int *sent = NULL;
    int64_t own0 = pp_partition_stage_params(p, 0), own1 = pp_partition_stage_params(p, 1);
    int64_t params = pp_graph_num_params(g);
    int nsent = pp_partition_stage_outputs(p, 0, &sent);
    int ok = pp_graph_num_params(back) == params && own0 + own1 == params && nsent > 0;
    printf("own definitions called; the library built, saved, loaded and partitioned a GPT of %lld parameters "
           "(%lld + %lld by stage, %d tensors cut)\n",
           (long long)params, (long long)own0, (long long)own1, nsent);
    pp_partition_destroy(p);
    pp_graph_destroy(back);
    pp_graph_destroy(g);
    return ok ? 0 : fail("the parameter counts of the loaded and partitioned model", NULL);
}
