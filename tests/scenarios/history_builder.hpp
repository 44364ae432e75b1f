#pragma once
// Hand-built histories for checker tests: a few lines per event, with the resource log kept in processing
// order.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "locksim/scenarios/checker/checker.hpp"

namespace locksim::testing {

/// For histories written as WriteRecord summaries (arrival, accepted): declares every node that recorded a
/// service set and, when the history has no resource log yet, writes one delivered copy per arrived write,
/// in (arrival, write id) order: a store that serves simultaneous arrivals in the order they were recorded.
inline History with_log(History h) {
  for (const auto& s : h.service_sets)
    if (std::find(h.service_nodes.begin(), h.service_nodes.end(), s.node) == h.service_nodes.end())
      h.service_nodes.push_back(s.node);
  if (!h.resource_log.empty()) return h;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < h.writes.size(); ++i)
    if (h.writes[i].arrived != kTimeMax) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return h.writes[a].arrived < h.writes[b].arrived; });
  for (std::size_t i : order)
    h.deliver(i, h.writes[i].arrived, h.writes[i].accepted, h.writes[i].accepted ? "" : "stale token");
  return h;
}

/// Judges a history written as summaries (see with_log).
inline CheckResult judge(const History& h) {
  return check(with_log(h));
}

/// Builds histories in a few lines per event.
struct Builder {
  History h;

  /// A grant whose service sets are given as (node, time) pairs.
  std::uint64_t grant(std::string client, std::string key, std::string value, Time granted,
                      std::vector<std::pair<std::string, Time>> sets, Time believed_valid_until = kTimeMax,
                      Time belief_end = kTimeMax, std::optional<std::uint64_t> token = std::nullopt) {
    for (auto& [node, t] : sets) {
      h.service_set(t, node, key, value);
      if (std::find(h.service_nodes.begin(), h.service_nodes.end(), node) == h.service_nodes.end())
        h.service_nodes.push_back(node);
    }
    GrantRecord g;
    g.client = std::move(client);
    g.key = std::move(key);
    g.value = std::move(value);
    g.token = token;
    g.granted = granted;
    g.believed_valid_until = believed_valid_until;
    g.belief_end = belief_end;
    return h.add_grant(std::move(g));
  }

  /// Puts `e` into the resource log in processing order: by time, and after every entry already logged at
  /// the same time (a store serving its mailbox in arrival order); renumbers the sequence.
  void log_in_order(ResourceEntry e) {
    auto at = std::upper_bound(h.resource_log.begin(), h.resource_log.end(), e.time,
                               [](Time t, const ResourceEntry& x) { return t < x.time; });
    h.resource_log.insert(at, std::move(e));
    for (std::size_t i = 0; i < h.resource_log.size(); ++i) h.resource_log[i].seq = i;
  }

  /// A write delivered once at `arrived` (kTimeMax: never), accepted (and applied) or rejected.
  std::uint64_t write(std::uint64_t grant, std::string key, Time sent, Time arrived, bool accepted,
                      std::optional<std::uint64_t> token = std::nullopt) {
    WriteRecord w;
    w.client = h.grants.at(grant).client;
    w.grant = grant;
    w.key = std::move(key);
    w.token = token;
    w.sent = sent;
    w.checked = sent;
    w.acknowledged = accepted;
    const auto id = h.add_write(std::move(w));
    if (arrived != kTimeMax) deliver(id, arrived, accepted);
    return id;
  }

  /// Another delivered copy of write `id` (a network duplicate), judged on its own.
  void deliver(std::uint64_t id, Time at, bool accepted) {
    const WriteRecord& w = h.writes.at(id);
    log_in_order(ResourceEntry{.op = ResourceEntry::Op::write,
                               .time = at,
                               .resource = "store",
                               .key = w.key,
                               .request = id,
                               .token = w.token,
                               .accepted = accepted,
                               .applied = accepted,
                               .value = w.value,
                               .reason = accepted ? "" : "stale token"});
  }

  /// A counter increment: a read served at `sent` returning `read`, then a write of read + 1.
  std::uint64_t increment(std::uint64_t grant, std::string key, std::int64_t read, Time sent, Time arrived,
                          bool acknowledged = true, Time read_at = kTimeMax) {
    if (read_at == kTimeMax) read_at = sent;
    ReadRecord rd;
    rd.client = h.grants.at(grant).client;
    rd.grant = grant;
    rd.key = key;
    rd.sent = read_at;
    rd.answered = true;
    rd.observed = std::to_string(read);
    const auto rid = h.add_read(rd);
    log_in_order(ResourceEntry{.op = ResourceEntry::Op::read,
                               .time = read_at,
                               .resource = "store",
                               .key = key,
                               .request = rid,
                               .accepted = true,
                               .value = rd.observed});
    WriteRecord w;
    w.client = rd.client;
    w.grant = grant;
    w.key = std::move(key);
    w.sent = sent;
    w.checked = sent;
    w.read_modify_write = true;
    w.read = rid;
    w.read_value = read;
    w.value = std::to_string(read + 1);
    w.acknowledged = acknowledged;
    const auto id = h.add_write(std::move(w));
    deliver(id, arrived, true);
    return id;
  }
};

}  // namespace locksim::testing
