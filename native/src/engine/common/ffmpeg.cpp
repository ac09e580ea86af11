#include "common/ffmpeg.h"

extern "C" {
#include <libavutil/avutil.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
}

#include <cstdarg>
#include <string>

namespace {

// Where FFmpeg's error lines go on this thread while a voxd_av_error_scope lives on it; null otherwise.
thread_local std::string * t_av_error = nullptr; // borrowed: the scope's `last`

void voxd_av_log(void * avcl, int level, const char * fmt, va_list vl) {
    if (level > AV_LOG_ERROR || t_av_error == nullptr) {
        return;
    }
    char line[256];
    int print_prefix = 0; // no "[mp3 @ 0x...]" prefix: the message goes to a client
    av_log_format_line2(avcl, level, fmt, vl, line, sizeof(line), &print_prefix);
    std::string text(line);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '.')) {
        text.pop_back();
    }
    if (!text.empty()) {
        *t_av_error = std::move(text);
    }
}

} // namespace

void voxd_ffmpeg_init() {
    av_log_set_level(AV_LOG_ERROR);   // our callback sees error lines only ...
    av_log_set_callback(voxd_av_log); // ... and prints none of them
}

voxd_av_error_scope::voxd_av_error_scope() {
    t_av_error = &last;
}

voxd_av_error_scope::~voxd_av_error_scope() {
    t_av_error = nullptr;
}

std::string voxd_av_reason(int err, const voxd_av_error_scope & log) {
    if (!log.last.empty()) {
        return log.last;
    }
    char buf[AV_ERROR_MAX_STRING_SIZE] = {};
    av_strerror(err, buf, sizeof(buf));
    return buf;
}
