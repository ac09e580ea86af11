// The CPU cores that ggml's thread teams share, process-wide (docs/architecture.md "Sharing the cores").
//
// ggml's CPU backend synchronises a graph's threads at every node with a spinning barrier. When two teams (two models
// stepping at once: a Whisper pass beside a TTS frame) have more threads between them than there are cores, a thread
// preempted mid-graph leaves the rest of its team spinning at the next barrier for a whole time slice, node after
// node; both teams crawl while the cores stay busy. So every multi-threaded CPU computation holds a lease on as many
// cores as it runs threads, and teams take turns, in the order they asked, instead of thrashing. A single thread
// never waits at a barrier, so it needs no lease. VOXD_CPU_GATE=0 in the environment turns the leases off (for
// measuring what they do: bench/cpu-gate.ts).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

class voxd_cpu_gate {
public:
    // Cores held from construction to destruction, on the thread that took them (it cannot be moved: the thread's
    // holding mark goes with it). Construction waits until `threads` cores (all of them, at most) are free and every
    // caller that asked before has been served. One thread or less takes nothing, at once; so does a thread that holds
    // a lease already (a step that runs graphs of its own): its cores are taken. std::optional<lease> holds one that
    // is given back and taken again along the way (emplace, reset).
    class lease {
    public:
        explicit lease(int threads) {
            voxd_cpu_gate & gate = instance();
            if (threads > 1 && !t_holding && gate.m_enabled) {
                m_cores = gate.take(threads);
            }
        }
        lease(lease &&)             = delete;
        lease & operator=(lease &&) = delete;
        ~lease() {
            if (m_cores > 0) {
                instance().release(m_cores);
            }
        }
        int cores() const { return m_cores; }

    private:
        int m_cores = 0;
    };

    struct stats {
        int capacity;          // the cores leases share
        int in_use;            // held now
        int peak_in_use;       // the most ever held at once
        uint64_t acquisitions; // leases taken (empty ones not counted)
        uint64_t waits;        // of those, leases that waited for cores or for an earlier caller
    };

    static stats snapshot() {
        voxd_cpu_gate & gate = instance();
        std::lock_guard<std::mutex> lock(gate.m_mutex);
        return { gate.m_capacity, gate.m_capacity - gate.m_free, gate.m_peak_in_use, gate.m_acquisitions, gate.m_waits };
    }

    // The cores this process may run on (its CPU affinity, where the system says).
    static int available_cores() {
#if defined(__linux__)
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof(set), &set) == 0) {
            return std::max(1, CPU_COUNT(&set));
        }
#endif
        return (int) std::max(1u, std::thread::hardware_concurrency());
    }

private:
    static voxd_cpu_gate & instance() {
        static voxd_cpu_gate gate; // lives as long as the process: leases may end on any thread, at any time
        return gate;
    }

    voxd_cpu_gate() : m_capacity(available_cores()), m_enabled(!is_off(std::getenv("VOXD_CPU_GATE"))), m_free(m_capacity) {}

    static bool is_off(const char * value) {
        return value != nullptr && std::strcmp(value, "0") == 0;
    }

    // The cores for a team of `threads`, once it is their turn; returns how many.
    int take(int threads) {
        const int cores = std::min(threads, m_capacity);
        std::unique_lock<std::mutex> lock(m_mutex);
        const uint64_t ticket = m_next_ticket++;
        const auto my_turn    = [&] { return ticket == m_serving && m_free >= cores; };
        if (!my_turn()) {
            m_waits++;
            m_changed.wait(lock, my_turn);
        }
        m_free -= cores;
        m_serving++;
        m_acquisitions++;
        m_peak_in_use = std::max(m_peak_in_use, m_capacity - m_free);
        lock.unlock();
        m_changed.notify_all(); // the next ticket may fit in what is left
        t_holding = true;
        return cores;
    }

    void release(int cores) {
        t_holding = false;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_free += cores;
        }
        m_changed.notify_all();
    }

    const int m_capacity;
    const bool m_enabled;
    std::mutex m_mutex; // guards the members below
    std::condition_variable m_changed;
    int m_free;
    uint64_t m_next_ticket  = 0; // the ticket the next caller draws
    uint64_t m_serving      = 0; // the ticket whose turn it is
    int m_peak_in_use       = 0;
    uint64_t m_acquisitions = 0;
    uint64_t m_waits        = 0;

    static inline thread_local bool t_holding = false; // this thread holds a lease
};
