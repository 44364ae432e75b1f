// The [[fault]] tables: the fault plan and its triggers.
#include "locksim/scenarios/loader/dist.hpp"
#include "locksim/scenarios/loader/loader_internal.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim::loading {

namespace {
constexpr FieldDoc kFaultFields[] = {
    {"kind",
     "\"pause\" | \"crash\" | \"restart\" | \"clock_jump\" | \"clock_drift\" | \"partition\" | \"heal\" | "
     "\"delay_spike\"",
     "required", "what happens"},
    {"at", "time", "", "the trigger: at this true time (one of at, after)"},
    {"after", "table", "", "the trigger: after a process's event (fault.after)"},
    {"target", "process name or role, or an array of them", "",
     "the process hit (pause, crash, restart, clock_jump, clock_drift; delay_spike: the sender, \"*\" = "
     "any); a role (\"leader\", \"primary\", \"holder\", \"holder-servers\", \"any-server\", "
     "\"any-client\") is resolved each time the fault fires; an array hits each"},
    {"peer", "process name or \"*\"", "\"*\"", "delay_spike: the receiver"},
    {"duration", "duration or a distribution (drawn at every firing)", "",
     "pause: how long (> 0, required); crash: restart after it (\"0\" = stay down); clock_jump: how far "
     "(non-zero, negative = back; a distribution's draws are forward unless back = true); partition: heal "
     "after it (\"0\" = never); delay_spike: the window. A distribution's values must be > 0 (a crash's "
     "may be 0)"},
    {"back", "bool", "false", "clock_jump with a distribution as duration: jump back by each draw"},
    {"extra", "duration > 0 or a distribution (min > 0, drawn at every firing)", "",
     "delay_spike: the delay added to each matching message (required)"},
    {"ppm", "integer -500,000..500,000", "", "clock_drift: the new drift (required)"},
    {"power_loss", "bool", "false",
     "crash: lose what was not fsynced (machine crash), not just volatile state"},
    {"one_way", "bool", "false", "partition: cut only side_a → side_b"},
    {"count", "integer 0..10,000,000", "0",
     "delay_spike: delay only the next count matching messages (0 = all)"},
    {"side_a", "array of process names or roles", "", "partition: one side (required unless split)"},
    {"side_b", "array of process names or roles", "", "partition: the other side (required unless split)"},
    {"split", "\"leader-alone\" | \"minority\" | \"majority\"", "",
     "partition: sides computed from the leader when it fires, instead of side_a and side_b"},
    {"every", "duration > 0 or a distribution (min > 0)", "",
     "repeat: fire again every this long after the first firing; a distribution draws each period anew "
     "(exponential: Poisson arrivals), and its shortest value bounds the firings"},
    {"times", "integer 1..10,000", "", "repeat: firings in all, the first included (needs every)"},
    {"until", "time", "limits.max_time",
     "repeat: no firing after this true time (needs every; the repetition ends at times or until)"},
    {"jitter", "duration or a distribution", "\"0\"",
     "each firing comes a uniform random 0..jitter later, or a draw of the distribution later (seeded; the "
     "period does not drift)"},
};
constexpr FieldDoc kAfterFields[] = {
    {"process", "process name or \"*\"", "required", "whose event"},
    {"note", "note name", "", "fire when the process logs this note (one of note, send, receive)"},
    {"send", "message type", "", "fire when the process sends a message of this type"},
    {"receive", "message type", "", "fire when the process takes a message of this type from its mailbox"},
    {"nth", "integer 1..10,000,000", "1", "fire on the nth matching event"},
    {"delay", "duration", "\"0\"", "fire this long after the event"},
};
}  // namespace

std::vector<TableDoc> fault_tables() {
  return {{"fault", "[[fault]]: the fault plan", kFaultFields},
          {"fault.after", "fault.after: an event trigger", kAfterFields}};
}

Trigger Loader::trigger(const Tab& f, const Scenario& s, std::string& proc) const {
  const bool has_at = f.has("at"), has_after = f.has("after");
  if (has_at && has_after) fail_at(f, "after", "a fault has one trigger: `at` or `after`, not both");
  if (!has_at && !has_after) {
    fail(f.line, f.field("at"),
         "missing trigger: at = \"2s\", or after = { process = \"client1\", note = \"acquired\" }");
  }
  if (has_at) {
    const Duration at = *duration(f, "at", Sign::non_negative);
    if (at > max_time_) {
      fail_at(f, "at",
              fmt::format("the fault at {} comes after limits.max_time ({}): it would never fire",
                          format_time(at), format_time(max_time_)));
    }
    return Trigger::at_time(at);
  }
  const toml::node* an = f.get("after");
  if (!an->is_table()) {
    fail(line_of(*an), f.field("after"),
         fmt::format("expected a table {{ process = \"client1\", note = \"acquired\" }}, got {}",
                     type_name(*an)));
  }
  Tab a{an->as_table(), f.field("after"), line_of(*an)};
  only_schema(a, "fault.after");
  Trigger t;
  need(a, "process", "process = \"client1\" (or \"*\" for any process)");
  proc = *str(a, "process");
  check_process(proc, line_of(*a.get("process")), a.field("process"), true);
  if (proc == "*") proc.clear();
  const int kinds = int(a.has("note")) + int(a.has("send")) + int(a.has("receive"));
  if (kinds == 0)
    fail(a.line, a.field("note"),
         "missing event: note = \"acquired\", send = \"TYPE\" or receive = \"TYPE\"");
  if (kinds > 1) fail(a.line, a.field("note"), "give one event: note, send or receive");
  if (a.has("note")) {
    t.kind = Trigger::Kind::note;
    t.label = *str(a, "note");
    std::vector<std::string> labels(note::all.begin(), note::all.end());
    for (std::string& n : step_notes(s, proc)) labels.push_back(std::move(n));  // the program's own notes
    if (std::find(labels.begin(), labels.end(), t.label) == labels.end()) {
      fail_at(a, "note",
              fmt::format("no process ever logs the note '{}', so the fault would never fire{}", t.label,
                          suggestion(t.label, labels, "notes")));
    }
  } else {
    t.kind = a.has("send") ? Trigger::Kind::send : Trigger::Kind::receive;
    t.label = *str(a, a.has("send") ? "send" : "receive");
  }
  t.nth = 1;
  if (const toml::node* nn = a.get("nth")) {
    if (nn->is_integer() && *nn->value<std::int64_t>() == 0) {
      fail(line_of(*nn), a.field("nth"), "nth = 0 can never fire: the first matching event is nth = 1");
    }
    t.nth = static_cast<std::uint32_t>(*integer(a, "nth", 1, kMaxAcquisitions));
  }
  if (auto d = duration(a, "delay", Sign::non_negative)) {
    if (*d > max_time_) {
      fail_at(a, "delay",
              fmt::format("a delay of {} is beyond limits.max_time ({}): the fault would never fire",
                          format_time(*d), format_time(max_time_)));
    }
    t.delay = *d;
  }
  // Client notes happen a bounded number of times: a trigger waiting for more can never fire.
  if (t.kind == Trigger::Kind::note && !proc.empty()) {
    auto it =
        std::find_if(s.clients.begin(), s.clients.end(), [&](const ClientSpec& c) { return c.name == proc; });
    if (it != s.clients.end()) {
      if (const auto most = note_bound(*it, t.label); most && t.nth > most->first) {
        fail(a.get("nth") ? line_of(*a.get("nth")) : line_of(*a.get("note")),
             a.field(a.get("nth") ? "nth" : "note"),
             fmt::format("{} logs '{}' at most {} time(s) ({}), so nth = {} can never fire", proc, t.label,
                         most->first, most->second, t.nth));
      }
    }
  }
  return t;
}

FaultSpec Loader::fault(const Tab& f, const Scenario& s) const {
  only_schema(f, "fault");
  need(f, "kind",
       "kind = \"pause\" | \"crash\" | \"restart\" | \"clock_jump\" | \"clock_drift\" | \"partition\" | "
       "\"heal\" | \"delay_spike\"");
  using K = Fault::Kind;
  const K kind = *enumeration<K>(f, "kind",
                                 {{"pause", K::pause},
                                  {"crash", K::crash},
                                  {"restart", K::restart},
                                  {"clock_jump", K::clock_jump},
                                  {"clock_drift", K::clock_drift},
                                  {"partition", K::partition},
                                  {"heal", K::heal},
                                  {"delay_spike", K::delay_spike}});
  const std::string kind_name = *str(f, "kind");
  const std::map<K, std::vector<std::string>> applies = {
      {K::pause, {"target", "duration"}},
      {K::crash, {"target", "duration", "power_loss"}},
      {K::restart, {"target"}},
      {K::clock_jump, {"target", "duration", "back"}},
      {K::clock_drift, {"target", "ppm"}},
      {K::partition, {"side_a", "side_b", "split", "duration", "one_way"}},
      {K::heal, {}},
      {K::delay_spike, {"target", "peer", "extra", "duration", "count"}}};
  const auto& ok = applies.at(kind);
  for (const auto& [k, v] : *f.t) {
    const std::string key(k.str());
    if (key == "kind" || key == "at" || key == "after") continue;
    if (key == "every" || key == "times" || key == "until" || key == "jitter") continue;  // every kind
    if (std::find(ok.begin(), ok.end(), key) == ok.end()) {
      fail(line_of(v), f.field(key),
           fmt::format("'{}' does not apply to a {} fault{}", key, kind_name,
                       ok.empty() ? std::string(" (it takes no parameters)")
                                  : fmt::format(" (it takes: {})", join(ok))));
    }
  }
  FaultSpec spec;
  spec.line = f.line;
  spec.fault.kind = kind;
  spec.fault.when = trigger(f, s, spec.trigger_proc);

  const bool needs_target = kind != K::partition && kind != K::heal && kind != K::delay_spike;
  if (needs_target)
    need(f, "target", fmt::format("target = \"<process>\" (the process the {} hits)", kind_name));
  targets(f, kind, spec);
  if (auto p = str(f, "peer")) {
    if (parse_fault_role(*p))
      fail_at(f, "peer",
              fmt::format("'{}' is a role; a peer is a process name (or \"*\"): roles are for target and the "
                          "partition sides",
                          *p));
    check_process(*p, line_of(*f.get("peer")), f.field("peer"), true);
    spec.peer = *p == "*" ? "" : *p;
  }
  repetition(f, spec);
  // A distribution for a length that must be > 0 at every firing (the plan's own value 0 means "forever").
  auto positive_dist = [&](const Tab& t, const char* key, const char* noun) {
    DistRules rules;
    rules.sign = DistRules::Sign::positive;
    rules.noun = noun;
    return parse_dist(*t.get(key), t.field(key), file_, rules);
  };
  switch (kind) {
    case K::pause:
      need(f, "duration", "duration = \"15s\" (how long the process stops)");
      if (f.get("duration")->is_table()) {
        DistRules rules;
        rules.sign = DistRules::Sign::positive;
        const Dist d = parse_dist(*f.get("duration"), f.field("duration"), file_, rules);
        spec.fault.duration = d.upper_bound();
        if (!d.is_constant()) spec.fault.duration_dist = d;
      } else {
        spec.fault.duration = *duration(f, "duration", Sign::positive);
      }
      break;
    case K::crash:
      if (const toml::node* dn = f.get("duration"); dn && dn->is_table()) {
        const Dist d = parse_dist(*dn, f.field("duration"), file_, {});
        spec.fault.duration = d.upper_bound();
        if (!d.is_constant()) spec.fault.duration_dist = d;
      } else {
        spec.fault.duration = duration(f, "duration", Sign::non_negative).value_or(0ns);
      }
      spec.fault.power_loss = boolean(f, "power_loss").value_or(false);
      break;
    case K::clock_jump:
      need(f, "duration", "duration = \"15s\" (how far the wall clock jumps; negative = back)");
      if (f.get("duration")->is_table()) {
        spec.fault.duration_dist = positive_dist(f, "duration", "jump");
        spec.fault.jump_back = boolean(f, "back").value_or(false);
        spec.fault.duration = spec.fault.duration_dist->upper_bound() * (spec.fault.jump_back ? -1 : 1);
      } else {
        if (f.has("back"))
          fail_at(
              f, "back",
              "back = true goes with a distribution as duration; a fixed jump back is a negative duration "
              "(duration = \"-15s\")");
        spec.fault.duration = *duration(f, "duration", Sign::non_zero);
      }
      break;
    case K::clock_drift:
      need(f, "ppm", "ppm = 100 (the new drift in parts per million)");
      spec.fault.ppm = *integer(f, "ppm", -NodeClock::kMaxDriftPpm, NodeClock::kMaxDriftPpm);
      break;
    case K::partition: {
      if (const toml::node* dn = f.get("duration"); dn && dn->is_table()) {
        spec.fault.duration_dist = positive_dist(f, "duration", "partition");
        spec.fault.duration = spec.fault.duration_dist->upper_bound();
      } else {
        spec.fault.duration = duration(f, "duration", Sign::non_negative).value_or(0ns);
      }
      spec.fault.one_way = boolean(f, "one_way").value_or(false);
      if (f.has("split")) {
        if (f.has("side_a") || f.has("side_b"))
          fail_at(f, f.has("side_a") ? "side_a" : "side_b",
                  "a partition has either split or side_a and side_b, not both");
        const std::string sp = *str(f, "split");
        if (!parse_fault_split(sp))
          fail_at(f, "split",
                  fmt::format("unknown split '{}'{}", sp, suggestion(sp, fault_split_names(), "one of")));
        spec.split = sp;
        break;
      }
      need(f, "side_a", "side_a = [\"client1\", ...] (or split = \"leader-alone\")");
      need(f, "side_b", "side_b = [\"redis4\", ...]");
      std::map<std::string, char> side_of;
      for (const char* key : {"side_a", "side_b"}) {
        const toml::node* n = f.get(key);
        if (!n->is_array()) {
          fail(line_of(*n), f.field(key),
               fmt::format("expected an array of process names, got {}", type_name(*n)));
        }
        const toml::array& a = *n->as_array();
        if (a.empty()) fail(line_of(*n), f.field(key), "a partition side must name at least one process");
        auto& out = key[5] == 'a' ? spec.side_a : spec.side_b;
        for (std::size_t i = 0; i < a.size(); ++i) {
          const std::string field = fmt::format("{}[{}]", f.field(key), i);
          const toml::node& e = a[i];
          const std::uint32_t l = line_of(e) ? line_of(e) : line_of(*n);
          if (!e.is_string()) fail(l, field, fmt::format("expected a process name, got {}", type_name(e)));
          const std::string name = *e.value<std::string>();
          target_name(name, l, field, false);
          if (auto it = side_of.find(name); it != side_of.end()) {
            fail(l, field,
                 it->second == key[5] ? fmt::format("'{}' is listed twice", name)
                                      : fmt::format("'{}' is on both sides of the partition", name));
          }
          side_of.emplace(name, key[5]);
          out.push_back(name);
        }
      }
      break;
    }
    case K::delay_spike:
      need(f, "extra", "extra = \"15s\" (the delay added to each matching message)");
      if (f.get("extra")->is_table()) {
        spec.fault.extra_dist = positive_dist(f, "extra", "delay");
        spec.fault.extra = spec.fault.extra_dist->upper_bound();
      } else {
        spec.fault.extra = *duration(f, "extra", Sign::positive);
      }
      if (const toml::node* dn = f.get("duration"); dn && dn->is_table()) {
        spec.fault.duration_dist = positive_dist(f, "duration", "window");
        spec.fault.duration = spec.fault.duration_dist->upper_bound();
      } else {
        spec.fault.duration = duration(f, "duration", Sign::non_negative).value_or(0ns);
      }
      spec.fault.count = static_cast<std::uint32_t>(integer(f, "count", 0, kMaxAcquisitions).value_or(0));
      break;
    case K::restart:
    case K::heal:
      break;
  }
  if (auto problem = fault_role_problem(spec)) fail_at(f, f.has("target") ? "target" : "kind", *problem);
  return spec;
}

void Loader::target_name(const std::string& name, std::uint32_t line, const std::string& field,
                         bool allow_any) const {
  if (parse_fault_role(name)) {
    if (process_set_.count(name))
      fail(line, field, fmt::format("'{}' is both a role and a process's name: rename the process", name));
    return;
  }
  if (allow_any && name == "*") return;
  if (!process_set_.count(name) && !services_.in_family(name)) {
    // A misspelled role reads better as a role than as the nearest process.
    const std::string near = nearest_name(name, fault_role_names());
    if (!near.empty() && nearest_name(name, processes_).empty())
      fail(line, field, fmt::format("unknown process or role '{}' (did you mean '{}'?)", name, near));
  }
  check_process(name, line, field, allow_any);
}

void Loader::targets(const Tab& f, Fault::Kind kind, FaultSpec& spec) const {
  const toml::node* n = f.get("target");
  if (!n) return;
  const bool any_ok = kind == Fault::Kind::delay_spike;
  if (n->is_string()) {
    const std::string t = *str(f, "target");
    target_name(t, line_of(*n), f.field("target"), any_ok);
    spec.target = t == "*" ? "" : t;
    return;
  }
  if (!n->is_array()) {
    fail(line_of(*n), f.field("target"),
         fmt::format("expected a process name or role, or an array of them, got {}", type_name(*n)));
  }
  const toml::array& a = *n->as_array();
  if (a.empty())
    fail(line_of(*n), f.field("target"), "a target array must name at least one process or role");
  if (a.size() > 1000) fail(line_of(*n), f.field("target"), "at most 1,000 targets");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string field = fmt::format("{}[{}]", f.field("target"), i);
    const toml::node& e = a[i];
    const std::uint32_t l = line_of(e) ? line_of(e) : line_of(*n);
    if (!e.is_string()) fail(l, field, fmt::format("expected a process name or role, got {}", type_name(e)));
    const std::string name = *e.value<std::string>();
    if (name == "*") fail(l, field, "\"*\" (any process) stands alone: target = \"*\", not in an array");
    target_name(name, l, field, false);
    // any-server and any-client may repeat: each entry picks another process.
    const bool picks = name == "any-server" || name == "any-client";
    if (!seen.insert(name).second && !picks) fail(l, field, fmt::format("'{}' is listed twice", name));
    if (i == 0)
      spec.target = name;
    else
      spec.more_targets.push_back(name);
  }
}

void Loader::repetition(const Tab& f, FaultSpec& spec) const {
  Repeat& r = spec.fault.repeat;
  const bool has_every = f.has("every");
  for (const char* key : {"times", "until"}) {
    if (f.has(key) && !has_every)
      fail_at(f, key, fmt::format("{} bounds a repetition: give its period too (every = \"5s\")", key));
  }
  DistRules rules;
  rules.limit = max_time_;
  rules.limit_name = fmt::format("limits.max_time ({})", format_time(max_time_));
  if (const toml::node* jn = f.get("jitter"); jn && jn->is_table()) {
    // A distribution is the jitter itself (a constant one delays every firing by exactly that).
    rules.noun = "jitter";
    const Dist d = parse_dist(*jn, f.field("jitter"), file_, rules);
    if (d.upper_bound() > 0ns) {
      r.jitter = d.upper_bound();
      r.jitter_dist = d;
    }
  } else if (auto j = duration(f, "jitter", Sign::non_negative)) {
    if (*j > max_time_)
      fail_at(f, "jitter",
              fmt::format("a jitter of {} is beyond limits.max_time ({})", format_time(*j),
                          format_time(max_time_)));
    r.jitter = *j;
  }
  if (!has_every) return;
  if (const toml::node* en = f.get("every"); en->is_table()) {
    rules.sign = DistRules::Sign::positive;
    rules.noun = "period";
    const Dist d = parse_dist(*en, f.field("every"), file_, rules);
    r.every = d.lower_bound();  // the shortest period bounds the firings
    if (!d.is_constant()) r.every_dist = d;
  } else {
    r.every = *duration(f, "every", Sign::positive);
  }
  if (auto t = integer(f, "times", 1, Repeat::kMaxFirings)) r.times = static_cast<std::uint32_t>(*t);
  const Trigger& w = spec.fault.when;
  // The first firing: `at`, or (a trigger) no earlier than its delay.
  const Time first = w.kind == Trigger::Kind::at ? w.at : w.delay;
  if (auto u = duration(f, "until", Sign::non_negative)) {
    if (*u > max_time_)
      fail_at(
          f, "until",
          fmt::format("until = {} is after limits.max_time ({}): lower it, or leave it out to repeat until "
                      "the end",
                      format_time(*u), format_time(max_time_)));
    if (*u < first)
      fail_at(f, "until",
              fmt::format("until = {} comes before the first firing ({} {}): the fault would never fire",
                          format_time(*u), w.kind == Trigger::Kind::at ? "at" : "after.delay",
                          format_time(first)));
    r.until = *u;
  }
  // Bounded as the runner will run it: until defaults to max_time; a triggered fault counts from time 0.
  Repeat bounded = r;
  if (bounded.times == 0 && bounded.until == kTimeMax) bounded.until = max_time_;
  if (bounded.bound(w.kind == Trigger::Kind::at ? w.at : Time{0}) > Repeat::kMaxFirings) {
    fail_at(
        f, "every",
        fmt::format(
            "a fault every {} {} could fire more than {} times, the most one fault may: give a "
            "longer period, times = N or an earlier until{}",
            r.every_dist ? fmt::format("{} (as short as {})", r.every_dist->describe(), format_time(r.every))
                         : format_time(r.every),
            r.until != kTimeMax ? fmt::format("until {}", format_time(r.until))
                                : fmt::format("until limits.max_time ({})", format_time(max_time_)),
            Repeat::kMaxFirings, w.kind == Trigger::Kind::at ? "" : " (a triggered fault counts from 0 s)"));
  }
}

}  // namespace locksim::loading
