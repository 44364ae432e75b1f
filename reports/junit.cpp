// JUnit XML for `locksim check` and `run --report junit`, the dialect Jenkins, GitLab and GitHub test
// reporters read: <testsuites> around one <testsuite> with tests/failures/errors/time counts, one <testcase
// classname="scenario" name="protocol" file="..."> per run.
#include <fmt/format.h>
#include <chrono>

#include "locksim/reports/report.hpp"

namespace locksim {

WallTimer::WallTimer()
    : start_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count()) {}

double WallTimer::seconds() const {
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  return static_cast<double>(now - start_ns_) / 1e9;
}

namespace {

/// XML 1.0 text/attribute escaping. Characters XML 1.0 cannot carry at all (other C0 controls, e.g. the ANSI
/// colour escape) are dropped, together with the rest of an ANSI "ESC [ ... letter" sequence.
std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u == 0x1b) {
      if (i + 1 < s.size() && s[i + 1] == '[') {
        i += 2;
        while (i < s.size() && !(s[i] >= '@' && s[i] <= '~')) ++i;
      }
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\t':
        out += "&#9;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        if (u < 0x20) break;
        out += c;
    }
  }
  return out;
}

/// Element text keeps its line breaks as they are (readable in a CI log); attributes encode them.
std::string xml_text(std::string_view s) {
  std::string e = xml_escape(s);
  std::string out;
  out.reserve(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) {
    if (e.compare(i, 5, "&#10;") == 0) {
      out += '\n';
      i += 4;
    } else {
      out += e[i];
    }
  }
  return out;
}

enum class Outcome { pass, failure, error };

Outcome outcome(const JUnitCase& c) {
  if (c.got.empty()) return Outcome::error;
  if (c.met) return *c.met ? Outcome::pass : Outcome::failure;
  if (!c.expected.empty() && c.expected != c.got) return Outcome::failure;
  return Outcome::pass;
}

std::string seconds(double s) {
  return fmt::format("{:.3f}", s < 0 ? 0.0 : s);
}

}  // namespace

std::string junit_report(const std::vector<JUnitCase>& cases) {
  std::size_t failures = 0, errors = 0;
  double total = 0;
  for (const auto& c : cases) {
    const Outcome o = outcome(c);
    failures += o == Outcome::failure;
    errors += o == Outcome::error;
    total += c.seconds;
  }
  const std::string counts =
      fmt::format("tests=\"{}\" failures=\"{}\" errors=\"{}\"", cases.size(), failures, errors);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites name=\"locksim\" {} time=\"{}\">\n", counts, seconds(total));
  out += fmt::format("  <testsuite name=\"locksim\" {} skipped=\"0\" time=\"{}\">\n", counts, seconds(total));
  for (const auto& c_in : cases) {
    JUnitCase c = c_in;
    for (const std::string& w : c.warnings) {  // a line each, after the story: in every outcome
      std::string& text = outcome(c) == Outcome::pass ? c.message : c.details;
      text += (text.empty() || text.ends_with('\n') ? "" : "\n") + std::string("warning: ") + w;
    }
    out += fmt::format("    <testcase classname=\"{}\" name=\"{}\"", xml_escape(c.scenario),
                       xml_escape(c.protocol));
    if (!c.file.empty()) out += fmt::format(" file=\"{}\"", xml_escape(c.file));
    out += fmt::format(" time=\"{}\"", seconds(c.seconds));
    const auto element = [&](const char* tag, const char* type, const std::string& message) {
      out += fmt::format(">\n      <{} message=\"{}\" type=\"{}\"", tag, xml_escape(message), type);
      out += c.details.empty() ? std::string("/>\n") : fmt::format(">{}</{}>\n", xml_text(c.details), tag);
      out += "    </testcase>\n";
    };
    switch (outcome(c)) {
      case Outcome::pass:
        if (c.message.empty()) {
          out += "/>\n";
        } else {
          out += ">\n      <system-out>" + xml_text(c.message) + "</system-out>\n    </testcase>\n";
        }
        break;
      case Outcome::failure: {
        const std::string head = fmt::format("expected {}, got {}", c.expected, c.got);
        element("failure", "expectation", c.message.empty() ? head : head + ": " + c.message);
        break;
      }
      case Outcome::error:
        element("error", "input", c.message.empty() ? "no verdict" : c.message);
        break;
    }
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace locksim
