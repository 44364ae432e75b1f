#include "locksim/protocols/object_store.hpp"

#include <fmt/format.h>

#include <map>

namespace locksim {

namespace {
struct Object {
  std::uint64_t generation = 0;
  std::string content;
  std::optional<std::uint64_t> token;
};
}  // namespace

std::vector<std::string> manifest_batches(const std::string& content) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < content.size()) {
    const std::size_t j = content.find(' ', i);
    const std::size_t end = j == std::string::npos ? content.size() : j;
    if (end > i) out.push_back(content.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

ProcId spawn_object_store(World& world, const std::string& name, ResourceOptions opts, History& history) {
  (void)opts;  // one behaviour: the client chooses whether to send If-Match
  World* w = &world;
  History* h = &history;
  return world.spawn(
      name,
      [w, h, name](Context& ctx) {
        std::map<std::string, Object> objects;
        for (;;) {
          auto m = ctx.receive();
          if (!m) continue;
          if (const auto* g = m->as<ObjectGet>()) {
            auto it = objects.find(g->name);
            ObjectRow row;
            if (it != objects.end()) {
              row.found = true;
              row.generation = it->second.generation;
              row.content = it->second.content;
              row.token = it->second.token;
            }
            h->log(ResourceEntry{.op = ResourceEntry::Op::read,
                                 .time = w->now(),
                                 .resource = name,
                                 .key = g->name,
                                 .request = g->read_id,
                                 .token = row.token,
                                 .accepted = true,
                                 .applied = false,
                                 .value = row.content,
                                 .kind = ResourceKind::object_store,
                                 .offset = static_cast<std::int64_t>(row.generation)});
            ctx.reply(*m, Message::of("object", row, fmt::format("generation={}", row.generation)));
            continue;
          }
          const auto* put = m->as<ObjectPut>();
          if (!put) continue;
          Object& obj = objects[put->name];
          ObjectPutReply rep;
          rep.applied = !put->if_match || *put->if_match == obj.generation;
          if (rep.applied) {
            ++obj.generation;
            obj.content = put->content;
            obj.token = put->token;
          } else {
            rep.reason =
                fmt::format("If-Match {} but the object is at generation {} (412 Precondition Failed)",
                            *put->if_match, obj.generation);
          }
          rep.generation = obj.generation;
          if (obj.generation == 0) objects.erase(put->name);  // a failed create leaves nothing behind
          h->log(ResourceEntry{.op = ResourceEntry::Op::write,
                               .time = w->now(),
                               .resource = name,
                               .key = put->name,
                               .request = put->write_id,
                               .token = put->token,
                               .accepted = rep.applied,
                               .applied = rep.applied,
                               .value = put->content,
                               .reason = rep.reason,
                               .kind = ResourceKind::object_store,
                               .offset = static_cast<std::int64_t>(rep.generation)});
          ctx.reply(*m, Message::of(rep.applied ? "object-written" : "precondition-failed", rep,
                                    rep.applied ? fmt::format("generation={}", rep.generation) : rep.reason));
        }
      },
      ProcessOptions{.daemon = true});
}

std::vector<Variant> object_store_variants() {
  return {};
}

}  // namespace locksim
