// The words the HTML report puts on a run (reports/html_labels.hpp).
#include "html_labels.hpp"

#include <fmt/format.h>

#include "locksim/scenarios/checker/checker.hpp"

namespace locksim::html_labels {

namespace {

/// What a safe run's history shows, in the terms of the resource's own property (docs/safety.md).
std::string no_anomaly(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::store:
      return "every write the store took followed the order in which the service granted the lock, no "
             "acknowledged update was lost, tokens grew with every grant and the newest holder's writes were "
             "taken.";
    case ResourceKind::checkpoint_table:
      return "no shard's checkpoint moved back and no offset was processed in two lock holds.";
    case ResourceKind::object_store:
      return "no manifest write left out a batch that the manifest before it had committed.";
    case ResourceKind::external_api:
      return "no logical job took effect twice at the API.";
    case ResourceKind::cas_row:
      return "no acknowledged compare-and-set of the row was lost.";
    case ResourceKind::job_queue:
      return "no period's job was enqueued twice.";
  }
  return "";
}

}  // namespace

std::string no_anomalies(const RunOutput& run) {
  if (run.more_resources.empty()) return no_anomaly(run.resource_kind);
  std::string out = run.resource + ": " + no_anomaly(run.resource_kind);
  for (const RunOutput::MoreResource& m : run.more_resources) out += " " + m.name + ": " + no_anomaly(m.kind);
  return out;
}

AnomalyLabels anomaly_labels(const Violation& v) {
  auto who = [](std::uint64_t epoch, const std::string& client) {
    return epoch == 0 ? client : fmt::format("epoch {} ({})", epoch, client);  // 0: written without a lock
  };
  const std::string a = who(v.earlier.epoch, v.earlier.client), b = who(v.later.epoch, v.later.client);
  auto token = [](const std::optional<std::uint64_t>& t) { return t ? fmt::format("{}", *t) : "none"; };
  if (v.kind == kLostUpdate)
    return {fmt::format("lost update: {}'s acknowledged write overwritten by {}", a, b), "lost: " + a + " ✓",
            "overwrote it: " + b + " ✓"};
  if (v.kind == kFreshWriteRejected)
    return {fmt::format("fresh write rejected: {}, the newest holder, refused", b), "fence set by " + a,
            "refused: " + b + " ✗"};
  if (v.kind == kTokenRegression)
    return {fmt::format("token regression: {} got token {} after {} got token {}",
                        who(v.grant_later.epoch, v.grant_later.client), token(v.grant_later.token),
                        who(v.grant_earlier.epoch, v.grant_earlier.client), token(v.grant_earlier.token)),
            "", ""};
  if (v.kind == kCheckpointRewind)
    return {fmt::format("checkpoint of shard {} rewound: {} after {}", v.key, b, a),
            "set offset: " + a + " ✓", "rewound: " + b + " ✓"};
  if (v.kind == kStaleManifest)
    return {fmt::format("manifest {} overwritten: {} left out batches {} had committed", v.key, b, a),
            "committed: " + a + " ✓", "overwrote: " + b + " ✓"};
  if (v.kind == kDuplicateEffect)
    return {fmt::format("{} of account {} charged twice: by {} and by {}", v.reason, v.key, a, b),
            "charged: " + a + " ✓", "charged again: " + b + " ✓"};
  if (v.kind == kDuplicateEnqueue)
    return {fmt::format("job {} enqueued twice: by {} and by {}", v.key, a, b), "enqueued: " + a + " ✓",
            "again: " + b + " ✓"};
  if (v.kind == kDuplicateProcessing)
    return {fmt::format("offset of shard {} processed twice: by {} and by {}", v.key, a, b), a + " ✓",
            "again: " + b + " ✓"};
  return {fmt::format("stale write accepted: {} after {}", b, a), a + " ✓", "stale: " + b + " ✓"};
}

}  // namespace locksim::html_labels
