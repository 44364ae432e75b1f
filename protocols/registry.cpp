#include <fmt/format.h>

#include <stdexcept>

#include "locksim/protocols/lock.hpp"

namespace locksim {

ProtocolRegistry& ProtocolRegistry::instance() {
  static ProtocolRegistry r;
  return r;
}

void ProtocolRegistry::add(std::string name, std::string summary, ProtocolFactory f) {
  entries_[std::move(name)] = Entry{std::move(summary), std::move(f)};
}

std::unique_ptr<Protocol> ProtocolRegistry::make(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw std::invalid_argument(fmt::format("unknown protocol '{}'", name));
  return it->second.factory();
}

std::vector<std::string> ProtocolRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [n, e] : entries_) out.push_back(n);
  return out;
}

}  // namespace locksim
