#pragma once
/// Reports render a finished run (RunOutput); they read results only.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/scenarios/runner.hpp"

namespace locksim {

struct TextStyle {
  bool color = false;  ///< ANSI colours (terminal only)
  int width = 0;       ///< columns the terminal timeline may use (0: 100); the CLI passes $COLUMNS
};

/// The plain-English story of every anomaly (empty when safe), one paragraph each.
std::string story(const RunOutput& run);
/// The story of one anomaly of `run`.
std::string anomaly_story(const RunOutput& run, const Violation& v);
/// The checkpoint table's anomalies (checkpoint-rewind, duplicate-processing) in its own words.
std::string checkpoint_story(const RunOutput& run, const Violation& v);
/// What the resource refused, one line each (CheckResult::refused), beside the verdict: the checkpoint
/// statements the table refused, or the object store's failed manifest writes.
std::vector<std::string> refusal_lines(const RunOutput& run);
/// The kind of resource whose log holds a refused write (a scenario may have several resources).
ResourceKind refusal_kind(const RunOutput& run, const CheckResult::Refusal& f);
/// The object store's anomaly (stale-manifest) in its own words.
std::string object_store_story(const RunOutput& run, const Violation& v);
/// The object store's refused manifest writes (If-Match failed), one line each.
std::vector<std::string> object_store_refusal_lines(const RunOutput& run);
/// The external API's anomaly (duplicate-effect) in its own words: jobs, charges, idempotency keys.
std::string external_api_story(const RunOutput& run, const Violation& v);
/// The jobs the external API never performed (CheckResult::missing), one line each, beside the verdict.
std::vector<std::string> missing_effect_lines(const RunOutput& run);
/// A cas-row's lost update in its own words: the row, the versions, the increment lost.
std::string cas_row_story(const RunOutput& run, const Violation& v);
/// The job queue's duplicate-enqueue in its own words: the job, the leaders, the times.
std::string job_queue_story(const RunOutput& run, const Violation& v);
/// The enqueues the job queue refused, one line each (CheckResult::refused).
std::vector<std::string> queue_refusal_lines(const RunOutput& run);
/// A cas-row's or a job queue's figures beside the verdict (conflicts and retries; enqueues accepted and
/// refused), one line each; nothing for other kinds.
std::vector<std::string> resource_figure_lines(const RunOutput& run);
/// "1 lost-update, 2 stale-write-accepted": the anomalies by kind (empty when none).
std::string anomaly_summary(const CheckResult& c);
/// What a reader must know before trusting the verdict, one sentence each (empty: nothing): grants no
/// service record backs (CheckResult::unbacked), for which safety cannot be judged from service records.
/// Every report shows them: a `warning:` line in text, `warnings` in JSON, lines in JUnit details, the HTML
/// banner.
std::vector<std::string> run_warnings(const RunOutput& run);
/// Full text report: header, timeline of the events that matter, the story, verdict and figures.
std::string text_report(const RunOutput& run, const Scenario& sc, TextStyle style = {});
/// The terminal timeline: one lane per process over true time (clients, lock servers, store), a time axis
/// scaled to style.width, pauses, crashes, restarts, each client's lease as it believed it against the lease
/// as the service knew it, writes accepted / rejected / stale, and a legend of the glyphs drawn. A picture a
/// workshop can read before it reads the events.
std::string timeline(const RunOutput& run, TextStyle style = {});
/// One trace event in words (true time, the process's monotonic and wall clocks, what happened), one line:
/// what `locksim run --step` prints before it waits for Enter.
std::string describe_event(const RunOutput& run, const TraceEvent& ev, TextStyle style = {});
/// Counterfactual replay: the same scenario (same seed, same fault plan) run against several protocols, their
/// client-level histories side by side, and the first step at which they part.
std::string compare_report(const std::vector<RunOutput>& runs, const Scenario& sc, TextStyle style = {});
/// One JSON object (see docs/report-json.md).
std::string json_report(const RunOutput& run, const Scenario& sc);

/// The HTML report: one self-contained page (inline SVG, CSS and JS; nothing fetched from the network) with a
/// space-time diagram of the run (a lane per process, messages, pauses, lease belief vs. the service's view,
/// writes, the violation ringed), the story, a legend, zoom and node-clock tooltips. For people, not for
/// tools.
std::string html_report(const RunOutput& run, const Scenario& sc);
/// `s` with & < > " ' escaped for HTML text and attribute values (the run report and the envelope page).
std::string html_escape(std::string_view s);

/// Wall-clock seconds since construction, for JUnit durations shown on CI dashboards. The reports layer owns
/// it so no real clock appears next to the simulation (sim/, protocols/, scenarios/); it never touches a run.
class WallTimer {
 public:
  WallTimer();
  double seconds() const;

 private:
  std::int64_t start_ns_;
};

/// One scenario × protocol outcome of `locksim check`, for JUnit XML.
/// Grants the service made that no client ever learned of: an attempt whose answer came after its client
/// stopped waiting (a reply later than the node timeout) holds the lock for nobody until it expires. One
/// sentence each, in time order (from the service's records and the kept trace's notes; empty without a
/// trace). Beside the verdict: a liveness problem, not a safety one.
std::vector<std::string> orphan_grants(const RunOutput& run);

/// Whether a trace event is one the story is told with (the text report's event list, `run --step`'s `s`): a
/// client's acquisitions, checks, writes and their answers, releases, and every fault.
bool is_story_event(const TraceEvent& ev);
/// A `hold` event in words: "write from client1 HELD by the cut link (sent while the link was cut)", or its
/// release "write from client1 released by the heal: arrives in 1ms". `peer`: the sender's name.
std::string held_message_words(const TraceEvent& ev, std::string_view peer);

struct JUnitCase {
  std::string scenario;  ///< becomes the test case's classname
  std::string protocol;  ///< becomes the test case's name
  std::string expected;  ///< expected verdict ("safe"/"unsafe"); empty when the scenario states none
  std::string got;       ///< the verdict the run gave; empty when the run could not be made (an error)
  double seconds = 0;    ///< wall time the check took (for CI dashboards only; never enters a trace)
  std::string message;   ///< one line: why it failed or could not run (a passing case: extra output)
  /// Whether the expectation was met, when it was judged by more than a verdict word (a richer [expect]
  /// or a seed range); unset: met iff `got` equals `expected`.
  std::optional<bool> met;
  std::string details;  ///< the failure's or error's text: the story of what happened, the replay command
  std::string file;     ///< the scenario's file (a catalog scenario: its path in the repository)
  /// run_warnings() of the run: a `warning:` line each, after the details (or as the case's output).
  std::vector<std::string> warnings;
};

/// JUnit XML for CI systems (the dialect Jenkins' and GitLab's parsers read): <testsuites> holding one
/// <testsuite name="locksim"> with one <testcase> per case; a case whose expectation was not met is a
/// <failure>, a case that produced no verdict (a bad file, an inconclusive run) an <error>. A failure's
/// `message` is one line, its text the details (the story): nothing is said twice.
std::string junit_report(const std::vector<JUnitCase>& cases);

}  // namespace locksim
