#pragma once
/// An object store with conditional writes (S3 / GCS style): named objects, each with a generation that every
/// applied write increments (1 for the first), and `If-Match: <generation>` on a write. A scheduler leader
/// keeps its output the way the design notes' object stores and search indexes do: it writes each batch as an
/// object of its own, then commits it by writing the **manifest** object (the resource key): the list of
/// committed batches and the writer's fencing token.
///
/// `fenced` mode is the careful client: it reads the manifest's generation and writes the next manifest with
/// `If-Match` on it (a manifest written by anyone else in between makes the write fail: 412), and it stops
/// when the manifest it reads carries a token above its own. `unfenced` is the blind writer: a plain PUT of
/// the manifest it computed from what it read last. The store cannot compare tokens (an object store does not
/// know what the metadata means): only the generation is checked.
///
/// Every delivered GET and PUT goes into the store's own append-only log (History::resource_log, kind
/// object_store): the key is the object's name, the value its content (a manifest: its batch names separated
/// by spaces), `applied` whether the PUT changed the object. That log is the only ground truth the checker
/// takes about it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/resource.hpp"
#include "locksim/protocols/variant.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {

/// GET of an object. `read_id` indexes History::reads (kNoId: not recorded).
struct ObjectGet {
  std::string name;
  std::uint64_t read_id = kNoId;
};
struct ObjectRow {
  bool found = false;
  std::uint64_t generation = 0;  ///< 0: no such object
  std::string content;
  std::optional<std::uint64_t> token;  ///< the token the object's last writer stored with it
};
/// PUT of an object; with `if_match`, only if the object's generation is that (0: only if it does not exist).
/// `write_id` indexes History::writes: recorded, never decided on.
struct ObjectPut {
  std::string name;
  std::string content;
  std::optional<std::uint64_t> token;
  std::optional<std::uint64_t> if_match;
  std::uint64_t write_id = kNoId;
};
struct ObjectPutReply {
  bool applied = false;
  std::uint64_t generation = 0;  ///< the object's generation after the request
  std::string reason;            ///< why not: the precondition that failed
};

inline constexpr const char* kObjectGetType = "object-get";
inline constexpr const char* kObjectPutType = "object-put";

/// The batch names a manifest's content lists, in order.
std::vector<std::string> manifest_batches(const std::string& content);

/// The variants the object store understands (ResourceOptions::variant).
std::vector<Variant> object_store_variants();

/// Spawn the store as a daemon process named `name`.
ProcId spawn_object_store(World& world, const std::string& name, ResourceOptions opts, History& history);

}  // namespace locksim
