#include "common/engine-log.h"
#include "common/ffmpeg.h"

#include "llama.h"
#include "parakeet.h"
#include "whisper.h"

#include <atomic>
#include <cstdio>

static std::atomic<int> g_min_log_level{ GGML_LOG_LEVEL_WARN };

void voxd_engine_log(ggml_log_level level, const char * text, void * /*user_data*/) {
    if (level == GGML_LOG_LEVEL_CONT || level < g_min_log_level.load()) {
        return;
    }
    std::fprintf(stderr, "[engine] %s", text);
}

void voxd_engine_log_init() {
    whisper_log_set(voxd_engine_log, nullptr);
    parakeet_log_set(voxd_engine_log, nullptr);
    llama_log_set(voxd_engine_log, nullptr);
    ggml_log_set(voxd_engine_log, nullptr);
    voxd_ffmpeg_init(); // FFmpeg's is not printed: its error lines become the reason in our messages
}

void voxd_engine_log_set_level(int level) {
    g_min_log_level.store(level);
}
