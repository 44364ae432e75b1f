#pragma once
/// A process's persistent storage: what it wrote goes to the OS first and reaches the disk on fsync.
/// A process crash (kill -9) keeps what reached the OS; a machine crash (power loss) keeps only what was
/// fsynced.
#include <map>
#include <optional>
#include <string>

#include "locksim/sim/time.hpp"

namespace locksim {

enum class FsyncPolicy : std::uint8_t {
  never,     ///< data reaches the disk only when the OS decides: for us, never before a power loss
  periodic,  ///< fsync every `fsync_period` (Redis appendfsync everysec)
  always,    ///< fsync after every write (Redis appendfsync always)
};

class Storage {
 public:
  void put(const std::string& key, std::string value);
  void erase(const std::string& key);
  std::optional<std::string> get(const std::string& key) const;
  /// All keys currently visible (OS view), in key order.
  std::map<std::string, std::string> snapshot() const;
  /// Make everything written so far durable.
  void fsync();
  /// Power loss: forget what was not fsynced.
  void lose_unsynced() { pending_.clear(); }
  /// Wipe everything (a fresh disk).
  void clear() {
    durable_.clear();
    pending_.clear();
  }
  bool has_unsynced() const { return !pending_.empty(); }

  FsyncPolicy policy = FsyncPolicy::never;
  Duration fsync_period{1s};

 private:
  std::map<std::string, std::string> durable_;
  std::map<std::string, std::optional<std::string>> pending_;  // nullopt = erased
};

}  // namespace locksim
