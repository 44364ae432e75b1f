#include "locksim/protocols/resource.hpp"

#include <fmt/format.h>

#include "locksim/protocols/cas_row.hpp"
#include "locksim/protocols/checkpoint_table.hpp"
#include "locksim/protocols/external_api.hpp"
#include "locksim/protocols/job_queue.hpp"
#include "locksim/protocols/object_store.hpp"

#include <algorithm>
#include <map>
#include <vector>

namespace locksim {

namespace {
/// "split-fence": how long a checked write takes to land (a slow disk write between check and apply).
constexpr Duration kSplitDelay = 200ms;
}  // namespace

ProcId spawn_resource(World& world, const std::string& name, ResourceOptions opts, History& history) {
  World* w = &world;
  History* h = &history;
  return world.spawn(
      name,
      [w, h, opts, name](Context& ctx) {
        std::map<std::string, std::string> values;
        std::map<std::string, std::uint64_t> highest;
        // "split-fence": a write checked against the fence lands (value and fence) kSplitDelay later, while
        // the store goes on answering others: check and write are two steps and two writes interleave between
        // them.
        struct Landing {
          Time at;
          WriteRequest wq;
        };
        std::vector<Landing> landing;  // in arrival order; all have the same delay, so due times are ordered
        // Every delivered copy and every landing goes into the store's own log, in processing order.
        auto log = [&](ResourceEntry::Op op, const std::string& key, std::uint64_t request,
                       const std::optional<std::uint64_t>& token, bool accepted, bool applied,
                       std::string value, std::string reason) {
          h->log(ResourceEntry{.op = op,
                               .time = w->now(),
                               .resource = name,
                               .key = key,
                               .request = request,
                               .token = token,
                               .accepted = accepted,
                               .applied = applied,
                               .value = std::move(value),
                               .reason = std::move(reason)});
        };
        auto land = [&](const Landing& l) {
          values[l.wq.key] = l.wq.value;
          highest[l.wq.key] = std::max(highest[l.wq.key], *l.wq.token);
          log(ResourceEntry::Op::land, l.wq.key, l.wq.write_id, l.wq.token, true, true, l.wq.value, {});
        };
        for (;;) {
          while (!landing.empty() && landing.front().at <= ctx.now()) {
            land(landing.front());
            landing.erase(landing.begin());
          }
          auto m = landing.empty() ? ctx.receive() : ctx.receive(landing.front().at - ctx.now());
          if (!m) continue;
          // The fence: accept iff token >= highest seen for the key; check and update are one atomic step.
          auto fence = [&](const std::string& key, const std::optional<std::uint64_t>& token) -> WriteReply {
            // "client-check": the store trusts the client to have compared tokens (each client sees only its
            // own).
            if (opts.mode != ResourceMode::fenced || opts.variant == "client-check") return {true, {}};
            if (!token) return {false, "no token"};
            auto it = highest.find(key);
            if (it != highest.end()) {
              const std::uint64_t hi = it->second, t = *token;
              bool ok = t >= hi;
              if (opts.variant == "gt-fence") ok = t > hi;
              if (opts.variant == "lt-fence") ok = t <= hi;
              if (!ok) return {false, fmt::format("token {} < highest {}", t, hi)};
            }
            if (opts.variant != "split-fence")
              highest[key] = *token;  // split-fence: raised when the write lands
            return {true, {}};
          };
          if (const auto* rq = m->as<ReadRequest>()) {
            ReadReply rep;
            WriteReply f = fence(rq->key, rq->token);
            rep.rejected = !f.accepted;
            rep.reason = f.reason;
            if (auto it = values.find(rq->key); !rep.rejected && it != values.end()) rep.value = it->second;
            log(ResourceEntry::Op::read, rq->key, rq->read_id, rq->token, !rep.rejected, false,
                rep.value.value_or(""), rep.reason);
            ctx.reply(*m, Message::of(rep.rejected ? "read-rejected" : "read-ok", rep,
                                      rep.rejected ? rep.reason
                                      : rep.value  ? *rep.value
                                                   : "nil"));
            continue;
          }
          const auto* wq = m->as<WriteRequest>();
          if (!wq) continue;
          WriteReply rep = fence(wq->key, wq->token);
          const bool split =
              opts.variant == "split-fence" && opts.mode == ResourceMode::fenced && rep.accepted;
          if (split) landing.push_back(Landing{ctx.now() + kSplitDelay, *wq});
          const bool applied = rep.accepted && !split;
          if (applied) values[wq->key] = wq->value;
          log(ResourceEntry::Op::write, wq->key, wq->write_id, wq->token, rep.accepted, applied, wq->value,
              rep.reason);
          ctx.reply(*m, Message::of(rep.accepted ? "accepted" : "rejected", rep, rep.reason));
        }
      },
      ProcessOptions{.daemon = true});
}

std::string_view to_string(ResourceKind k) {
  switch (k) {
    case ResourceKind::store:
      return "store";
    case ResourceKind::checkpoint_table:
      return "checkpoint-table";
    case ResourceKind::object_store:
      return "object-store";
    case ResourceKind::external_api:
      return "external-api";
    case ResourceKind::cas_row:
      return "cas-row";
    case ResourceKind::job_queue:
      return "job-queue";
  }
  return "?";
}

std::string_view resource_property(ResourceKind k) {
  switch (k) {
    case ResourceKind::store:
      return "a key-value store, fenced or not: no write accepted out of the order the service granted the "
             "lock";
    case ResourceKind::checkpoint_table:
      return "the notes' shard_checkpoint UPDATE: an offset never moves back, none is processed in two holds";
    case ResourceKind::external_api:
      return "a payment or email API that cannot check tokens: each logical job takes effect exactly once";
    case ResourceKind::cas_row:
      return "a row with a version column, written by compare-and-set: no acknowledged increment is lost";
    case ResourceKind::job_queue:
      return "a scheduler leader's queue: no period's job enqueued twice";
    case ResourceKind::object_store:
      return "an object store's manifest, written with If-Match or not: no committed batch dropped by a "
             "later "
             "manifest";
  }
  return "";
}

std::vector<Variant> resource_variants(ResourceKind k) {
  switch (k) {
    case ResourceKind::checkpoint_table:
      return checkpoint_table_variants();
    case ResourceKind::object_store:
      return object_store_variants();
    case ResourceKind::cas_row:
      return cas_row_variants();
    case ResourceKind::job_queue:
      return job_queue_variants();
    case ResourceKind::external_api:
      return external_api_variants();
    default:
      return resource_variants();
  }
}

std::vector<Variant> resource_variants() {
  return {{"gt-fence", "accept iff token > highest: a second write by the same holder is refused"},
          {"lt-fence", "the comparison backwards: accept iff token <= highest"},
          {"split-fence", "check the token on arrival but land the write 200 ms later (mutant)"},
          {"client-check", "the store does not compare tokens; the clients are trusted to (mutant)"}};
}

}  // namespace locksim
