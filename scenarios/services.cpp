#include "locksim/scenarios/services.hpp"

#include <algorithm>
#include <tuple>

#include "locksim/protocols/lock.hpp"

namespace locksim {

namespace {

/// A name's prefix and its number ("redis12" → ("redis", 12)); no number (or a leading 0): (name, 0).
std::pair<std::string_view, std::uint64_t> numbered(std::string_view s) {
  std::size_t i = s.size();
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') --i;
  if (i == s.size() || i == 0 || s[i] == '0' || s.size() - i > 9) return {s, 0};
  std::uint64_t n = 0;
  for (std::size_t j = i; j < s.size(); ++j) n = n * 10 + static_cast<std::uint64_t>(s[j] - '0');
  return {s.substr(0, i), n};
}

}  // namespace

bool DeclaredServices::has(std::string_view name) const {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool DeclaredServices::in_family(std::string_view name) const {
  const auto [prefix, n] = numbered(name);
  if (n == 0) return false;
  return std::any_of(names.begin(), names.end(), [&, p = prefix](const std::string& d) {
    const auto [dp, dn] = numbered(d);
    return dn != 0 && dp == p;
  });
}

std::string DeclaredServices::summary() const {
  return compact_names(names);
}

std::string DeclaredServices::hints() const {
  std::vector<std::string> out;
  for (const auto& [p, d] : by_protocol)
    if (!d.names_hint.empty() && std::find(out.begin(), out.end(), d.names_hint) == out.end())
      out.push_back(d.names_hint);
  std::string s;
  for (const auto& h : out) s += (s.empty() ? "" : "; ") + h;
  return s;
}

std::vector<std::string> DeclaredServices::protocols_of(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [p, d] : by_protocol)
    if (d.find(name)) out.push_back(p);
  return out;
}

DeclaredServices declared_services(const Scenario& sc) {
  register_builtin_protocols();
  const ProtocolRegistry& reg = ProtocolRegistry::instance();
  DeclaredServices out;
  for (const std::string& p : reg.names()) {
    ServiceDecl d = reg.make(p)->declare(sc.config_for(p));
    if (d.empty()) continue;
    for (const ServiceProcess& sp : d.processes)
      if (!out.has(sp.name)) out.names.push_back(sp.name);
    out.by_protocol.emplace_back(p, std::move(d));
  }
  std::sort(out.names.begin(), out.names.end(), [](const std::string& a, const std::string& b) {
    const auto [pa, na] = numbered(a);
    const auto [pb, nb] = numbered(b);
    return std::tie(pa, na, a) < std::tie(pb, nb, b);
  });
  return out;
}

}  // namespace locksim
