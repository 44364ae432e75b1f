#include "locksim/scenarios/replay.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/loader.hpp"

namespace locksim {

std::string hash_text(std::uint64_t h) {
  return fmt::format("0x{:016x}", h);
}

std::optional<std::uint64_t> parse_hash(std::string_view s) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  if (s.empty() || s.size() > 16) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + static_cast<std::uint64_t>(d);
  }
  return v;
}

ReplayFile load_replay_text(std::string_view text, const std::string& filename) {
  // Split: the [replay] table's lines go to one text, the rest (with those lines blanked) to the other.
  std::string scenario_text, replay_text;
  bool in_replay = false;
  std::uint32_t line_no = 0, replay_line = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(start, end - start);
    ++line_no;
    std::string_view trimmed = line;
    while (!trimmed.empty() && (trimmed.front() == ' ' || trimmed.front() == '\t')) trimmed.remove_prefix(1);
    while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\t' || trimmed.back() == '\r'))
      trimmed.remove_suffix(1);
    if (trimmed.starts_with("[")) {
      std::string_view header = trimmed;
      if (auto hash = header.find('#'); hash != std::string_view::npos) header = header.substr(0, hash);
      while (!header.empty() && (header.back() == ' ' || header.back() == '\t')) header.remove_suffix(1);
      in_replay = header == "[replay]";
      if (in_replay) replay_line = line_no;
    }
    (in_replay ? replay_text : scenario_text) += std::string(line);
    replay_text += "\n";
    scenario_text += "\n";  // both texts keep the file's line numbers
    start = end + 1;
  }
  if (replay_line == 0) {
    throw InputError(
        filename, 1, "replay",
        "not a replay file: no [replay] table (protocol, expected_trace_hash); `locksim run` runs plain "
        "scenario files");
  }
  ReplayFile out;
  out.scenario = load_scenario_text(scenario_text, filename);
  toml::table t;
  try {
    t = toml::parse(replay_text, filename);
  } catch (const toml::parse_error& e) {
    const auto l = static_cast<std::uint32_t>(e.source().begin.line);
    throw InputError(filename, l ? l : replay_line, "replay",
                     fmt::format("not valid TOML: {}", e.description()));
  }
  const toml::table* r = t["replay"].as_table();
  if (!r) throw InputError(filename, replay_line, "replay", "expected a table [replay]");
  for (const auto& [k, v] : *r) {
    const std::string_view ks = k.str();
    if (ks != "protocol" && ks != "expected_trace_hash" && ks != "verdict" && ks != "found_by" &&
        ks != "format") {
      throw InputError(
          filename, static_cast<std::uint32_t>(v.source().begin.line), fmt::format("replay.{}", ks),
          fmt::format(
              "unknown key '{}' (valid keys: protocol, expected_trace_hash, verdict, found_by, format)", ks));
    }
    if (!v.is_string()) {
      throw InputError(filename, static_cast<std::uint32_t>(v.source().begin.line),
                       fmt::format("replay.{}", ks), "expected a string");
    }
  }
  auto get = [&](const char* k, bool required) -> std::string {
    const toml::node* n = r->get(k);
    if (!n) {
      if (required) throw InputError(filename, replay_line, fmt::format("replay.{}", k), "missing");
      return {};
    }
    return *n->value<std::string>();
  };
  // Format 1 (no `format` key): written before the lease service's lessor checked for expired leases at an
  // interval, when every lease ended at the exact instant; such a file must replay as it was recorded.
  const std::string format = get("format", false);
  if (!format.empty() && format != "1" && format != "2") {
    throw InputError(filename, replay_line, "replay.format",
                     fmt::format("unknown replay format '{}' (this locksim reads 1 and 2)", format));
  }
  if (format.empty() || format == "1") {
    out.scenario.config.expiry_check_interval = 0ns;
    for (auto& [p, c] : out.scenario.per_protocol) c.expiry_check_interval = 0ns;
  }
  auto line_of = [&](const char* k) {
    const toml::node* n = r->get(k);
    return n ? static_cast<std::uint32_t>(n->source().begin.line) : replay_line;
  };
  out.info.protocol = get("protocol", true);
  const std::string h = get("expected_trace_hash", true);
  auto hv = parse_hash(h);
  if (!hv) {
    throw InputError(filename, line_of("expected_trace_hash"), "replay.expected_trace_hash",
                     fmt::format("'{}' is not a 64-bit hex hash such as \"0x0123456789abcdef\"", h));
  }
  out.info.expected_trace_hash = *hv;
  const std::string v = get("verdict", false);
  if (v.empty() || v == "unsafe")
    out.info.verdict = Verdict::unsafe;
  else if (v == "safe")
    out.info.verdict = Verdict::safe;
  else
    throw InputError(filename, line_of("verdict"), "replay.verdict",
                     fmt::format("'{}' is not safe or unsafe", v));
  out.info.found_by = get("found_by", false);
  const auto names = valid_protocol_names();
  if (std::find(names.begin(), names.end(), out.info.protocol) == names.end()) {
    throw InputError(filename, line_of("protocol"), "replay.protocol",
                     fmt::format("unknown protocol '{}'", out.info.protocol));
  }
  return out;
}

ReplayFile load_replay_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path, 0, "file", "a directory, not a replay file");
  if (!std::filesystem::is_regular_file(path, ec)) throw InputError(path, 0, "file", "no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, 0, "file", fmt::format("cannot open: {}", std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return load_replay_text(ss.str(), path);
}

void write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, 0, "file", fmt::format("cannot write: {}", std::strerror(errno)));
    out << text;
    if (!out.flush()) throw InputError(path, 0, "file", "write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw InputError(path, 0, "file", fmt::format("cannot write: {}", ec.message()));
}

ReplayCheck replay(const ReplayFile& file) {
  ReplayCheck c;
  RunOptions ro;
  ro.keep_trace = true;
  c.run = run_scenario(file.scenario, file.info.protocol, ro);
  c.hash_matches = c.run.trace_hash == file.info.expected_trace_hash;
  c.verdict_matches = c.run.verdict() == file.info.verdict;
  return c;
}

}  // namespace locksim
