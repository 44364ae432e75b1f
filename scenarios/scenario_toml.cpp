// A scenario written back out as the TOML the loader reads to the same scenario (scenarios/replay.hpp:
// scenario_to_toml): the replay file explore writes for a shrunk counterexample, which `locksim replay`
// reads.
#include <fmt/format.h>

#include <string>

#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/replay.hpp"

namespace locksim {

namespace {

/// A TOML basic string.
std::string q(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f)
          out += fmt::format("\\u{:04x}", c);
        else
          out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

/// A bare key if it is one, else quoted ("lease+fence").
std::string key(std::string_view k) {
  bool bare = !k.empty();
  for (char c : k)
    bare = bare && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-');
  return bare ? std::string(k) : q(k);
}

/// Exact duration text: format_time gives "1.5s", "0.000000001s", "-2s", which parse_duration reads back
/// exactly.
std::string dur(Duration d) {
  return q(d == 0ns ? "0" : format_time(d));
}

/// Parts per million as an exact decimal fraction.
std::string ppm(std::int64_t v) {
  return fmt::format("{}.{:06}", v / 1'000'000, v % 1'000'000);
}

/// A TOML float that reads back as the same double ("1.5", "2.0").
std::string real(double x) {
  std::string a = fmt::format("{}", x);
  if (a.find_first_of(".en") == std::string::npos) a += ".0";
  return a;
}

std::string delay_text(const DelayDist& d) {
  using K = DelayDist::Kind;
  switch (d.kind) {
    case K::constant:
      return dur(d.min);
    case K::uniform:
      return fmt::format("{{ kind = \"uniform\", min = {}, max = {} }}", dur(d.min), dur(d.max));
    case K::exponential:
      return fmt::format("{{ kind = \"exponential\", min = {}, max = {}, mean = {} }}", dur(d.min),
                         dur(d.max), dur(d.mean));
    case K::long_tail:
      return fmt::format("{{ kind = \"long_tail\", min = {}, max = {}, mean = {}, alpha = {} }}", dur(d.min),
                         dur(d.max), dur(d.mean), real(d.alpha));
    case K::lognormal:
      return fmt::format("{{ kind = \"lognormal\", min = {}, max = {}, median = {}, sigma = {} }}",
                         dur(d.min), dur(d.max), dur(d.median), real(d.sigma));
    case K::empirical: {
      // Inline, so the file replays without the CSV the scenario read them from.
      std::string v;
      for (Duration x : *d.values) v += (v.empty() ? "" : ", ") + dur(x);
      return fmt::format("{{ kind = \"empirical\", values = [{}] }}", v);
    }
  }
  return dur(d.min);
}

void link_lines(std::string& s, const LinkOptions& o) {
  s += fmt::format("delay = {}\n", delay_text(o.delay));
  s += fmt::format("loss = {}\n", ppm(o.loss_ppm));
  s += fmt::format("duplicate = {}\n", ppm(o.duplicate_ppm));
  s += fmt::format("reorder = {}\n", ppm(o.reorder_ppm));
  s += fmt::format("reorder_extra = {}\n", dur(o.reorder_extra));
}

const char* fsync_name(FsyncPolicy p) {
  switch (p) {
    case FsyncPolicy::never:
      return "never";
    case FsyncPolicy::periodic:
      return "periodic";
    case FsyncPolicy::always:
      return "always";
  }
  return "never";
}

/// The fields of `c` that differ from `base` (all of them that matter when base is the defaults).
void config_lines(std::string& s, const ProtocolConfig& c, const ProtocolConfig& base, bool with_ttl) {
  if (with_ttl && c.ttl != base.ttl) s += fmt::format("ttl = {}\n", dur(c.ttl));
  if (c.nodes != base.nodes) s += fmt::format("nodes = {}\n", c.nodes);
  if (c.aof != base.aof) s += fmt::format("aof = {}\n", c.aof);
  if (c.fsync != base.fsync) s += fmt::format("fsync = \"{}\"\n", fsync_name(c.fsync));
  if (c.fsync_period != base.fsync_period) s += fmt::format("fsync_period = {}\n", dur(c.fsync_period));
  if (c.replica != base.replica) s += fmt::format("replica = {}\n", c.replica);
  if (c.replication_delay != base.replication_delay)
    s += fmt::format("replication_delay = {}\n", dur(c.replication_delay));
  if (c.failover_after != base.failover_after)
    s += fmt::format("failover_after = {}\n", dur(c.failover_after));
  if (c.incr_token != base.incr_token) s += fmt::format("incr_token = {}\n", c.incr_token);
  if (c.drift_factor_ppm != base.drift_factor_ppm)
    s += fmt::format("drift_factor = {}\n", ppm(c.drift_factor_ppm));
  if (c.clock_drift_allowance != base.clock_drift_allowance)
    s += fmt::format("clock_drift_allowance = {}\n", dur(c.clock_drift_allowance));
  if (c.node_timeout != base.node_timeout) s += fmt::format("node_timeout = {}\n", dur(c.node_timeout));
  if (c.retry_count != base.retry_count) s += fmt::format("retry_count = {}\n", c.retry_count);
  if (c.retry_delay != base.retry_delay) s += fmt::format("retry_delay = {}\n", dur(c.retry_delay));
  if (c.retry_jitter != base.retry_jitter) s += fmt::format("retry_jitter = {}\n", dur(c.retry_jitter));
  if (c.elapsed_recheck != base.elapsed_recheck)
    s += fmt::format("elapsed_recheck = {}\n", c.elapsed_recheck);
  if (c.keepalive_interval != base.keepalive_interval)
    s += fmt::format("keepalive_interval = {}\n", dur(c.keepalive_interval));
  if (c.rpc_timeout != base.rpc_timeout) s += fmt::format("rpc_timeout = {}\n", dur(c.rpc_timeout));
  if (c.expiry_check_interval != base.expiry_check_interval)
    s += fmt::format("expiry_check_interval = {}\n", dur(c.expiry_check_interval));
  if (c.first_token != base.first_token) s += fmt::format("first_token = {}\n", c.first_token);
  if (c.election_timeout_min != base.election_timeout_min)
    s += fmt::format("election_timeout_min = {}\n", dur(c.election_timeout_min));
  if (c.election_timeout_max != base.election_timeout_max)
    s += fmt::format("election_timeout_max = {}\n", dur(c.election_timeout_max));
  if (c.heartbeat != base.heartbeat) s += fmt::format("heartbeat = {}\n", dur(c.heartbeat));
  if (c.idle_in_transaction_timeout != base.idle_in_transaction_timeout)
    s += fmt::format("idle_in_transaction_timeout = {}\n", dur(c.idle_in_transaction_timeout));
  if (c.same_db_resource != base.same_db_resource)
    s += fmt::format("resource = {}\n", c.same_db_resource ? "\"same-db\"" : "\"store\"");
  if (c.variant != base.variant) s += fmt::format("variant = {}\n", q(c.variant));
}

/// A client's program as an inline array of step tables, each written out in full (its note too), blocks
/// nested: what the loader reads back to the same steps.
std::string steps_text(const std::vector<ClientStep>& steps) {
  std::vector<std::string> out;
  for (const ClientStep& st : steps) {
    using K = ClientStep::Kind;
    std::string t;
    switch (st.kind) {
      case K::work:
      case K::sleep:
        t = fmt::format("{} = {}", to_string(st.kind), delay_text(st.duration));
        break;
      case K::repeat:
        t = fmt::format("repeat = {}, steps = {}", st.count, steps_text(st.steps));
        break;
      case K::loop:
        t = fmt::format("loop = {}, steps = {}",
                        st.until == kTimeMax ? q("forever") : q("until " + format_time(st.until)),
                        steps_text(st.steps));
        break;
      default:
        t = fmt::format("step = {}", q(std::string(to_string(st.kind))));
    }
    if (!st.resource.empty()) t += fmt::format(", resource = {}", q(st.resource));
    if (!st.note.empty()) t += fmt::format(", note = {}", q(st.note));
    out.push_back("{ " + t + " }");
  }
  return fmt::format("[{}]", fmt::join(out, ", "));
}

/// Background renewal: `renew = true` and each setting the client made (unset ones stay the protocol's).
void renewal_lines(std::string& s, const RenewalSpec& r) {
  if (!r.on) return;
  s += "renew = true\n";
  if (r.every) s += fmt::format("renew_every = {}\n", dur(*r.every));
  if (r.before_expiry) s += fmt::format("renew_before_expiry = {}\n", dur(*r.before_expiry));
  if (r.retry) s += fmt::format("renew_retry = {}\n", dur(*r.retry));
  if (r.stop_on_failure)
    s += fmt::format("on_renew_failure = {}\n", q(*r.stop_on_failure ? "stop" : "continue"));
}

/// A client's own protocol settings as an inline table (only the fields it sets), or "" when it sets none.
std::string client_settings_text(const ClientSettings& c) {
  std::vector<std::string> kv;
  if (c.drift_factor_ppm) kv.push_back(fmt::format("drift_factor = {}", ppm(*c.drift_factor_ppm)));
  if (c.clock_drift_allowance)
    kv.push_back(fmt::format("clock_drift_allowance = {}", dur(*c.clock_drift_allowance)));
  if (c.node_timeout) kv.push_back(fmt::format("node_timeout = {}", dur(*c.node_timeout)));
  if (c.retry_count) kv.push_back(fmt::format("retry_count = {}", *c.retry_count));
  if (c.retry_delay) kv.push_back(fmt::format("retry_delay = {}", dur(*c.retry_delay)));
  if (c.retry_jitter) kv.push_back(fmt::format("retry_jitter = {}", dur(*c.retry_jitter)));
  if (c.elapsed_recheck) kv.push_back(fmt::format("elapsed_recheck = {}", *c.elapsed_recheck));
  if (c.keepalive_interval) kv.push_back(fmt::format("keepalive_interval = {}", dur(*c.keepalive_interval)));
  if (c.rpc_timeout) kv.push_back(fmt::format("rpc_timeout = {}", dur(*c.rpc_timeout)));
  if (kv.empty()) return {};
  std::string out = "{ ";
  for (std::size_t i = 0; i < kv.size(); ++i) out += (i ? ", " : "") + kv[i];
  return out + " }";
}

void extra_lines(std::string& s, const std::string& table, const ProtocolConfig& c,
                 const ProtocolConfig* base) {
  std::string body;
  for (const auto& [k, v] : c.extra) {
    if (base) {
      auto it = base->extra.find(k);
      if (it != base->extra.end() && it->second == v) continue;
    }
    body += fmt::format("{} = {}\n", key(k), q(v));
  }
  if (!body.empty()) s += fmt::format("\n[{}.extra]\n{}", table, body);
}

std::string name_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + q(v[i]);
  return s + "]";
}

/// An expectation as [expect] holds it: a bare verdict as one word, the rest as an inline table.
std::string expectation_value(const Expectation& e) {
  if (e.verdict_only() && e.verdict) return q(to_string(*e.verdict));
  std::vector<std::string> kv;
  if (e.verdict) kv.push_back(fmt::format("verdict = {}", q(to_string(*e.verdict))));
  if (e.anomalies) kv.push_back(fmt::format("anomalies = {}", name_list(*e.anomalies)));
  if (e.lost_updates) kv.push_back(fmt::format("lost_updates = {}", q(e.lost_updates->text)));
  if (e.tokens)
    kv.push_back(fmt::format("tokens = {}",
                             q(*e.tokens == Expectation::Tokens::increasing ? "increasing" : "regressing")));
  if (e.min_slack) kv.push_back(fmt::format("min_slack = {}", dur(*e.min_slack)));
  if (e.seeds) kv.push_back(fmt::format("seeds = \"{}..{}\"", e.seeds->first, e.seeds->second));
  if (e.over) kv.push_back(fmt::format("over = {}", q(*e.over == Expectation::Over::all ? "all" : "any")));
  std::string s = "{ ";
  for (std::size_t i = 0; i < kv.size(); ++i) s += (i ? ", " : "") + kv[i];
  return s + " }";
}

std::string fault_kind(Fault::Kind k) {
  return std::string(to_string(k));
}

/// `target = "client1"`, or an array when the fault has several (FaultSpec::more_targets).
std::string target_text(const FaultSpec& f, bool any_when_empty = false) {
  if (f.more_targets.empty()) return q(f.target.empty() && any_when_empty ? "*" : f.target);
  std::vector<std::string> all{f.target};
  all.insert(all.end(), f.more_targets.begin(), f.more_targets.end());
  return name_list(all);
}

void fault_lines(std::string& s, const FaultSpec& f) {
  const Fault& x = f.fault;
  s += fmt::format("\n[[fault]]\nkind = \"{}\"\n", fault_kind(x.kind));
  using K = Fault::Kind;
  const std::string target = target_text(f);
  switch (x.kind) {
    case K::pause:
      s += fmt::format("target = {}\nduration = {}\n", target,
                       x.duration_dist ? delay_text(*x.duration_dist) : dur(x.duration));
      break;
    case K::crash:
      s += fmt::format("target = {}\nduration = {}\npower_loss = {}\n", target,
                       x.duration_dist ? delay_text(*x.duration_dist) : dur(x.duration), x.power_loss);
      break;
    case K::restart:
      s += fmt::format("target = {}\n", target);
      break;
    case K::clock_jump:
      if (x.duration_dist)
        s += fmt::format("target = {}\nduration = {}\nback = {}\n", target, delay_text(*x.duration_dist),
                         x.jump_back);
      else
        s += fmt::format("target = {}\nduration = {}\n", target, dur(x.duration));
      break;
    case K::clock_drift:
      s += fmt::format("target = {}\nppm = {}\n", target, x.ppm);
      break;
    case K::partition:
      if (!f.split.empty())
        s += fmt::format("split = {}\n", q(f.split));
      else
        s += fmt::format("side_a = {}\nside_b = {}\n", name_list(f.side_a), name_list(f.side_b));
      s += fmt::format("one_way = {}\nduration = {}\n", x.one_way,
                       x.duration_dist ? delay_text(*x.duration_dist) : dur(x.duration));
      break;
    case K::heal:
      break;
    case K::delay_spike:
      s += fmt::format("target = {}\npeer = {}\nextra = {}\nduration = {}\ncount = {}\n",
                       target_text(f, true), q(f.peer.empty() ? "*" : f.peer),
                       x.extra_dist ? delay_text(*x.extra_dist) : dur(x.extra),
                       x.duration_dist ? delay_text(*x.duration_dist) : dur(x.duration), x.count);
      break;
  }
  // Repetition: only what the fault has, so a file without it reads as it always did.
  const Repeat& r = x.repeat;
  if (r.repeats()) {
    s += fmt::format("every = {}\n", r.every_dist ? delay_text(*r.every_dist) : dur(r.every));
    if (r.times > 0) s += fmt::format("times = {}\n", r.times);
    if (r.until != kTimeMax) s += fmt::format("until = {}\n", dur(r.until));
  }
  if (r.jitter > 0ns)
    s += fmt::format("jitter = {}\n", r.jitter_dist ? delay_text(*r.jitter_dist) : dur(r.jitter));
  const Trigger& t = x.when;
  if (t.kind == Trigger::Kind::at) {
    s += fmt::format("at = {}\n", dur(t.at));
  } else {
    const char* ev = t.kind == Trigger::Kind::note   ? "note"
                     : t.kind == Trigger::Kind::send ? "send"
                                                     : "receive";
    s += fmt::format("after = {{ process = {}, {} = {}, nth = {}, delay = {} }}\n",
                     q(f.trigger_proc.empty() ? "*" : f.trigger_proc), ev, q(t.label), t.nth, dur(t.delay));
  }
}

std::string comment(std::string_view text) {
  std::string out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t nl = text.find('\n', start);
    const std::string_view line =
        text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    if (!line.empty()) out += fmt::format("#   {}\n", line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return out;
}

}  // namespace

std::string scenario_to_toml(const Scenario& sc, const ReplayInfo* replay) {
  std::string s;
  if (replay) {
    s += "# A locksim counterexample. Re-run it exactly with:\n#   " + command_name() + " replay THIS_FILE\n";
    if (!replay->found_by.empty()) s += fmt::format("# Found by:\n#   {}\n", replay->found_by);
    if (!replay->story.empty()) s += "# The fault plan:\n" + comment(replay->story);
    s += "\n";
  }
  s += fmt::format("name = {}\n", q(sc.name));
  if (!sc.title.empty()) s += fmt::format("title = {}\n", q(sc.title));
  if (!sc.source.empty()) s += fmt::format("source = {}\n", q(sc.source));
  if (!sc.teaches.empty()) s += fmt::format("teaches = {}\n", q(sc.teaches));
  if (sc.seed > Scenario::kMaxSeed)  // a TOML integer could not hold it: the file would not load
    throw std::invalid_argument(
        fmt::format("seed {} is above the largest seed, {}", sc.seed, Scenario::kMaxSeed));
  s += fmt::format("seed = {}\n", sc.seed);

  s += fmt::format("\n[limits]\nmax_time = {}\nmax_events = {}\nmax_mailbox = {}\n", dur(sc.max_time),
                   sc.max_events, sc.max_mailbox);
  s += fmt::format("\n[lock]\nkey = {}\nttl = {}\n", q(sc.lock_key), dur(sc.config.ttl));
  // [resource], or [[resource]] once per resource when there are several.
  const char* header = sc.more_resources.empty() ? "\n[resource]\n" : "\n[[resource]]\n";
  for (const ResourceSpec& r : sc.all_resources()) {
    s += fmt::format("{}name = {}\nkey = {}\nmode = \"{}\"\nvariant = {}\n", header, q(r.name), q(r.key),
                     !r.mode                           ? "auto"
                     : *r.mode == ResourceMode::fenced ? "fenced"
                                                       : "unfenced",
                     q(r.variant));
    if (r.kind != ResourceKind::store) s += fmt::format("kind = \"{}\"\n", to_string(r.kind));
    if (r.kind == ResourceKind::external_api)
      s += fmt::format("idempotency_keys = {}\nidempotency_retention = {}\n", r.idempotency_keys,
                       dur(r.idempotency_retention));
    if (r.kind == ResourceKind::cas_row) s += fmt::format("max_retries = {}\n", r.cas_max_retries);
    if (r.kind == ResourceKind::job_queue)
      s += fmt::format("period = {}\njob = {}\n", dur(r.job_period), q(r.job_name));
  }

  const ProtocolConfig defaults;
  std::string pc;
  config_lines(pc, sc.config, defaults, false);
  s += "\n[protocol]\n" + pc;
  extra_lines(s, "protocol", sc.config, nullptr);
  for (const auto& [name, c] : sc.per_protocol) {
    const std::string table = fmt::format("protocols.{}", key(name));
    std::string body;
    config_lines(body, c, sc.config, true);
    s += fmt::format("\n[{}]\n{}", table, body);
    extra_lines(s, table, c, &sc.config);
  }

  s += "\n[network]\n";
  link_lines(s, sc.network.defaults);
  if (sc.network.refuse_when_down) s += "connection_refused = true\n";
  if (sc.network.cut_messages == CutMessages::held) s += "cut_messages = \"held\"\n";
  for (const LinkSpec& l : sc.links) {
    s += fmt::format("\n[[network.link]]\nfrom = {}\nto = {}\n", q(l.from), q(l.to));
    link_lines(s, l.options);
  }
  for (const auto& [name, ns] : sc.config.node_settings) {
    s += fmt::format("\n[[node]]\nname = {}\n", q(name));
    if (ns.aof) s += fmt::format("aof = {}\n", *ns.aof);
    if (ns.fsync) s += fmt::format("fsync = \"{}\"\n", fsync_name(*ns.fsync));
    if (ns.fsync_period) s += fmt::format("fsync_period = {}\n", dur(*ns.fsync_period));
  }
  for (const ClockSpec& c : sc.clocks) {
    s += fmt::format("\n[[clock]]\nnode = {}\noffset = {}\ndrift_ppm = {}\n", q(c.node), dur(c.clock.offset),
                     c.clock.drift_ppm);
  }
  for (const ClientSpec& c : sc.clients) {
    s += fmt::format("\n[[client]]\nname = {}\nstart = {}\n", q(c.name),
                     c.start_dist ? delay_text(*c.start_dist) : dur(c.start));
    if (c.steps.empty()) {  // the default program, by its flags
      s += fmt::format("acquisitions = {}\nwrites_per_hold = {}\n", c.acquisitions, c.writes_per_hold);
      if (c.work_dist)
        s += fmt::format("work = {}\n", delay_text(*c.work_dist));
      else
        s += fmt::format("work_min = {}\nwork_max = {}\n", dur(c.work_min), dur(c.work_max));
      if (c.think_dist)
        s += fmt::format("think = {}\n", delay_text(*c.think_dist));
      else
        s += fmt::format("think_min = {}\nthink_max = {}\n", dur(c.think_min), dur(c.think_max));
      s += fmt::format(
          "read_modify_write = {}\ncheck_before_write = {}\nextend_before_write = {}\nrelease = {}\n",
          c.read_modify_write, c.check_before_write, c.extend_before_write, c.release);
    } else {
      s += fmt::format("steps = {}\n", steps_text(c.steps));
    }
    s += fmt::format("retry_delay = {}\ngive_up_at = {}\n",
                     c.retry_delay_dist ? delay_text(*c.retry_delay_dist) : dur(c.retry_delay),
                     dur(c.give_up_at));
    renewal_lines(s, c.renewal);
    if (!c.protocol.empty()) s += fmt::format("protocol = {}\n", client_settings_text(c.protocol));
  }
  for (const FaultSpec& f : sc.faults) fault_lines(s, f);

  s += "\n[expect]\n";
  if (replay) {
    s += fmt::format("protocols = {}\n{} = \"{}\"\n", name_list({replay->protocol}), key(replay->protocol),
                     to_string(replay->verdict));
  } else {
    if (!sc.protocols.empty()) s += fmt::format("protocols = {}\n", name_list(sc.protocols));
    for (const auto& [p, e] : sc.expect) s += fmt::format("{} = {}\n", key(p), expectation_value(e));
  }

  if (replay) {
    s += fmt::format(
        "\n[replay]\nformat = \"2\"\nprotocol = {}\nexpected_trace_hash = {}\nverdict = \"{}\"\n",
        q(replay->protocol), q(hash_text(replay->expected_trace_hash)), to_string(replay->verdict));
    if (!replay->found_by.empty()) s += fmt::format("found_by = {}\n", q(replay->found_by));
  }
  return s;
}

}  // namespace locksim
