#pragma once
/// The protected resource for real runs: a small key-value store on a 127.0.0.1 port, served by a thread of
/// the parent (never killed), whose append-only delivery log is the ground truth the checker reads, exactly
/// as the simulated store's (protocols/resource.cpp): fenced = accept iff token >= the highest accepted for
/// the key, checked and updated in one step; unfenced = accept every write.
///
/// A pause (a stalled disk, a GC pause of the storage service) stops it taking requests: what arrives
/// meanwhile waits, in the order it arrived over every connection (as in the simulated store's queue, and in
/// a single-threaded server's event queue), and is taken at the resume, in that order, in the same instant.
///
/// The wire format, one line each way: "W client write-id token|- key value" answered "A" or "R reason".
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace locksim::reality {

struct StoreEntry {
  std::int64_t time_ns = 0;  ///< since the run's start
  std::string client;
  std::uint64_t write = 0;  ///< the client's own write number
  std::string key, value;
  std::optional<std::uint64_t> token;
  bool accepted = false;
  std::string reason;
};

class StoreServer {
 public:
  /// Listens on a free loopback port at once; serves after start().
  StoreServer(bool fenced, std::int64_t t0_ns);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  void start();
  std::uint16_t port() const { return port_; }
  int listen_fd() const { return listen_fd_; }
  std::vector<StoreEntry> log() const;
  /// Stops taking requests (true) or takes what waited and goes on (false).
  void pause(bool on);

 private:
  void loop();
  std::string handle(const std::string& line);
  bool fenced_;
  std::int64_t t0_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::vector<StoreEntry> log_;
  std::map<std::string, std::uint64_t> highest_;
  std::atomic<bool> stop_{false}, paused_{false};
  std::thread thread_;
};

}  // namespace locksim::reality
