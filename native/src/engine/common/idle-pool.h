// Engine states kept idle for reuse (a whisper_state, a parakeet_state): each holds compute buffers that are costly
// to allocate, so a transcription takes an idle one when there is one and gives it back when done; beyond
// `max_idle` a state given back is freed. Any thread.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

template <typename T> class voxd_idle_pool {
public:
    explicit voxd_idle_pool(size_t max_idle = 2) : m_max_idle(max_idle) {}

    void set_max_idle(size_t max_idle) {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_max_idle = max_idle;
    }

    // An idle item, or an empty T (a null unique_ptr) when there is none.
    T take() {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_idle.empty()) {
            return T();
        }
        T item = std::move(m_idle.back());
        m_idle.pop_back();
        return item;
    }

    // Keeps `item` for reuse, or frees it (outside the lock) when max_idle are kept already.
    void give(T item) {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_idle.size() < m_max_idle) {
                m_idle.push_back(std::move(item));
            }
        }
        // `item`, when it was not kept, is freed here
    }

private:
    std::mutex m_mutex; // guards the members below
    size_t m_max_idle;
    std::vector<T> m_idle;
};
