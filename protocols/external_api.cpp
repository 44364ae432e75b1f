#include "locksim/protocols/external_api.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

namespace locksim {

namespace {

/// The provider's durable records, kept across a crash and restart of the API process.
struct ApiState {
  struct Remembered {
    Time first_seen{};  ///< the API's clock when it performed the key's first request
    std::uint64_t result = 0;
  };
  std::map<std::string, Remembered> keys;        // idempotency key -> what it performed
  std::map<std::string, std::int64_t> last_job;  // account -> highest job performed
  std::uint64_t effects = 0;                     // results handed out so far (charge numbers)
};

std::string secs(Duration d) {
  return format_seconds(d, 3) + " s";
}

}  // namespace

std::string idempotency_key_for(const std::string& key, std::int64_t job) {
  return fmt::format("job-{}-{}", key, job);
}

ProcId spawn_external_api(World& world, const std::string& name, ExternalApiOptions opts, History& history) {
  World* w = &world;
  History* h = &history;
  auto state = std::make_shared<ApiState>();
  return world.spawn(
      name,
      [w, h, opts, name, state](Context& ctx) {
        ApiState& st = *state;
        for (;;) {
          auto m = ctx.receive();
          if (!m) continue;
          if (const auto* rd = m->as<ApiRead>()) {
            const std::int64_t last = st.last_job[rd->key];
            h->log(ResourceEntry{.op = ResourceEntry::Op::read,
                                 .time = w->now(),
                                 .resource = name,
                                 .key = rd->key,
                                 .request = rd->read_id,
                                 .accepted = true,
                                 .value = fmt::format("{}", last),
                                 .kind = ResourceKind::external_api,
                                 .job = last});
            ctx.reply(*m, Message::of("api-last-job", ApiLastJob{last}, fmt::format("last_job={}", last)));
            continue;
          }
          const auto* rq = m->as<ApiRequest>();
          if (!rq) continue;
          ApiReply rep;
          const Time now = ctx.now();  // the API's own clock
          if (!rq->idempotency_key) {
            rep.performed = true;
            rep.reason = "no idempotency key";
          } else if (auto it = st.keys.find(*rq->idempotency_key); it == st.keys.end()) {
            rep.performed = true;
            rep.reason = fmt::format("key {} not seen before", *rq->idempotency_key);
          } else if (!idempotency_key_retained(it->second.first_seen, now, opts.retention)) {
            rep.performed = true;
            rep.reason =
                fmt::format("key {} forgotten: first seen {} ago, retention {}", *rq->idempotency_key,
                            secs(now - it->second.first_seen), secs(opts.retention));
          } else {
            rep.result = it->second.result;
            rep.reason =
                fmt::format("key {} seen {} ago (retention {}): first result replayed", *rq->idempotency_key,
                            secs(now - it->second.first_seen), secs(opts.retention));
          }
          if (rep.performed) {
            rep.result = ++st.effects;
            if (rq->idempotency_key) st.keys[*rq->idempotency_key] = {now, rep.result};
            std::int64_t& last = st.last_job[rq->key];
            last = std::max(last, rq->job);
          }
          h->log(ResourceEntry{.op = ResourceEntry::Op::write,
                               .time = w->now(),
                               .resource = name,
                               .key = rq->key,
                               .request = rq->write_id,
                               .accepted = true,
                               .applied = rep.performed,
                               .value = fmt::format("{}", rq->job),
                               .reason = rep.reason,
                               .kind = ResourceKind::external_api,
                               .worker = rq->client,
                               .job = rq->job,
                               .idempotency_key = rq->idempotency_key.value_or("")});
          ctx.reply(*m, Message::of(rep.performed ? "api-performed" : "api-deduplicated", rep,
                                    fmt::format("job={} result={}", rq->job, rep.result)));
        }
      },
      ProcessOptions{.daemon = true});
}

std::vector<Variant> external_api_variants() {
  return {};
}

}  // namespace locksim
