// A C++17 user of the public API, compiled (not run) by tests/test_cxx_headers.sh: every
// header parses as C++, and the functions it calls are C symbols (extern "C"), not mangled.
#include <onnxpipe/onnxpipe.h>
#include <onnxpipe/trainer.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char **argv)
{
    pp_error err = {};
    pp_gpt_config gc = pp_gpt_config_default();
    gc.layers = 1, gc.d_model = 32, gc.heads = 2, gc.seq = 16, gc.batch = 4, gc.with_loss = 1;
    pp_graph *g = nullptr;
    if (pp_example_gpt(&gc, &g, &err) != PP_OK) return 1;
    pp_trainer_config *cfg = pp_trainer_config_default();
    pp_trainer_config_set_graph(cfg, g);
    if (pp_trainer_config_set(cfg, "--batch", "4", &err) != PP_OK) return 1;
    pp_trainer *t = nullptr;
    if (pp_trainer_create(cfg, nullptr, &t, &err) != PP_OK) return 1;
    // a captureless lambda is a pp_trainer_feed_fn
    auto feed = [](void *user, const pp_trainer_feed *f, pp_error *) -> pp_status {
        auto *tokens = static_cast<std::vector<int64_t> *>(user);
        for (int i = 0; i < f->ninputs; i++)
            std::memcpy(f->inputs[i].data, tokens->data(), f->inputs[i].nbytes);
        return PP_OK;
    };
    std::vector<int64_t> tokens(4 * 16, 1);
    pp_trainer_stats st = {};
    for (int s = 0; s < (argc > 1 ? 10 : 1); s++)
        if (pp_trainer_step(t, feed, &tokens, &st, &err) != PP_OK) std::fprintf(stderr, "%s\n", err.msg);
    pp_trainer_eval_stats ev = {};
    pp_trainer_eval(t, feed, &tokens, &ev, &err);
    pp_trainer_save(t, argv[0], &err);
    pp_trainer_wait_saves(t, &err);
    pp_trainer_export(t, "trained.onnx", &err);
    std::printf("loss %g, eval %g at step %lld\n", st.loss, ev.loss, (long long)pp_trainer_steps_done(t));
    pp_trainer_destroy(t);
    pp_trainer_config_destroy(cfg);
    pp_graph_destroy(g);
    return 0;
}
