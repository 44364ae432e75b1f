#pragma once
/// The envelope as a self-contained HTML page: an SVG heat map per protocol (axes in the fields' units, each
/// cell's fraction of unsafe seeds, the refined boundary and its fitted line), the summary sentences, and on
/// a click on a cell the command that replays its first unsafe run. The CSS and script are files under
/// reports/envelope/, embedded at build time.
#include <string>

#include "locksim/scenarios/envelope.hpp"

namespace locksim {

std::string envelope_html(const EnvelopeResult& r, const PointCommand& command);

}  // namespace locksim
