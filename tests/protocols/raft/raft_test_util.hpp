#pragma once
/// Test support for the Raft group: an observer that checks Raft and lock-service invariants as the run goes,
/// and rapidcheck with a chosen number of cases.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "locksim/protocols/raft/lease_group.hpp"

namespace locksim::raft::testing {

/// Records what the group reports and checks, at every callback:
///  - at most one leader per term (election safety);
///  - a member's commit index never moves back within one incarnation (it restarts from 0);
///  - no member removes from its log an entry that was committed (the same term at an applied index);
///  - every member applies indexes 1, 2, 3... (from 1 again after a restart), and the entry at an index is
///  the
///    same for every member and every incarnation (each applied prefix is a prefix of one agreed sequence);
///  - per lock, holder revisions strictly increase (across leader failovers);
///  - service-side lease safety: when a lease is revoked for expiry, or loses a lock to another lease without
///    having released it, every promise made for it (grant/keep-alive answered ok) has ended;
///  - leader append-only: a member removes no entry from its log while it leads;
///  - state machine safety where entries commit: the entry a member's log holds at an index it reports
///    committed is the same for every member and incarnation (read from its storage, which holds its log);
///  - leader completeness: a leader of term T holds every entry committed in a term below T (an entry's
///    commit term is the term of the first member to report it committed: the leader that counted it);
///  - the lease service's own promise about grant keys: a grant entry names the lease its key created first
///    (the lease at its own index when the key is new or 0), and a grant or keep-alive is promised only for
///    that lease while it has not been revoked; a reference model of leases and keys replays the applied
///    entries to know which lease that is.
/// check_log_matching() adds log matching over the members' logs at the moment it is called.
/// Time is the world's true time; the members' clocks must not drift for the lease checks to be exact.
struct Recorder {
  explicit Recorder(World& w) : world(&w) {}

  struct Holder {
    Time time{};
    std::string node, lock;
    std::uint64_t lease = 0, rev = 0;
  };

  World* world;
  std::map<std::uint64_t, std::string> leaders;  // term → node
  std::map<std::uint64_t, Entry> agreed;         // index → entry
  std::map<std::string, std::uint64_t> applied;  // node → last applied index
  std::vector<Holder> holders;                   // first record of each (lock, rev)
  std::set<std::pair<std::string, std::uint64_t>> seen_holders;
  std::map<std::uint64_t, Time> promise_end;  // lease → latest end of a promise made for it
  std::uint64_t promises = 0;
  std::set<std::pair<std::string, std::uint64_t>> released;  // (lock, lease) given up voluntarily
  std::set<std::uint64_t> revoked_by_client;
  std::map<std::string, std::uint64_t> last_holder;  // lock → lease
  std::map<std::string, std::uint64_t> commit;       // node → commit index it reported last
  struct StepDown {
    Time time{};
    std::string node;
    std::uint64_t term = 0;
  };
  std::vector<StepDown> step_downs;
  /// Entries known committed: the entry and the term it was committed in.
  struct Committed {
    Entry entry;
    std::uint64_t term = 0;
  };
  std::map<std::uint64_t, Committed> committed;  // index → entry
  std::map<std::string, std::uint64_t> leading;  // node → the term it leads (until it steps down or restarts)
  std::map<std::string, Entry> last_applied;     // node → the entry it applied last
  /// Reference model of the lease service's leases and grant keys, fed the applied entries in index order.
  struct LeaseModel {
    std::map<std::uint64_t, std::uint64_t> key_lease;   // grant key → the lease it created
    std::map<std::uint64_t, std::uint64_t> revoked_at;  // lease → index of the revoke that ended it
    std::set<std::uint64_t> leases;                     // every lease ever created
    /// The lease a grant entry at `index` names.
    std::uint64_t names(std::uint64_t index, const Command& c) const {
      if (c.lease == 0) return index;
      auto it = key_lease.find(c.lease);
      return it != key_lease.end() && it->second < index ? it->second : index;
    }
    bool alive(std::uint64_t lease, std::uint64_t index) const {
      if (!leases.count(lease) || lease > index) return false;
      auto r = revoked_at.find(lease);
      return r == revoked_at.end() || r->second > index;
    }
    void apply(std::uint64_t index, const Command& c) {
      if (c.op == Op::grant) {
        const std::uint64_t lease = names(index, c);
        if (lease == index) {
          leases.insert(index);
          if (c.lease != 0) key_lease.emplace(c.lease, index);
        }
      } else if (c.op == Op::revoke && alive(c.lease, index)) {
        revoked_at.emplace(c.lease, index);
      }
    }
  } lease_model;
  std::vector<std::string> errors;

  /// Entry `index` of `node`'s log as its storage holds it.
  std::optional<Entry> stored_entry(const std::string& node, std::uint64_t index) const {
    auto s = world->storage(world->find(node)).get(fmt::format("raft/log/{:012}", index));
    return s ? decode(*s) : std::nullopt;
  }
  /// `node`'s current term as its storage holds it.
  std::uint64_t stored_term(const std::string& node) const {
    auto s = world->storage(world->find(node)).get("raft/hard");
    std::uint64_t t = 0;
    if (s) std::from_chars(s->data(), s->data() + s->size(), t);
    return t;
  }

  void error(std::string s) {
    if (errors.size() < 20) errors.push_back(fmt::format("t={} {}", format_time(world->now()), s));
  }

  std::shared_ptr<Observer> observer() {
    auto o = std::make_shared<Observer>();
    o->on_leader = [this](const std::string& node, std::uint64_t term) {
      auto [it, fresh] = leaders.emplace(term, node);
      if (!fresh && it->second != node)
        error(fmt::format("two leaders in term {}: {} and {}", term, it->second, node));
      leading[node] = term;
      for (const auto& [index, c] : committed) {
        if (c.term >= term) continue;
        auto e = stored_entry(node, index);
        if (!e || !(*e == c.entry))
          error(fmt::format("{} leads term {} without entry {} ({}) committed in term {}: it has {}", node,
                            term, index, encode(c.entry), c.term, e ? encode(*e) : "none"));
      }
    };
    o->on_start = [this](const std::string& node, std::uint64_t) { leading.erase(node); };
    o->on_step_down = [this](const std::string& node, std::uint64_t term) {
      step_downs.push_back({world->now(), node, term});
      leading.erase(node);
    };
    o->on_commit = [this](const std::string& node, std::uint64_t from, std::uint64_t to) {
      if (to < from) error(fmt::format("{} commit index moved back from {} to {}", node, from, to));
      commit[node] = to;
      // The first member to report an index committed is the leader that counted it: its term is the
      // entry's commit term.
      const std::uint64_t term = stored_term(node);
      for (std::uint64_t i = from + 1; i <= to; ++i) {
        auto e = stored_entry(node, i);
        if (!e) {
          error(fmt::format("{} reports entry {} committed but its log has none", node, i));
          continue;
        }
        auto [it, fresh] = committed.emplace(i, Committed{*e, term});
        if (!fresh && !(it->second.entry == *e))
          error(fmt::format("{} committed a different entry at {}: {} vs {}", node, i, encode(*e),
                            encode(it->second.entry)));
      }
    };
    // A member never removes an entry it knows is committed (at or below its own commit index). A member
    // outside the majority that committed an entry may still hold a copy a stale leader of an older term
    // overwrites: Raft allows that, the entry stays on the majority and every later leader has it.
    o->on_truncate = [this](const std::string& node, std::uint64_t index, const Entry& e) {
      auto c = commit.find(node);
      if (c != commit.end() && index <= c->second)
        error(fmt::format("{} removed entry {} ({}) at or below its commit index {}", node, index, encode(e),
                          c->second));
      // Leader append-only.
      if (auto l = leading.find(node); l != leading.end())
        error(fmt::format("{} removed entry {} ({}) from its log while it leads term {}", node, index,
                          encode(e), l->second));
    };
    o->on_apply = [this](const std::string& node, std::uint64_t index, const Entry& e) {
      std::uint64_t& last = applied[node];
      if (index != last + 1 && index != 1) error(fmt::format("{} applied {} after {}", node, index, last));
      last = index;
      last_applied[node] = e;
      auto [it, fresh] = agreed.emplace(index, e);
      if (!fresh) {
        if (!(it->second == e))
          error(fmt::format("{} applied a different entry at {}: {} vs {}", node, index, encode(e),
                            encode(it->second)));
        return;
      }
      // First application anywhere: the entry is committed now.
      const Command& c = e.cmd;
      lease_model.apply(index, c);
      if (c.op == Op::unlock) released.insert({c.name, c.lease});
      if (c.op == Op::revoke && !c.expired) revoked_by_client.insert(c.lease);
      if (c.op == Op::revoke && c.expired) {
        auto p = promise_end.find(c.lease);
        if (p != promise_end.end() && p->second > world->now())
          error(fmt::format("lease {} revoked for expiry {} before its promise ended", c.lease,
                            format_time(p->second - world->now())));
      }
    };
    o->on_holder = [this](const std::string& node, const std::string& lock, std::uint64_t lease,
                          std::uint64_t rev) {
      if (!seen_holders.insert({lock, rev}).second) return;
      for (auto it = holders.rbegin(); it != holders.rend(); ++it) {
        if (it->lock != lock) continue;
        if (it->rev >= rev) error(fmt::format("holder revision {} after {} for {}", rev, it->rev, lock));
        break;
      }
      if (auto prev = last_holder.find(lock); prev != last_holder.end() && prev->second != lease) {
        const std::uint64_t a = prev->second;
        const bool gave_up = released.count({lock, a}) || revoked_by_client.count(a);
        auto p = promise_end.find(a);
        if (!gave_up && p != promise_end.end() && p->second > world->now())
          error(fmt::format("{} held by lease {} while lease {} still promised for {}", lock, lease, a,
                            format_time(p->second - world->now())));
      }
      last_holder[lock] = lease;
      holders.push_back({world->now(), node, lock, lease, rev});
    };
    o->on_promise = [this](const std::string& node, std::uint64_t lease, Duration ttl,
                           Duration since_append) {
      ++promises;
      // Made as `node` applies its last applied entry: a grant names one lease, the one its key created.
      const std::uint64_t index = applied[node];
      const Command& c = last_applied[node].cmd;
      const std::uint64_t named = c.op == Op::grant ? lease_model.names(index, c) : c.lease;
      if (lease != named)
        error(fmt::format("{} promised lease {} for the {} at {} (key {}), which names lease {}", node, lease,
                          to_string(c.op), index, c.lease, named));
      else if (!lease_model.alive(lease, index))
        error(fmt::format("{} promised lease {} at {}, which no longer exists there", node, lease, index));
      Time end = world->now() - since_append + ttl;
      Time& cur = promise_end[lease];
      cur = std::max(cur, end);
    };
    return o;
  }

  /// Log matching, over the logs the members' storage holds now: two logs with an entry of the same term at
  /// the same index hold the same entries up to there. Adds what it finds to `errors`.
  void check_log_matching(const std::vector<std::string>& nodes) {
    std::vector<std::vector<Entry>> logs;
    for (const auto& node : nodes) {
      std::vector<Entry> log;
      std::uint64_t last = 0;
      if (auto s = world->storage(world->find(node)).get("raft/last"))
        std::from_chars(s->data(), s->data() + s->size(), last);
      for (std::uint64_t i = 1; i <= last; ++i) {
        auto e = stored_entry(node, i);
        if (!e) break;
        log.push_back(*e);
      }
      logs.push_back(std::move(log));
    }
    for (std::size_t a = 0; a < logs.size(); ++a)
      for (std::size_t b = a + 1; b < logs.size(); ++b) {
        std::size_t top = std::min(logs[a].size(), logs[b].size());
        while (top > 0 && logs[a][top - 1].term != logs[b][top - 1].term) --top;
        for (std::size_t i = 0; i < top; ++i)
          if (!(logs[a][i] == logs[b][i])) {
            error(fmt::format("{} and {} both hold a term-{} entry at {} but differ at {}: {} vs {}",
                              nodes[a], nodes[b], logs[a][top - 1].term, top, i + 1, encode(logs[a][i]),
                              encode(logs[b][i])));
            break;
          }
      }
  }

  std::string report() const {
    std::string s;
    for (const auto& e : errors) s += e + "\n";
    return s;
  }
};

/// Run a rapidcheck property `cases` times (rapidcheck's default is 100).
template <class Testable>
void check_cases(int cases, Testable&& testable) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata md;
  md.id = std::string(info->test_suite_name()) + "/" + info->name();
  md.description = info->name();
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = cases;
  if (const char* e = std::getenv("RAFT_CASES")) params.maxSuccess = std::atoi(e);
  const auto result = rc::detail::checkTestable(std::forward<Testable>(testable), md, params);
  if (!result.template is<rc::detail::SuccessResult>()) {
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << ss.str();
  }
}

}  // namespace locksim::raft::testing
