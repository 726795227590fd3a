// Runs work(i) for i in [0, count) on up to `threads` threads (the caller's among them). An
// exception on any thread stops the handing out of new items and is rethrown on the caller's
// thread once all have joined, so a worker's error reaches the caller instead of std::terminate.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace libreyolo {

template <typename Work>
void parallel_for(std::size_t count, int threads, Work&& work) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto run = [&] {
    try {
      for (std::size_t i = next++; i < count && !failed; i = next++) work(i);
    } catch (...) {
      const std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  {
    std::vector<std::jthread> pool;
    const std::size_t extra = std::min<std::size_t>(count, static_cast<std::size_t>(std::max(1, threads))) - (count ? 1 : 0);
    for (std::size_t t = 0; t < extra; ++t) pool.emplace_back(run);
    run();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace libreyolo
