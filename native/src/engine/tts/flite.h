// Offline English text-to-speech with CMU flite 2.2: the built-in voices slt, kal, awb and rms, all at 16 kHz. A
// source build opens Debian's libflite1 with dlopen on first use, so the addon loads where flite is not installed
// and only this engine fails, with an `engine_unavailable` error naming the package; a platform package links it in
// (common/clib.h).
#pragma once

#include "common/error.h"
#include "common/pcm-sink.h"

#include <memory>
#include <string>
#include <vector>

struct voxd_flite_voices; // the registered voices (tts/flite.cpp)

struct voxd_flite_voice {
    std::string id;   // slt, kal, awb, rms
    std::string name; // flite's name for it
    std::string description;
};

// flite's voices, opened and registered once per process (flite keeps them in globals); a model is a hold on
// them. Syntheses may run at once on any threads.
class voxd_flite_model {
public:
    static constexpr int sample_rate = 16000;

    ~voxd_flite_model();

    // Opens flite and has every voice speak once. Throws voxd_error "engine_unavailable" (flite is not installed)
    // or "model_load_failed".
    static std::shared_ptr<const voxd_flite_model> load();

    // The built-in voices in order (`voice` below is an index into them); names are flite's once `loaded`.
    static std::vector<voxd_flite_voice> voices(const voxd_flite_model * loaded);

    // True when flite's rand() is redirected: the same request always gives the same audio.
    bool deterministic() const;

    // Speaks `text` at `speed` (> 1 is faster) into `sink` at 16 kHz, utterance by utterance, streaming as flite
    // does. Throws voxd_error "aborted", "synthesis_failed", "out_of_memory" or "invalid_argument" (no such voice).
    void synthesize(const std::string & text, size_t voice, float speed, voxd_pcm_sink & sink, const voxd_abort_ptr & abort) const;

private:
    explicit voxd_flite_model(const voxd_flite_voices & voices);
    std::unique_ptr<voxd_flite_voices> m_voices;
};
