// What the engine libraries report about this build and this machine, for systemInfo() and the startup log.
#pragma once

#include <string>
#include <vector>

struct voxd_compute_device {
    std::string name;
    std::string description;
};

struct voxd_system_info {
    std::string ggml_version;
    std::string ggml_commit;
    std::string llama; // llama.cpp's feature line (CPU features, backends)
    std::string whisper;
    std::vector<voxd_compute_device> devices; // ggml's backends' devices, CPU included
};

voxd_system_info voxd_read_system_info();
