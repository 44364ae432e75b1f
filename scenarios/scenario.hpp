#pragma once
/// A scenario: everything needed to build a world, run a workload against one protocol, and judge it.
/// Scenarios come from the built-in catalog or from TOML files (scenarios/loader.hpp); both produce this
/// struct.
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/resource.hpp"
#include "locksim/sim/faults.hpp"
#include "locksim/sim/network.hpp"
#include "locksim/sim/time.hpp"

namespace locksim {

enum class Verdict : std::uint8_t { safe, unsafe };
std::string_view to_string(Verdict v);

/// One step of a client program (docs/scenario-format.md, "Client programs"; scenarios/workload.cpp runs
/// them and records the ground truth around each).
struct ClientStep {
  enum class Kind : std::uint8_t {
    acquire,    ///< acquire the lock, retrying (retry_delay) until granted; past give_up_at the program ends
    read,       ///< read the resource key; the next write of this hold writes what it read + 1
    write,      ///< write the resource key: a fresh value, or the last read + 1 after a read
    increment,  ///< read, then at once write the value + 1 (a read–modify–write)
    work,       ///< work for `duration` while holding (skipped once the hold is lost)
    check,      ///< check the lease still looks valid; if not, the hold is lost
    extend,     ///< extend the lock; if refused, the hold is lost
    release,    ///< release the lock
    sleep,      ///< wait `duration`, holding or not (think time)
    repeat,     ///< run `steps` `count` times
    loop,       ///< run `steps` until true time `until` (kTimeMax: until the run ends)
  };
  Kind kind = Kind::acquire;
  /// work, sleep: how long. A constant draws nothing from the client's random stream; a uniform range draws
  /// one value per step. (Any distribution the network accepts fits here.)
  DelayDist duration = DelayDist::constant_of(Duration{0});
  std::uint64_t count = 0;  ///< repeat: iterations
  Time until = kTimeMax;    ///< loop: no iteration begins at or after this true time
  /// A note the client logs as the step begins, before it acts (empty: none), so a fault trigger can attach
  /// to this step: after = { process = "client1", note = "<note>" }.
  std::string note;
  std::vector<ClientStep> steps;  ///< repeat, loop: the block
  std::uint32_t line = 0;         ///< source line, for messages
  /// read, write, increment: the resource it acts on, by name ({ write = "mailer" }); empty: the first.
  std::string resource;
};

std::string_view to_string(ClientStep::Kind k);

/// Background renewal: a thread of the client process ("client1/renew") that renews the lock it holds, as
/// etcd's session, Redisson's watchdog and node-redlock's using() do. Every unset field takes the protocol's
/// RenewalDefaults (protocols/lock.hpp).
struct RenewalSpec {
  bool on = false;
  std::optional<Duration> every;          ///< renew this long after the grant and each renewal
  std::optional<Duration> before_expiry;  ///< renew once this little of the validity estimate remains
  std::optional<Duration> retry;          ///< after a failed renewal, try again this long later
  std::optional<bool> stop_on_failure;    ///< on_renew_failure = "stop" (true) or "continue" (false)
};

/// One client process and its workload: its program (`steps`), or the loop the flags below describe:
/// acquire → for each write: [read] → [work] → [extend] → [check] → write → [release] → [think].
struct ClientSpec {
  std::string name;
  Time start{0};  ///< when the client process starts (true time)
  /// `start` given as a distribution: drawn once, when the process starts, from the client's own stream
  /// ("start"); `start` is then its latest value (what the loader checks against max_time).
  std::optional<Dist> start_dist;
  std::uint32_t acquisitions = 1;       ///< successful acquisitions to perform before exiting
  std::uint32_t writes_per_hold = 1;    ///< writes inside each critical section
  Duration work_min{0}, work_max{0};    ///< work before each write (uniform), e.g. read–sleep–write
  Duration think_min{0}, think_max{0};  ///< pause between releasing and the next acquire
  /// `work` / `think` given as a distribution (a table): drawn at each step instead of the uniform range.
  std::optional<DelayDist> work_dist, think_dist;
  /// The workload's wait after the protocol gave up acquiring, before it calls acquire again (not the
  /// protocol's own retry_delay between the attempts inside one acquire: ClientSettings, ProtocolConfig).
  Duration retry_delay{500ms};
  /// `retry_delay` given as a distribution: drawn at each wait from the client's own stream
  /// ("retry-delay"); `retry_delay` is then its longest value.
  std::optional<Dist> retry_delay_dist;
  Time give_up_at{0};                ///< stop trying to acquire after this true time (0 = scenario max_time)
  bool read_modify_write = false;    ///< counter workload: read the value, work, write value+1
  bool check_before_write = true;    ///< check the lease looks valid right before each write (careful code)
  bool extend_before_write = false;  ///< extend/keep the lease alive before each write (long-running job)
  bool release = true;               ///< release at the end of the critical section
  /// The client's program. Empty: the program the flags above describe (default_program() in
  /// scenarios/workload.hpp), which runs exactly as the fixed loop always did.
  std::vector<ClientStep> steps;
  RenewalSpec renewal;  ///< background renewal (off by default)
  /// This client's own client-side protocol settings, over the scenario's config for whichever protocol runs
  /// (empty: the client uses that config itself). Servers never see them.
  ClientSettings protocol;
};

/// A node clock setting, by process name.
struct ClockSpec {
  std::string node;
  ClockOptions clock;
};

/// Per-link network override by process names ("*" = any).
struct LinkSpec {
  std::string from, to;
  LinkOptions options;
};

/// A fault with process names instead of ids (resolved when the world is built). `target`, `more_targets`
/// and the sides may also name a role ("leader", "holder", ...: scenarios/runner.hpp), resolved each time the
/// fault fires.
struct FaultSpec {
  Fault fault;  ///< target/peer/side/trigger ids are filled from the names below
  std::string target, peer, trigger_proc;
  std::vector<std::string> side_a, side_b;
  std::uint32_t line = 0;  ///< source line, for error messages
  /// A list of targets (`target = ["client1", "holder"]`): `target` is its first, these the rest.
  std::vector<std::string> more_targets;
  /// A partition whose sides are computed from the leader when it fires ("leader-alone", "minority",
  /// "majority"; empty: the sides are given).
  std::string split;
};

/// A bound on a count, as written in [expect]: "0", "> 0", ">= 3", "<= 5%", "< 10%". A bound with `%` is on
/// the percentage (of acknowledged read–modify–writes, for lost updates), without on the count.
struct CountBound {
  enum class Op : std::uint8_t { eq, lt, le, gt, ge };
  Op op = Op::eq;
  double value = 0;
  bool percent = false;
  std::string text;  ///< as written, for messages
  bool holds(std::uint64_t count, double percentage) const;
};

/// What a scenario expects of one protocol: a verdict, and optionally which anomalies, how many lost updates,
/// how the tokens go and how much slack is left; over one seed (the scenario's or --seed) or over a range of
/// seeds, where `over` says whether every seed must meet it ("all") or at least one ("any").
struct Expectation {
  enum class Tokens : std::uint8_t { increasing, regressing };
  enum class Over : std::uint8_t { all, any };
  std::optional<Verdict> verdict;
  std::optional<std::vector<std::string>> anomalies;  ///< exactly these anomaly kinds occur ([] = none)
  std::optional<CountBound> lost_updates;
  std::optional<Tokens> tokens;
  std::optional<Duration> min_slack;  ///< the checker's slack is at least this (no slack measured: met)
  std::optional<std::pair<std::uint64_t, std::uint64_t>> seeds;  ///< first..last, inclusive
  std::optional<Over> over;  ///< default: any for an unsafe verdict, all otherwise

  Expectation() = default;
  Expectation(Verdict v) : verdict(v) {}  // NOLINT: a bare verdict is the common case
  Over quantifier() const { return over.value_or(verdict == Verdict::unsafe ? Over::any : Over::all); }
  /// True when only a verdict is given (today's one-word form).
  bool verdict_only() const {
    return !anomalies && !lost_updates && !tokens && !min_slack && !seeds && !over;
  }
  /// "unsafe", or "unsafe; anomalies = [lost-update]; lost_updates > 0; over seeds 1..20: any".
  std::string describe() const;
};

/// One protected resource: a `[resource]` table, or one of the `[[resource]]` tables of a scenario with
/// several. Scenario keeps the first one's fields as its own (resource_name, resource_kind...); the others
/// are Scenario::more_resources.
struct ResourceSpec {
  std::string name = "store";
  std::string key = "data";
  std::optional<ResourceMode> mode;  ///< nothing: "auto", fenced iff the protocol is
  std::string variant;
  ResourceKind kind = ResourceKind::store;
  bool idempotency_keys = false;
  Duration idempotency_retention{std::chrono::hours(24)};
  std::uint32_t cas_max_retries = 5;
  Duration job_period{std::chrono::seconds(5)};
  std::string job_name = "report";
};

struct Scenario {
  std::string name;     ///< catalog name, e.g. "kleppmann-gc-pause"
  std::string title;    ///< one line
  std::string source;   ///< paper / post / report it reproduces
  std::string teaches;  ///< one paragraph: what it teaches
  std::string file;     ///< where it came from (path or "builtin")

  /// The largest seed: scenario and replay files hold it as a TOML integer (64-bit signed), so every seed,
  /// on the command line too, is in [0, 2^63 - 1].
  static constexpr std::uint64_t kMaxSeed = 0x7fff'ffff'ffff'ffffULL;
  std::uint64_t seed = 1;
  std::string lock_key = "lock";
  std::string resource_key = "data";
  std::string resource_name = "store";
  /// "auto": fenced iff the protocol is fenced; otherwise forced.
  std::optional<ResourceMode> resource_mode;
  std::string resource_variant;
  /// What the resource is ([resource] kind): today's store by default.
  ResourceKind resource_kind = ResourceKind::store;
  /// external-api: whether the clients send an idempotency key (one per logical job) with each request, and
  /// how long the API remembers a key ([resource] idempotency_keys, idempotency_retention).
  bool idempotency_keys = false;
  Duration idempotency_retention{std::chrono::hours(24)};
  /// cas-row ([resource] max_retries): how many times a client re-reads and tries again after a conflict
  /// before it gives the update up.
  std::uint32_t cas_max_retries = 5;
  /// job-queue ([resource] period, job): a leader enqueues one job per period of its wall clock, named
  /// "<job>-<hh:mm:ss of the period's start>".
  Duration job_period{5s};
  std::string job_name = "report";
  /// The protected resources after the first, in file order ([[resource]]): each a process of its own,
  /// which a client's read and write steps name ({ write = "mailer" }); judged each by its kind's property.
  std::vector<ResourceSpec> more_resources;
  /// The first resource as a ResourceSpec, and every resource in file order.
  ResourceSpec first_resource() const;
  std::vector<ResourceSpec> all_resources() const;
  void set_first_resource(const ResourceSpec& r);

  ProtocolConfig config;                               ///< parameters for every protocol
  std::map<std::string, ProtocolConfig> per_protocol;  ///< complete configs for protocols that override some
  NetworkOptions network;                              ///< defaults (links filled from `links` at build time)
  std::vector<LinkSpec> links;
  std::vector<ClockSpec> clocks;
  std::vector<ClientSpec> clients;
  std::vector<FaultSpec> faults;
  Time max_time{60s};
  std::uint64_t max_events = 5'000'000;
  std::size_t max_mailbox =
      1'000'000;  ///< messages waiting in one mailbox before the run stops (inconclusive)

  std::vector<std::string> protocols;         ///< protocols the scenario runs by default (order kept)
  std::map<std::string, Expectation> expect;  ///< what each protocol with an expectation should get

  const ProtocolConfig& config_for(const std::string& protocol) const {
    auto it = per_protocol.find(protocol);
    return it == per_protocol.end() ? config : it->second;
  }
};

/// An input error: names the file, line and field. Exit code 2.
struct InputError : std::runtime_error {
  InputError(std::string file, std::uint32_t line, std::string field, std::string what);
  std::string file, field, message;
  std::uint32_t line;
};

}  // namespace locksim
