#include "stt/audio-lm.h"

#include "common/cpu-gate.h"
#include "common/error.h"
#include "common/executor.h"
#include "common/file-size.h"
#include "common/ggml-graph.h"
#include "stt/whisper-rules.h" // voxd_whisper_logsumexp: the log-softmax's denominator

#include "mtmd-helper.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>

namespace {

// KV cells per job when the options name none: a 30 s chunk (the most the STT service sends: 375 audio positions
// at 12.5 Hz for Qwen3-ASR and Voxtral), its prompt and an answer of several hundred tokens
constexpr int k_default_n_ctx_seq = 1024;
// prompt positions decoded per llama_decode
constexpr int k_n_batch = 512;
// the most jobs one context holds: each holds its KV cells from the load on
constexpr int k_max_batch = 64;

struct chunks_deleter {
    void operator()(mtmd_input_chunks * c) const { mtmd_input_chunks_free(c); }
};
struct bitmap_deleter {
    void operator()(mtmd_bitmap * b) const { mtmd_bitmap_free(b); }
};
struct sampler_deleter {
    void operator()(llama_sampler * s) const { llama_sampler_free(s); }
};

// ggml's fast kernels on the context's CPU backend while it lives; reference mode again after, whatever happens.
class fast_kernels {
public:
    explicit fast_kernels(llama_context * lctx) : m_lctx(lctx) { voxd_llama_use_row_kernels(m_lctx, false); }
    ~fast_kernels() { voxd_llama_use_row_kernels(m_lctx, true); }
    fast_kernels(const fast_kernels &)             = delete;
    fast_kernels & operator=(const fast_kernels &) = delete;

private:
    llama_context * m_lctx; // borrowed
};

// A llama_batch of tokens, one sequence per row, freed with it.
class token_batch {
public:
    explicit token_batch(int capacity) : m_batch(llama_batch_init(capacity, 0, 1)) {}
    ~token_batch() { llama_batch_free(m_batch); }
    token_batch(const token_batch &)             = delete;
    token_batch & operator=(const token_batch &) = delete;

    void add(llama_token token, llama_pos pos, llama_seq_id seq_id) {
        const int i          = m_batch.n_tokens++;
        m_batch.token[i]     = token;
        m_batch.pos[i]       = pos;
        m_batch.n_seq_id[i]  = 1;
        m_batch.seq_id[i][0] = seq_id;
        m_batch.logits[i]    = 1;
    }
    const llama_batch & get() const { return m_batch; }

private:
    llama_batch m_batch;
};

// The length of the longest prefix of `bytes` that ends on a whole UTF-8 character (a truncated sequence at the end
// waits for the next token's bytes; invalid bytes pass, to be replaced by the JS side's decoder).
size_t complete_utf8_prefix(const std::string & bytes) {
    const size_t n = bytes.size();
    for (size_t back = 1; back <= std::min<size_t>(3, n); back++) {
        const unsigned char c = (unsigned char) bytes[n - back];
        if ((c & 0xC0) == 0x80) {
            continue; // a continuation byte: look further back for the lead
        }
        const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

uint64_t elapsed_us(std::chrono::steady_clock::time_point since) {
    return (uint64_t) std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - since).count();
}

} // namespace

// One transcription's decoding state; executor thread only once submitted.
struct voxd_audio_lm_job {
    std::shared_ptr<voxd_audio_lm_task> task;
    voxd_audio_lm_request request;
    std::unique_ptr<llama_sampler, sampler_deleter> sampler; // owns the sampler chain
    llama_seq_id seq_id = -1;
    bool prefilled      = false;
    bool done           = false;
    llama_pos n_past    = 0;                // the next position of the sequence
    llama_token pending = LLAMA_TOKEN_NULL; // sampled, not yet decoded
    voxd_audio_lm_result result;
    std::string utf8_carry; // bytes of a character whose last bytes have not come yet
    bool reported = false;  // the task was told how the job ended
};

// ---- voxd_audio_lm_batcher ----

voxd_audio_lm_batcher::voxd_audio_lm_batcher(const voxd_audio_lm_options & options) : m_options(options) {
    voxd_llama_backend_init();
    voxd_llama_clear_last_error();
    if (options.mmproj.empty()) {
        throw voxd_error("model_load_failed", "no mmproj given: an audio language model is a GGUF model plus its audio mmproj GGUF");
    }
    if (options.max_batch < 1 || options.max_batch > k_max_batch) {
        throw voxd_error("invalid_argument", "an audio language model decodes from 1 to " + std::to_string(k_max_batch) + " jobs together");
    }
    m_options.n_ctx_seq = options.n_ctx_seq > 0 ? options.n_ctx_seq : k_default_n_ctx_seq;
    const int threads   = options.threads > 0 ? options.threads : voxd_default_threads();

    m_info.arch = voxd_gguf_string(options.model, "general.architecture", "model");
    if (voxd_gguf_string(options.mmproj, "general.architecture", "mmproj") != "clip") {
        throw voxd_error("model_load_failed", "mmproj " + options.mmproj + " is not an mmproj (its architecture is not clip)");
    }
    m_info.projector = voxd_gguf_string(options.mmproj, "clip.audio.projector_type", "mmproj");
    if (m_info.projector.empty()) {
        m_info.projector = voxd_gguf_string(options.mmproj, "clip.projector_type", "mmproj");
    }

    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers       = options.use_gpu ? mparams.n_gpu_layers : 0;
    mparams.main_gpu           = options.gpu_device;
    m_model                    = voxd_llama_load_model(options.model, mparams, "model");
    m_vocab                    = llama_model_get_vocab(m_model.get());
    const char * tmpl          = llama_model_chat_template(m_model.get(), nullptr); // owned by the model
    if (!tmpl) {
        throw voxd_error("model_load_failed", "model " + options.model + " has no chat template, so its transcription prompt cannot be written");
    }
    m_template = tmpl;

    m_lctx = voxd_llama_batch_context(m_model.get(), { m_options.n_ctx_seq, options.max_batch, k_n_batch, threads, false }, options.model);

    mtmd_context_params mm = mtmd_context_params_default();
    mm.use_gpu             = options.use_gpu;
    mm.n_threads           = threads;
    mm.print_timings       = false;
    m_mctx.reset(mtmd_init_from_file(options.mmproj.c_str(), m_model.get(), mm));
    if (!m_mctx) {
        throw voxd_error("model_load_failed", "libmtmd could not load the mmproj " + options.mmproj + voxd_llama_last_error());
    }
    if (!mtmd_support_audio(m_mctx.get()) || mtmd_gen_audio_get_info(m_mctx.get()).type != MTMD_GEN_AUDIO_TYPE_NONE) {
        throw voxd_error("model_load_failed", "mmproj " + options.mmproj + " has no audio encoder for recognition (projector '" + m_info.projector + "')");
    }
    if (mtmd_get_audio_sample_rate(m_mctx.get()) != 16000) {
        throw voxd_error("model_load_failed", "mmproj " + options.mmproj + " takes audio at " + std::to_string(mtmd_get_audio_sample_rate(m_mctx.get())) +
                                                  " Hz; the engine feeds 16 kHz");
    }
    // the template must be one llama.cpp knows: checked once here, not at the first request
    voxd_audio_lm_request probe;
    probe.has_system = true;
    prompt(probe);

    m_info.n_ctx_seq = m_options.n_ctx_seq;
    m_info.n_vocab   = llama_vocab_n_tokens(m_vocab);
    m_info.gpu       = options.use_gpu && voxd_gpu_available();
    m_cpu_threads    = m_info.gpu ? 1 : threads;
    m_weight_bytes   = (int64_t) llama_model_size(m_model.get()) + voxd_file_bytes(options.mmproj);
    for (int i = options.max_batch - 1; i >= 0; i--) {
        m_free_seq_ids.push_back(i);
    }
    m_executor = std::make_shared<voxd_executor>();
}

voxd_audio_lm_batcher::~voxd_audio_lm_batcher() {
    if (m_executor) {
        m_executor->stop(); // the loop sees it at its next step and ends every job with "closed"
    }
    m_jobs.close_queued("the audio language model was released");
}

bool voxd_audio_lm_batcher::on_executor_thread() const {
    return m_executor->on_thread();
}

voxd_audio_lm_timings voxd_audio_lm_batcher::timings() const {
    std::lock_guard<std::mutex> lock(m_timings_mutex);
    return m_timings;
}

voxd_audio_lm_batcher::prompt_parts voxd_audio_lm_batcher::prompt(const voxd_audio_lm_request & request) const {
    // stand-ins no template changes: the client's text is tokenized apart, as plain text, so that special-token texts
    // in it (`<|im_end|>`) stay text and cannot end its message; the audio goes where libmtmd's marker stands
    static const std::string system_stand_in = "\x1e";
    const std::string user                   = request.user + mtmd_default_marker();
    std::vector<llama_chat_message> messages;
    if (request.has_system) {
        messages.push_back({ "system", system_stand_in.c_str() });
    }
    messages.push_back({ "user", user.c_str() });
    std::vector<char> buf(4096 + user.size());
    int32_t n = llama_chat_apply_template(m_template.c_str(), messages.data(), messages.size(), true, buf.data(), (int32_t) buf.size());
    if (n > (int32_t) buf.size()) {
        buf.resize((size_t) n);
        n = llama_chat_apply_template(m_template.c_str(), messages.data(), messages.size(), true, buf.data(), (int32_t) buf.size());
    }
    if (n < 0) {
        throw voxd_error("model_load_failed", "the model's chat template is not one llama.cpp knows, so its transcription prompt cannot be written");
    }
    const std::string text = std::string(buf.data(), (size_t) n) + request.assistant;
    const size_t system_at = request.has_system ? text.find(system_stand_in) : 0;
    const size_t audio_at  = system_at == std::string::npos ? std::string::npos : text.find(mtmd_default_marker(), system_at);
    if (audio_at == std::string::npos) {
        throw voxd_error("model_load_failed", "the model's chat template drops the messages' text, so its transcription prompt cannot be written");
    }
    const size_t system_end = request.has_system ? system_at + system_stand_in.size() : 0;
    return { text.substr(0, system_at), text.substr(system_end, audio_at - system_end), text.substr(audio_at + std::strlen(mtmd_default_marker())) };
}

void voxd_audio_lm_batcher::submit(std::shared_ptr<voxd_audio_lm_task> task, voxd_audio_lm_request request) {
    if (request.samples.empty()) {
        task->on_done({});
        return;
    }
    if (request.samples.size() < min_samples) {
        request.samples.resize(min_samples, 0.0f);
    }
    auto job                          = std::make_unique<voxd_audio_lm_job>();
    job->task                         = std::move(task);
    job->request                      = std::move(request);
    llama_sampler_chain_params params = llama_sampler_chain_default_params();
    params.no_perf                    = true;
    job->sampler.reset(llama_sampler_chain_init(params));
    if (job->request.temperature > 0.0f) {
        llama_sampler_chain_add(job->sampler.get(), llama_sampler_init_temp(job->request.temperature));
        llama_sampler_chain_add(job->sampler.get(), llama_sampler_init_dist(job->request.seed));
    } else {
        llama_sampler_chain_add(job->sampler.get(), llama_sampler_init_greedy());
    }
    m_jobs.push(std::move(job), *m_executor, [this] { m_jobs.run_until_idle(*m_executor, m_cpu_threads, [this] { step(); }); });
}

void voxd_audio_lm_batcher::step() {
    voxd_llama_clear_last_error();
    m_jobs.admit(m_options.max_batch);
    release_ended();
    std::vector<voxd_audio_lm_job *> decoding;
    for (auto & job : m_jobs.active) {
        if (job->prefilled && !job->done) {
            decoding.push_back(job.get());
        }
    }
    // New jobs get the lowest free sequence ids (so the batch stays one run of ids) and their prompt, each alone. A
    // prefill holds up every job being decoded (seconds on a CPU), so while any is, one new job is prefilled per step.
    const size_t prefills = decoding.empty() ? m_jobs.active.size() : 1;
    size_t prefilled      = 0;
    for (auto & job : m_jobs.active) {
        if (job->prefilled || prefilled == prefills) {
            continue;
        }
        if (job->task->aborted()) {
            fail(*job, "aborted", "the operation was aborted");
            continue;
        }
        const auto lowest = std::min_element(m_free_seq_ids.begin(), m_free_seq_ids.end());
        job->seq_id       = *lowest;
        m_free_seq_ids.erase(lowest);
        job->prefilled = true;
        prefilled++;
        voxd_llama_clear_last_error();
        try {
            prefill(*job);
        } catch (const voxd_error & e) {
            fail(*job, e.code, e.what() + voxd_llama_last_error());
        } catch (const std::exception & e) {
            fail(*job, "transcription_failed", e.what() + voxd_llama_last_error());
        }
    }
    try {
        if (!decoding.empty()) {
            decode(decoding);
        }
    } catch (const std::exception & e) { // a failed decode step ends the jobs it held
        const voxd_error * coded = dynamic_cast<const voxd_error *>(&e);
        for (voxd_audio_lm_job * job : decoding) {
            fail(*job, coded ? coded->code : "transcription_failed", e.what() + voxd_llama_last_error());
        }
    }
    release_ended();
}

void voxd_audio_lm_batcher::fail(voxd_audio_lm_job & job, const std::string & code, const std::string & message) {
    if (!job.reported) {
        job.task->on_error(code, message);
        job.reported = true;
    }
    job.done = true;
}

void voxd_audio_lm_batcher::release_ended() {
    for (size_t i = 0; i < m_jobs.active.size();) {
        voxd_audio_lm_job & job = *m_jobs.active[i];
        if (job.task->aborted()) {
            fail(job, "aborted", "the operation was aborted");
        } else if (!job.done) {
            i++;
            continue;
        }
        if (!job.reported) {
            finish(job);
        }
        if (job.seq_id >= 0) {
            llama_memory_seq_rm(llama_get_memory(m_lctx.get()), job.seq_id, -1, -1);
            m_free_seq_ids.push_back(job.seq_id);
        }
        m_jobs.active.erase(m_jobs.active.begin() + (ptrdiff_t) i);
    }
}

void voxd_audio_lm_batcher::prefill(voxd_audio_lm_job & job) {
    const auto started = std::chrono::steady_clock::now();
    llama_memory_seq_rm(llama_get_memory(m_lctx.get()), job.seq_id, -1, -1);
    const std::vector<float> & samples = job.request.samples;
    std::unique_ptr<mtmd_bitmap, bitmap_deleter> audio(mtmd_bitmap_init_from_audio(samples.size(), samples.data())); // owns a copy
    std::unique_ptr<mtmd_input_chunks, chunks_deleter> chunks(mtmd_input_chunks_init());                             // owns the tokenized prompt
    const prompt_parts parts = prompt(job.request);
    const mtmd_input_text before{ parts.before_system.c_str(), parts.before_system.size(), true, /*parse_special =*/true };
    const mtmd_input_text system{ job.request.system.c_str(), job.request.system.size(), true, /*parse_special =*/false };
    const mtmd_input_text after{ parts.after_system.c_str(), parts.after_system.size(), true, /*parse_special =*/true };
    const mtmd_input_text tail{ parts.after_audio.c_str(), parts.after_audio.size(), true, /*parse_special =*/true };
    const mtmd_input_part in[] = { { &before, nullptr }, { &system, nullptr }, { &after, nullptr }, { nullptr, audio.get() }, { &tail, nullptr } };
    std::vector<const mtmd_input_part *> order;
    for (const mtmd_input_part & part : in) {
        if (part.bitmap || part.text->text_len > 0) { // an empty text part would be a chunk of no tokens
            order.push_back(&part);
        }
    }
    if (!audio || mtmd_tokenize_from_parts(m_mctx.get(), chunks.get(), order.data(), order.size(), /*add_special =*/true) != 0) {
        throw voxd_error("invalid_argument", "libmtmd could not take the audio");
    }
    const llama_pos n_pos = mtmd_helper_get_n_pos(chunks.get());
    if (n_pos + 1 >= m_options.n_ctx_seq) {
        throw voxd_error("invalid_argument", "the audio and prompt take " + std::to_string(n_pos) + " positions, more than the " +
                                                 std::to_string(m_options.n_ctx_seq) + " a job holds: cut the audio at pauses, or shorten the prompt");
    }
    // The audio is encoded and the prompt decoded on this sequence alone, the same whatever else is in the batch, so
    // the prompt needs no reference mode: ggml's fast kernels (tiled flash attention, fused ops) do it, as llama.cpp's
    // tools do. Only the steps, where rows meet other jobs' rows, run in reference mode.
    llama_pos n_past = 0;
    int rc           = 0;
    {
        const fast_kernels fast(m_lctx.get());
        rc = mtmd_helper_eval_chunks(m_mctx.get(), m_lctx.get(), chunks.get(), 0, job.seq_id, k_n_batch, true, &n_past);
    }
    if (rc != 0) {
        throw voxd_error("transcription_failed", "the model failed on the audio and prompt");
    }
    job.n_past               = n_past;
    job.result.prompt_tokens = (int32_t) n_past;
    {
        std::lock_guard<std::mutex> lock(m_timings_mutex);
        m_timings.prefill_us += elapsed_us(started);
        m_timings.prefill_jobs++;
    }
    accept(job, -1);
}

void voxd_audio_lm_batcher::decode(const std::vector<voxd_audio_lm_job *> & jobs) {
    const auto started = std::chrono::steady_clock::now();
    std::vector<llama_seq_id> seq_ids;
    for (const voxd_audio_lm_job * job : jobs) {
        seq_ids.push_back(job->seq_id);
    }
    uint64_t calls = 0;
    voxd_llama_decode_runs(seq_ids, [&](const std::vector<int> & rows, bool companion) {
        token_batch batch((int) rows.size() + 1);
        for (int row : rows) {
            const voxd_audio_lm_job & job = *jobs[(size_t) row];
            batch.add(job.pending, job.n_past, job.seq_id);
        }
        voxd_audio_lm_job & first = *jobs[(size_t) rows[0]];
        if (companion) {
            batch.add(first.pending, first.n_past + 1, first.seq_id);
        }
        const int rc = llama_decode(m_lctx.get(), batch.get());
        if (companion) {
            llama_memory_seq_rm(llama_get_memory(m_lctx.get()), first.seq_id, first.n_past + 1, -1);
        }
        if (rc != 0) {
            throw voxd_error("transcription_failed", "the model failed on a decode step");
        }
        calls++;
        for (size_t i = 0; i < rows.size(); i++) {
            voxd_audio_lm_job & job = *jobs[(size_t) rows[i]];
            job.n_past++;
            accept(job, (int32_t) i);
        }
    });
    std::lock_guard<std::mutex> lock(m_timings_mutex);
    m_timings.decode_us += elapsed_us(started);
    m_timings.decode_steps++;
    m_timings.decode_calls += calls;
    m_timings.decode_rows += jobs.size();
    m_timings.max_step_rows = std::max<uint64_t>(m_timings.max_step_rows, jobs.size());
}

void voxd_audio_lm_batcher::accept(voxd_audio_lm_job & job, int32_t logits_row) {
    const llama_token token = llama_sampler_sample(job.sampler.get(), m_lctx.get(), logits_row);
    if (llama_vocab_is_eog(m_vocab, token)) {
        job.done = true;
        return;
    }
    job.result.tokens.push_back(token);
    const float * logits = llama_get_logits_ith(m_lctx.get(), logits_row); // owned by the context
    job.result.logprobs.push_back(logits[token] - voxd_whisper_logsumexp(logits, logits + m_info.n_vocab));
    char piece[256];
    const int32_t n = llama_token_to_piece(m_vocab, token, piece, sizeof(piece), 0, /*special =*/true);
    job.utf8_carry.append(piece, (size_t) std::max(n, 0));
    const size_t whole     = complete_utf8_prefix(job.utf8_carry);
    const std::string text = job.utf8_carry.substr(0, whole);
    job.utf8_carry.erase(0, whole);
    job.result.text += text;
    job.task->on_text(text);
    const bool at_max = job.request.max_tokens > 0 && (int) job.result.tokens.size() >= job.request.max_tokens;
    if (at_max || job.n_past + 2 >= m_options.n_ctx_seq) { // the next token and a companion need their cells
        job.result.truncated = true;
        job.done             = true;
        return;
    }
    job.pending = token;
}

void voxd_audio_lm_batcher::finish(voxd_audio_lm_job & job) {
    // bytes of a character the answer ended inside of (cut by max_tokens) are dropped, not sent as U+FFFD
    job.task->on_done(std::move(job.result));
    job.reported = true;
}

// ---- voxd_audio_lm_model ----

std::shared_ptr<voxd_audio_lm_model> voxd_audio_lm_model::load(const voxd_audio_lm_options & options) {
    std::shared_ptr<voxd_audio_lm_model> model(new voxd_audio_lm_model());
    model->m_batcher = std::make_unique<voxd_audio_lm_batcher>(options);
    return model;
}

voxd_audio_lm_model::~voxd_audio_lm_model() {
    voxd_release_batcher(m_batcher);
}
