// The [[client]] tables: clients, their programs (steps) and background renewal.
#include "locksim/scenarios/loader/dist.hpp"
#include "locksim/scenarios/loader/loader_internal.hpp"
#include "locksim/scenarios/workload.hpp"

#include <functional>

namespace locksim::loading {

namespace {
constexpr FieldDoc kClientFields[] = {
    {"name", "string", "clientN (N = position)", "process name"},
    {"count", "integer 1..100,000", "1", "make count clients named name1..nameN (name defaults to client)"},
    {"stagger", "duration", "\"0\"", "with count: client k starts at start + (k-1) * stagger"},
    {"start", "time or distribution", "\"0\"",
     "when the client starts; must be before max_time (a distribution: drawn once per run, from the "
     "client's own seeded stream; its longest value must be before max_time)"},
    {"acquisitions", "integer 1..10,000,000", "1", "successful acquisitions before the client exits"},
    {"writes_per_hold", "integer 0..1,000,000", "1", "writes in each critical section"},
    {"work", "duration or distribution", "\"0\"",
     "work before each write: a duration (sets work_min = work_max) or any distribution"},
    {"work_min", "duration", "\"0\"", "work drawn uniformly in [work_min, work_max]"},
    {"work_max", "duration", "work_min", "the upper bound of work"},
    {"think", "duration or distribution", "\"0\"",
     "pause between release and the next acquire: a duration (sets think_min = think_max) or any "
     "distribution"},
    {"think_min", "duration", "\"0\"", "think drawn uniformly in [think_min, think_max]"},
    {"think_max", "duration", "think_min", "the upper bound of think"},
    {"retry_delay", "duration or distribution", "\"500ms\"",
     "the workload's wait after the protocol gave up acquiring, before it acquires again (not [protocol] "
     "retry_delay, the wait between the attempts inside one acquire); a distribution is drawn at each wait"},
    {"give_up_at", "time", "\"0\" (= max_time)", "stop trying to acquire after this time"},
    {"read_modify_write", "bool", "false", "counter workload: read, work, write read+1"},
    {"check_before_write", "bool", "true", "check the lease still looks valid right before each write"},
    {"extend_before_write", "bool", "false", "extend the lock before each write (long-running job)"},
    {"release", "bool", "true", "release at the end of the critical section"},
    {"steps", "array of steps", "the program the keys above describe",
     "the client's program (client.steps); replaces acquisitions, writes_per_hold, work, think and the "
     "read/check/extend/release flags"},
    {"protocol", "table", "none (the scenario's [protocol])",
     "this client's own client-side protocol settings, over [protocol]'s: protocol = { node_timeout = "
     "\"10ms\", retry_count = 0 } (client.protocol lists the keys)"},
    {"renew", "bool", "false",
     "renew the held lock in the background, in a thread of the client (client1/renew), with the "
     "protocol library's defaults"},
    {"on_renew_failure", "\"stop\" | \"continue\"", "the library's (redlock stop, others continue)",
     "when renewal failed for good: stop acting as holder at the next step, or go on unaware"},
    {"renew_every", "duration > 0", "the library's (lease, redis: ttl/3)",
     "renew this long after the grant and after each renewal"},
    {"renew_before_expiry", "duration > 0", "the library's (redlock: 500ms)",
     "renew once this little of the validity estimate remains (below every protocol's ttl)"},
    {"renew_retry", "duration > 0", "the library's (lease 500ms, redis ttl/3, redlock retry_delay)",
     "after a failed renewal, try again this long later while the estimate holds"},
};

constexpr FieldDoc kStepFields[] = {
    {"step", "\"acquire\" | \"read\" | \"write\" | \"increment\" | \"check\" | \"extend\" | \"release\"", "",
     "a step without a value, written as a table to give it a note"},
    {"work", "distribution", "", "work this long while holding (skipped once the hold is lost)"},
    {"sleep", "distribution", "", "wait this long, holding or not"},
    {"repeat", "integer 1..10,000,000", "", "run steps this many times"},
    {"loop", "\"forever\" | \"until TIME\"", "",
     "run steps again and again: forever (the run's end, or give_up_at at an acquire, stops it) or until "
     "that true time"},
    {"steps", "array of steps", "", "repeat, loop: the block"},
    {"note", "note name", "",
     "a note the client logs as the step begins, for a fault trigger: after = { process, note }"},
    {"resource", "a [[resource]] name", "the first resource",
     "read, write, increment: the resource the step acts on, where the scenario has several"},
};

/// Step names written as plain strings.
const std::vector<std::pair<std::string, ClientStep::Kind>>& simple_steps() {
  using K = ClientStep::Kind;
  static const std::vector<std::pair<std::string, K>> k = {
      {"acquire", K::acquire}, {"read", K::read},     {"write", K::write},    {"increment", K::increment},
      {"check", K::check},     {"extend", K::extend}, {"release", K::release}};
  return k;
}

/// Every step name, for did-you-mean.
std::vector<std::string> step_names() {
  std::vector<std::string> out;
  for (const auto& [n, k] : simple_steps()) out.push_back(n);
  for (const char* n : {"work", "sleep", "repeat", "loop"}) out.push_back(n);
  return out;
}

/// The keys of a [[client]] that describe the default program: with `steps` the program is written out.
constexpr const char* kFlagKeys[] = {"acquisitions",
                                     "writes_per_hold",
                                     "work",
                                     "work_min",
                                     "work_max",
                                     "think",
                                     "think_min",
                                     "think_max",
                                     "read_modify_write",
                                     "check_before_write",
                                     "extend_before_write",
                                     "release"};

constexpr int kMaxStepDepth = 16;
constexpr std::size_t kMaxSteps = 10'000;
}  // namespace

std::vector<TableDoc> client_tables() {
  return {{"client", "[[client]]: clients and their workload", kClientFields},
          {"client.steps", "client.steps: one step of a client's program, as a table", kStepFields},
          {"client.protocol",
           "client.protocol: one client's own client-side protocol settings (the keys of [protocol] a client "
           "library takes)",
           client_protocol_fields()}};
}

std::vector<std::string> step_notes(const Scenario& s, const std::string& proc) {
  std::vector<std::string> out;
  std::function<void(const std::vector<ClientStep>&)> in = [&](const std::vector<ClientStep>& steps) {
    for (const ClientStep& st : steps) {
      if (!st.note.empty() && std::find(out.begin(), out.end(), st.note) == out.end()) out.push_back(st.note);
      in(st.steps);
    }
  };
  for (const ClientSpec& c : s.clients)
    if (proc.empty() || c.name == proc) in(c.steps);
  return out;
}

std::optional<std::pair<std::uint64_t, std::string>> note_bound(const ClientSpec& c, std::string_view label) {
  const std::optional<std::uint64_t> most = most_notes(c, label);
  if (!most) return std::nullopt;
  if (!c.steps.empty()) return std::make_pair(*most, std::string("its steps"));
  std::string why = "its workload";
  if (label == note::acquired) why = "acquisitions";
  if (label == note::released) why = "acquisitions with release = true";
  if (label == note::write) why = "acquisitions × writes_per_hold";
  if (label == note::lease_check) why = "writes with check_before_write = true";
  if (label == note::renewed || label == note::renew_failed || label == note::renewal_lost ||
      label == note::aborted)
    why = "without renew = true";
  return std::make_pair(*most, why);
}

std::vector<ClientStep> Loader::steps(const toml::node& n, const std::string& field, int depth,
                                      std::size_t& total) const {
  if (!n.is_array()) {
    fail(line_of(n), field,
         fmt::format("expected an array of steps such as [\"acquire\", \"write\", \"release\"], got {}",
                     type_name(n)));
  }
  const toml::array& a = *n.as_array();
  if (a.empty()) fail(line_of(n), field, "an empty list of steps does nothing: give at least one step");
  if (depth > kMaxStepDepth)
    fail(line_of(n), field, fmt::format("steps nested more than {} deep", kMaxStepDepth));
  std::vector<ClientStep> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (++total > kMaxSteps) fail(line_of(a[i]), field, fmt::format("more than {} steps", kMaxSteps));
    out.push_back(step(a[i], fmt::format("{}[{}]", field, i), depth, total));
  }
  return out;
}

ClientStep Loader::step(const toml::node& n, const std::string& field, int depth, std::size_t& total) const {
  using K = ClientStep::Kind;
  ClientStep st;
  st.line = line_of(n);
  auto simple = [&](const std::string& name, std::uint32_t line, const std::string& f) {
    for (const auto& [k, kind] : simple_steps())
      if (k == name) return kind;
    if (name == "work" || name == "sleep")
      fail(line, f, fmt::format("'{0}' needs a duration: {{ {0} = \"1s\" }}", name));
    if (name == "repeat" || name == "loop")
      fail(line, f,
           fmt::format("'{}' needs a block: {{ {} = {}, steps = [...] }}", name, name,
                       name == "repeat" ? "3" : "\"forever\""));
    fail(line, f, fmt::format("unknown step '{}'{}", name, suggestion(name, step_names(), "steps")));
  };
  if (n.is_string()) {
    st.kind = simple(*n.value<std::string>(), st.line, field);
    return st;
  }
  if (!n.is_table()) {
    fail(st.line, field,
         fmt::format(
             "expected a step: a name such as \"write\" or a table such as {{ work = \"1s\" }}, got {}",
             type_name(n)));
  }
  const Tab t{n.as_table(), field, st.line};
  only_schema(t, "client.steps");
  std::vector<std::string> kinds;
  for (const char* k : {"step", "work", "sleep", "repeat", "loop"})
    if (t.has(k)) kinds.push_back(k);
  if (kinds.empty())
    fail(st.line, t.field("step"),
         "a step table names its step: step = \"write\", work = \"1s\", sleep, repeat or loop");
  if (kinds.size() > 1)
    fail_at(t, kinds[1], fmt::format("one step per table: '{}' and '{}' are two", kinds[0], kinds[1]));
  const std::string& kind = kinds[0];
  const bool block = kind == "repeat" || kind == "loop";
  if (t.has("steps") && !block)
    fail_at(t, "steps", fmt::format("'steps' is the block of a repeat or a loop, not of a {} step", kind));
  if (kind == "step") {
    const std::string name = *str(t, "step");
    st.kind = simple(name, line_of(*t.get("step")), t.field("step"));
  } else if (kind == "work" || kind == "sleep") {
    st.kind = kind == "work" ? K::work : K::sleep;
    DistRules rules;
    rules.limit = max_time_;
    rules.limit_name = fmt::format("limits.max_time ({})", format_time(max_time_));
    rules.noun = kind;
    st.duration = parse_dist(*t.get(kind), t.field(kind), file_, rules);
  } else if (kind == "repeat") {
    st.kind = K::repeat;
    const toml::node* rn = t.get("repeat");
    if (rn->is_integer() && *rn->value<std::int64_t>() <= 0) {
      fail(line_of(*rn), t.field("repeat"),
           fmt::format("repeat = {} runs nothing: repeat at least once", *rn->value<std::int64_t>()));
    }
    st.count = static_cast<std::uint64_t>(*integer(t, "repeat", 1, kMaxAcquisitions));
  } else {
    st.kind = K::loop;
    const std::string text = *str(t, "loop");
    if (text != "forever") {
      if (text.rfind("until ", 0) != 0) {
        fail_at(t, "loop",
                fmt::format("'{}': write loop = \"forever\" or loop = \"until 50s\" (a true time)", text));
      }
      std::string why;
      const auto at = parse_duration(text.substr(6), false, &why);
      if (!at) fail_at(t, "loop", fmt::format("'{}': {}", text, why));
      if (*at <= 0ns)
        fail_at(t, "loop", fmt::format("'{}' never runs: no iteration begins at or after it", text));
      if (*at > max_time_) {
        fail_at(t, "loop",
                fmt::format("'{}' is beyond limits.max_time ({}): write loop = \"forever\" to loop until the "
                            "run ends",
                            text, format_time(max_time_)));
      }
      st.until = *at;
    }
  }
  if (block) {
    need(t, "steps", fmt::format("steps = [...] (the block the {} runs)", kind));
    st.steps = steps(*t.get("steps"), t.field("steps"), depth + 1, total);
  }
  if (auto target = str(t, "resource")) {
    if (st.kind != K::read && st.kind != K::write && st.kind != K::increment)
      fail_at(t, "resource",
              fmt::format("'resource' names what a read, write or increment acts on, not a {} step",
                          to_string(st.kind)));
    if (std::find(resource_names_.begin(), resource_names_.end(), *target) == resource_names_.end())
      fail_at(t, "resource",
              fmt::format("no resource named '{}': this scenario's resources are {}{}", *target,
                          join(resource_names_), suggestion(*target, resource_names_, "resources")));
    if (*target != resource_names_.front()) st.resource = *target;  // the first is the default
  }
  if (auto note_name = str(t, "note")) {
    if (!valid_ident(*note_name))
      fail_at(t, "note",
              fmt::format("'{}' is not a valid note name: use letters, digits, '_', '-', '.'", *note_name));
    if (std::find(note::all.begin(), note::all.end(), *note_name) != note::all.end()) {
      fail_at(t, "note",
              fmt::format("'{}' is a note the workload or a protocol logs already: give this step a name of "
                          "its own",
                          *note_name));
    }
    st.note = *note_name;
  }
  return st;
}

void Loader::program(const Tab& c, ClientSpec& spec, ResourceKind kind) const {
  for (const char* k : kFlagKeys) {
    if (c.has(k)) {
      fail_at(c, k,
              fmt::format("'{}' describes the default program; with steps, write it into the program", k));
    }
  }
  std::size_t total = 0;
  spec.steps = steps(*c.get("steps"), c.field("steps"), 0, total);
  // The first step that needs the lock must come after an acquire, in program order.
  bool acquired = false;
  std::function<void(const std::vector<ClientStep>&)> walk = [&](const std::vector<ClientStep>& steps) {
    for (const ClientStep& st : steps) {
      if (acquired) return;
      if (st.kind == ClientStep::Kind::acquire) {
        acquired = true;
        return;
      }
      const bool holder = st.kind != ClientStep::Kind::sleep && st.kind != ClientStep::Kind::repeat &&
                          st.kind != ClientStep::Kind::loop;
      if (holder) {
        fail(st.line, c.field("steps"),
             fmt::format("'{}' before any acquire: it needs the lock; put \"acquire\" first",
                         to_string(st.kind)));
      }
      walk(st.steps);
    }
  };
  // A cas-row needs no lock: a program that never acquires runs its reads and writes without one (the
  // steps that only make sense with a lock are refused).
  std::function<bool(const std::vector<ClientStep>&)> acquires = [&](const std::vector<ClientStep>& steps) {
    for (const ClientStep& st : steps)
      if (st.kind == ClientStep::Kind::acquire || acquires(st.steps)) return true;
    return false;
  };
  if (kind == ResourceKind::cas_row && !acquires(spec.steps)) {
    std::function<void(const std::vector<ClientStep>&)> no_lock = [&](const std::vector<ClientStep>& steps) {
      for (const ClientStep& st : steps) {
        if (st.kind == ClientStep::Kind::check || st.kind == ClientStep::Kind::extend ||
            st.kind == ClientStep::Kind::release)
          fail(st.line, c.field("steps"),
               fmt::format("'{}' needs the lock, and this program never acquires it", to_string(st.kind)));
        no_lock(st.steps);
      }
    };
    no_lock(spec.steps);
    return;
  }
  walk(spec.steps);
  if (!acquired)
    fail_at(
        c, "steps",
        "the program never acquires the lock: add \"acquire\" (only a cas-row is written without a lock)");
}

void Loader::renewal(const Tab& c, const Scenario& s, ClientSpec& spec) const {
  RenewalSpec& r = spec.renewal;
  r.on = boolean(c, "renew").value_or(false);
  for (const char* k : {"on_renew_failure", "renew_every", "renew_before_expiry", "renew_retry"}) {
    if (c.has(k) && !r.on) fail_at(c, k, fmt::format("'{}' sets up background renewal: add renew = true", k));
  }
  if (!r.on) return;
  if (auto v = enumeration<bool>(c, "on_renew_failure", {{"stop", true}, {"continue", false}}))
    r.stop_on_failure = *v;
  r.every = duration(c, "renew_every", Sign::positive);
  r.retry = duration(c, "renew_retry", Sign::positive);
  r.before_expiry = duration(c, "renew_before_expiry", Sign::positive);
  if (r.before_expiry) {
    std::vector<std::pair<std::string, Duration>> ttls = {{"[lock] ttl", s.config.ttl}};
    for (const auto& [name, cfg] : s.per_protocol) ttls.emplace_back(fmt::format("{}'s ttl", name), cfg.ttl);
    for (const auto& [what, ttl] : ttls) {
      if (*r.before_expiry >= ttl) {
        fail_at(c, "renew_before_expiry",
                fmt::format("{} is not below {} ({}): the lock would be renewed as soon as it is renewed",
                            format_time(*r.before_expiry), what, format_time(ttl)));
      }
    }
  }
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
    if (const toml::node* d = c.get("start"); d != nullptr && d->is_table()) {
      DistRules rules;
      rules.limit = max_time_ - 1ns;
      rules.limit_name =
          fmt::format("limits.max_time ({}): the client would never run", format_time(max_time_));
      rules.noun = "start";
      spec.start_dist = parse_dist(*d, c.field("start"), file_, rules);
      spec.start = spec.start_dist->upper_bound();  // the latest start: what the max_time check below needs
    } else if (auto v = duration(c, "start", Sign::non_negative)) {
      spec.start = *v;
    }
    if (auto v = integer(c, "acquisitions", 1, kMaxAcquisitions))
      spec.acquisitions = static_cast<std::uint32_t>(*v);
    if (auto v = integer(c, "writes_per_hold", 0, 1'000'000))
      spec.writes_per_hold = static_cast<std::uint32_t>(*v);
    auto range = [&](const char* both, const char* lo, const char* hi, Duration& out_lo, Duration& out_hi,
                     std::optional<DelayDist>& out_dist) {
      if (c.has(both) && (c.has(lo) || c.has(hi))) {
        fail_at(c, both, fmt::format("give either {} or {}/{}, not both", both, lo, hi));
      }
      if (const toml::node* d = c.get(both); d != nullptr && d->is_table()) {
        DistRules rules;
        rules.limit = max_time_;
        rules.limit_name = fmt::format("limits.max_time ({})", format_time(max_time_));
        rules.noun = both;
        out_dist = parse_dist(*d, c.field(both), file_, rules);
        return;
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
    range("work", "work_min", "work_max", spec.work_min, spec.work_max, spec.work_dist);
    range("think", "think_min", "think_max", spec.think_min, spec.think_max, spec.think_dist);
    if (const toml::node* d = c.get("retry_delay"); d != nullptr && d->is_table()) {
      DistRules rules;
      rules.limit = max_time_;
      rules.limit_name = fmt::format("limits.max_time ({})", format_time(max_time_));
      rules.noun = "retry_delay";
      spec.retry_delay_dist = parse_dist(*d, c.field("retry_delay"), file_, rules);
      spec.retry_delay = spec.retry_delay_dist->upper_bound();
    } else if (auto v = duration(c, "retry_delay", Sign::non_negative)) {
      spec.retry_delay = *v;
    }
    if (auto v = duration(c, "give_up_at", Sign::non_negative)) spec.give_up_at = *v;
    if (auto v = boolean(c, "read_modify_write")) spec.read_modify_write = *v;
    if (auto v = boolean(c, "check_before_write")) spec.check_before_write = *v;
    if (auto v = boolean(c, "extend_before_write")) spec.extend_before_write = *v;
    if (auto v = boolean(c, "release")) spec.release = *v;
    if (c.has("steps")) program(c, spec, s.resource_kind);
    if (const toml::node* p = c.get("protocol")) {
      if (!p->is_table()) {
        fail(
            line_of(*p), c.field("protocol"),
            fmt::format("expected a table of this client's protocol settings, such as protocol = {{ "
                        "node_timeout = \"10ms\", retry_count = 0 }}, got {} (a client runs the protocol the "
                        "scenario runs: [expect] protocols, or -p)",
                        type_name(*p)));
      }
      spec.protocol = client_protocol(Tab{p->as_table(), c.field("protocol"), line_of(*p)});
    }
    renewal(c, s, spec);
    Duration stagger{0};
    if (auto v = duration(c, "stagger", Sign::non_negative)) {
      if (!count) fail_at(c, "stagger", "stagger spaces out the starts of `count` clients: add count = N");
      stagger = *v;
      if (spec.start_dist && stagger > 0ns)
        fail_at(c, "stagger",
                "stagger does not combine with a start distribution (each client draws its own start): "
                "drop stagger, or give start as a duration");
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
      if (std::find(resource_names_.begin(), resource_names_.end(), one.name) != resource_names_.end()) {
        fail_at(c, c.has("name") ? "name" : "count",
                fmt::format("client name '{}' is already the name of a resource", one.name));
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
