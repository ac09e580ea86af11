#include "common/system-info.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"
#include "whisper.h"

voxd_system_info voxd_read_system_info() {
    voxd_system_info info;
    info.ggml_version = ggml_version();
    info.ggml_commit  = ggml_commit();
    info.llama        = llama_print_system_info();
    info.whisper      = whisper_print_system_info();
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        info.devices.push_back({ ggml_backend_dev_name(dev), ggml_backend_dev_description(dev) });
    }
    return info;
}
