// The fault plan and the kernel actions it takes (pause, crash, restart, clock changes, partitions), split
// from sim/world.cpp, which runs the events.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "locksim/sim/world.hpp"

namespace locksim {

std::string_view to_string(Fault::Kind k) {
  switch (k) {
    case Fault::Kind::pause:
      return "pause";
    case Fault::Kind::crash:
      return "crash";
    case Fault::Kind::restart:
      return "restart";
    case Fault::Kind::clock_jump:
      return "clock_jump";
    case Fault::Kind::clock_drift:
      return "clock_drift";
    case Fault::Kind::partition:
      return "partition";
    case Fault::Kind::heal:
      return "heal";
    case Fault::Kind::delay_spike:
      return "delay_spike";
  }
  return "?";
}

// ---------------------------------------------------------------- faults and kernel actions

void World::pause(ProcId id, Duration d) {
  Process& p = process_ref(id);  // a pause stops the whole process: every thread of it
  if (p.state == ProcState::crashed || p.state == ProcState::exited) return;
  const Time until = d >= kForever - now_ ? kTimeMax : now_ + d;
  if (p.paused && until <= p.pause_until) return;  // a shorter overlapping pause does not cut this one short
  p.pause_until = until;
  const std::uint64_t gen = ++p.pause_gen;
  if (!p.paused) {
    p.paused = true;
    const std::string detail = fmt::format("for={}", format_time(d));
    record(TraceKind::pause, p.id, {}, 0, {}, detail);
    for (Process* t : p.threads) {
      if (t->state == ProcState::crashed || t->state == ProcState::exited) continue;
      t->paused = true;
      record(TraceKind::pause, t->id, {}, 0, {}, detail);
    }
  }
  if (until != kTimeMax) {
    push(until, [this, &p, gen] {
      if (gen == p.pause_gen) resume(p.id);
    });
  }
}

void World::resume(ProcId id) {
  Process& p = process_ref(id);
  if (!p.paused) return;
  p.paused = false;
  ++p.pause_gen;
  record(TraceKind::resume, p.id);
  if (p.threads.empty()) return wake_after_pause(p);
  // Every fiber of the process runs again; what came due first during the pause runs first (a timer that
  // fired before another), the main fiber before its threads on a tie.
  std::vector<Process*> members{&p};
  for (Process* t : p.threads) {
    if (!t->paused) continue;
    t->paused = false;
    record(TraceKind::resume, t->id);
    members.push_back(t);
  }
  std::stable_sort(members.begin(), members.end(),
                   [](const Process* a, const Process* b) { return a->pending_since < b->pending_since; });
  for (Process* m : members) wake_after_pause(*m);
}

void World::wake_after_pause(Process& p) {
  // Everything that came due during the pause (timers, wanted messages) was turned into one pending wake.
  if (p.pending_start) {
    p.pending_start = false;
    push_event(now_, EvKind::start, p.id.value, 0);
  } else if (p.pending_wake) {
    p.pending_wake = false;
    const std::uint64_t gen = p.pending_gen;
    push_event(now_, EvKind::wake, p.id.value, gen);
  }
}

void World::crash(ProcId id, bool power_loss) {
  if (current_ != nullptr) {  // called from inside a fiber: act from scheduler context, at this instant
    push(now_, [this, id, power_loss] { crash(id, power_loss); });
    return;
  }
  Process& p = process_ref(id);  // a crash takes the whole process down, every thread of it
  if (p.state == ProcState::crashed || p.state == ProcState::exited) return;
  const char* detail = power_loss ? "power loss" : "process";
  record(TraceKind::crash, p.id, {}, 0, {}, detail);
  kill_fiber(p);
  p.fiber = boost::context::fiber{};
  if (!p.opts.daemon && live_ > 0) --live_;
  gate_ = 0;  // perhaps the last live process: run_until looks
  p.state = ProcState::crashed;
  lose_volatile(p);
  ++p.fsync_gen;
  p.fsync_local = kTimeMax;
  if (power_loss) p.storage.lose_unsynced();
  p.host_down = power_loss;
  if (!p.threads.empty()) end_threads(p, true, detail);
}

void World::lose_volatile(Process& p) {
  for (std::size_t i = 0; i < p.mailbox.size(); ++i) messages_.drop(p.mailbox[i]);
  p.mailbox.clear();
  p.paused = false;
  p.pending_wake = false;
  p.pending_start = false;
  p.waiting_receive = false;
  p.waiting_notify = false;
  ++p.pause_gen;
  ++p.wait_gen;
  p.wait_local = kTimeMax;
}

void World::restart(ProcId id) {
  if (current_ != nullptr) {
    push(now_, [this, id] { restart(id); });
    return;
  }
  Process& p = process_ref(id);  // only the main body runs again: threads are started by it, if at all
  if (p.state != ProcState::crashed) return;
  ++p.incarnation;
  p.host_down = false;
  p.first_msg = next_msg_;  // what was sent before now is for an earlier incarnation
  record(TraceKind::restart, id, {}, 0, {}, fmt::format("incarnation={}", p.incarnation));
  p.state = ProcState::created;
  if (!p.opts.daemon && !p.restart_pending) ++live_;
  p.restart_pending = false;
  arm_fsync(p);
  start_fiber(p);
}

// One clock per host: a process's threads keep copies of its clock, changed with it at the same instant (so
// every copy reads the same), and their waits are armed again as the process's are.
void World::clock_jump(ProcId id, Duration by) {
  Process& p = process_ref(id);
  p.clock.jump(now_, by);
  for (Process* t : p.threads) t->clock.jump(now_, by);
  record(TraceKind::clock, p.id, {}, 0, "jump", fmt::format("by={}", format_time(by)));
}

void World::clock_drift(ProcId id, std::int64_t ppm) {
  Process& p = process_ref(id);
  p.clock.set_drift(now_, ppm);
  for (Process* t : p.threads) t->clock.set_drift(now_, ppm);
  record(TraceKind::clock, p.id, {}, 0, "drift", fmt::format("ppm={}", p.clock.drift_ppm()));
  rearm_local_deadlines(p);
  for (Process* t : p.threads) rearm_local_deadlines(*t);
}

void World::rearm_local_deadlines(Process& p) {
  // A wait that came due during a pause (pending_wake) is over already; the stale wake of the old arming
  // finds its generation gone. A wall-clock jump moves no monotonic reading: nothing to do there.
  if (p.state == ProcState::blocked && p.wait_local != kTimeMax && !p.pending_wake) {
    const std::uint64_t gen = ++p.wait_gen;
    push_event(std::max(p.clock.true_time_at(p.wait_local), now_), EvKind::wake, p.id.value, gen);
  }
  if (p.fsync_local != kTimeMax && p.state != ProcState::crashed && p.state != ProcState::exited)
    schedule_fsync(p, p.fsync_local);
}

PartitionId World::partition(const std::vector<ProcId>& a, const std::vector<ProcId>& b, bool one_way) {
  std::vector<std::pair<ProcId, ProcId>> links;
  for (ProcId xa : a)
    for (ProcId yb : b) {
      const ProcId x = process_of(xa), y = process_of(yb);  // a thread's links are its process's
      if (x == y) continue;
      links.emplace_back(x, y);
      if (!one_way) links.emplace_back(y, x);
    }
  const PartitionId id = network_.cut(std::move(links));
  std::string names = fmt::format("#{} ", id);
  for (std::size_t i = 0; i < a.size(); ++i) names += (i == 0 ? "" : ",") + name(a[i]);
  names += one_way ? " -> " : " | ";
  for (std::size_t i = 0; i < b.size(); ++i) names += (i == 0 ? "" : ",") + name(b[i]);
  record(TraceKind::network, {}, {}, 0, "partition", names);
  partition_names_.emplace(id, std::move(names));
  return id;
}

void World::heal(PartitionId id) {
  Network::Links opened;  // (only looked for when messages are held)
  if (!network_.heal(id, held_.empty() ? nullptr : &opened)) return;  // healed already (by a heal of all)
  auto it = partition_names_.find(id);
  record(TraceKind::network, {}, {}, 0, "heal", it->second);
  partition_names_.erase(it);
  if (!opened.empty()) release_held(opened);
}

void World::heal() {
  Network::Links opened;
  network_.heal_all(held_.empty() ? nullptr : &opened);
  partition_names_.clear();
  record(TraceKind::network, {}, {}, 0, "heal", "all");
  if (!opened.empty()) release_held(opened);
}

std::uint64_t Repeat::bound(Time first) const {
  constexpr std::uint64_t over = std::uint64_t{kMaxFirings} + 1;
  if (!repeats()) return 1;
  std::uint64_t n = times == 0 ? over : std::min<std::uint64_t>(times, over);
  if (until != kTimeMax) {
    const std::uint64_t by_time =
        until < first ? 0 : static_cast<std::uint64_t>((until - first) / every) + 1;  // jitter only delays
    n = std::min(n, by_time);
  }
  return n;
}

std::string Repeat::check(Time first) const {
  if (every < 0ns) return fmt::format("the period every = {} is negative", format_time(every));
  if (jitter < 0ns) return fmt::format("the jitter {} is negative", format_time(jitter));
  if (every_dist && (every <= 0ns || every_dist->lower_bound() < every))
    return fmt::format("a period drawn from {} must be longer than zero, and every its shortest value",
                       every_dist->describe());
  if (jitter_dist && (jitter_dist->lower_bound() < 0ns || jitter_dist->upper_bound() > jitter))
    return fmt::format("a jitter drawn from {} must lie in [0, jitter]", jitter_dist->describe());
  if (!repeats()) return {};
  if (times == 0 && until == kTimeMax)
    return "a repeated fault needs an end: a number of firings (times) or an end time (until)";
  if (bound(first) > kMaxFirings) {
    return fmt::format(
        "a fault every {} from {} {} fires more than {} times, the most one fault may fire",
        format_time(every), format_time(first),
        times > kMaxFirings ? fmt::format("{} times", times) : fmt::format("until {}", format_time(until)),
        kMaxFirings);
  }
  return {};
}

void World::add_fault(Fault f) {
  // A triggered fault's first firing is not known before the run: its repetition is bounded from time 0.
  if (std::string why = f.repeat.check(f.when.kind == Trigger::Kind::at ? f.when.at : Time{0}); !why.empty())
    throw std::invalid_argument(why);
  faults_.push_back(std::move(f));
  fault_state_.emplace_back();
  const std::size_t idx = faults_.size() - 1;
  const Fault& ff = faults_[idx];
  if (ff.when.kind == Trigger::Kind::at) {
    fault_state_[idx].first = std::max(ff.when.at, now_);
    schedule_firing(idx);
  } else {
    have_triggers_[static_cast<int>(ff.when.kind)] = true;
  }
}

void World::schedule_firing(std::size_t i) {
  const Fault& f = faults_[i];
  FaultState& st = fault_state_[i];
  const Repeat& r = f.repeat;
  const std::uint32_t limit =
      !r.repeats() ? 1 : (r.times == 0 ? Repeat::kMaxFirings : std::min(r.times, Repeat::kMaxFirings));
  if (st.fired >= limit) return;
  Time t{};
  if (r.every_dist && st.fired > 0) {
    // A period drawn for this firing, from the nominal time of the one before (the jitter does not drift it).
    if (!st.period_rng) st.period_rng = rng_.stream("fault-period").stream(i);
    const Time prev = st.fired == 1 ? st.first : st.nominal;
    const Duration d = r.every_dist->sample(*st.period_rng);
    if (d >= kTimeMax - prev) return;  // past the end
    t = st.nominal = prev + d;
  } else {
    if (st.fired > 0 && r.every.count() > (kTimeMax - st.first).count() / st.fired) return;  // past the end
    t = st.first + r.every * st.fired;
  }
  if (r.jitter > 0ns) {
    // One draw per firing, from this stream: uniform in [0, jitter], or the jitter's distribution.
    if (!st.jitter_rng) st.jitter_rng = rng_.stream("fault-jitter").stream(i);
    const Duration extra =
        r.jitter_dist ? r.jitter_dist->sample(*st.jitter_rng) : st.jitter_rng->uniform(0ns, r.jitter);
    t = extra >= kTimeMax - t ? kTimeMax : t + extra;
  }
  if (r.repeats() && t > r.until) return;
  ++st.fired;
  push(t, [this, i] { fire_planned(i); });
}

void World::match_triggers(Trigger::Kind kind, ProcId from, std::string_view label) {
  // A trigger names a process: the notes, sends and receives of its threads are its own.
  ProcId p{};
  for (std::size_t i = 0; i < faults_.size(); ++i) {
    const Trigger& t = faults_[i].when;
    if (t.kind != kind || t.label != label) continue;
    if (!p.valid()) p = process_of(from);
    if (t.proc.valid() && t.proc != p) continue;
    if (++fault_state_[i].hits != t.nth) continue;
    const Fault& f = faults_[i];
    fault_state_[i].first = now_ + t.delay;
    // Faults on the process that triggered them take effect before its next statement; all others run as
    // events at this same instant, after the current event and before the process steps still queued for
    // it (world callbacks come first at an instant: sim/world.hpp). A fault whose targets a callback
    // computes is resolved right here when it may be such a pause, and acts at once if it is one.
    if (t.delay == 0ns && f.repeat.jitter == 0ns && f.kind == Fault::Kind::pause) {
      if (!f.targets_at_fire) {
        if (f.target == p && f.more_targets.empty()) {
          ++fault_state_[i].fired;
          fire_resolved(i, f, {});
          continue;
        }
      } else {
        Fault g = f;
        const Resolution r = resolve(i, g);
        ++fault_state_[i].fired;
        if (!r.fire || (g.target == p && g.more_targets.empty())) {
          fire_resolved(i, g, r);
        } else {
          g.targets_at_fire = nullptr;
          push(now_, [this, i, g = std::move(g), r] { fire_resolved(i, g, r); });
        }
        continue;
      }
    }
    schedule_firing(i);
  }
}

Resolution World::resolve(std::size_t i, Fault& g) {
  FaultState& st = fault_state_[i];
  if (!st.pick_rng) st.pick_rng = rng_.stream("fault-targets").stream(i);
  Resolution r = faults_[i].targets_at_fire(g, *st.pick_rng);
  const bool needs_target =
      g.kind != Fault::Kind::partition && g.kind != Fault::Kind::heal && g.kind != Fault::Kind::delay_spike;
  auto bad = [this](ProcId p) { return !p.valid() || p.value >= procs_.size(); };
  if (r.fire &&
      ((needs_target && bad(g.target)) || std::any_of(g.more_targets.begin(), g.more_targets.end(), bad))) {
    r = {false, r.detail.empty() ? "no process to hit" : r.detail + ": no process to hit"};
  }
  if (r.fire && g.kind == Fault::Kind::partition && (g.side_a.empty() || g.side_b.empty()))
    r = {false, r.detail.empty() ? "a partition side is empty" : r.detail + ": a partition side is empty"};
  return r;
}

void World::fire_planned(std::size_t i) {
  const Fault& f = faults_[i];
  if (!f.targets_at_fire) return fire_resolved(i, f, {});
  Fault g = f;
  const Resolution r = resolve(i, g);
  fire_resolved(i, g, r);
}

void World::fire_resolved(std::size_t i, const Fault& f, const Resolution& r) {
  if (r.fire && (f.duration_dist || f.extra_dist)) {
    FaultState& st = fault_state_[i];
    Fault g = f;
    if (f.duration_dist) {
      if (!st.duration_rng) st.duration_rng = rng_.stream("fault-duration").stream(i);
      g.duration = f.duration_dist->sample(*st.duration_rng);
      st.drawn.push_back(g.duration);  // the draw itself (a jump back is its negation)
      if (f.jump_back) g.duration = -g.duration;
    }
    if (f.extra_dist) {
      if (!st.extra_rng) st.extra_rng = rng_.stream("fault-extra").stream(i);
      g.extra = f.extra_dist->sample(*st.extra_rng);
    }
    ++st.applied;
    fire(g, r.detail);
  } else if (r.fire) {
    ++fault_state_[i].applied;
    fire(f, r.detail);
  } else {
    record(TraceKind::fault, {}, {}, 0, std::string(to_string(f.kind)), fmt::format("skipped: {}", r.detail));
  }
  schedule_firing(i);
}

void World::fire(const Fault& f, std::string_view detail) {
  if (f.kind == Fault::Kind::partition || f.kind == Fault::Kind::heal) return fire_one(f, f.target, detail);
  fire_one(f, f.target, detail);
  for (ProcId t : f.more_targets) fire_one(f, t, detail);
}

void World::fire_one(const Fault& f, ProcId target, std::string_view detail) {
  std::string text = f.duration != 0ns ? fmt::format("duration={}", format_time(f.duration)) : "";
  if (f.extra_dist) text += fmt::format("{}extra={}", text.empty() ? "" : " ", format_time(f.extra));
  if (!detail.empty()) text += (text.empty() ? "" : " ") + std::string(detail);
  record(TraceKind::fault, target, f.peer, 0, std::string(to_string(f.kind)), text);
  switch (f.kind) {
    case Fault::Kind::pause:
      pause(target, f.duration > 0ns ? f.duration : kForever);
      break;
    case Fault::Kind::crash:
      crash(target, f.power_loss);
      if (f.duration > 0ns) {
        // A planned restart keeps the process live, so the run does not end as "done" before it.
        Process& p = process_ref(target);
        if (p.state == ProcState::crashed && !p.restart_pending) {
          p.restart_pending = true;
          if (!p.opts.daemon) ++live_;
        }
        push(now_ + f.duration, [this, target] { restart(target); });
      }
      break;
    case Fault::Kind::restart:
      restart(target);
      break;
    case Fault::Kind::clock_jump:
      clock_jump(target, f.duration);
      break;
    case Fault::Kind::clock_drift:
      clock_drift(target, f.ppm);
      break;
    case Fault::Kind::partition: {
      // A timed end heals this partition only: others, overlapping it or not, stay in force.
      const PartitionId id = partition(f.side_a, f.side_b, f.one_way);
      if (f.duration > 0ns) push(now_ + f.duration, [this, id] { heal(id); });
    } break;
    case Fault::Kind::heal:
      heal();
      break;
    case Fault::Kind::delay_spike:
      network_.add_spike(target, f.peer, f.extra, f.duration > 0ns ? now_ + f.duration : kTimeMax, f.count);
      break;
  }
}

}  // namespace locksim
