#include "locksim/protocols/cas_row.hpp"

#include <fmt/format.h>

#include <map>

namespace locksim {

namespace {
struct Row {
  std::int64_t value = 0;
  std::uint64_t version = 0;
};
}  // namespace

ProcId spawn_cas_row(World& world, const std::string& name, ResourceOptions opts, History& history) {
  World* w = &world;
  History* h = &history;
  return world.spawn(
      name,
      [w, h, opts, name](Context& ctx) {
        std::map<std::string, Row> rows;  // id -> row; every row exists from the start (0, version 0)
        for (;;) {
          auto m = ctx.receive();
          if (!m) continue;
          if (const auto* rq = m->as<CasRead>()) {
            const Row& row = rows[rq->row];
            h->log(ResourceEntry{.op = ResourceEntry::Op::read,
                                 .time = w->now(),
                                 .resource = name,
                                 .key = rq->row,
                                 .request = rq->read_id,
                                 .accepted = true,
                                 .value = fmt::format("{}", row.value),
                                 .kind = ResourceKind::cas_row,
                                 .version = row.version});
            ctx.reply(*m, Message::of("cas-row", CasRowValue{row.value, row.version},
                                      fmt::format("value={} version={}", row.value, row.version)));
            continue;
          }
          const auto* up = m->as<CasUpdate>();
          if (!up) continue;
          Row& row = rows[up->row];
          CasReply rep;
          // The WHERE clause: the version the client read is still the row's.
          const bool version_matches = row.version == up->read_version;
          rep.applied = version_matches || opts.variant == "blind-update";
          if (rep.applied) {
            row.value = up->value;
            ++row.version;
          } else {
            rep.reason = fmt::format("version {} <> {} (zero rows updated)", row.version, up->read_version);
          }
          rep.version = row.version;
          h->log(ResourceEntry{.op = ResourceEntry::Op::write,
                               .time = w->now(),
                               .resource = name,
                               .key = up->row,
                               .request = up->write_id,
                               .token = up->token,
                               .accepted = rep.applied,
                               .applied = rep.applied,
                               .value = fmt::format("{}", up->value),
                               .reason = rep.reason,
                               .kind = ResourceKind::cas_row,
                               .version = up->read_version});
          ctx.reply(*m, Message::of(rep.applied ? "cas-applied" : "cas-conflict", rep,
                                    rep.applied ? fmt::format("version={}", rep.version) : rep.reason));
        }
      },
      ProcessOptions{.daemon = true});
}

std::vector<Variant> cas_row_variants() {
  return {{"blind-update",
           "UPDATE without AND version = :read_version: every write is applied (the lost update the version "
           "column prevents)"}};
}

}  // namespace locksim
