#pragma once
/// Test support for the Raft group: an observer that checks Raft and lock-service invariants as the run goes,
/// and rapidcheck with a chosen number of cases.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "protocols/raft/raft.hpp"

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
///    having released it, every promise made for it (grant/keep-alive answered ok) has ended.
/// Time is the world's true time; the members' clocks must not drift for the last check to be exact.
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
  std::vector<std::string> errors;

  void error(std::string s) {
    if (errors.size() < 20) errors.push_back(fmt::format("t={} {}", format_time(world->now()), s));
  }

  std::shared_ptr<Observer> observer() {
    auto o = std::make_shared<Observer>();
    o->on_leader = [this](const std::string& node, std::uint64_t term) {
      auto [it, fresh] = leaders.emplace(term, node);
      if (!fresh && it->second != node)
        error(fmt::format("two leaders in term {}: {} and {}", term, it->second, node));
    };
    o->on_step_down = [this](const std::string& node, std::uint64_t term) {
      step_downs.push_back({world->now(), node, term});
    };
    o->on_commit = [this](const std::string& node, std::uint64_t from, std::uint64_t to) {
      if (to < from) error(fmt::format("{} commit index moved back from {} to {}", node, from, to));
      commit[node] = to;
    };
    // A member never removes an entry it knows is committed (at or below its own commit index). A member
    // outside the majority that committed an entry may still hold a copy a stale leader of an older term
    // overwrites: Raft allows that, the entry stays on the majority and every later leader has it.
    o->on_truncate = [this](const std::string& node, std::uint64_t index, const Entry& e) {
      auto c = commit.find(node);
      if (c != commit.end() && index <= c->second)
        error(fmt::format("{} removed entry {} ({}) at or below its commit index {}", node, index, encode(e),
                          c->second));
    };
    o->on_apply = [this](const std::string& node, std::uint64_t index, const Entry& e) {
      std::uint64_t& last = applied[node];
      if (index != last + 1 && index != 1) error(fmt::format("{} applied {} after {}", node, index, last));
      last = index;
      auto [it, fresh] = agreed.emplace(index, e);
      if (!fresh) {
        if (!(it->second == e))
          error(fmt::format("{} applied a different entry at {}: {} vs {}", node, index, encode(e),
                            encode(it->second)));
        return;
      }
      // First application anywhere: the entry is committed now.
      const Command& c = e.cmd;
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
    o->on_promise = [this](const std::string&, std::uint64_t lease, Duration ttl, Duration since_append) {
      ++promises;
      Time end = world->now() - since_append + ttl;
      Time& cur = promise_end[lease];
      cur = std::max(cur, end);
    };
    return o;
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
