#pragma once
/// The protected resource: a store process that keeps, per key, a value and the highest token it has
/// accepted. `unfenced` accepts every write; `fenced` accepts a write iff its token >= the highest accepted
/// so far (the check and the write are one atomic step). It answers every write accepted/rejected and records
/// every delivered copy of every request, with its judgement, in its own append-only log
/// (History::resource_log, ground truth), in the order it processed them.
#include <cstdint>
#include <optional>
#include <string>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/variant.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {

enum class ResourceMode : std::uint8_t { unfenced, fenced };

struct ResourceOptions {
  ResourceMode mode = ResourceMode::unfenced;
  /// Teaching variants: "gt-fence" accepts iff token > highest (rejects an equal token: a second write by the
  /// same holder fails); "lt-fence" has the comparison backwards (a one-line bug real systems shipped).
  /// Mutants: "split-fence" checks the token on arrival but lands the write (and raises the fence)
  /// later, so two writes interleave between check and write; "client-check" leaves the comparison to the
  /// clients (the store accepts every write).
  std::string variant;
};

/// Body of a write request. `write_id` indexes History::writes: ground truth the store records, never decides
/// on.
struct WriteRequest {
  std::string key;
  std::string value;
  std::optional<std::uint64_t> token;
  std::uint64_t write_id = 0;
};
struct WriteReply {
  bool accepted = false;
  std::string reason;
};
/// A read. In `fenced` mode a read carries the reader's token too and is fenced like a write: rejected if the
/// token is below the highest seen, otherwise it raises the fence to it. Without that, fencing only the
/// writes cannot protect a read–modify–write: a stale holder's older-token write can land before the new
/// holder's first write and be overwritten by a value computed without it (a lost update). Unfenced mode
/// ignores the token.
struct ReadRequest {
  std::string key;
  std::optional<std::uint64_t> token;
  std::uint64_t read_id = kNoId;  ///< indexes History::reads: recorded, never decided on
};
struct ReadReply {
  std::optional<std::string> value;
  bool rejected = false;
  std::string reason;
};

inline constexpr const char* kWriteType = "write";
inline constexpr const char* kReadType = "read";

/// The variants the store understands (ResourceOptions::variant).
std::vector<Variant> resource_variants();

/// A kind's name in scenario files and reports: "store", "checkpoint-table", "external-api", "cas-row",
/// "job-queue", "object-store".
std::string_view to_string(ResourceKind k);
/// What a resource of kind `k` promises when the lock fails it, in one line: the property the checker
/// judges it by (docs/safety.md); `locksim list` and `matrix --by-resource` print it.
std::string_view resource_property(ResourceKind k);
/// The variants a resource of kind `k` understands.
std::vector<Variant> resource_variants(ResourceKind k);

/// Spawn the store as a daemon process named `name`.

ProcId spawn_resource(World& world, const std::string& name, ResourceOptions opts, History& history);

}  // namespace locksim
