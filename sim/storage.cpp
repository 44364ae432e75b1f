#include "locksim/sim/storage.hpp"

namespace locksim {

void Storage::put(const std::string& key, std::string value) {
  pending_[key] = std::move(value);
  if (policy == FsyncPolicy::always) fsync();
}

void Storage::erase(const std::string& key) {
  pending_[key] = std::nullopt;
  if (policy == FsyncPolicy::always) fsync();
}

std::optional<std::string> Storage::get(const std::string& key) const {
  if (auto it = pending_.find(key); it != pending_.end()) return it->second;
  if (auto it = durable_.find(key); it != durable_.end()) return it->second;
  return std::nullopt;
}

std::map<std::string, std::string> Storage::snapshot() const {
  auto out = durable_;
  for (const auto& [k, v] : pending_) {
    if (v)
      out[k] = *v;
    else
      out.erase(k);
  }
  return out;
}

void Storage::fsync() {
  for (auto& [k, v] : pending_) {
    if (v)
      durable_[k] = std::move(*v);
    else
      durable_.erase(k);
  }
  pending_.clear();
}

}  // namespace locksim
