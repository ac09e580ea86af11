#include "voxd-whisper.h"

#include "voxd-cpu-gate.h"
#include "voxd-ggml-graph.h"

#include "ggml.h"
#include "whisper.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <optional>
#include <thread>
#include <unordered_set>

// ---- file check ----

// whisper_model_load accepts files it cannot use: a file without tensors loads as an "empty model for
// testing" (uninitialised weights), a tensor cut short by the end of the file is half-read without an error,
// and some broken hparams reach GGML_ASSERTs (process abort) later. Walking the layout first turns each of
// these into a clean model_load_failed.
static void voxd_whisper_check_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) {
        throw voxd_error("model_load_failed", "cannot open " + path);
    }
    const int64_t size = in.tellg();
    in.seekg(0);

    auto fail     = [&](const std::string & why) { throw voxd_error("model_load_failed", path + " is not a usable whisper.cpp model: " + why); };
    auto read_i32 = [&]() {
        int32_t v = 0;
        if (!in.read(reinterpret_cast<char *>(&v), sizeof(v))) {
            fail("the file is truncated");
        }
        return v;
    };
    auto skip = [&](int64_t n) {
        if (n < 0 || (int64_t) in.tellg() + n > size) {
            fail("the file is truncated");
        }
        in.seekg(n, std::ios::cur);
    };

    if ((uint32_t) read_i32() != GGML_FILE_MAGIC) {
        fail("bad magic");
    }
    int32_t hp[11];
    for (int32_t & v : hp) {
        v = read_i32();
    }
    const auto [n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype] = hp;
    (void) ftype; // whisper.cpp rejects unknown ftypes cleanly itself

    // whisper.cpp hard-codes the special token ids of the Whisper tokenizer: smaller vocabularies index past them
    const bool sane = n_vocab >= 51864 && n_vocab <= (1 << 20) && n_audio_ctx > 0 && n_audio_ctx <= (1 << 16) && n_text_ctx > 0 && n_text_ctx <= (1 << 16) &&
                      n_audio_state > 0 && n_audio_state <= (1 << 16) && n_text_state == n_audio_state && n_audio_head > 0 &&
                      n_audio_state % n_audio_head == 0 && n_text_head > 0 && n_text_state % n_text_head == 0 && n_audio_layer > 0 && n_audio_layer <= 256 &&
                      n_text_layer > 0 && n_text_layer <= 256 && n_mels > 0 && n_mels <= 512;
    if (!sane) {
        fail("implausible hyperparameters");
    }

    const int32_t n_mel = read_i32();
    const int32_t n_fft = read_i32();
    if (n_mel != n_mels || n_fft != 1 + WHISPER_N_FFT / 2) {
        fail("mel filters do not match the hyperparameters");
    }
    skip((int64_t) n_mel * n_fft * (int64_t) sizeof(float));

    const int32_t n_words = read_i32();
    if (n_words < 0 || n_words > n_vocab) {
        fail("bad vocabulary size");
    }
    for (int32_t i = 0; i < n_words; i++) {
        const int32_t len = read_i32();
        if (len < 0 || len > 1024) {
            fail("bad vocabulary entry");
        }
        skip(len);
    }

    // every tensor complete, each name once, and as many as whisper_model_load creates for these hparams
    const int64_t expected = 11 + 15 * (int64_t) n_audio_layer + 24 * (int64_t) n_text_layer;
    std::unordered_set<std::string> names;
    while ((int64_t) in.tellg() < size) {
        const int32_t n_dims   = read_i32();
        const int32_t name_len = read_i32();
        const int32_t ttype    = read_i32();
        if (n_dims < 1 || n_dims > 4 || name_len < 1 || name_len > 256 || ttype < 0 || ttype >= GGML_TYPE_COUNT) {
            fail("bad tensor header");
        }
        const ggml_type type = (ggml_type) ttype;
        const int64_t blck   = ggml_blck_size(type); // 0 for removed types
        int64_t ne[4]        = { 1, 1, 1, 1 };
        int64_t n_elements   = 1;
        for (int i = 0; i < n_dims; i++) {
            ne[i] = read_i32();
            if (ne[i] <= 0 || ne[i] > (1 << 24)) {
                fail("bad tensor shape");
            }
            n_elements *= ne[i];
        }
        if (blck <= 0 || ne[0] % blck != 0 || n_elements > (int64_t(1) << 34)) {
            fail("bad tensor type or shape");
        }
        std::string name(name_len, '\0');
        if (!in.read(name.data(), name_len)) {
            fail("the file is truncated");
        }
        if (!names.insert(name).second) {
            fail("tensor '" + name + "' appears twice");
        }
        skip(n_elements / blck * (int64_t) ggml_type_size(type));
    }
    if ((int64_t) names.size() != expected) {
        fail(names.empty() ? "it has no tensors" : "it has " + std::to_string(names.size()) + " tensors, expected " + std::to_string(expected));
    }
}

// ---- model data ----

voxd_whisper_model_data::~voxd_whisper_model_data() {
    // The last holder can be a batched job ending on the batcher's own thread, which cannot join itself: the
    // batcher is then destroyed (and that thread joined) on a thread of its own.
    if (batcher && batcher->on_executor_thread()) {
        std::thread([b = std::move(batcher)]() mutable { b.reset(); }).detach();
    }
}

void voxd_whisper_model_data::context_deleter::operator()(whisper_context * ctx) const {
    whisper_free(ctx);
}

void voxd_whisper_model_data::state_deleter::operator()(whisper_state * state) const {
    whisper_free_state(state);
}

whisper_context * voxd_whisper_model_data::context() {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_ctx) {
        m_ctx.reset(whisper_init_from_file_with_params_no_state(path.c_str(), cparams));
        if (!m_ctx) {
            throw voxd_error("transcription_failed", "whisper.cpp cannot load " + path + " (out of memory?)");
        }
    }
    return m_ctx.get();
}

voxd_whisper_model_data::state_ptr voxd_whisper_model_data::acquire() {
    whisper_context * ctx = context();
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_idle.empty()) {
            state_ptr st = std::move(m_idle.back());
            m_idle.pop_back();
            return st;
        }
    }
    state_ptr st(whisper_init_state(ctx));
    if (!st) {
        throw voxd_error("transcription_failed", "cannot allocate a whisper state (out of memory?)");
    }
    return st;
}

void voxd_whisper_model_data::release(state_ptr st) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_idle.size() < max_idle) {
            m_idle.push_back(std::move(st));
            return;
        }
    }
    // beyond max_idle: `st` is freed here, outside the lock
}

// ---- languages ----

// The short code of a language given by code or English name, or "" when unknown. A local lookup, because
// whisper_lang_id logs an error for every unknown name a client sends.
static std::string voxd_whisper_language_code(const voxd_whisper_batcher & model, std::string name) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return (char) std::tolower(c); });
    const int n = model.multilingual() ? model.n_languages() : 1; // id 0 is English
    for (int id = 0; id < n && id <= whisper_lang_max_id(); id++) {
        if (name == whisper_lang_str(id) || name == whisper_lang_str_full(id)) {
            return whisper_lang_str(id);
        }
    }
    return "";
}

// ---- transcription ----

struct voxd_whisper_word {
    std::string word;
    int64_t t0;
    int64_t t1;
    double probability;
};

// Times in centiseconds (whisper.cpp's unit), converted to seconds only when crossing into JS.
struct voxd_whisper_segment {
    int64_t t0 = 0;
    int64_t t1 = 0;
    std::string text;
    std::vector<int32_t> tokens;
    double avg_logprob    = 0.0;
    double no_speech_prob = 0.0;
    float temperature     = 0.0f;
    std::vector<voxd_whisper_word> words;
};

// One transcribe() call, on the batcher (voxd_whisper_task) or on whisper.cpp's path (execute(), word timestamps).
// Shared by the worker or batcher, the promise settlement and every queued segment delivery, so it lives until
// the last of them is done.
class voxd_whisper_job : public voxd_whisper_task, public std::enable_shared_from_this<voxd_whisper_job> {
public:
    voxd_whisper_job(std::shared_ptr<voxd_whisper_model_data> model, voxd_whisper_params params, std::vector<float> samples, voxd_abort_ptr abort)
        : m_model(std::move(model)), m_params(std::move(params)), m_samples(std::move(samples)), m_abort(std::move(abort)) {
        // whisper.cpp's fallback schedule, rebuilt with the same float arithmetic to name each segment's temperature
        if (m_params.temperature_inc > 0.0f) {
            for (float t = m_params.temperature; t < 1.0f + 1e-6f && m_temperatures.size() < 32; t += m_params.temperature_inc) {
                m_temperatures.push_back(t);
            }
        } else {
            m_temperatures.push_back(m_params.temperature);
        }
        m_budget    = m_params.max_tokens > 0 ? m_params.max_tokens : -1;
        m_n_samples = (int64_t) m_samples.size();
        m_beg       = m_model->batcher->timestamp_begin();
    }

    // Segments go to JS through this while the job runs. transcribe() creates it on the main thread with one
    // thread reference, which belongs to the job's runner: it calls non-blocking (an unbounded queue, so never
    // waiting on JS) and releases the reference exactly once, when the job ends; Node frees the TSFN after the calls
    // still queued have run. Each queued call holds the job (shared_ptr) it delivers for. A batched job always has
    // one (it also settles the promise); on whisper.cpp's path only when the caller streams.
    Napi::ThreadSafeFunction tsfn;
    bool streaming = false;
    std::shared_ptr<Napi::FunctionReference> callback; // the caller's onSegment; main thread only
    std::unique_ptr<Napi::Promise::Deferred> deferred; // a batched job's promise; main thread only

    // ---- the batcher's side (voxd_whisper_task), on its thread ----

    const voxd_whisper_params & params() const override { return m_params; }
    const std::vector<float> & samples() const override { return m_samples; }
    bool aborted() const override { return m_abort->load(std::memory_order_relaxed); }
    bool halted() const override { return m_halt.load(std::memory_order_relaxed); }

    void on_segment(const voxd_whisper_raw_segment & segment, const std::string & language) override {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_language = language;
        }
        add(segment);
    }

    void on_done(const std::string & language) override {
        settle([language](Napi::Env env, voxd_whisper_job & job) { job.deferred->Resolve(job.result_to_js(env, language)); });
    }

    void on_error(const std::string & code, const std::string & message) override {
        m_failed.store(true); // set before the rejection, so no segment reaches JS after it
        settle([code, message](Napi::Env env, voxd_whisper_job & job) { job.deferred->Reject(voxd_make_js_error(env, code, message).Value()); });
    }

    // ---- whisper.cpp's path ----

    // Worker thread: runs the transcription; returns the language.
    std::string execute() {
        struct tsfn_release {
            voxd_whisper_job & job;
            ~tsfn_release() {
                if (job.streaming)
                    job.tsfn.Release();
            }
        } guard{ *this };
        try {
            return run();
        } catch (...) {
            m_failed.store(true); // set before the rejection, so no segment reaches JS after it
            throw;
        }
    }

    // Main thread: hands the segments not yet delivered to `fn`, in order. Called by queued TSFN calls and once
    // more before the promise settles, so every segment arrives exactly once and before the result.
    void deliver(Napi::Env env, Napi::Function fn) {
        if (m_failed.load()) {
            return;
        }
        size_t first;
        std::vector<voxd_whisper_segment> batch;
        std::string language;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            language = m_language;
            first    = m_delivered;
            batch.assign(m_segments.begin() + (std::ptrdiff_t) m_delivered, m_segments.end());
            m_delivered = m_segments.size();
        }
        for (size_t k = 0; k < batch.size() && !aborted(); k++) { // nothing more once the caller gave up
            try {
                fn.Call({ segment_to_js(env, batch[k], first + k), Napi::String::New(env, language) });
            } catch (const Napi::Error &) {
                // the exception is cleared; it must not escape into libuv. The engine's wrapper catches its own.
            }
        }
    }

    Napi::Value result_to_js(Napi::Env env, const std::string & language) {
        std::lock_guard<std::mutex> lock(m_mutex);
        Napi::Object out = Napi::Object::New(env);
        out.Set("language", language);
        Napi::Array segments = Napi::Array::New(env, m_segments.size());
        for (size_t i = 0; i < m_segments.size(); i++) {
            segments.Set((uint32_t) i, segment_to_js(env, m_segments[i], i));
        }
        out.Set("segments", segments);
        return out;
    }

private:
    // A batched job ends: the segments still queued, then the promise, on the main thread; the TSFN is released.
    template <typename F> void settle(F finish) {
        if (m_settled.exchange(true)) {
            return;
        }
        m_samples                = std::vector<float>(); // a long clip's copy need not outlive the decoding
        const napi_status queued = tsfn.NonBlockingCall([job = shared_from_this(), finish](Napi::Env env, Napi::Function) {
            try {
                if (job->callback) {
                    job->deliver(env, job->callback->Value());
                }
                finish(env, *job);
            } catch (const Napi::Error &) {
                // the promise stays pending only if V8 itself failed; nothing may escape into libuv
            }
            job->callback.reset(); // a JS reference: deleted here, on the main thread, not where the job ends
        });
        if (queued != napi_ok && callback) {
            callback->SuppressDestruct(); // the environment is going away: the reference goes with it
        }
        tsfn.Release();
    }

    std::string run() {
        voxd_check_abort(m_abort);
        whisper_context * ctx   = m_model->context();
        const bool multilingual = whisper_is_multilingual(ctx);
        // English-only models have no language token: nothing to detect
        const std::string fixed_language = !m_params.language.empty() ? m_params.language : multilingual ? "" : "en";
        if (m_samples.empty()) {
            return fixed_language.empty() ? "en" : fixed_language; // whisper.cpp would detect on a stale spectrogram
        }
        m_fixed_language = fixed_language;

        voxd_whisper_model_data::state_ptr st = m_model->acquire();

        whisper_full_params wp = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
        wp.n_threads           = m_params.threads > 0 ? m_params.threads : std::min(4, voxd_cpu_gate::available_cores());
        wp.translate           = m_params.translate;
        wp.no_context          = true; // clears any text a pooled state kept from its previous request
        wp.print_progress      = false;
        wp.print_realtime      = false;
        wp.print_timestamps    = false;
        wp.print_special       = false;
        wp.token_timestamps    = m_params.word_timestamps;
        wp.max_tokens          = std::max(0, m_params.max_tokens);
        wp.language            = fixed_language.empty() ? nullptr : fixed_language.c_str();
        wp.initial_prompt      = m_params.initial_prompt.empty() ? nullptr : m_params.initial_prompt.c_str();
        wp.temperature         = m_params.temperature;
        wp.temperature_inc     = m_params.temperature_inc;
        if (m_params.no_context) {
            // no_context in whisper.cpp only clears history at the start; windows still see the text before
            // them unless the text context is sized to the initial prompt alone (or to nothing). A token covers
            // at least one byte, so the buffer always suffices (a short one makes whisper.cpp log an error).
            std::vector<whisper_token> prompt(m_params.initial_prompt.size() + 1);
            const int n_prompt =
                m_params.initial_prompt.empty() ? 0 : whisper_tokenize(ctx, m_params.initial_prompt.c_str(), prompt.data(), (int) prompt.size());
            wp.n_max_text_ctx       = n_prompt > 0 ? n_prompt + 1 : 0; // + <|startofprev|>
            wp.carry_initial_prompt = n_prompt > 0;
        }

        wp.new_segment_callback             = on_new_segment;
        wp.new_segment_callback_user_data   = this;
        wp.encoder_begin_callback           = on_encoder_begin;
        wp.encoder_begin_callback_user_data = this;
        wp.logits_filter_callback           = on_logits;
        wp.logits_filter_callback_user_data = this;
        wp.abort_callback                   = on_abort;
        wp.abort_callback_user_data         = this;

        // whisper.cpp runs every graph of the transcription inside this one call: the job holds the cores from the
        // start, and gives them back and waits its turn again at each new window (on_encoder_begin), so that other
        // models step between windows; on a GPU it keeps no team of CPU threads busy
        m_lease_threads = m_model->cparams.use_gpu && voxd_gpu_available() ? 1 : wp.n_threads;
        m_cores.emplace(m_lease_threads);
        const int ret = whisper_full_with_state(ctx, st.get(), wp, m_samples.data(), (int) m_samples.size());
        m_cores.reset();
        m_samples = std::vector<float>(); // a long clip's copy need not outlive the decoding
        if (ret == -7) {
            (void) st.release(); // on this path (KV cache allocation failed) whisper_full_with_state frees the state itself
            voxd_check_abort(m_abort);
            throw voxd_error("transcription_failed", "whisper.cpp could not allocate its KV cache (out of memory?)");
        }

        if (!m_callback_error.empty()) {
            throw voxd_error("transcription_failed", m_callback_error);
        }
        voxd_check_abort(m_abort); // also after a 0: an encoder_begin_callback refusal ends whisper_full "successfully"
        if (ret != 0) {
            if (!m_halt.load()) {
                throw voxd_error("transcription_failed", "whisper.cpp failed to transcribe (whisper_full error " + std::to_string(ret) + ")");
            }
            // else: the token budget was spent and decoding was stopped on purpose; the segments so far stand
        } else {
            collect(ctx, st.get()); // segments whisper.cpp finished without a callback (none expected)
        }

        const std::string language = language_of(st.get());
        // decoder 0's sampling RNG is seeded only when a state is created: a state that sampled at t > 0 would
        // make the next request on it decode differently, so only states that stayed greedy go back to the pool
        if (ret == 0 && !m_sampled) {
            m_model->release(std::move(st));
        }
        return language;
    }

    // The language decoded with: given, English for English-only models, else what whisper.cpp detected.
    std::string language_of(whisper_state * st) const {
        if (!m_fixed_language.empty()) {
            return m_fixed_language;
        }
        const int id = whisper_full_lang_id_from_state(st);
        return id >= 0 && id <= whisper_lang_max_id() ? whisper_lang_str(id) : "en";
    }

    // ---- whisper.cpp callbacks: they run on the worker thread (or threads it joins) and never throw ----

    static bool on_abort(void * data) {
        auto * job = static_cast<voxd_whisper_job *>(data);
        return job->aborted() || job->halted();
    }

    // Before each 30 s window: the temperature attempts start over. The abort callback is only polled after
    // a whole encoder pass, so an abort that came during language detection (or the previous window) stops
    // here instead of paying for one more pass; whisper.cpp then returns 0 and run() sees the flag.
    static bool on_encoder_begin(whisper_context *, whisper_state *, void * data) {
        auto * job     = static_cast<voxd_whisper_job *>(data);
        job->m_attempt = -1;
        job->m_cores.reset();
        job->m_cores.emplace(job->m_lease_threads);
        return !on_abort(data);
    }

    // Called before each sampling step. With no tokens yet it is the first step of a temperature attempt, and
    // whisper.cpp makes that call from one thread; later calls may come from several threads and only return.
    static void on_logits(whisper_context *, whisper_state *, const whisper_token_data *, int n_tokens, float *, void * data) {
        if (n_tokens != 0) {
            return;
        }
        auto * job = static_cast<voxd_whisper_job *>(data);
        job->m_attempt++;
        job->m_window_temperature = job->m_temperatures[(size_t) std::min<int>(job->m_attempt, (int) job->m_temperatures.size() - 1)];
        if (job->m_window_temperature > 0.0f) {
            job->m_sampled = true;
        }
    }

    static void on_new_segment(whisper_context * ctx, whisper_state * st, int /*n_new*/, void * data) {
        auto * job = static_cast<voxd_whisper_job *>(data);
        try {
            job->collect(ctx, st);
        } catch (const std::exception & e) {
            job->m_callback_error = e.what();
            job->m_halt.store(true);
        } catch (...) {
            job->m_callback_error = "unknown error while collecting segments";
            job->m_halt.store(true);
        }
    }

    // Takes the segments whisper.cpp added since the last call.
    void collect(whisper_context * ctx, whisper_state * st) {
        const int n = whisper_full_n_segments_from_state(st);
        for (; m_n_seen < n; m_n_seen++) {
            voxd_whisper_raw_segment raw;
            raw.t0                  = whisper_full_get_segment_t0_from_state(st, m_n_seen);
            raw.t1                  = whisper_full_get_segment_t1_from_state(st, m_n_seen);
            raw.no_speech_prob      = whisper_full_get_segment_no_speech_prob_from_state(st, m_n_seen);
            raw.temperature         = m_window_temperature;
            const whisper_token eot = whisper_token_eot(ctx);
            const int n_tokens      = whisper_full_n_tokens_from_state(st, m_n_seen);
            for (int j = 0; j < n_tokens; j++) {
                const whisper_token_data td = whisper_full_get_token_data_from_state(st, m_n_seen, j);
                voxd_whisper_token t;
                t.id   = td.id;
                t.p    = td.p;
                t.plog = td.plog;
                t.t0   = td.t0;
                t.t1   = td.t1;
                if (td.id < eot) {
                    t.text = whisper_full_get_token_text_from_state(ctx, st, m_n_seen, j);
                }
                raw.tokens.push_back(std::move(t));
            }
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                if (m_language.empty()) {
                    m_language = language_of(st); // detection is over once segments come
                }
            }
            add(raw);
        }
    }

    // A decoder's segment: applies the token budget, clamps its times to the clip and keeps them in order, and
    // queues it for JS. Text tokens have text; <|endoftext|>, task and language tokens are not part of the output.
    void add(const voxd_whisper_raw_segment & raw) {
        if (m_halt.load()) {
            return; // budget spent: the rest is dropped
        }
        const int64_t duration = m_n_samples * 100 / WHISPER_SAMPLE_RATE;
        voxd_whisper_segment seg;
        // with few tokens (or untrained weights) a window's last segment can end past the end of the audio
        seg.t0             = std::clamp<int64_t>(raw.t0, m_last_t1, duration);
        seg.t1             = std::clamp<int64_t>(raw.t1, seg.t0, duration);
        seg.no_speech_prob = raw.no_speech_prob;
        seg.temperature    = raw.temperature;

        double sum_logprob = 0.0;
        bool budget_hit    = false;
        for (const voxd_whisper_token & t : raw.tokens) {
            const bool is_text = !t.text.empty();
            if (!is_text && t.id < m_beg) {
                continue;
            }
            if (is_text && m_budget >= 0) {
                if (m_budget == 0) {
                    budget_hit = true;
                    break;
                }
                m_budget--;
            }
            seg.tokens.push_back(t.id);
            sum_logprob += std::isfinite(t.plog) ? t.plog : 0.0;
            if (!is_text) {
                continue;
            }
            seg.text += t.text;
            if (m_params.word_timestamps) {
                add_to_words(seg.words, t);
            }
        }
        seg.avg_logprob = seg.tokens.empty() ? 0.0 : sum_logprob / (double) seg.tokens.size();
        if (budget_hit || m_budget == 0) {
            m_halt.store(true); // stops decoding at the next step (graph boundary)
        }

        int64_t last = seg.t0;
        for (voxd_whisper_word & w : seg.words) {
            w.t0 = std::clamp<int64_t>(w.t0, last, seg.t1);
            w.t1 = std::clamp<int64_t>(w.t1, w.t0, seg.t1);
            last = w.t1;
        }
        m_last_t1 = seg.t1;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_segments.push_back(std::move(seg));
        }
        if (streaming) {
            tsfn.NonBlockingCall([job = shared_from_this()](Napi::Env env, Napi::Function fn) { job->deliver(env, fn); });
        }
    }

    // A token that starts with a space starts a word; other tokens (word pieces, punctuation) extend the last one.
    static void add_to_words(std::vector<voxd_whisper_word> & words, const voxd_whisper_token & td) {
        std::string text(td.text);
        const bool starts_word = words.empty() || (!text.empty() && text[0] == ' ');
        const size_t first     = text.find_first_not_of(' ');
        text                   = first == std::string::npos ? "" : text.substr(first);
        if (starts_word) {
            if (!text.empty()) {
                words.push_back({ text, td.t0, td.t1, td.p });
            }
            return;
        }
        voxd_whisper_word & w = words.back();
        w.word += text;
        w.t1          = std::max(w.t1, td.t1);
        w.probability = std::min(w.probability, (double) td.p); // a word is as certain as its least certain piece
    }

    static Napi::Value segment_to_js(Napi::Env env, const voxd_whisper_segment & seg, size_t index) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("index", (double) index);
        o.Set("start", (double) seg.t0 / 100.0);
        o.Set("end", (double) seg.t1 / 100.0);
        o.Set("text", seg.text);
        Napi::Array tokens = Napi::Array::New(env, seg.tokens.size());
        for (size_t i = 0; i < seg.tokens.size(); i++) {
            tokens.Set((uint32_t) i, seg.tokens[i]);
        }
        o.Set("tokens", tokens);
        o.Set("avgLogprob", seg.avg_logprob);
        o.Set("noSpeechProb", seg.no_speech_prob);
        o.Set("temperature", std::round((double) seg.temperature * 1000.0) / 1000.0); // 0.2f, not 0.200000003
        if (!seg.words.empty()) {
            Napi::Array words = Napi::Array::New(env, seg.words.size());
            for (size_t i = 0; i < seg.words.size(); i++) {
                Napi::Object w = Napi::Object::New(env);
                w.Set("word", seg.words[i].word);
                w.Set("start", (double) seg.words[i].t0 / 100.0);
                w.Set("end", (double) seg.words[i].t1 / 100.0);
                w.Set("probability", seg.words[i].probability);
                words.Set((uint32_t) i, w);
            }
            o.Set("words", words);
        }
        return o;
    }

    std::shared_ptr<voxd_whisper_model_data> m_model;
    voxd_whisper_params m_params;
    std::vector<float> m_samples;
    voxd_abort_ptr m_abort;
    std::vector<float> m_temperatures;
    int64_t m_n_samples = 0;
    int32_t m_beg       = 0; // the first timestamp token: ids between <|endoftext|> and it are not output

    // the runner's thread only (a worker, or the batcher's)
    int m_n_seen               = 0;
    int m_attempt              = -1;
    float m_window_temperature = 0.0f;
    bool m_sampled             = false;
    int m_budget               = -1; // text tokens left; -1 = no limit
    int64_t m_last_t1          = 0;
    std::string m_callback_error;
    std::string m_fixed_language; // the language given (or implied); empty = detect
    // whisper.cpp's path: the cores its graphs run on, held a window at a time (voxd-cpu-gate.h)
    std::optional<voxd_cpu_gate::lease> m_cores;
    int m_lease_threads = 1;

    std::atomic<bool> m_halt{ false };    // budget spent or collecting failed: whisper.cpp stops at its next check
    std::atomic<bool> m_failed{ false };  // the job failed: segments still queued are dropped
    std::atomic<bool> m_settled{ false }; // a batched job's end was reported

    std::mutex m_mutex; // guards m_segments (worker appends, main thread reads)
    std::vector<voxd_whisper_segment> m_segments;
    std::string m_language; // set with the first segment
    size_t m_delivered = 0; // main thread only
};

// ---- argument parsing (main thread) ----

static voxd_whisper_params voxd_whisper_parse_params(Napi::Env env, const Napi::Value & value, const voxd_whisper_batcher & model) {
    voxd_whisper_params params;
    if (value.IsUndefined() || value.IsNull()) {
        return params;
    }
    if (!value.IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", "params must be an object");
    }
    Napi::Object p  = value.As<Napi::Object>();
    auto bad        = [&](const std::string & message) { return voxd_make_js_error(env, "invalid_argument", message); };
    auto opt_string = [&](const char * key) -> std::string {
        Napi::Value v = p.Get(key);
        if (v.IsUndefined() || v.IsNull())
            return "";
        if (!v.IsString())
            throw bad(std::string(key) + " must be a string");
        return v.As<Napi::String>().Utf8Value();
    };
    auto opt_bool = [&](const char * key, bool fallback) {
        Napi::Value v = p.Get(key);
        if (v.IsUndefined() || v.IsNull())
            return fallback;
        if (!v.IsBoolean())
            throw bad(std::string(key) + " must be a boolean");
        return v.As<Napi::Boolean>().Value();
    };
    auto opt_number = [&](const char * key, double fallback, double lo, double hi) {
        Napi::Value v = p.Get(key);
        if (v.IsUndefined() || v.IsNull())
            return fallback;
        const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
        if (!(d >= lo && d <= hi))
            throw bad(std::string(key) + " must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return d;
    };

    const bool multilingual    = model.multilingual();
    const std::string language = opt_string("language");
    if (!language.empty() && language != "auto") {
        params.language = voxd_whisper_language_code(model, language);
        if (params.language.empty()) {
            throw bad(multilingual ? "unknown language '" + language + "'" : "this model is English-only; it cannot transcribe '" + language + "'");
        }
    }
    params.translate = opt_bool("translate", false);
    if (params.translate && !multilingual) {
        throw bad("this model is English-only; it cannot translate");
    }
    params.initial_prompt  = opt_string("initialPrompt");
    params.temperature     = (float) opt_number("temperature", 0.0, 0.0, 1.0);
    params.temperature_inc = (float) opt_number("temperatureInc", 0.2, 0.0, 1.0);
    params.max_tokens      = (int) opt_number("maxTokens", 0, 0, 1 << 20);
    params.word_timestamps = opt_bool("wordTimestamps", false);
    params.threads         = (int) opt_number("threads", 0, 0, 256);
    params.no_context      = opt_bool("noContext", false);
    return params;
}

// ---- model ----

Napi::Function voxd_whisper_model::define(Napi::Env env) {
    return DefineClass(env, "WhisperModel",
                       {
                           StaticMethod<&voxd_whisper_model::load>("load"),
                           InstanceMethod<&voxd_whisper_model::info>("info"),
                           InstanceMethod<&voxd_whisper_model::transcribe>("transcribe"),
                           InstanceMethod<&voxd_whisper_model::timings>("timings"),
                           InstanceMethod<&voxd_whisper_model::release>("release"),
                           StaticValue("sampleRate", Napi::Number::New(env, WHISPER_SAMPLE_RATE)),
                       });
}

voxd_whisper_model::voxd_whisper_model(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_whisper_model>(info) {}

std::shared_ptr<voxd_whisper_model_data> voxd_whisper_model::loaded(Napi::Env env) const {
    if (!m_model) {
        throw voxd_make_js_error(env, "closed", "the whisper model was released");
    }
    return m_model;
}

Napi::Value voxd_whisper_model::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "WhisperModel.load(path, options): path must be a string");
    }
    auto data     = std::make_shared<voxd_whisper_model_data>();
    data->path    = info[0].As<Napi::String>().Utf8Value();
    data->cparams = whisper_context_default_params();
    voxd_whisper_batch_options batch;
    if (info[1].IsObject()) {
        Napi::Object o = info[1].As<Napi::Object>();
        auto integer   = [&](const char * key, int lo, int hi) -> std::optional<int> {
            Napi::Value v = o.Get(key);
            if (v.IsUndefined() || v.IsNull())
                return std::nullopt;
            const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
            if (!(d >= lo && d <= hi) || d != std::floor(d))
                throw voxd_make_js_error(env, "invalid_argument",
                                           std::string("WhisperModel.load: ") + key + " must be an integer in [" + std::to_string(lo) + ", " +
                                               std::to_string(hi) + "]");
            return (int) d;
        };
        if (o.Get("useGpu").IsBoolean())
            data->cparams.use_gpu = batch.use_gpu = o.Get("useGpu").As<Napi::Boolean>().Value();
        if (o.Get("flashAttn").IsBoolean())
            data->cparams.flash_attn = o.Get("flashAttn").As<Napi::Boolean>().Value();
        if (auto v = integer("gpuDevice", 0, 64))
            data->cparams.gpu_device = batch.gpu_device = *v;
        if (auto v = integer("maxIdleStates", 0, 64))
            data->max_idle = (size_t) *v;
        if (auto v = integer("maxBatch", 1, 256))
            batch.max_batch = *v;
        if (auto v = integer("threads", 0, 256))
            batch.threads = *v;
        if (auto v = integer("maxEncode", 0, 256))
            batch.max_encode = *v;
    } else if (!info[1].IsUndefined() && !info[1].IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "WhisperModel.load(path, options): options must be an object");
    }

    using loaded_t = std::shared_ptr<voxd_whisper_model_data>;
    return voxd_async_worker<loaded_t>::run(
        env, "voxd.whisper.load",
        [data, batch]() {
            voxd_whisper_check_file(data->path);
            data->batcher = std::make_unique<voxd_whisper_batcher>(data->path, batch);
            return data;
        },
        [](Napi::Env env, loaded_t & data) -> Napi::Value {
            voxd_track_executor(env, data->batcher->executor());
            Napi::Object obj     = voxd_class(env, "WhisperModel").New({});
            Unwrap(obj)->m_model = data;
            Unwrap(obj)->m_memory.set(env, voxd_file_bytes(data->path)); // every weight is read into memory
            return obj;
        });
}

// whisper.cpp's size names, by encoder depth
static const char * voxd_whisper_type_name(int n_audio_layer) {
    switch (n_audio_layer) {
        case 4: return "tiny";
        case 6: return "base";
        case 12: return "small";
        case 24: return "medium";
        case 32: return "large";
        default: return "unknown";
    }
}

Napi::Value voxd_whisper_model::info(const Napi::CallbackInfo & info) {
    Napi::Env env                      = info.Env();
    const voxd_whisper_batcher & model = *loaded(env)->batcher; // hparams are immutable: safe beside running work
    const std::vector<int32_t> hp      = model.hparams();
    Napi::Object o                     = Napi::Object::New(env);
    o.Set("multilingual", model.multilingual());
    o.Set("type", voxd_whisper_type_name(hp[4]));
    const char * names[] = { "nVocab",     "nAudioCtx", "nAudioState", "nAudioHead", "nAudioLayer", "nTextCtx",
                             "nTextState", "nTextHead", "nTextLayer",  "nMels",      "ftype" };
    for (size_t i = 0; i < hp.size(); i++) {
        o.Set(names[i], hp[i]);
    }
    o.Set("gpu", model.on_gpu());
    const int n_langs     = model.multilingual() ? model.n_languages() : 1;
    Napi::Array languages = Napi::Array::New(env, (size_t) n_langs);
    for (int id = 0; id < n_langs; id++) {
        languages.Set((uint32_t) id, whisper_lang_str(id));
    }
    o.Set("languages", languages);
    return o;
}

Napi::Value voxd_whisper_model::timings(const Napi::CallbackInfo & info) {
    Napi::Env env                      = info.Env();
    const voxd_whisper_batch_timings t = loaded(env)->batcher->timings();
    Napi::Object o                     = Napi::Object::New(env);
    o.Set("encodeMs", (double) t.encode_us / 1000.0);
    o.Set("encodeCalls", (double) t.encode_calls);
    o.Set("encodeWindows", (double) t.encode_windows);
    o.Set("decodeMs", (double) t.decode_us / 1000.0);
    o.Set("decodeCalls", (double) t.decode_calls);
    o.Set("decodeRows", (double) t.decode_rows);
    o.Set("sampleMs", (double) t.sample_us / 1000.0);
    return o;
}

Napi::Value voxd_whisper_model::transcribe(const Napi::CallbackInfo & info) {
    Napi::Env env                                  = info.Env();
    std::shared_ptr<voxd_whisper_model_data> model = loaded(env);
    std::vector<float> samples                     = voxd_copy_samples(info[0], "samples");
    if (samples.size() > (size_t) INT32_MAX) {
        throw voxd_make_js_error(env, "invalid_argument", "samples: too long for whisper.cpp (at most 2^31 - 1)");
    }
    voxd_whisper_params params = voxd_whisper_parse_params(env, info[1], *model->batcher);
    if (!info[2].IsUndefined() && !info[2].IsNull() && !info[2].IsFunction()) {
        throw voxd_make_js_error(env, "invalid_argument", "onSegment must be a function");
    }
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[3]);
    const bool batched   = !params.word_timestamps; // the batcher makes no word timestamps: whisper.cpp's path does

    auto job = std::make_shared<voxd_whisper_job>(model, std::move(params), std::move(samples), abort);
    // the final flush calls the callback directly; the reference lives with the job, used on the main thread only
    if (info[2].IsFunction()) {
        Napi::Function fn = info[2].As<Napi::Function>();
        job->callback     = std::make_shared<Napi::FunctionReference>(Napi::Persistent(fn));
        job->tsfn         = Napi::ThreadSafeFunction::New(env, fn, "voxd.whisper.segment", 0 /* unbounded queue */, 1 /* the runner */);
        job->streaming    = true;
    }

    if (batched) {
        if (!job->streaming) { // the TSFN also settles the promise: a batched job always has one
            job->tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo &) {}), "voxd.whisper.job", 0, 1);
        }
        job->deferred         = std::make_unique<Napi::Promise::Deferred>(Napi::Promise::Deferred::New(env));
        Napi::Promise promise = job->deferred->Promise();
        voxd_run_in_background(env, "voxd.whisper.submit", [job, model]() {
            try {
                model->batcher->submit(job); // computes the features here, off the event loop
            } catch (const voxd_error & e) {
                job->on_error(e.code, e.what());
            } catch (const std::bad_alloc &) {
                job->on_error("out_of_memory", "out of memory");
            } catch (const std::exception & e) {
                job->on_error("transcription_failed", e.what());
            }
        });
        return promise;
    }
    return voxd_async_worker<std::string>::run(
        env, "voxd.whisper.transcribe", [job]() { return job->execute(); },
        [job](Napi::Env env, std::string & language) -> Napi::Value {
            if (job->callback) {
                job->deliver(env, job->callback->Value()); // segments still queued in the TSFN arrive before the result
            }
            return job->result_to_js(env, language);
        });
}

Napi::Value voxd_whisper_model::release(const Napi::CallbackInfo & info) {
    m_model.reset(); // workers in flight hold their own reference; the last one frees the weights
    m_memory.reset();
    return info.Env().Undefined();
}

void voxd_whisper_init(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "WhisperModel", voxd_whisper_model::define(env));
}
