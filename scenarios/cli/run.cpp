// `locksim run` (and --compare, --step), `list` and `demo`.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <optional>

#include "locksim/protocols/service.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/command_name.hpp"

namespace locksim::cli {

namespace {

/// `run --step`: the run one trace event at a time. After each event it reads a command from stdin: Enter =
/// the next event, `n N` = N events on, `s` = the next event of the story (text report's list), `v` = the
/// first violation, `b` = one back, `q` = quit. At the end of stdin the rest runs without waiting. Returns
/// false when the user quit.
bool step_through(const RunOutput& r, const Scenario& sc, TextStyle style) {
  const std::size_t n = r.trace.size();
  fmt::print(
      "{} with {}: {} events. Enter = next event, n N = N events on, s = next story event, v = the "
      "violation, "
      "b = back, q + Enter = quit.\n\n",
      sc.name, r.protocol, n);
  if (n == 0) return true;
  const std::size_t width = std::to_string(n).size();
  const auto show = [&](std::size_t i) {
    fmt::print("[{:>{}}/{}] {}\n", i + 1, width, n, describe_event(r, r.trace[i], style));
  };
  // The violation: the first event at or after the earliest anomaly's time (its write's processing).
  std::optional<std::size_t> violation;
  if (!r.check.violations.empty()) {
    Time first = r.check.violations[0].time;
    for (const auto& v : r.check.violations) first = std::min(first, v.time);
    for (std::size_t i = 0; i < n && !violation; ++i)
      if (r.trace[i].time >= first) violation = i;
  }
  std::size_t i = 0;
  show(0);
  bool wait = true;
  while (i + 1 < n) {
    if (!wait) {
      show(++i);
      continue;
    }
    std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line)) {
      wait = false;  // no more input: run to the end
      continue;
    }
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    std::size_t to = i + 1;
    if (line == "q" || line == "Q") {
      fmt::print("stopped after event {} of {}.\n", i + 1, n);
      return false;
    } else if (line == "b") {
      if (i == 0) {
        fmt::print("(at the first event)\n");
        continue;
      }
      to = i - 1;
    } else if (line == "s") {
      to = i + 1;
      while (to < n && !is_story_event(r.trace[to])) ++to;
      if (to == n) {
        fmt::print("(no story event after this one)\n");
        continue;
      }
    } else if (line == "v") {
      if (!violation) {
        fmt::print("(this run has no violation)\n");
        continue;
      }
      to = *violation;
    } else if (line.rfind("n ", 0) == 0 || line == "n") {
      std::uint64_t k = 0;
      const std::string num = line.size() > 2 ? line.substr(2) : "";
      const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), k);
      if (num.empty() || ec != std::errc{} || end != num.data() + num.size() || k == 0) {
        fmt::print("(n needs a number of events: n 10)\n");
        continue;
      }
      to = static_cast<std::size_t>(std::min<std::uint64_t>(i + k, n - 1));
    } else if (!line.empty()) {
      fmt::print(
          "(commands: Enter = next, n N, s = next story event, v = the violation, b = back, q = quit)\n");
      continue;
    }
    if (to != i + 1)
      fmt::print("-- event {} of {}, t = {} s --\n", to + 1, n, format_seconds(r.trace[to].time, 3));
    i = to;
    show(i);
  }
  fmt::print("\n");
  return true;
}

}  // namespace

int cmd_list() {
  fmt::print("scenarios:\n");
  for (const auto& e : catalog()) {
    Scenario sc = load_scenario(std::string(e.name));
    fmt::print("  {:<34} {}\n  {:<34} source: {}\n", sc.name, sc.title, "", sc.source);
  }
  fmt::print("\nprotocols:\n");
  auto& reg = ProtocolRegistry::instance();
  for (const auto& n : protocol_names()) {
    fmt::print("  {:<14} {}\n", n, reg.summary(n));
    const auto proto = reg.make(n);
    // The service it declares with the default settings: the names a scenario file's faults may aim at.
    const ServiceDecl decl = proto->declare(ProtocolConfig{});
    if (!decl.empty()) {
      std::vector<std::string> groups;
      for (std::size_t i = 0; i < decl.processes.size();) {
        std::size_t j = i;
        std::vector<std::string> names;
        while (j < decl.processes.size() && decl.processes[j].roles == decl.processes[i].roles)
          names.push_back(decl.processes[j++].name);
        std::vector<std::string> roles;
        for (ProcessRole r : decl.processes[i].roles) roles.emplace_back(to_string(r));
        groups.push_back(fmt::format("{} ({})", compact_names(names), fmt::join(roles, ", ")));
        i = j;
      }
      fmt::print("  {:<14}   service: {}; a grant needs {} server record(s){}\n", "", fmt::join(groups, ", "),
                 std::max<std::uint32_t>(decl.quorum, 1),
                 decl.names_hint.empty() ? "" : fmt::format(" ({})", decl.names_hint));
    }
    for (const Variant& v : proto->variants()) fmt::print("  {:<14}   variant {}: {}\n", "", v.name, v.doc);
  }
  fmt::print(
      "\nresource kinds ([resource] kind = ...), the property each is judged by, and their variants:\n");
  for (const ResourceKind k :
       {ResourceKind::store, ResourceKind::checkpoint_table, ResourceKind::external_api,
        ResourceKind::cas_row, ResourceKind::job_queue, ResourceKind::object_store}) {
    const std::vector<Variant> vs = resource_variants(k);
    fmt::print("  {:<18} {}{}\n", to_string(k), resource_property(k), vs.empty() ? " (no variants)" : "");
    for (const Variant& v : vs) fmt::print("  {:<22}   variant {}: {}\n", "", v.name, v.doc);
  }
  return kOk;
}

/// `run --compare P1,P2,...`: the identical fault plan against several protocols, side by side.
int cmd_compare(const std::string& scenario, const std::vector<std::string>& ps,
                std::optional<std::uint64_t> seed, const std::string& out_file, bool no_color) {
  if (ps.size() < 2)
    input_error("--compare needs at least two protocols, e.g. --compare redlock,lease+fence");
  validate_protocols(ps);
  Scenario sc = load_scenario(scenario);
  std::vector<RunOutput> runs;
  bool any_unsafe = false;
  for (const auto& p : ps) {
    RunOptions ro;
    ro.seed = seed;
    runs.push_back(run_scenario(sc, p, ro));
    any_unsafe |= !runs.back().check.safe;
  }
  emit(compare_report(runs, sc, text_style(no_color, !out_file.empty())), out_file);
  return any_unsafe ? kFail : kOk;
}

int cmd_run(const std::string& scenario, const std::vector<std::string>& ps_in,
            std::optional<std::uint64_t> seed, const std::string& report, const std::string& out_file,
            bool no_color, bool trace, bool step) {
  Scenario sc = load_scenario(scenario);
  auto ps = protocols_for(sc, ps_in);
  validate_protocols(ps);
  if (report == "html" && ps.size() > 1)
    input_error(
        fmt::format("--report html draws one run; choose one protocol with -p (this scenario runs {})",
                    fmt::join(ps, ", ")));
  bool any_unsafe = false;
  std::string text;
  std::vector<std::string> jsons;
  std::vector<JUnitCase> cases;
  for (const auto& p : ps) {
    RunOptions ro;
    ro.seed = seed;
    const WallTimer timer;  // JUnit durations only
    RunOutput r = run_scenario(sc, p, ro);
    require_within_limits(r, sc);
    any_unsafe |= !r.check.safe;
    if (step && !step_through(r, sc, text_style(no_color))) return r.check.safe ? kOk : kFail;
    if (report == "html") {
      text = html_report(r, sc);
    } else if (report == "junit") {
      auto exp = sc.expect.find(p);
      JUnitCase jc{sc.name,
                   p,
                   exp == sc.expect.end() ? "" : exp->second.describe(),
                   std::string(to_string(r.verdict())),
                   timer.seconds(),
                   ""};
      jc.file = sc.file;
      jc.warnings = run_warnings(r);
      const std::string replay =
          fmt::format("replay: {} run {} -p {} --seed {}", command_name(), scenario, p, r.seed);
      const std::vector<std::string> unmet_list =
          exp == sc.expect.end() ? std::vector<std::string>{} : unmet_in_run(exp->second, r);
      const std::string unmet = fmt::format("{}", fmt::join(unmet_list, "; "));
      if (exp != sc.expect.end()) jc.met = unmet.empty();
      if (!unmet.empty()) {
        jc.message = unmet;
        jc.details = (r.check.safe ? std::string() : story(r) + "\n") + replay;
      } else if (!r.check.safe) {
        jc.message = story(r) + replay;  // as expected: the story as the case's output
      }
      cases.push_back(std::move(jc));
    } else if (report == "json") {
      jsons.push_back(json_report(r, sc));
    } else {
      if (!text.empty()) text += "\n" + std::string(78, '-') + "\n\n";
      text += text_report(r, sc, text_style(no_color, !out_file.empty()));
      if (trace)
        for (const auto& ev : r.trace)
          text += Trace::format(ev, r.name_of(ev.proc), r.name_of(ev.peer)) + "\n";
    }
  }
  if (report == "junit") text = junit_report(cases);
  if (report == "json") {
    if (jsons.size() == 1)
      text = jsons[0];
    else {
      text = "[\n";
      for (std::size_t i = 0; i < jsons.size(); ++i) text += jsons[i] + (i + 1 < jsons.size() ? ",\n" : "\n");
      text += "]\n";
    }
  }
  emit(text, out_file);
  return any_unsafe ? kFail : kOk;
}

int cmd_demo(bool no_color) {
  const std::string name = "kleppmann-gc-pause";
  Scenario sc = load_scenario(name);
  const TextStyle style = text_style(no_color);
  fmt::print("{}\n{}\n\n", sc.title, sc.teaches);
  int mismatches = 0;
  std::string summary;
  for (const auto& p : protocols_for(sc, {})) {
    RunOutput r = run_scenario(sc, p);
    fmt::print("{}\n", std::string(78, '='));
    fmt::print("{}", text_report(r, sc, style));
    auto exp = sc.expect.find(p);
    const bool ok = exp == sc.expect.end() || unmet_in_run(exp->second, r).empty();
    if (!ok) ++mismatches;
    summary += fmt::format("  {:<12} {:<7} {}\n", p, to_string(r.verdict()),
                           exp == sc.expect.end() ? ""
                           : ok                   ? "(as the literature says)"
                                                  : "(NOT as expected)");
  }
  fmt::print("{}\nverdicts for {}:\n{}", std::string(78, '='), name, summary);
  fmt::print("\nnext: `{0} run {1} -p redis --report json`, `{0} matrix`, `{0} list`\n", command_name(),
             name);
  return mismatches ? kFail : kOk;
}

}  // namespace locksim::cli
