#include "locksim/scenarios/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <utility>

#include "locksim/protocols/resource.hpp"

namespace locksim {

std::string_view to_string(ClientStep::Kind k) {
  switch (k) {
    case ClientStep::Kind::acquire:
      return "acquire";
    case ClientStep::Kind::read:
      return "read";
    case ClientStep::Kind::write:
      return "write";
    case ClientStep::Kind::increment:
      return "increment";
    case ClientStep::Kind::work:
      return "work";
    case ClientStep::Kind::check:
      return "check";
    case ClientStep::Kind::extend:
      return "extend";
    case ClientStep::Kind::release:
      return "release";
    case ClientStep::Kind::sleep:
      return "sleep";
    case ClientStep::Kind::repeat:
      return "repeat";
    case ClientStep::Kind::loop:
      return "loop";
  }
  return "?";
}

namespace {

using workload::Holding;

std::string token_text(const std::optional<std::uint64_t>& t) {
  return t ? fmt::format("{}", *t) : "none";
}

ClientStep simple(ClientStep::Kind k) {
  ClientStep s;
  s.kind = k;
  return s;
}

ClientStep timed(ClientStep::Kind k, Duration lo, Duration hi) {
  ClientStep s = simple(k);
  s.duration = DelayDist::uniform_of(lo, hi);  // as the fixed loop drew it: rng.uniform(lo, hi)
  return s;
}

/// A flag's work or think step: its distribution when the file gave one, else uniform in [lo, hi] (none when
/// hi is 0, as the fixed loop had none).
void add_wait(std::vector<ClientStep>& to, ClientStep::Kind k, const std::optional<DelayDist>& dist,
              Duration lo, Duration hi) {
  if (dist) {
    to.push_back(simple(k));
    to.back().duration = *dist;
  } else if (hi > 0ns) {
    to.push_back(timed(k, lo, hi));
  }
}

ClientStep block(ClientStep::Kind k, std::uint64_t count, std::vector<ClientStep> steps) {
  ClientStep s = simple(k);
  s.count = count;
  s.steps = std::move(steps);
  return s;
}

/// Whether running `steps` while not holding could do anything: a step that is not skipped then (acquire,
/// release ends a lost hold, sleep), directly or in a block.
bool acts_unheld(const std::vector<ClientStep>& steps) {
  for (const ClientStep& s : steps) {
    if (s.kind == ClientStep::Kind::acquire || s.kind == ClientStep::Kind::release ||
        s.kind == ClientStep::Kind::sleep)
      return true;
    if (!s.note.empty()) return true;  // its note is logged all the same
    if ((s.kind == ClientStep::Kind::repeat || s.kind == ClientStep::Kind::loop) && acts_unheld(s.steps))
      return true;
  }
  return false;
}

bool holder_step(ClientStep::Kind k) {
  switch (k) {
    case ClientStep::Kind::read:
    case ClientStep::Kind::write:
    case ClientStep::Kind::increment:
    case ClientStep::Kind::work:
    case ClientStep::Kind::check:
    case ClientStep::Kind::extend:
      return true;
    default:
      return false;
  }
}

/// Ends the belief interval of the grant in progress if the fiber unwinds (crash) or returns.
struct BeliefGuard {
  History* h;
  World* w;
  std::optional<std::uint64_t> grant;
  const char* reason = "crashed";
  ~BeliefGuard() {
    if (grant && !w->shutting_down()) h->end_belief(*grant, w->now(), reason);
  }
};

/// One client's run of its program in its main fiber, and the ground truth recorded around each step.
///
/// Skipping. A hold is *lost* when the client stops acting as holder (an extension refused, the lease found
/// expired, a fenced read refused, renewal failed with on_renew_failure = "stop"): from then on the holder
/// steps (read, write, increment, work, check, extend) are skipped, up to the hold's release (itself skipped:
/// a lost lock is not released) or the next acquire. Without a hold, holder steps are skipped too. A read
/// that timed out has no value to compute from: the steps after it are skipped through the next write or
/// increment it would have fed. A block that could do nothing while the hold is lost is skipped at once; a
/// `loop` iteration in which nothing happened (no event: every step skipped, or a check answered from the
/// client's own clock) ends the loop, which would otherwise spin at one instant forever.
class ClientRun {
 public:
  ClientRun(const WorkloadEnv& env, const ClientSpec& spec, Context& ctx)
      : env_(env),
        spec_(spec),
        ctx_(ctx),
        w_(*env.world),
        h_(*env.history),
        client_(env.protocol->make_client(ctx, *env.config)),
        ttl_(env.config->ttl),
        fenced_(env.protocol->fenced()),
        lock_free_(!workload::acquires(program_of(spec))),
        held_(std::make_shared<Holding>()),
        guard_{env.history, env.world, std::nullopt},
        retry_rng_(ctx.rng().stream("retry-delay")) {
    targets_.push_back(env);
    for (const ResourceTarget& t : env.more_resources) targets_.push_back(env.on(t));
    rholds_.resize(targets_.size());
  }

  void run(const std::vector<ClientStep>& program) {
    block(program);
    guard_.grant.reset();  // the program ended (or gave up): a hold not released lasts until its validity
  }

 private:
  enum class Flow : std::uint8_t { go, end };  // end: the program is over (gave up acquiring)

  Flow block(const std::vector<ClientStep>& steps) {
    for (const ClientStep& s : steps)
      if (one(s) == Flow::end) return Flow::end;
    return Flow::go;
  }

  /// A client whose program never acquires (a cas-row's) acts as holder all along: grant kNoId, no token.
  bool holding() const { return lock_free_ || (held_->grant.has_value() && !lost_); }
  std::optional<std::uint64_t> token() const {
    return fenced_ && held_->grant ? held_->grant->token : std::nullopt;
  }
  Grant& grant() { return *held_->grant; }
  Time true_time(Time local) const { return w_.clock(ctx_.self()).true_time_at(local); }
  std::string valid_for() const { return format_seconds(held_->grant->valid_until - ctx_.now(), 3) + "s"; }

  /// The index of the resource step `s` acts on (0: the first, the default).
  std::size_t target_of(const ClientStep& s) const {
    for (std::size_t i = 1; i < targets_.size(); ++i)
      if (targets_[i].resource_name == s.resource) return i;
    return 0;
  }

  Flow one(const ClientStep& s) {
    // node-redlock's routine checks its AbortSignal between statements: a renewal that failed for good stops
    // the holder here, before its next step.
    if (holding() && held_->renewal_failed && renewal_.stop_on_failure) {
      ctx_.note("aborted", "renewal failed: not acting as holder any more");
      lose("renewal failed");
    }
    if (!s.note.empty()) ctx_.note(s.note, std::string(to_string(s.kind)));
    if (holder_step(s.kind) && (!holding() || (read_missed_ && s.kind != ClientStep::Kind::write &&
                                               s.kind != ClientStep::Kind::increment))) {
      return Flow::go;
    }
    switch (s.kind) {
      case ClientStep::Kind::acquire:
        return acquire();
      case ClientStep::Kind::read:
        cur_ = target_of(s);
        read();
        break;
      case ClientStep::Kind::write:
        cur_ = target_of(s);
        write_slot(false);
        break;
      case ClientStep::Kind::increment:
        cur_ = target_of(s);
        write_slot(true);
        break;
      case ClientStep::Kind::work:
      case ClientStep::Kind::sleep:
        ctx_.sleep(s.duration.sample(ctx_.rng()));
        break;
      case ClientStep::Kind::check:
        check();
        break;
      case ClientStep::Kind::extend:
        extend();
        break;
      case ClientStep::Kind::release:
        release();
        break;
      case ClientStep::Kind::repeat:
        if (!holding() && !acts_unheld(s.steps)) break;
        for (std::uint64_t i = 0; i < s.count; ++i)
          if (block(s.steps) == Flow::end) return Flow::end;
        break;
      case ClientStep::Kind::loop:
        if (!holding() && !acts_unheld(s.steps)) break;
        while (s.until == kTimeMax || w_.now() < s.until) {
          const std::uint64_t before = w_.events_processed();
          if (block(s.steps) == Flow::end) return Flow::end;
          if (w_.events_processed() == before) break;  // nothing happened: it would spin at one instant
        }
        break;
    }
    return Flow::go;
  }

  Flow acquire() {
    for (;;) {
      if (w_.now() >= env_.give_up_at) {
        ctx_.note("gave-up");
        return Flow::end;
      }
      const Time requested = w_.now();
      ctx_.note("acquire", fmt::format("key={}", env_.lock_key));
      std::optional<Grant> g = client_->acquire(ctx_, env_.lock_key, ttl_);
      if (!g) {
        ctx_.note("acquire-failed");
        ctx_.sleep(spec_.retry_delay_dist ? spec_.retry_delay_dist->sample(retry_rng_) : spec_.retry_delay);
        continue;
      }
      ++holds_;
      writes_ = 0;
      lost_ = read_missed_ = false;
      for (ResourceHold& r : rholds_) r = {};
      checked_.reset();
      GrantRecord rec;
      rec.client = ctx_.name();
      rec.key = env_.lock_key;
      rec.value = g->value;
      rec.token = g->token;
      rec.requested = requested;
      rec.granted = w_.now();
      rec.believed_valid_until = true_time(g->valid_until);
      const std::uint64_t gid = h_.add_grant(rec);
      guard_.grant = gid;  // a hold this one replaces (not released) lasts until its own validity runs out
      Holding& h = *held_;
      h.grant = std::move(g);
      h.gid = gid;
      ++h.generation;
      h.renewed_at = ctx_.now();
      h.retry_at = kTimeMax;
      h.renewal_failed = false;
      ctx_.note("acquired", fmt::format("token={} valid_for={}", token_text(grant().token), valid_for()));
      if (spec_.renewal.on) start_renewal();
      return Flow::go;
    }
  }

  void start_renewal() {
    if (!renewer_.valid()) {
      renewal_ = renewal_plan(spec_.renewal, env_.protocol->renewal_defaults(*env_.config));
      renewer_ = ctx_.spawn_thread("renew", workload::renewal_body(env_, held_, renewal_));
    } else {
      ctx_.notify(renewer_);  // a new hold: the thread waits for one, or for the last one's schedule
    }
  }

  /// The hold is over as far as the client is concerned: it stops acting as holder now.
  void lose(const char* reason) {
    h_.end_belief(held_->gid, w_.now(), reason);
    lost_ = true;
    guard_.grant.reset();
  }

  void read() {
    const WorkloadEnv& re = targets_[cur_];
    ResourceHold& rh = rholds_[cur_];
    if (re.resource_kind == ResourceKind::object_store)
      return after(workload::manifest_read_step(re, ctx_, held_->gid, token(), rh.manifest));
    if (re.resource_kind == ResourceKind::external_api) {
      const auto last = workload::read_last_job(re, ctx_, held_->gid);
      if (last) rh.next_offset = *last + 1;
      read_missed_ = !last;
      return;
    }
    if (re.resource_kind == ResourceKind::checkpoint_table) {
      bool refused = false;
      const auto offset =
          workload::read_checkpoint(re, ctx_, held_->gid, fenced_ ? grant().token : std::nullopt, refused);
      if (offset) rh.next_offset = *offset + 1;
      if (refused) {
        lose("fenced out");
      } else {
        read_missed_ = !offset;
      }
      return;
    }
    if (re.resource_kind == ResourceKind::cas_row || re.resource_kind == ResourceKind::job_queue)
      return after(workload::read_step(re, ctx_, held_->gid, token(), rh.kind));
    ReadRecord rr;
    rr.client = ctx_.name();
    rr.grant = held_->gid;
    rr.key = re.resource_key;
    rr.token = fenced_ ? grant().token : std::nullopt;
    rr.sent = w_.now();
    const std::uint64_t read_id = h_.add_read(rr);
    const ReadRequest rq{re.resource_key, rr.token, read_id};
    auto rep = ctx_.call(re.resource, Message::of(kReadType, rq), 5s);
    if (!rep || is_refusal(*rep)) {
      ctx_.note(rep ? "read-refused" : "read-timeout");
      read_missed_ = true;
      return;
    }
    const auto* r = rep->as<ReadReply>();
    if (r && r->rejected) {
      ctx_.note("read-rejected", r->reason);
      lose("fenced out");
      return;
    }
    if (r) {
      h_.reads[read_id].answered = true;
      h_.reads[read_id].observed = r->value.value_or("");
    }
    // Nothing (or no reply body) reads as 0; a value that is not an integer (a fresh write's "client1#1.0")
    // has no number to add one to: the write computed from it writes 1.
    std::optional<std::int64_t> v = 0;
    if (r && r->value) {
      std::int64_t x = 0;
      const std::string& text = *r->value;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
      v = ec == std::errc{} && end == text.data() + text.size() ? std::optional<std::int64_t>(x)
                                                                : std::nullopt;
    }
    rh.read = ReadResult{read_id, v};
  }

  /// A write or an increment: one of the hold's write slots (a slot whose read timed out is skipped, but
  /// counts, as the fixed loop's iterations did).
  void write_slot(bool increment) {
    const std::uint32_t slot = writes_++;
    if (read_missed_) {
      read_missed_ = false;  // this is the write the missing read would have fed
      return;
    }
    if (increment) {
      read();
      if (read_missed_) {
        read_missed_ = false;
        return;
      }
      if (!holding()) return;
    }
    write(slot);
  }

  void write(std::uint32_t slot) {
    const WorkloadEnv& re = targets_[cur_];
    ResourceHold& rh = rholds_[cur_];
    // The last check of this hold, else now: taken before the note (a pause the note triggers falls after).
    const Time checked = checked_.value_or(w_.now());
    if (re.resource_kind == ResourceKind::object_store)  // batch `slot` of this hold, then the manifest
      return after(workload::manifest_write_step(
          re, ctx_, held_->gid, token(),
          fmt::format("{}/batch-{}-{}.{}", re.resource_key, ctx_.name(), holds_, slot), checked,
          checked_.has_value(), rh.manifest));
    if (re.resource_kind == ResourceKind::external_api) {
      if (workload::request_job(re, ctx_, held_->gid, rh.next_offset, checked, checked_.has_value()))
        ++rh.next_offset;
      return;
    }
    if (re.resource_kind == ResourceKind::checkpoint_table) {
      const auto done =
          workload::write_checkpoint(re, ctx_, held_->gid, rh.next_offset,
                                     fenced_ ? grant().token : std::nullopt, checked, checked_.has_value());
      if (done == workload::Checkpointed::applied) ++rh.next_offset;
      if (done == workload::Checkpointed::refused) lose("fenced out");
      return;
    }
    if (re.resource_kind == ResourceKind::cas_row || re.resource_kind == ResourceKind::job_queue)
      return after(
          workload::write_step(re, ctx_, held_->gid, token(), checked, checked_.has_value(), rh.kind));
    const std::optional<ReadResult> rd = std::exchange(rh.read, std::nullopt);
    WriteRecord wr;
    wr.client = ctx_.name();
    wr.grant = held_->gid;
    wr.key = re.resource_key;
    wr.value = rd ? fmt::format("{}", rd->value.value_or(0) + 1)
                  : fmt::format("{}#{}.{}", ctx_.name(), holds_, slot);
    wr.token = fenced_ ? grant().token : std::nullopt;
    wr.sent = w_.now();
    wr.checked = checked;
    wr.lease_checked = checked_.has_value();
    wr.read_modify_write = rd.has_value();
    wr.read = rd ? rd->id : kNoId;
    if (rd) wr.read_value = rd->value;  // nothing when the read was not an integer
    const std::uint64_t wid = h_.add_write(wr);
    ctx_.note("write", fmt::format("value={} token={}", wr.value, token_text(wr.token)));
    // A pause the note triggered has happened by now: the write leaves the client after it.
    h_.writes[wid].sent = w_.now();
    auto rep = ctx_.call(re.resource,
                         Message::of(kWriteType, WriteRequest{re.resource_key, wr.value, wr.token, wid},
                                     fmt::format("token={}", token_text(wr.token))),
                         5s);
    if (rep && is_refusal(*rep)) {
      ctx_.note("write-refused", "connection refused: the resource is not running");
    } else if (rep) {
      const auto* r = rep->as<WriteReply>();
      h_.writes[wid].acknowledged = r && r->accepted;
      ctx_.note(r && r->accepted ? "write-accepted" : "write-rejected", r ? r->reason : "");
    } else {
      ctx_.note("write-timeout");
    }
  }

  /// What a cas-row's or a job queue's read or write step did to the hold.
  void after(workload::StepEnd end) {
    if (end == workload::StepEnd::read_missed) read_missed_ = true;
    if (end == workload::StepEnd::fenced_out || end == workload::StepEnd::no_answer)
      lose(end == workload::StepEnd::fenced_out ? "fenced out" : "no answer from the resource");
  }

  void check() {
    checked_ = w_.now();
    if (!client_->believes_valid(ctx_, grant())) {
      ctx_.note("expired", "lease no longer valid before write; not writing");
      lose("expired");
      return;
    }
    ctx_.note("lease-check", fmt::format("ok, valid_for={}", valid_for()));
  }

  void extend() {
    if (!client_->extend(ctx_, grant(), ttl_)) {
      ctx_.note("extend-failed");
      lose("extend failed");
      return;
    }
    ctx_.note("extended", fmt::format("valid_for={}", valid_for()));
    h_.grants[held_->gid].believed_valid_until = true_time(grant().valid_until);
    held_->renewed_at = ctx_.now();  // the renewal thread's schedule starts again from here
    held_->retry_at = kTimeMax;
    if (held_->renewal_failed && renewer_.valid()) {
      held_->renewal_failed = false;
      ctx_.notify(renewer_);
    }
  }

  void release() {
    if (!held_->grant) return;
    Holding& h = *held_;
    const Grant g = std::move(*h.grant);
    h.grant.reset();
    ++h.generation;  // a renewal in flight is ignored from here on
    if (lost_) {     // a lost lock is not released
      lost_ = false;
      return;
    }
    // The client stops acting as holder when it decides to release, before the unlock goes out: the service
    // may grant the lock to the next client as soon as the unlock arrives.
    h_.end_belief(h.gid, w_.now(), "released");
    guard_.grant.reset();
    client_->release(ctx_, g);
    ctx_.note("released");
  }

  struct ReadResult {
    std::uint64_t id = kNoId;
    std::optional<std::int64_t> value;  ///< nothing: not an integer
  };

  const WorkloadEnv& env_;
  const ClientSpec& spec_;
  Context& ctx_;
  World& w_;
  History& h_;
  std::unique_ptr<LockClient> client_;
  const Duration ttl_;
  const bool fenced_;
  const bool lock_free_;  ///< the program never acquires (a cas-row's client without a lock)
  std::shared_ptr<Holding> held_;
  BeliefGuard guard_;
  std::uint32_t holds_ = 0;      ///< successful acquisitions so far
  std::uint32_t writes_ = 0;     ///< write slots reached in the current hold
  bool lost_ = false;            ///< the current hold is lost (skip to its release)
  bool read_missed_ = false;     ///< the last read timed out: skip through the next write
  std::optional<Time> checked_;  ///< the last check of the current hold
  /// What the current hold knows of each resource (index: the first, then more_resources in order).
  struct ResourceHold {
    std::optional<ReadResult> read;  ///< the read the next write of this hold computes from
    std::int64_t next_offset = 1;    ///< checkpoint table: the offset this hold checkpoints next; API: job
    workload::KindHold kind;         ///< cas-row, job queue: what this hold knows of the resource
    std::optional<workload::ManifestView> manifest;  ///< object store: the manifest as this hold saw it
  };
  std::vector<WorkloadEnv> targets_;  ///< env_ acting on each resource, in the same order
  std::vector<ResourceHold> rholds_;
  std::size_t cur_ = 0;      ///< the resource of the step being run
  ProcId renewer_{};         ///< the renewal thread, once started
  RenewalDefaults renewal_;  ///< its plan
  Rng retry_rng_;            ///< draws of a retry_delay distribution (a stream of its own)
};

}  // namespace

std::vector<ClientStep> default_program(const ClientSpec& spec) {
  std::vector<ClientStep> per_write;
  if (spec.read_modify_write) per_write.push_back(simple(ClientStep::Kind::read));
  add_wait(per_write, ClientStep::Kind::work, spec.work_dist, spec.work_min, spec.work_max);
  if (spec.extend_before_write) per_write.push_back(simple(ClientStep::Kind::extend));
  if (spec.check_before_write) per_write.push_back(simple(ClientStep::Kind::check));
  per_write.push_back(simple(ClientStep::Kind::write));
  std::vector<ClientStep> hold;
  hold.push_back(simple(ClientStep::Kind::acquire));
  hold.push_back(block(ClientStep::Kind::repeat, spec.writes_per_hold, std::move(per_write)));
  if (spec.release) hold.push_back(simple(ClientStep::Kind::release));
  add_wait(hold, ClientStep::Kind::sleep, spec.think_dist, spec.think_min, spec.think_max);
  return {block(ClientStep::Kind::repeat, spec.acquisitions, std::move(hold))};
}

std::vector<ClientStep> program_of(const ClientSpec& spec) {
  return spec.steps.empty() ? default_program(spec) : spec.steps;
}

RenewalDefaults renewal_plan(const RenewalSpec& spec, const RenewalDefaults& defaults) {
  RenewalDefaults plan = defaults;
  if (spec.every || spec.before_expiry) {  // a schedule of the client's own replaces the library's
    plan.every = spec.every.value_or(Duration{0});
    plan.before_expiry = spec.before_expiry.value_or(Duration{0});
  }
  if (spec.retry) plan.retry = *spec.retry;
  if (spec.stop_on_failure) plan.stop_on_failure = *spec.stop_on_failure;
  return plan;
}

WorkloadEnv WorkloadEnv::on(const ResourceTarget& t) const {
  WorkloadEnv e = *this;
  e.more_resources.clear();
  e.resource_name = t.name;
  e.resource = t.resource;
  e.resource_kind = t.kind;
  e.resource_mode = t.mode;
  e.idempotency_keys = t.idempotency_keys;
  e.resource_key = t.key;
  e.cas_max_retries = t.cas_max_retries;
  e.job_period = t.job_period;
  e.job_name = t.job_name;
  return e;
}

Body client_body(const WorkloadEnv& env, const ClientSpec& spec) {
  return [env, spec, program = program_of(spec)](Context& ctx) {
    ClientRun run(env, spec, ctx);
    run.run(program);
  };
}

}  // namespace locksim
