#include "protocols/resource.hpp"

#include <fmt/format.h>

#include <map>

namespace locksim {

ProcId spawn_resource(World& world, const std::string& name, ResourceOptions opts, History& history) {
  World* w = &world;
  History* h = &history;
  return world.spawn(
      name,
      [w, h, opts](Context& ctx) {
        std::map<std::string, std::string> values;
        std::map<std::string, std::uint64_t> highest;
        for (;;) {
          auto m = ctx.receive();
          if (!m) continue;
          if (const auto* rq = m->as<ReadRequest>()) {
            ReadReply rep;
            if (auto it = values.find(rq->key); it != values.end()) rep.value = it->second;
            ctx.reply(*m, Message::of("read-ok", rep, rep.value ? *rep.value : "nil"));
            continue;
          }
          const auto* wq = m->as<WriteRequest>();
          if (!wq) continue;
          WriteReply rep{true, {}};
          if (opts.mode == ResourceMode::fenced) {
            auto it = highest.find(wq->key);
            const bool seen = it != highest.end();
            if (!wq->token) {
              rep = {false, "no token"};
            } else if (seen) {
              const std::uint64_t hi = it->second, t = *wq->token;
              bool ok = t >= hi;
              if (opts.variant == "gt-fence") ok = t > hi;
              if (opts.variant == "lt-fence") ok = t <= hi;
              if (!ok) rep = {false, fmt::format("token {} < highest {}", t, hi)};
            }
            if (rep.accepted) highest[wq->key] = *wq->token;
          }
          if (rep.accepted) values[wq->key] = wq->value;
          if (wq->write_id < h->writes.size()) {
            auto& rec = h->writes[wq->write_id];
            rec.arrived = w->now();
            rec.accepted = rep.accepted;
            rec.reject_reason = rep.reason;
          }
          if (rep.accepted) {
            // Counter workload: the final value per key, when it is an integer.
            std::int64_t v = 0;
            bool numeric = !wq->value.empty();
            for (char c : wq->value) {
              if (c < '0' || c > '9') {
                numeric = false;
                break;
              }
              v = v * 10 + (c - '0');
            }
            if (numeric) h->final_counters[wq->key] = v;
          }
          ctx.reply(*m, Message::of(rep.accepted ? "accepted" : "rejected", rep, rep.reason));
        }
      },
      ProcessOptions{.daemon = true});
}

}  // namespace locksim
