// The engine libraries' log (ggml, whisper.cpp, llama.cpp, libmtmd): lines at or above a level go to stderr with an
// [engine] prefix, the rest are dropped. Process-wide, as the libraries' own callbacks are.
#pragma once

#include "ggml.h"

// Routes every engine library's log through voxd_engine_log, and FFmpeg's into common/ffmpeg.h's error scopes.
// Idempotent: each JS environment's init calls it.
void voxd_engine_log_init();

// Lines below `level` (a ggml_log_level) are dropped from now on; the default drops those below warnings.
void voxd_engine_log_set_level(int level);

// The callback itself, for a library whose log an engine installs (libmtmd: tts/ggml/tts-model.cpp).
void voxd_engine_log(ggml_log_level level, const char * text, void * user_data);
