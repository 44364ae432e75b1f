#pragma once
/// The workload a client process runs, and the ground-truth recording around it. This is oracle-side code: it
/// may see the world (true time) and the history; the protocol's LockClient it drives may not.
///
/// A client runs its program (ClientSpec::steps, or the program its flags describe), step by step, in its
/// main fiber; with renewal on, a thread of the client process ("client1/renew") renews the lock it holds in
/// the background (scenarios/workload_renewal.cpp), with a LockClient of its own. Both record into the
/// history through this code, never through the protocol.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/lock.hpp"
#include "locksim/scenarios/scenario.hpp"

namespace locksim {

/// One more protected resource a client's steps may name (Scenario::more_resources), as the runner spawned
/// it.
struct ResourceTarget {
  std::string name;
  ProcId resource{};
  ResourceKind kind = ResourceKind::store;
  ResourceMode mode = ResourceMode::unfenced;
  bool idempotency_keys = false;
  std::string key;
  std::uint32_t cas_max_retries = 5;
  Duration job_period{5s};
  std::string job_name = "report";
};

struct WorkloadEnv {
  World* world = nullptr;
  History* history = nullptr;
  Protocol* protocol = nullptr;
  /// The config this client's LockClients are built from: the scenario's own for the protocol, or a copy of
  /// it with the client's settings applied (ClientSpec::protocol), kept alive by `own_config`.
  const ProtocolConfig* config = nullptr;
  std::shared_ptr<const ProtocolConfig> own_config;
  ProcId resource{};
  ResourceKind resource_kind = ResourceKind::store;
  /// The resource's mode. The object store's clients write the manifest with If-Match when it is fenced.
  ResourceMode resource_mode = ResourceMode::unfenced;
  bool idempotency_keys = false;  ///< external-api: the clients send a key per logical job
  std::string lock_key;
  std::string resource_key;
  Time give_up_at{0};
  std::uint32_t cas_max_retries = 5;  ///< cas-row: Scenario::cas_max_retries
  Duration job_period{5s};            ///< job-queue: Scenario::job_period
  std::string job_name = "report";    ///< job-queue: Scenario::job_name
  std::string resource_name;          ///< the first resource's process name
  /// The resources after the first, which a step names ({ step = "write", resource = "mailer" }).
  std::vector<ResourceTarget> more_resources;

  /// This environment acting on resource `t` instead of the first.
  WorkloadEnv on(const ResourceTarget& t) const;
};

/// The program the flags of `spec` describe, the loop every client ran before programs existed:
/// repeat `acquisitions` × { acquire; repeat `writes_per_hold` × { [read] [work] [extend] [check] write };
/// [release]; [sleep think] }, each bracketed step present only when its flag asks for it (no work step for
/// work_max = 0: a zero sleep would still yield to other processes). It runs exactly as that loop did: the
/// same notes, draws, messages and records.
std::vector<ClientStep> default_program(const ClientSpec& spec);

/// spec.steps, or default_program(spec) when it has none.
std::vector<ClientStep> program_of(const ClientSpec& spec);

/// The most times one run of `spec`'s client can log note `label`, one of the workload's notes or a step's
/// own (nothing: no bound, e.g. inside a `loop`, an acquire's retries, the renewal thread's notes, or a note
/// only a protocol logs). 0 when it never can. For the loader's check that a note trigger can fire.
std::optional<std::uint64_t> most_notes(const ClientSpec& spec, std::string_view label);

/// The renewal a client runs: the protocol's RenewalDefaults with the client's overrides applied.
RenewalDefaults renewal_plan(const RenewalSpec& spec, const RenewalDefaults& defaults);

/// The body of a client process running `spec` against the protocol in `env`.
Body client_body(const WorkloadEnv& env, const ClientSpec& spec);

namespace workload {

/// What a client's main fiber and its renewal thread share (fibers of one process: they never run at once,
/// so nothing needs a lock). Owned by both (a crash unwinds the main fiber before the thread dies).
struct Holding {
  std::optional<Grant> grant;  ///< the lock held now, as the client sees it (nothing: none)
  std::uint64_t gid = kNoId;   ///< its GrantRecord
  /// Bumped at every acquire and release: a renewal that began under an older hold is ignored.
  std::uint64_t generation = 0;
  Time renewed_at{};         ///< client clock: when the grant was obtained or last renewed
  Time retry_at = kTimeMax;  ///< client clock: the next attempt after a failed renewal (kTimeMax: none due)
  bool renewal_failed = false;  ///< renewal gave up on this hold (its estimate ran out)
};

/// The renewal thread's body: renews `h`'s grant per `plan` until the process ends.
Body renewal_body(const WorkloadEnv& env, std::shared_ptr<Holding> h, RenewalDefaults plan);

/// Checkpoint table (scenarios/workload_checkpoint.cpp). A `read` step reads the shard's row (fenced: claims
/// it with the token; `refused` when a newer holder has): the hold goes on from its last_processed_offset + 1
/// (nothing: no answer, or refused). A `write` step checkpoints the next offset:
/// the notes' UPDATE, recorded as a WriteRecord whose value is the offset; the hold's next offset follows an
/// applied one; a refused one means a newer holder moved the row (the hold is lost: the leader steps down).
std::optional<std::int64_t> read_checkpoint(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                                            const std::optional<std::uint64_t>& token, bool& refused);
enum class Checkpointed : std::uint8_t { applied, refused, no_answer };
Checkpointed write_checkpoint(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, std::int64_t offset,
                              const std::optional<std::uint64_t>& token, Time checked, bool lease_checked);

/// Object store (scenarios/workload_object_store.cpp): the manifest as this hold last saw it.
struct ManifestView {
  std::uint64_t generation = 0;  ///< 0: no manifest yet
  std::vector<std::string> batches;
};
/// A `read` step GETs the manifest (the resource key); nothing: no answer. `stale`: it carries a token
/// above `token`, so a newer holder has committed since (the hold is lost: the leader steps down).
std::optional<ManifestView> read_manifest(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                                          const std::optional<std::uint64_t>& token, bool& stale);
/// A `write` step writes `batch` as an object of its own, then commits it: PUT of the manifest `seen` plus
/// the batch, with the token, and `If-Match: seen.generation` when `conditional`. Recorded as a WriteRecord
/// whose value is the new manifest's content. Applied: `seen` becomes the new manifest. Refused (412): a
/// newer manifest exists. No answer: what happened is unknown (`seen` must be read again).
enum class Committed : std::uint8_t { applied, refused, no_answer };
Committed commit_batch(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, ManifestView& seen,
                       const std::string& batch, const std::optional<std::uint64_t>& token, bool conditional,
                       Time checked, bool lease_checked);
/// External API (scenarios/workload_external_api.cpp). A `read` step asks the API for the highest job it has
/// performed on the account: the hold goes on from that job + 1 (nothing: no answer). A `write` step sends
/// the request for the hold's next job, with its idempotency key when the scenario's clients send keys,
/// recorded as a WriteRecord whose value is the job; an answer (performed or a replayed first result) moves
/// the hold to the next job; no answer leaves it there, so the next `write` retries the same job, as a
/// client that timed out does (it cannot tell whether the effect happened).
std::optional<std::int64_t> read_last_job(const WorkloadEnv& env, Context& ctx, std::uint64_t grant);
bool request_job(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, std::int64_t job, Time checked,
                 bool lease_checked);
/// Whether `steps` acquire the lock anywhere. A program that never does runs without a lock (a cas-row's
/// clients may): its holder steps run as if it held one, with grant kNoId and no token.
bool acquires(const std::vector<ClientStep>& steps);

/// What a hold of a cas-row's or a job queue's client knows of the resource (reset at each acquire).
struct CasSeen {
  std::uint64_t read_id = kNoId;
  std::int64_t value = 0;
  std::uint64_t version = 0;
};
struct KindHold {
  std::optional<CasSeen> cas_read;          ///< cas-row: the read the next write computes from
  std::optional<std::int64_t> next_period;  ///< job queue: the period this hold enqueues next
};
/// How a cas-row's or a job queue's read or write step ended for the hold: as usual, with a read that did not
/// answer (the write it feeds is skipped), or with the hold lost (refused: a newer holder's token; or no
/// answer where the hold cannot go on without one).
enum class StepEnd : std::uint8_t { done, read_missed, fenced_out, no_answer };
/// A `read` or `write` step of a client of a cas-row or a job queue (scenarios/workload_kinds.cpp).
StepEnd read_step(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                  const std::optional<std::uint64_t>& token, KindHold& hold);
StepEnd write_step(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                   const std::optional<std::uint64_t>& token, Time checked, bool lease_checked,
                   KindHold& hold);
/// Object store: a `read` step GETs the manifest into `manifest` (fenced_out: it carries a newer holder's
/// token). A `write` step commits `batch` in the manifest, reading it first when this hold does not know it
/// (none read yet, or the last commit's outcome is unknown), with If-Match when the store's mode is fenced; a
/// 412 means someone committed since (fenced_out).
StepEnd manifest_read_step(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                           const std::optional<std::uint64_t>& token, std::optional<ManifestView>& manifest);
StepEnd manifest_write_step(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                            const std::optional<std::uint64_t>& token, const std::string& batch, Time checked,
                            bool lease_checked, std::optional<ManifestView>& manifest);

/// cas-row (scenarios/workload_casrow.cpp). A `read` step reads the row's value and version (nothing: no
/// answer); `reread` marks a read a write step makes itself, after a conflict or for want of a read step (its
/// notes are "reread-*", so the notes of a read step stay one per step). A `write` step runs the
/// compare-and-set UPDATE computed from that read (value + 1 WHERE version = the version read); on a conflict
/// it re-reads and tries again, up to env.cas_max_retries times, then gives the update up ("write-gave-up").
/// A timed-out statement is not retried: it may have been applied.
std::optional<CasSeen> read_cas_row(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, bool reread);
void cas_update(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, CasSeen seen,
                const std::optional<std::uint64_t>& token, Time checked, bool lease_checked);

/// Job queue (scenarios/workload_jobqueue.cpp). A `read` step lists the queue (fenced: claims it with the
/// token; refused when a newer holder has): the hold goes on after the latest period enqueued; no answer or
/// refused, the hold is lost (a leader that does not know the queue must not enqueue). A `write` step
/// enqueues the job of the next period due, at most one per step: the period after the last one this hold
/// enqueued (or listed), else the period the client's wall clock is in; nothing while that period has not
/// begun. A refused enqueue means a newer holder's token: the hold is lost.
std::int64_t current_period(const WorkloadEnv& env, Context& ctx);
std::string job_id(const WorkloadEnv& env, std::int64_t period);
enum class Listed : std::uint8_t { answered, refused, no_answer };
Listed list_job_queue(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                      const std::optional<std::uint64_t>& token, std::optional<std::int64_t>& latest);
enum class Enqueued : std::uint8_t { accepted, refused, no_answer };
Enqueued enqueue_job(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, std::int64_t period,
                     const std::optional<std::uint64_t>& token, Time checked, bool lease_checked);

}  // namespace workload
}  // namespace locksim
