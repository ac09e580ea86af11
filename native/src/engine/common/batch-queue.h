// The job queue our batchers run on (stt/whisper-batch, stt/parakeet-batch): jobs are queued from any thread, join
// the active batch between steps on the model's executor thread, and end with an error when a step fails or the
// executor stops. `Job` holds a `task` whose on_error(code, message) reports the end.
#pragma once

#include "common/cpu-gate.h"
#include "common/error.h"
#include "common/executor.h"

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

template <typename Job> class voxd_batch_queue {
public:
    std::vector<std::unique_ptr<Job>> active; // the batch; executor thread only

    // Queues `job`; unless a loop is already queued or running, posts `loop` (which calls run_until_idle) to
    // `executor`. Throws voxd_error "closed" once the executor stops.
    void push(std::unique_ptr<Job> job, voxd_executor & executor, std::function<void()> loop) {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_running) {
            m_running = executor.post(std::move(loop));
            if (!m_running) {
                throw voxd_error("closed", "the engine was stopped: its JavaScript environment is shutting down");
            }
        }
        m_queue.push_back(std::move(job));
    }

    // Executor thread: queued jobs join the batch until it has `max`.
    void admit(int max) {
        std::lock_guard<std::mutex> lock(m_mutex);
        while (!m_queue.empty() && (int) active.size() < max) {
            active.push_back(std::move(m_queue.front()));
            m_queue.pop_front();
        }
    }

    // Executor thread: runs `step` until no job is queued or active. A step that throws ends every active job with
    // its error; once the executor is stopping, every job ends with "closed".
    void run_until_idle(voxd_executor & executor, int threads, const std::function<void()> & step) {
        for (;;) {
            if (executor.stopping()) {
                std::deque<std::unique_ptr<Job>> queued;
                {
                    std::lock_guard<std::mutex> lock(m_mutex);
                    queued.swap(m_queue);
                    m_running = false;
                }
                fail(active, "closed", "the engine was stopped");
                fail(queued, "closed", "the engine was stopped");
                return;
            }
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                if (m_queue.empty() && active.empty()) {
                    m_running = false;
                    return;
                }
            }
            try {
                // the cores for the whole step, the work between its graphs (spectrograms, sampling) included: a thread
                // of this step running beside another model's team would slow that team down as much as a team of its own
                const voxd_cpu_gate::lease cores(threads);
                step();
            } catch (const voxd_error & e) {
                fail(active, e.code, e.what());
            } catch (const std::exception & e) {
                fail(active, "transcription_failed", e.what());
            }
        }
    }

    // Ends the jobs still queued (the batcher's destructor, once its executor stopped).
    void close_queued(const std::string & message) {
        std::lock_guard<std::mutex> lock(m_mutex);
        fail(m_queue, "closed", message);
    }

private:
    template <typename List> static void fail(List & jobs, const std::string & code, const std::string & message) {
        for (auto & job : jobs) {
            job->task->on_error(code, message);
        }
        jobs.clear();
    }

    std::mutex m_mutex; // guards m_queue and m_running
    std::deque<std::unique_ptr<Job>> m_queue;
    bool m_running = false; // a loop is queued or running on the executor
};

// Destroys a batcher (whose destructor stops and joins its executor thread) from its owner's destructor. The owner's
// last holder can be a job ending on that very thread, which cannot join itself: the batcher is then destroyed (and
// the thread joined) on a thread of its own.
template <typename Batcher> void voxd_release_batcher(std::unique_ptr<Batcher> & batcher) {
    if (batcher && batcher->on_executor_thread()) {
        std::thread([b = std::move(batcher)]() mutable { b.reset(); }).detach();
    }
}
