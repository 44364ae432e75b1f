#pragma once
/// Runs N independent tasks on J threads, each writing its own result slot, so what the caller folds
/// afterwards (in index order) does not depend on J or on which thread ran what. Used by `envelope` and
/// `risk`: a task is one world (worlds never share state), a thread runs many of them one after another.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace locksim {

/// Calls task(i) for every i in [0, n) on `jobs` threads (0 counts as 1; never more threads than tasks).
/// With `progress`, the calling thread only reports: progress(done) about five times a second and once at the
/// end; without, it works too. The first exception a task throws stops the others from starting new tasks
/// and is rethrown here once every thread has stopped.
inline void run_ordered_tasks(std::size_t n, std::uint32_t jobs, const std::function<void(std::size_t)>& task,
                              const std::function<void(std::size_t)>& progress = {}) {
  std::atomic<std::size_t> next{0}, done{0};
  std::atomic<bool> abort{false};
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;
  auto worker = [&] {
    while (!abort.load()) {
      const std::size_t i = next.fetch_add(1);
      if (i >= n) break;
      try {
        task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        abort = true;
      }
      if (done.fetch_add(1) + 1 == n) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
    }
  };
  if (jobs == 0) jobs = 1;
  jobs = static_cast<std::uint32_t>(std::min<std::size_t>(jobs, std::max<std::size_t>(n, 1)));
  std::vector<std::thread> threads;
  for (std::uint32_t t = progress ? 0 : 1; t < jobs; ++t) threads.emplace_back(worker);
  if (progress) {
    std::unique_lock<std::mutex> lock(mu);
    while (done.load() < n && !abort.load()) {
      cv.wait_for(lock, std::chrono::milliseconds(200));  // wall time: how often the progress bar redraws
      lock.unlock();
      progress(done.load());
      lock.lock();
    }
  } else {
    worker();
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace locksim
