// The [network] table and its [[network.link]] overrides. A delay is any distribution (loader/dist.cpp).
#include "locksim/scenarios/loader/dist.hpp"
#include "locksim/scenarios/loader/loader_internal.hpp"

namespace locksim::loading {

namespace {
constexpr FieldDoc kNetworkFields[] = {
    {"delay", "duration or distribution", "\"1ms\"",
     "one-way delay of every message: a duration or any distribution (locksim explain distribution)"},
    {"loss", "probability", "0", "chance a message is lost"},
    {"duplicate", "probability", "0", "chance a message is delivered twice"},
    {"reorder", "probability", "0", "chance a message gets an extra uniform delay in [0, reorder_extra]"},
    {"reorder_extra", "duration", "\"0\"", "required when reorder > 0"},
    {"connection_refused", "boolean", "false",
     "a message for a process that is not running (crashed, ended, or an earlier incarnation) is answered at "
     "once by its host with a refusal, as TCP answers a closed port with a reset; false: silence until the "
     "sender's timeout. A host that lost power (crash with power_loss) answers nothing either way; a paused "
     "process still accepts and buffers"},
    {"cut_messages", "\"lost\" | \"held\"", "\"lost\"",
     "what a link cut by a partition does to a message that meets it, when sent or when it arrives: lost (a "
     "datagram's fate, or a connection's that gave up), or held as TCP holds a stream's bytes and delivered "
     "after the heal, in the order sent (dropped if its sender or receiver crashed or restarted meanwhile)"},
    {"link", "array of tables", "", "per-link overrides: [[network.link]]"},
};
constexpr FieldDoc kLinkFields[] = {
    {"from", "process name or \"*\"", "required", "the sender"},
    {"to", "process name or \"*\"", "required", "the receiver (not \"*\" when from is \"*\")"},
    {"delay", "duration or distribution", "[network] delay", "one-way delay on this link"},
    {"loss", "probability", "[network] loss", "chance a message is lost"},
    {"duplicate", "probability", "[network] duplicate", "chance a message is delivered twice"},
    {"reorder", "probability", "[network] reorder", "chance of an extra uniform delay"},
    {"reorder_extra", "duration", "[network] reorder_extra",
     "the largest extra delay of a reordered message"},
};
}  // namespace

std::vector<TableDoc> network_tables() {
  return {{"network", "[network]", kNetworkFields},
          {"network.link", "[[network.link]]: per-link overrides", kLinkFields},
          distribution_table()};
}

DelayDist Loader::delay(const toml::node& n, const std::string& field) const {
  return parse_dist(n, field, file_);
}

void Loader::link_options(const Tab& t, LinkOptions& o) const {
  if (const toml::node* n = t.get("delay")) o.delay = delay(*n, t.field("delay"));
  if (auto v = fraction_ppm(t, "loss", 1.0)) o.loss_ppm = static_cast<std::uint32_t>(*v);
  if (auto v = fraction_ppm(t, "duplicate", 1.0)) o.duplicate_ppm = static_cast<std::uint32_t>(*v);
  if (auto v = fraction_ppm(t, "reorder", 1.0)) o.reorder_ppm = static_cast<std::uint32_t>(*v);
  if (auto v = duration(t, "reorder_extra", Sign::non_negative)) o.reorder_extra = *v;
  if (t.has("reorder") && o.reorder_ppm != 0 && o.reorder_extra == 0ns) {
    fail_at(t, "reorder", "reorder needs reorder_extra (the largest extra delay of a reordered message)");
  }
}

void Loader::network(const Tab& root, Scenario& s) const {
  if (auto n = sub_table(root, "network")) {
    only_schema(*n, "network");
    link_options(*n, s.network.defaults);
    if (auto v = boolean(*n, "connection_refused")) s.network.refuse_when_down = *v;
    if (auto v = enumeration<CutMessages>(*n, "cut_messages",
                                          {{"lost", CutMessages::lost}, {"held", CutMessages::held}}))
      s.network.cut_messages = *v;
    for (const Tab& l : table_array(*n, "link")) {
      only_schema(l, "network.link");
      LinkSpec spec;
      need(l, "from", "from = \"<process>\" (or \"*\")");
      need(l, "to", "to = \"<process>\" (or \"*\")");
      spec.from = *str(l, "from");
      spec.to = *str(l, "to");
      check_process(spec.from, line_of(*l.get("from")), l.field("from"), true);
      check_process(spec.to, line_of(*l.get("to")), l.field("to"), true);
      if (spec.from == "*" && spec.to == "*") {
        fail_at(l, "to", "a link from \"*\" to \"*\" is every link: set it in [network] instead");
      }
      spec.options = s.network.defaults;
      link_options(l, spec.options);
      s.links.push_back(std::move(spec));
    }
  }
}

}  // namespace locksim::loading
