// The object store's anomaly and refusals told in its own words: manifests, generations, batches.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "locksim/reports/report.hpp"

namespace locksim {

namespace {

std::string secs(Time t) {
  return t == kTimeMax ? "never" : format_seconds(t, 3) + " s";
}
std::string tok(const std::optional<std::uint64_t>& t) {
  return t ? fmt::format("token {}", *t) : "no token";
}
std::string who(const WriteRef& w) {
  return fmt::format("{} (epoch {}, {})", w.client, w.epoch, tok(w.token));
}

/// The generation an applied manifest write created: the store logs it with the entry.
std::uint64_t generation_of(const RunOutput& run, const WriteRef& w) {
  if (w.seq >= run.history.resource_log.size()) return 0;
  return static_cast<std::uint64_t>(run.history.resource_log[w.seq].offset);
}

}  // namespace

std::string object_store_story(const RunOutput& run, const Violation& v) {
  const History& h = run.history;
  const std::string& replaced = h.writes.at(v.earlier.write).value;
  const std::string& written = h.writes.at(v.later.write).value;
  const std::vector<std::string> lost = checker_detail::dropped_batches(replaced, written);
  std::string s = fmt::format(
      "Manifest {} overwritten by a stale copy: {} committed generation {} at {}; then the store applied "
      "{}'s "
      "manifest (sent at {}) at {} as generation {}, and it leaves out {} {}.",
      v.key, who(v.earlier), generation_of(run, v.earlier), secs(v.earlier.arrived), who(v.later),
      secs(v.later.sent), secs(v.later.arrived), generation_of(run, v.later),
      lost.size() == 1 ? "batch" : "batches", fmt::join(lost, ", "));
  s += fmt::format(
      " {} computed its manifest from the one it had read before, and nothing made the PUT depend on it: the "
      "batches committed in between are lost to every reader of the manifest. An object store cannot compare "
      "fencing tokens; a PUT with If-Match on the generation the writer read (the fenced store) fails with "
      "412 instead.",
      v.later.client);
  return s;
}

std::vector<std::string> object_store_refusal_lines(const RunOutput& run) {
  std::vector<std::string> out;
  for (const CheckResult::Refusal& f : run.check.refused) {
    if (refusal_kind(run, f) != ResourceKind::object_store) continue;
    out.push_back(fmt::format("refused manifest write: {}'s commit of {} at {} ({}): {}{}", f.write.client,
                              f.key, secs(f.write.arrived), tok(f.write.token), f.reason,
                              f.newest ? " — the newest holder's own commit" : ""));
  }
  return out;
}

}  // namespace locksim
