#pragma once
/// An external API that cannot check fencing tokens: a payment or email provider whose every performed
/// request is a side effect (a charge, an email) that nothing can take back. A request names a logical job of
/// the caller's batch and, optionally, an idempotency key (chosen by the client per logical job, e.g.
/// "job-3-17"). The API remembers a key it has performed for `retention`, measured on its own (monotonic)
/// clock from the moment it first performed it, as Stripe keeps keys for 24 hours: a request whose key it
/// still remembers is deduplicated (it returns the first result and performs nothing); a request without a
/// key, or whose key it has forgotten, is performed. It has no field for a token and checks none.
///
/// A read asks for the highest job the API has performed on the account (`key`): the workload's honest way
/// to learn where a batch stands. The API's records (what it performed, the keys it remembers) are the
/// provider's own durable database: a crash of the API process loses only the requests in flight.
///
/// Every delivered request and read goes into the API's own append-only log (History::resource_log, kind
/// external_api), in processing order: performed (applied) or deduplicated, with the job, the key and the
/// calling client. It is the only ground truth the checker takes about the API.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/variant.hpp"
#include "locksim/sim/time.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {

struct ExternalApiOptions {
  /// How long the API remembers an idempotency key after it first performed a request with it.
  Duration retention{std::chrono::hours(24)};
};

/// One request: perform job `job` on account `key` for `client`. `write_id` indexes History::writes:
/// recorded, never decided on.
struct ApiRequest {
  std::string key;
  std::int64_t job = 0;
  std::optional<std::string> idempotency_key;
  std::string client;
  std::uint64_t write_id = kNoId;
};
/// The answer: the effect's result (a charge number), new (`performed`) or the first one replayed.
struct ApiReply {
  bool performed = false;
  std::uint64_t result = 0;
  std::string reason;  ///< why it was deduplicated, or what the API knew of the key when it performed it
};
/// A read of the account: the highest job the API has performed on it (0: none).
struct ApiRead {
  std::string key;
  std::uint64_t read_id = kNoId;
};
struct ApiLastJob {
  std::int64_t job = 0;
};

inline constexpr const char* kApiRequestType = "api-request";
inline constexpr const char* kApiReadType = "api-read";

/// Whether a key the API first performed at `first_seen` (its own clock) is still remembered at `now`: it is
/// kept for `retention` and forgotten from first_seen + retention on.
constexpr bool idempotency_key_retained(Time first_seen, Time now, Duration retention) {
  return now - first_seen < retention;
}

/// The client's idempotency key for job `job` of account `key`: "job-<key>-<job>".
std::string idempotency_key_for(const std::string& key, std::int64_t job);

/// The variants the API understands: none.
std::vector<Variant> external_api_variants();

/// Spawn the API as a daemon process named `name`.
ProcId spawn_external_api(World& world, const std::string& name, ExternalApiOptions opts, History& history);

}  // namespace locksim
