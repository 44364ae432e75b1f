// The words the HTML report puts on a run: what a safe history shows in each resource's terms, and the tag
// and labels of an anomaly's two writes.
#pragma once

#include <string>

#include "locksim/reports/report.hpp"

namespace locksim::html_labels {

/// What a safe run's history shows, in the terms of its resources' own properties (docs/safety.md).
std::string no_anomalies(const RunOutput& run);

/// The words the picture puts on an anomaly: a tag for it and a label for each of its two writes.
struct AnomalyLabels {
  std::string title, earlier, later;
};
AnomalyLabels anomaly_labels(const Violation& v);

}  // namespace locksim::html_labels
