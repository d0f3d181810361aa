/* A user's program for tests/test_install.sh, built out of tree against an installed
 * onnxpipe (CMake package and pkg-config, shared and static): it checks that the library
 * it runs with is the version of the headers it was compiled with, then uses it. */
#include <onnxpipe/onnxpipe.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    printf("headers %s (%d.%d.%d), library %s (%d)\n", ONNXPIPE_VERSION_STRING, ONNXPIPE_VERSION_MAJOR,
           ONNXPIPE_VERSION_MINOR, ONNXPIPE_VERSION_PATCH, pp_version(), pp_version_number());
    if (strcmp(pp_version(), ONNXPIPE_VERSION_STRING) || pp_version_number() != ONNXPIPE_VERSION_NUMBER) {
        fprintf(stderr, "install_user: the library's version differs from the headers'\n");
        return 1;
    }
    pp_error err = {0};
    pp_gpt_config cfg = pp_gpt_config_default();
    pp_graph *g = NULL;
    pp_partition *p = NULL;
    if (pp_example_gpt(&cfg, &g, &err) != PP_OK || pp_partition_create(g, 2, NULL, &p, &err) != PP_OK) {
        fprintf(stderr, "install_user: %s\n", err.msg);
        pp_graph_destroy(g);
        return 1;
    }
    int64_t own0 = pp_partition_stage_params(p, 0), own1 = pp_partition_stage_params(p, 1);
    printf("example GPT: %lld parameters, %lld + %lld by stage\n", (long long)pp_graph_num_params(g),
           (long long)own0, (long long)own1);
    int ok = own0 + own1 == pp_graph_num_params(g) && own0 > 0 && own1 > 0;
    pp_partition_destroy(p);
    pp_graph_destroy(g);
    return ok ? 0 : 1;
}
