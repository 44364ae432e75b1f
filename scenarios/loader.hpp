#pragma once
/// Scenario files: TOML in, a validated Scenario out. The format is documented in docs/scenario-format.md.
/// Every mistake a person can make in a file (unknown key, wrong type, absurd duration, unknown protocol or
/// process, a trigger that can never fire, a file that is not TOML) is reported as an InputError whose
/// message reads `file:line: field: what is wrong`, with the nearest valid name for a typo. The loader never
/// crashes or hangs on bad input: it is the boundary between people and the simulator.
///
/// Process names are kept as names (FaultSpec::target, ClockSpec::node, LinkSpec::from/to); the world builder
/// resolves them. Conventions: FaultSpec::target/peer/trigger_proc are empty for "any process"; LinkSpec uses
/// "*".
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/scenarios/scenario.hpp"

namespace locksim {

/// The note labels the client workload (scenarios/workload.cpp) and the protocols log with ctx.note(). A note
/// trigger may only wait for one of these, or for a note a client's program step names (`note = "..."`):
/// anything else could never fire. Keep this the one list.
namespace note {
inline constexpr std::string_view acquire = "acquire";  ///< a client starts an acquire attempt
inline constexpr std::string_view acquire_sent =
    "acquire-sent";                                       ///< a protocol client sent its lock request(s)
inline constexpr std::string_view acquired = "acquired";  ///< a client got the lock
inline constexpr std::string_view acquire_failed = "acquire-failed";  ///< the protocol gave up this attempt
inline constexpr std::string_view gave_up = "gave-up";            ///< the client stopped trying (give_up_at)
inline constexpr std::string_view read_timeout = "read-timeout";  ///< read of a read-modify-write timed out
inline constexpr std::string_view read_rejected = "read-rejected";  ///< a fenced store refused a stale read
inline constexpr std::string_view extended = "extended";            ///< a client extended its lock / lease
inline constexpr std::string_view extend_failed = "extend-failed";  ///< an extension was refused
inline constexpr std::string_view expired = "expired";              ///< the lease no longer looked valid
inline constexpr std::string_view lease_check =
    "lease-check";                                  ///< the lease looked valid right before a write
inline constexpr std::string_view write = "write";  ///< a client sends a write to the resource
inline constexpr std::string_view write_accepted = "write-accepted";  ///< the resource accepted it
inline constexpr std::string_view write_rejected = "write-rejected";  ///< the resource rejected it (fencing)
inline constexpr std::string_view write_timeout = "write-timeout";    ///< no answer from the resource
inline constexpr std::string_view read_refused = "read-refused";    ///< the resource's host refused the read
inline constexpr std::string_view write_refused = "write-refused";  ///< the resource's host refused the write
inline constexpr std::string_view released = "released";            ///< a client released the lock
inline constexpr std::string_view aborted =
    "aborted";  ///< renewal failed: the holder stops (on_renew_failure)
// Logged by a client's renewal thread (client1/renew; scenarios/workload.cpp):
inline constexpr std::string_view renewed = "renewed";            ///< a background renewal went through
inline constexpr std::string_view renew_failed = "renew-failed";  ///< a renewal failed; it will be retried
inline constexpr std::string_view renewal_lost = "renewal-lost";  ///< renewal gave up: the estimate ran out
// Logged by the protocols (protocols/redis, protocols/raft):
inline constexpr std::string_view extend_sent = "extend-sent";  ///< a Redis/Redlock client sent its extension
inline constexpr std::string_view release_sent = "release-sent";  ///< a Redis/Redlock client sent its release
inline constexpr std::string_view failover = "failover";          ///< the sentinel promoted the replica
inline constexpr std::string_view promoted = "promoted";          ///< a Redis replica became master
inline constexpr std::string_view demoted = "demoted";            ///< a Redis master became a replica
inline constexpr std::string_view raft_election = "raft-election";  ///< a Raft member started an election
inline constexpr std::string_view raft_leader = "raft-leader";      ///< a Raft member became leader
inline constexpr std::string_view raft_holder = "raft-holder";      ///< the lease service granted the lock
inline constexpr std::array<std::string_view, 30> all = {
    read_rejected,  acquire,        acquire_sent,  acquired,     acquire_failed, gave_up,
    read_timeout,   extended,       extend_failed, expired,      lease_check,    write,
    write_accepted, write_rejected, write_timeout, released,     aborted,        renewed,
    renew_failed,   renewal_lost,   extend_sent,   release_sent, failover,       promoted,
    demoted,        raft_election,  raft_leader,   raft_holder,  read_refused,   write_refused};
}  // namespace note

/// Protocol names a file may use even before the protocol is registered (so catalog files validate while the
/// protocols are being written); the registry's names are accepted as well.
inline constexpr std::array<std::string_view, 7> kKnownProtocolNames = {
    "redis", "redlock", "redis+incr", "lease", "lease+fence", "db-lease", "db-lease+fence"};

/// Largest duration or time anywhere in a file: nothing a lock scenario needs is longer than a year.
inline constexpr Duration kMaxDuration = std::chrono::hours(24 * 365);
inline constexpr std::uint32_t kMaxClients = 100'000;
inline constexpr std::uint32_t kMaxAcquisitions = 10'000'000;

/// Load and validate a scenario file. Throws InputError (file, line, field, message) on any problem.
Scenario load_scenario_file(const std::string& path);

/// Load and validate scenario text; `filename` is used in messages and stored in Scenario::file.
Scenario load_scenario_text(std::string_view toml, const std::string& filename);

/// Parse a duration string exactly into integer nanoseconds: "15s", "250ms", "10us", "5ns", "1m", "1.5s",
/// "2h", "1m30s", "0". Negative values ("-2s") only when `allow_negative`. Nothing on bad syntax, a fraction
/// of a nanosecond, or a magnitude beyond kMaxDuration; `why` (if given) then says what is wrong.
std::optional<Duration> parse_duration(std::string_view text, bool allow_negative = false,
                                       std::string* why = nullptr);

/// Levenshtein edit distance (for "did you mean" suggestions).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word` if it is close enough to be a plausible typo, else empty.
std::string nearest_name(std::string_view word, const std::vector<std::string>& candidates);

/// Every protocol name a scenario may use: kKnownProtocolNames plus the registry's (sorted, unique).
std::vector<std::string> valid_protocol_names();

}  // namespace locksim
