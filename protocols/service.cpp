#include "locksim/protocols/service.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/lock.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {

std::string_view to_string(ProcessRole r) {
  switch (r) {
    case ProcessRole::server:
      return "server";
    case ProcessRole::replica:
      return "replica";
    case ProcessRole::sentinel:
      return "sentinel";
    case ProcessRole::leader_capable:
      return "leader-capable";
    case ProcessRole::primary:
      return "primary";
  }
  return "?";
}

bool ServiceProcess::is(ProcessRole r) const {
  return std::find(roles.begin(), roles.end(), r) != roles.end();
}

std::vector<std::string> ServiceDecl::names() const {
  std::vector<std::string> out;
  out.reserve(processes.size());
  for (const ServiceProcess& p : processes) out.push_back(p.name);
  return out;
}

const ServiceProcess* ServiceDecl::find(std::string_view name) const {
  for (const ServiceProcess& p : processes)
    if (p.name == name) return &p;
  return nullptr;
}

ServiceRecorder::ServiceRecorder(History& history, const World& world, std::string node)
    : history_(&history), world_(&world), node_(std::move(node)) {
  if (history.service.empty()) return;  // a protocol that declared nothing (deprecated): unchecked
  const ServiceProcess* p = history.service.find(node_);
  if (!p) {
    throw std::logic_error(
        fmt::format("protocol '{}' records service facts for '{}', which its declared service does not name "
                    "(declared: {})",
                    history.protocol, node_, compact_names(history.service.names())));
  }
  may_grant_ = p->is(ProcessRole::server);
  may_role_ = p->is(ProcessRole::leader_capable);
}

void ServiceRecorder::grant(const std::string& key, const std::string& value) const {
  if (!may_grant_) {
    throw std::logic_error(
        fmt::format("protocol '{}': '{}' records a grant but is not declared a server (ProcessRole::server)",
                    history_->protocol, node_));
  }
  history_->service_sets.push_back({world_->now(), node_, key, value});
}

void ServiceRecorder::leader(std::uint64_t term) const {
  if (!may_role_) {
    throw std::logic_error(
        fmt::format("protocol '{}': '{}' records a role but is not declared leader-capable "
                    "(ProcessRole::leader_capable)",
                    history_->protocol, node_));
  }
  history_->service_roles.push_back({world_->now(), node_, ServiceRole::Role::leader, term});
}

void ServiceRecorder::follower(std::uint64_t term) const {
  if (!may_role_) {
    throw std::logic_error(
        fmt::format("protocol '{}': '{}' records a role but is not declared leader-capable "
                    "(ProcessRole::leader_capable)",
                    history_->protocol, node_));
  }
  history_->service_roles.push_back({world_->now(), node_, ServiceRole::Role::follower, term});
}

ServiceRecorder History::recorder(const World& world, std::string node) {
  return ServiceRecorder(*this, world, std::move(node));
}

ServiceInfo build_service(Protocol& protocol, World& world, const ProtocolConfig& cfg, History& history) {
  const ServiceDecl decl = protocol.declare(cfg);
  history.protocol = protocol.name();
  history.service = decl;
  if (!decl.empty()) history.service_quorum = decl.quorum;
  const std::size_t first = world.process_count();
  ServiceInfo info = protocol.build(world, cfg, history);
  if (!decl.empty()) {
    std::vector<ProcId> spawned;
    std::vector<std::string> names;
    for (std::size_t i = first; i < world.process_count(); ++i) {
      const ProcId p{static_cast<std::uint32_t>(i)};
      spawned.push_back(p);
      names.push_back(world.name(p));
    }
    const bool info_ok = info.servers.empty() || info.servers == spawned;
    if (names != decl.names() || !info_ok) {
      std::vector<std::string> returned;
      for (ProcId p : info.servers) returned.push_back(world.name(p));
      throw std::logic_error(
          fmt::format("protocol '{}' declared its service as [{}] but build() spawned [{}]{}",
                      protocol.name(), fmt::join(decl.names(), ", "), fmt::join(names, ", "),
                      info_ok ? "" : fmt::format(" and returned [{}]", fmt::join(returned, ", "))));
    }
    info.servers = std::move(spawned);
  }
  history.service_nodes.clear();
  for (ProcId p : info.servers) history.service_nodes.push_back(world.name(p));
  return info;
}

namespace {

/// A name's prefix and its number ("redis12" → "redis", 12); no number: 0.
std::pair<std::string_view, std::uint64_t> split_number(std::string_view s) {
  std::size_t i = s.size();
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') --i;
  if (i == s.size() || s[i] == '0' || s.size() - i > 9) return {s, 0};
  std::uint64_t n = 0;
  for (std::size_t j = i; j < s.size(); ++j) n = n * 10 + static_cast<std::uint64_t>(s[j] - '0');
  return {s.substr(0, i), n};
}

}  // namespace

std::string compact_names(const std::vector<std::string>& names) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < names.size();) {
    const auto [prefix, n] = split_number(names[i]);
    std::size_t j = i + 1;
    if (n != 0) {
      while (j < names.size()) {
        const auto [p2, n2] = split_number(names[j]);
        if (p2 != prefix || n2 != n + (j - i)) break;
        ++j;
      }
    }
    if (j - i >= 3)
      parts.push_back(fmt::format("{}..{}", names[i], names[j - 1]));
    else
      for (std::size_t k = i; k < j; ++k) parts.push_back(names[k]);
    i = j;
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace locksim
