// The [[client]] tables: clients and their workload.
#include "scenarios/loader/loader_internal.hpp"

namespace locksim::loading {

namespace {
constexpr FieldDoc kClientFields[] = {
    {"name", "string", "clientN (N = position)", "process name"},
    {"count", "integer 1..100,000", "1", "make count clients named name1..nameN (name defaults to client)"},
    {"stagger", "duration", "\"0\"", "with count: client k starts at start + (k-1) * stagger"},
    {"start", "time", "\"0\"", "when the client starts; must be before max_time"},
    {"acquisitions", "integer 1..10,000,000", "1", "successful acquisitions before the client exits"},
    {"writes_per_hold", "integer 0..1,000,000", "1", "writes in each critical section"},
    {"work", "duration", "\"0\"", "work before each write (sets work_min = work_max)"},
    {"work_min", "duration", "\"0\"", "work drawn uniformly in [work_min, work_max]"},
    {"work_max", "duration", "work_min", "the upper bound of work"},
    {"think", "duration", "\"0\"", "pause between release and the next acquire (sets think_min = think_max)"},
    {"think_min", "duration", "\"0\"", "think drawn uniformly in [think_min, think_max]"},
    {"think_max", "duration", "think_min", "the upper bound of think"},
    {"retry_delay", "duration", "\"500ms\"", "wait after the protocol gave up acquiring"},
    {"give_up_at", "time", "\"0\" (= max_time)", "stop trying to acquire after this time"},
    {"read_modify_write", "bool", "false", "counter workload: read, work, write read+1"},
    {"check_before_write", "bool", "true", "check the lease still looks valid right before each write"},
    {"extend_before_write", "bool", "false", "extend the lock before each write (long-running job)"},
    {"release", "bool", "true", "release at the end of the critical section"},
};
}  // namespace

std::vector<TableDoc> client_tables() {
  return {{"client", "[[client]]: clients and their workload", kClientFields}};
}

void Loader::clients(const Tab& root, Scenario& s) {
  std::map<std::string, std::uint32_t> seen;  // name -> line
  for (const Tab& c : table_array(root, "client")) {
    only_schema(c, "client");
    ClientSpec spec;
    const auto count = integer(c, "count", 1, kMaxClients);
    const std::string name =
        str(c, "name").value_or(count ? "client" : fmt::format("client{}", s.clients.size() + 1));
    if (!valid_ident(name)) {
      fail_at(c, "name", fmt::format("'{}' is not a valid name: use letters, digits, '_', '-', '.'", name));
    }
    if (auto v = duration(c, "start", Sign::non_negative)) spec.start = *v;
    if (auto v = integer(c, "acquisitions", 1, kMaxAcquisitions))
      spec.acquisitions = static_cast<std::uint32_t>(*v);
    if (auto v = integer(c, "writes_per_hold", 0, 1'000'000))
      spec.writes_per_hold = static_cast<std::uint32_t>(*v);
    auto range = [&](const char* both, const char* lo, const char* hi, Duration& out_lo, Duration& out_hi) {
      if (c.has(both) && (c.has(lo) || c.has(hi))) {
        fail_at(c, both, fmt::format("give either {} or {}/{}, not both", both, lo, hi));
      }
      if (auto v = duration(c, both, Sign::non_negative)) out_lo = out_hi = *v;
      auto l = duration(c, lo, Sign::non_negative);
      auto h = duration(c, hi, Sign::non_negative);
      if (l) out_lo = *l;
      out_hi = h ? *h : (l ? *l : out_hi);
      if (out_lo > out_hi) {
        fail_at(c, hi,
                fmt::format("{} ({}) is below {} ({})", hi, format_time(out_hi), lo, format_time(out_lo)));
      }
    };
    range("work", "work_min", "work_max", spec.work_min, spec.work_max);
    range("think", "think_min", "think_max", spec.think_min, spec.think_max);
    if (auto v = duration(c, "retry_delay", Sign::non_negative)) spec.retry_delay = *v;
    if (auto v = duration(c, "give_up_at", Sign::non_negative)) spec.give_up_at = *v;
    if (auto v = boolean(c, "read_modify_write")) spec.read_modify_write = *v;
    if (auto v = boolean(c, "check_before_write")) spec.check_before_write = *v;
    if (auto v = boolean(c, "extend_before_write")) spec.extend_before_write = *v;
    if (auto v = boolean(c, "release")) spec.release = *v;
    Duration stagger{0};
    if (auto v = duration(c, "stagger", Sign::non_negative)) {
      if (!count) fail_at(c, "stagger", "stagger spaces out the starts of `count` clients: add count = N");
      stagger = *v;
    }
    const std::uint32_t n = count ? static_cast<std::uint32_t>(*count) : 1;
    if (s.clients.size() + n > kMaxClients) {
      fail_at(c, count ? "count" : "name",
              fmt::format("too many clients: at most {} in a scenario", kMaxClients));
    }
    for (std::uint32_t k = 1; k <= n; ++k) {
      ClientSpec one = spec;
      one.name = count ? fmt::format("{}{}", name, k) : name;
      // start + stagger * (k - 1) >= max_time, computed without overflow.
      const bool late =
          spec.start >= max_time_ ||
          (k > 1 && stagger.count() > (max_time_ - spec.start).count() / static_cast<std::int64_t>(k - 1));
      one.start = late ? max_time_ : spec.start + stagger * (k - 1);
      if (late || one.start >= max_time_) {
        fail_at(c, c.has("stagger") ? "stagger" : "start",
                fmt::format("client '{}' would not start before limits.max_time ({}): it would never run",
                            one.name, format_time(max_time_)));
      }
      if (auto it = seen.find(one.name); it != seen.end()) {
        fail_at(c, c.has("name") ? "name" : "count",
                fmt::format("duplicate client name '{}' (already defined at line {})", one.name, it->second));
      }
      if (process_set_.count(one.name)) {
        fail_at(c, c.has("name") ? "name" : "count",
                fmt::format("client name '{}' is already the name of a service process", one.name));
      }
      seen.emplace(one.name, c.line);
      s.clients.push_back(std::move(one));
    }
  }
}

}  // namespace locksim::loading
