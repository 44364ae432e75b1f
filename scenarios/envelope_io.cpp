// The envelope's files: CSV and JSON of a result, the JSONL of a shard's grid points, and their merge with
// the check that every point of the grid came in.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "locksim/scenarios/envelope.hpp"
#include "locksim/scenarios/replay.hpp"

namespace locksim {

using ojson = nlohmann::ordered_json;

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

/// FNV-1a over the scenario text: tells merge whether the shards ran the same text.
std::uint64_t text_hash(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

/// A number as JSON and CSV hold it: shortest text that reads back the same.
std::string num(double v) {
  return fmt::format("{}", v);
}

ojson point_json(const EnvelopeSpec& spec, const std::string& protocol, const EnvelopePoint& p,
                 const PointCommand& command) {
  ojson j;
  if (p.index >= 0) j["index"] = p.index;
  ojson at = ojson::array();
  for (std::size_t k = 0; k < spec.axes.size(); ++k) at.push_back(spec.axes[k].display(p.at[k]));
  j["at"] = at;
  j["runs"] = p.runs;
  j["unsafe"] = p.unsafe;
  j["inconclusive"] = p.inconclusive;
  j["errors"] = p.errors;
  j["fraction"] = p.fraction();
  j["status"] = p.status();
  if (p.first_unsafe_seed) {
    j["seed"] = *p.first_unsafe_seed;
    j["trace_hash"] = hash_text(p.first_unsafe_hash);
    if (command) j["command"] = command(protocol, p);
  }
  return j;
}

ojson grid_json(const EnvelopeSpec& s) {
  ojson j;
  j["scenario"] = s.scenario;
  j["scenario_hash"] = hash_text(text_hash(s.toml));
  j["set"] = s.sets;
  ojson axes = ojson::array();
  for (const EnvelopeAxis& a : s.axes) {
    ojson x;
    x["field"] = a.field;
    x["kind"] = a.kind == AxisKind::duration  ? "duration"
                : a.kind == AxisKind::integer ? "integer"
                                              : "number";
    x["lo"] = a.lo;
    x["hi"] = a.hi;
    x["unit"] = a.unit();
    axes.push_back(x);
  }
  j["axes"] = axes;
  j["steps"] = s.steps;
  j["seeds"] = s.seeds;
  j["first_seed"] = s.first_seed;
  j["protocols"] = s.protocols;
  return j;
}

}  // namespace

std::string point_file_name(const EnvelopeSpec& spec, const std::vector<double>& at) {
  std::string name = spec.scenario;
  if (const auto slash = name.find_last_of('/'); slash != std::string::npos) name = name.substr(slash + 1);
  if (name.ends_with(".toml")) name.resize(name.size() - 5);
  for (std::size_t k = 0; k < spec.axes.size(); ++k) {
    std::string v = spec.axes[k].format(at[k]);
    v.erase(std::remove(v.begin(), v.end(), ' '), v.end());
    std::string field = spec.axes[k].field;
    field.erase(std::remove_if(field.begin(), field.end(), [](char c) { return c == '[' || c == ']'; }),
                field.end());
    name += fmt::format("-{}={}", field, v);
  }
  for (char& c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.' || c == '+' || c == '='))
      c = '_';
  return name + ".toml";
}

std::string envelope_csv(const EnvelopeResult& r, const PointCommand& command) {
  const EnvelopeSpec& s = r.spec;
  std::string out = "protocol,kind,index";
  for (const EnvelopeAxis& a : s.axes)
    out += "," + csv_field(a.unit().empty() ? a.field : fmt::format("{} ({})", a.field, a.unit()));
  out += ",runs,unsafe,inconclusive,errors,fraction,status,first_unsafe_seed,command\n";
  for (const ProtocolEnvelope& pe : r.protocols) {
    auto line = [&](const EnvelopePoint& p, std::string_view kind) {
      out +=
          fmt::format("{},{},{}", csv_field(pe.protocol), kind, p.index >= 0 ? std::to_string(p.index) : "");
      for (std::size_t k = 0; k < s.axes.size(); ++k) out += "," + num(s.axes[k].display(p.at[k]));
      out += fmt::format(",{},{},{},{},{},{},{},{}\n", p.runs, p.unsafe, p.inconclusive, p.errors,
                         num(p.fraction()), p.status(),
                         p.first_unsafe_seed ? std::to_string(*p.first_unsafe_seed) : "",
                         csv_field(p.first_unsafe_seed && command ? command(pe.protocol, p) : ""));
    };
    for (const EnvelopePoint& p : pe.grid) line(p, "grid");
    for (const EnvelopePoint& p : pe.refined) line(p, "refine");
  }
  return out;
}

std::string envelope_json(const EnvelopeResult& r, const PointCommand& command) {
  const EnvelopeSpec& s = r.spec;
  ojson j = grid_json(s);
  j["refine"] = s.refine;
  ojson res = ojson::array();
  const std::vector<double> rs = r.resolution();
  for (std::size_t k = 0; k < s.axes.size(); ++k) res.push_back(s.axes[k].display(rs[k]));
  j["resolution"] = res;
  ojson ps = ojson::array();
  for (const ProtocolEnvelope& pe : r.protocols) {
    ojson p;
    p["protocol"] = pe.protocol;
    p["summary"] = pe.summary;
    ojson fit;
    fit["points"] = pe.fit.points;
    fit["dependent"] = s.axes[std::min<std::size_t>(pe.fit.dependent, s.axes.size() - 1)].field;
    fit["slope"] = pe.fit.slope;
    fit["intercept"] = pe.fit.intercept;
    fit["rms"] = pe.fit.rms;
    fit["tolerance"] = pe.fit.tolerance;
    fit["is_line"] = pe.fit.is_line;
    fit["unsafe_above"] = pe.fit.unsafe_above;
    p["fit"] = fit;
    ojson g = ojson::array(), rf = ojson::array(), b = ojson::array();
    for (const EnvelopePoint& pt : pe.grid) g.push_back(point_json(s, pe.protocol, pt, command));
    for (const EnvelopePoint& pt : pe.refined) rf.push_back(point_json(s, pe.protocol, pt, command));
    for (const BoundaryPoint& bp : pe.boundary) {
      ojson x, at = ojson::array();
      for (std::size_t k = 0; k < s.axes.size(); ++k) at.push_back(s.axes[k].display(bp.at[k]));
      x["at"] = at;
      x["axis"] = bp.axis;
      x["half_width"] = s.axes[bp.axis].display(bp.half_width);
      b.push_back(x);
    }
    p["grid"] = g;
    p["refined"] = rf;
    p["boundary"] = b;
    ps.push_back(p);
  }
  j["results"] = ps;
  return j.dump(1, ' ') + "\n";
}

std::string envelope_grid_key(const EnvelopeSpec& spec) {
  return grid_json(spec).dump();
}

std::string envelope_jsonl(const EnvelopeResult& r) {
  std::string out;
  const ojson grid = grid_json(r.spec);
  for (const ProtocolEnvelope& pe : r.protocols)
    for (const EnvelopePoint& p : pe.grid) {
      ojson j;
      j["envelope"] = grid;
      j["shard"] = r.spec.shard;
      j["shards"] = r.spec.shards;
      j["protocol"] = pe.protocol;
      j["index"] = p.index;
      j["runs"] = p.runs;
      j["unsafe"] = p.unsafe;
      j["inconclusive"] = p.inconclusive;
      j["errors"] = p.errors;
      if (p.first_unsafe_seed) {
        j["seed"] = *p.first_unsafe_seed;
        j["trace_hash"] = hash_text(p.first_unsafe_hash);
      }
      out += j.dump() + "\n";
    }
  return out;
}

EnvelopeMerge merge_envelope_jsonl(
    const std::vector<std::string>& files,
    const std::function<std::pair<std::string, std::string>(const std::string&)>& load_text) {
  EnvelopeMerge m;
  std::optional<ojson> grid;
  std::uint32_t shards = 0;
  std::map<std::pair<std::string, std::int64_t>, EnvelopePoint> seen;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw InputError(f, 0, "file", "cannot open");
    std::uint32_t line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const ojson j = ojson::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("envelope") || !j.contains("index"))
        throw InputError(f, line_no, "jsonl", "not a line of `locksim envelope --jsonl`");
      try {
        if (!grid) {
          grid = j["envelope"];
          shards = j.at("shards").get<std::uint32_t>();
        } else if (j["envelope"] != *grid) {
          throw InputError(
              f, line_no, "envelope",
              "a line of a different envelope (scenario, fields, steps, seeds or protocols differ)");
        } else if (j.at("shards").get<std::uint32_t>() != shards) {
          throw InputError(f, line_no, "shards", "lines cut into different numbers of shards");
        }
        EnvelopePoint p;
        p.index = j.at("index").get<std::int64_t>();
        p.runs = j.at("runs").get<std::uint32_t>();
        p.unsafe = j.at("unsafe").get<std::uint32_t>();
        p.inconclusive = j.at("inconclusive").get<std::uint32_t>();
        p.errors = j.at("errors").get<std::uint32_t>();
        if (j.contains("seed")) {
          p.first_unsafe_seed = j.at("seed").get<std::uint64_t>();
          p.first_unsafe_hash = parse_hash(j.at("trace_hash").get<std::string>()).value_or(0);
        }
        if (!seen.emplace(std::make_pair(j.at("protocol").get<std::string>(), p.index), p).second)
          ++m.duplicates;
      } catch (const nlohmann::json::exception& e) {
        throw InputError(f, line_no, "jsonl", e.what());
      }
    }
  }
  if (!grid)
    throw InputError(files.empty() ? "<command line>" : files.front(), 0, "FILES", "no envelope points");
  m.points = seen.size();
  const ojson& g = *grid;
  EnvelopeSpec spec;
  spec.scenario = g.at("scenario").get<std::string>();
  std::tie(spec.toml, spec.file) = load_text(spec.scenario);
  spec.sets = g.at("set").get<std::vector<std::string>>();
  spec.toml = set_fields(spec.toml, spec.file, spec.sets);
  if (hash_text(text_hash(spec.toml)) != g.at("scenario_hash").get<std::string>())
    throw InputError(spec.file, 0, "scenario",
                     "its text is not the one the shards ran (the file changed since): run the shards again");
  for (const ojson& a : g.at("axes")) {
    EnvelopeAxis ax;
    ax.field = a.at("field").get<std::string>();
    const std::string kind = a.at("kind").get<std::string>();
    ax.kind = kind == "duration"  ? AxisKind::duration
              : kind == "integer" ? AxisKind::integer
                                  : AxisKind::number;
    ax.lo = a.at("lo").get<double>();
    ax.hi = a.at("hi").get<double>();
    spec.axes.push_back(ax);
  }
  spec.steps = g.at("steps").get<std::uint32_t>();
  spec.seeds = g.at("seeds").get<std::uint32_t>();
  spec.first_seed = g.at("first_seed").get<std::uint64_t>();
  spec.protocols = g.at("protocols").get<std::vector<std::string>>();
  // Missing points, by shard: a whole shard, or the indices of one.
  const std::uint64_t n = spec.grid_points();
  for (std::uint32_t k = 0; k < shards; ++k) {
    std::uint64_t expected = 0, missing = 0;
    std::vector<std::string> examples;
    for (std::uint64_t i = k; i < n; i += shards)
      for (const std::string& p : spec.protocols) {
        ++expected;
        if (seen.count({p, static_cast<std::int64_t>(i)})) continue;
        ++missing;
        if (examples.size() < 5) examples.push_back(fmt::format("{} #{}", p, i));
      }
    if (missing == expected && expected > 0)
      m.missing.push_back(
          fmt::format("shard {} of {} missing: no file has its {} point(s) (--shard {}/{}, "
                      "JOB_COMPLETION_INDEX={})",
                      k, shards, expected, k, shards, k));
    else if (missing > 0)
      m.missing.push_back(fmt::format("shard {} of {}: {} of its {} point(s) missing: {}{}", k, shards,
                                      missing, expected, fmt::join(examples, ", "),
                                      missing > examples.size() ? ", ..." : ""));
  }
  if (!m.missing.empty()) return m;
  EnvelopeResult r;
  r.spec = spec;
  for (const std::string& p : spec.protocols) {
    ProtocolEnvelope pe;
    pe.protocol = p;
    for (std::uint64_t i = 0; i < n; ++i) {
      EnvelopePoint pt = seen.at({p, static_cast<std::int64_t>(i)});
      pt.at = spec.grid_values(i);
      pe.grid.push_back(std::move(pt));
    }
    r.protocols.push_back(std::move(pe));
  }
  m.result = std::move(r);
  return m;
}

}  // namespace locksim
