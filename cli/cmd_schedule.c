#include "cli.h"
int cmd_schedule(int argc, char **argv) { (void)argc; (void)argv; return cli_usage_error(NULL, "not built yet"); }
