// `locksim check` and `locksim matrix`: every scenario × protocol judged against its expectation.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/command_name.hpp"

namespace locksim::cli {

int cmd_matrix(const std::vector<std::string>& scenarios_in, const std::vector<std::string>& ps_in,
               const std::string& format, bool by_resource) {
  validate_protocols(ps_in);
  std::vector<Scenario> scs;
  for (const auto& s : scenario_inputs(scenarios_in)) scs.push_back(load_scenario(s));
  // One table, or one per resource kind (in the order of the kinds, the scenarios in their own order within).
  // A scenario with several resources is in a group of its own, after the kinds: its verdict is the whole
  // run's.
  std::vector<std::vector<const Scenario*>> groups;
  std::vector<const Scenario*> several;
  if (by_resource) {
    std::vector<ResourceKind> kinds;
    for (const auto& sc : scs)
      if (sc.more_resources.empty() && std::find(kinds.begin(), kinds.end(), sc.resource_kind) == kinds.end())
        kinds.push_back(sc.resource_kind);
    std::sort(kinds.begin(), kinds.end());
    for (ResourceKind k : kinds) {
      groups.emplace_back();
      for (const auto& sc : scs)
        if (sc.more_resources.empty() && sc.resource_kind == k) groups.back().push_back(&sc);
    }
    for (const auto& sc : scs)
      if (!sc.more_resources.empty()) several.push_back(&sc);
    if (!several.empty()) groups.push_back(several);
  } else {
    groups.emplace_back();
    for (const auto& sc : scs) groups.back().push_back(&sc);
  }
  const bool md = format == "md";
  std::string out;
  int mismatches = 0;
  for (const auto& group : groups) {
    std::vector<std::string> cols = ps_in;
    if (cols.empty()) {
      for (const Scenario* sc : group)
        for (const auto& p : protocols_for(*sc, {}))
          if (std::find(cols.begin(), cols.end(), p) == cols.end()) cols.push_back(p);
      // In name order, so a protocol's column sits beside its +fence twin's, whatever the files list first.
      std::sort(cols.begin(), cols.end());
    }
    const bool of_several = by_resource && !several.empty() && &group == &groups.back();
    auto label = [&](const Scenario& sc) {  // with several resources: which, of which kinds
      if (!of_several) return sc.name;
      std::vector<std::string> named;
      for (const ResourceSpec& r : sc.all_resources())
        named.push_back(fmt::format("{}: {}", r.name, to_string(r.kind)));
      return fmt::format("{} ({})", sc.name, fmt::join(named, ", "));
    };
    std::size_t w0 = 8;
    for (const Scenario* sc : group) w0 = std::max(w0, label(*sc).size());
    if (of_several) {
      const char* what =
          "several resources: each judged by its own kind's property; the verdict is the run's";
      out += md ? fmt::format("{}**{}**\n\n", out.empty() ? "" : "\n", what)
                : fmt::format("{}{}\n", out.empty() ? "" : "\n", what);
    } else if (by_resource) {
      const ResourceKind k = group.front()->resource_kind;
      out += md ? fmt::format("{}**{}**: {}\n\n", out.empty() ? "" : "\n", to_string(k), resource_property(k))
                : fmt::format("{}resource {}: {}\n", out.empty() ? "" : "\n", to_string(k),
                              resource_property(k));
    }
    auto row = [&](const std::string& first, const std::vector<std::string>& cells) {
      if (md) {
        out += "| " + first + " |";
        for (const auto& c : cells) out += " " + c + " |";
      } else {
        out += fmt::format("{:<{}}", first, w0);
        for (std::size_t i = 0; i < cells.size(); ++i)
          out += fmt::format("  {:<{}}", cells[i], std::max<std::size_t>(cols[i].size(), 10));
      }
      out += "\n";
    };
    row("scenario", cols);
    if (md) {
      out += "|---|";
      for (std::size_t i = 0; i < cols.size(); ++i) out += "---|";
      out += "\n";
    }
    for (const Scenario* sc : group) {
      std::vector<std::string> cells;
      auto mine = protocols_for(*sc, {});
      for (const auto& p : cols) {
        if (ps_in.empty() && std::find(mine.begin(), mine.end(), p) == mine.end()) {
          cells.push_back("—");
          continue;
        }
        Cell c = run_cell(*sc, p);
        if (!c.ok()) ++mismatches;
        std::string mark = !c.expected ? "" : c.ok() ? " ✓" : " ✗";
        cells.push_back(std::string(to_string(c.got)) + mark);
      }
      row(label(*sc), cells);
    }
  }
  out += fmt::format("\n✓ = as expected, ✗ = NOT as expected; {} mismatch(es)\n", mismatches);
  fmt::print("{}", out);
  return mismatches ? kFail : kOk;
}

int cmd_check(const std::vector<std::string>& paths, const std::string& junit_file, bool no_color) {
  const bool color = use_color(no_color);
  const auto word = [color](std::string_view w, std::string_view sgr) {
    return color ? fmt::format("\x1b[{}m{}\x1b[0m", sgr, w) : std::string(w);
  };
  int passed = 0, failed = 0, errors = 0;
  std::vector<JUnitCase> cases;
  // A bad file or an inconclusive run is one red case (an <error>) among the others, and the rest still run:
  // CI then shows which one, and the JUnit file is written in every case before the exit code says 2.
  const auto error = [&](const std::string& scenario, const std::string& protocol, const std::string& file,
                         const std::string& what) {
    ++errors;
    fmt::print("{} {}{}: {}\n", word("ERROR", "1;33"), scenario, protocol.empty() ? "" : " × " + protocol,
               what);
    JUnitCase jc{scenario, protocol.empty() ? "load" : protocol, "", "", 0.0, what};
    jc.file = file;
    cases.push_back(std::move(jc));
  };
  std::vector<std::string> inputs;
  try {
    inputs = scenario_inputs(paths);
  } catch (const InputError& e) {
    error(e.file, "", e.file, e.what());
  }
  for (const auto& s : inputs) {
    Scenario sc;
    try {
      sc = load_scenario(s);
    } catch (const InputError& e) {
      error(s, "", s, e.what());
      continue;
    }
    if (sc.expect.empty()) {
      fmt::print("SKIP  {}: no expected verdicts\n", sc.name);
      continue;
    }
    const std::string file = sc.file.empty() ? s : sc.file;
    for (const auto& [p, e] : sc.expect) {
      const WallTimer timer;  // JUnit durations only
      Cell c;
      try {
        c = run_cell(sc, p);
      } catch (const InputError& x) {
        error(sc.name, p, file, x.what());
        continue;
      }
      (c.ok() ? passed : failed)++;
      JUnitCase jc{sc.name, p, e.describe(), c.got_text, timer.seconds(), "", c.met};
      jc.file = file;
      jc.warnings = c.warnings;
      if (!c.ok()) {
        jc.message = c.why;
        jc.details =
            fmt::format("{}\nreplay: {} run {} -p {} --seed {}", c.story, command_name(), s, p, c.seed);
      }
      cases.push_back(std::move(jc));
      fmt::print("{}  {} × {}: {} (expected {}){}\n", c.ok() ? word("PASS", "32") : word("FAIL", "1;31"),
                 sc.name, p, c.got_text, e.describe(),
                 c.ok() ? ""
                        : fmt::format("\n      {}; replay: {} run {} -p {} --seed {}", c.why, command_name(),
                                      s, p, c.seed));
      for (const std::string& w : c.warnings) fmt::print("      {} {}\n", word("warning:", "1;33"), w);
    }
  }
  fmt::print("{} passed, {} failed{}\n", passed, failed, errors ? fmt::format(", {} error(s)", errors) : "");
  if (!junit_file.empty()) emit(junit_report(cases), junit_file);
  return errors ? kInput : failed ? kFail : kOk;
}

}  // namespace locksim::cli
