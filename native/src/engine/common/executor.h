// A thread of its own that runs tasks one at a time, for engines whose calls come in many short pieces (a TTS frame
// step). ggml's CPU backend keeps an OpenMP thread team per calling thread, so short calls made from whichever
// libuv worker is free keep waking cold teams: a Pocket TTS frame took twice as long that way. Callers (libuv
// workers) block in run() while the task runs here, so the work still counts as theirs. The thread ends with the
// executor, or earlier when its environment is torn down (stop(), from the cleanup hook: voxd_env_threads).
#pragma once

#include "common/error.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

class voxd_executor {
public:
    voxd_executor() : m_thread([this] { loop(); }) {}

    ~voxd_executor() { stop(); }

    voxd_executor(const voxd_executor &)             = delete;
    voxd_executor & operator=(const voxd_executor &) = delete;

    // Runs the tasks queued so far, then ends the thread and joins it; run() refuses later tasks. Idempotent, and
    // safe to call from two threads at once (the environment's cleanup hook, which holds the executor meanwhile, and
    // the thread an engine is destroyed on): the second waits for the first. Never from a task.
    void stop() noexcept {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_stopping = true;
        }
        m_wake.notify_one();
        std::lock_guard<std::mutex> join_lock(m_join_mutex);
        if (m_thread.joinable()) {
            m_thread.join();
        }
    }

    // Runs `task` on the executor's thread after the tasks queued before it; returns when it ended, rethrowing
    // what it threw. Throws voxd_error "closed" once the executor is stopping. Must not be called from a task (it
    // would wait for itself).
    void run(const std::function<void()> & task) {
        std::mutex done_mutex;
        std::condition_variable done_cv;
        bool done = false;
        std::exception_ptr error;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_stopping) {
                throw voxd_error("closed", "the engine was stopped: its JavaScript environment is shutting down");
            }
            m_queue.emplace_back([&] {
                try {
                    task();
                } catch (...) {
                    error = std::current_exception();
                }
                std::lock_guard<std::mutex> done_lock(done_mutex);
                done = true;
                done_cv.notify_one();
            });
        }
        m_wake.notify_one();
        std::unique_lock<std::mutex> done_lock(done_mutex);
        done_cv.wait(done_lock, [&] { return done; });
        if (error) {
            std::rethrow_exception(error);
        }
    }

    // Queues `task` and returns at once; false (nothing queued) once the executor is stopping. The task catches
    // its own exceptions.
    bool post(std::function<void()> task) {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_stopping) {
                return false;
            }
            m_queue.emplace_back(std::move(task));
        }
        m_wake.notify_one();
        return true;
    }

    bool on_thread() const { return std::this_thread::get_id() == m_thread.get_id(); }

    // True once stop() began: a long task (a batcher's loop) ends early, failing its work with "closed".
    bool stopping() {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_stopping;
    }

private:
    void loop() {
        for (;;) {
            std::function<void()> task;
            {
                std::unique_lock<std::mutex> lock(m_mutex);
                m_wake.wait(lock, [this] { return m_stopping || !m_queue.empty(); });
                if (m_queue.empty()) {
                    return; // stopping, and nothing left
                }
                task = std::move(m_queue.front());
                m_queue.pop_front();
            }
            task();
        }
    }

    std::mutex m_mutex; // guards m_queue and m_stopping
    std::condition_variable m_wake;
    std::deque<std::function<void()>> m_queue;
    bool m_stopping = false;
    std::mutex m_join_mutex; // one join at a time
    std::thread m_thread;    // last: started once the members above exist
};

// Adds the time from its construction to its destruction to `total` (a uint64_t or an atomic one), in microseconds:
// where an engine's steps spend their time.
template <typename Total> class voxd_stage_timer {
public:
    explicit voxd_stage_timer(Total & total) : m_total(total), m_start(std::chrono::steady_clock::now()) {}
    ~voxd_stage_timer() { m_total += (uint64_t) std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - m_start).count(); }
    voxd_stage_timer(const voxd_stage_timer &)             = delete;
    voxd_stage_timer & operator=(const voxd_stage_timer &) = delete;

private:
    Total & m_total;
    std::chrono::steady_clock::time_point m_start;
};
