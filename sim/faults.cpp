// The fault plan and the kernel actions it takes (pause, crash, restart, clock changes, partitions), split
// from sim/world.cpp, which runs the events.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "sim/world.hpp"

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
  Process& p = *procs_[id.value];
  if (p.state == ProcState::crashed || p.state == ProcState::exited) return;
  const Time until = d >= kForever - now_ ? kTimeMax : now_ + d;
  if (p.paused && until <= p.pause_until) return;  // a shorter overlapping pause does not cut this one short
  p.pause_until = until;
  const std::uint64_t gen = ++p.pause_gen;
  if (!p.paused) {
    p.paused = true;
    record(TraceKind::pause, id, {}, 0, {}, fmt::format("for={}", format_time(d)));
  }
  if (until != kTimeMax) {
    push(until, [this, &p, gen] {
      if (gen == p.pause_gen) resume(p.id);
    });
  }
}

void World::resume(ProcId id) {
  Process& p = *procs_[id.value];
  if (!p.paused) return;
  p.paused = false;
  ++p.pause_gen;
  record(TraceKind::resume, id);
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
  Process& p = *procs_[id.value];
  if (p.state == ProcState::crashed || p.state == ProcState::exited) return;
  record(TraceKind::crash, id, {}, 0, {}, power_loss ? "power loss" : "process");
  kill_fiber(p);
  p.fiber = boost::context::fiber{};
  if (!p.opts.daemon && live_ > 0) --live_;
  gate_ = 0;  // perhaps the last live process: run_until looks
  p.state = ProcState::crashed;
  for (std::size_t i = 0; i < p.mailbox.size(); ++i) messages_.drop(p.mailbox[i]);
  p.mailbox.clear();
  p.paused = false;
  p.pending_wake = false;
  p.pending_start = false;
  p.waiting_receive = false;
  ++p.pause_gen;
  ++p.wait_gen;
  ++p.fsync_gen;
  p.fsync_local = kTimeMax;
  p.wait_local = kTimeMax;
  if (power_loss) p.storage.lose_unsynced();
}

void World::restart(ProcId id) {
  if (current_ != nullptr) {
    push(now_, [this, id] { restart(id); });
    return;
  }
  Process& p = *procs_[id.value];
  if (p.state != ProcState::crashed) return;
  ++p.incarnation;
  p.first_msg = next_msg_;  // what was sent before now is for an earlier incarnation
  record(TraceKind::restart, id, {}, 0, {}, fmt::format("incarnation={}", p.incarnation));
  p.state = ProcState::created;
  if (!p.opts.daemon && !p.restart_pending) ++live_;
  p.restart_pending = false;
  arm_fsync(p);
  start_fiber(p);
}

void World::clock_jump(ProcId id, Duration by) {
  Process& p = *procs_[id.value];
  p.clock.jump(now_, by);
  record(TraceKind::clock, id, {}, 0, "jump", fmt::format("by={}", format_time(by)));
}

void World::clock_drift(ProcId id, std::int64_t ppm) {
  Process& p = *procs_[id.value];
  p.clock.set_drift(now_, ppm);
  record(TraceKind::clock, id, {}, 0, "drift", fmt::format("ppm={}", p.clock.drift_ppm()));
  rearm_local_deadlines(p);
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
  for (ProcId x : a)
    for (ProcId y : b) {
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
  if (!network_.heal(id)) return;  // healed already (by a heal of all): nothing changes
  auto it = partition_names_.find(id);
  record(TraceKind::network, {}, {}, 0, "heal", it->second);
  partition_names_.erase(it);
}

void World::heal() {
  network_.heal_all();
  partition_names_.clear();
  record(TraceKind::network, {}, {}, 0, "heal", "all");
}

void World::add_fault(Fault f) {
  faults_.push_back(std::move(f));
  fault_hits_.push_back(0);
  const std::size_t idx = faults_.size() - 1;
  const Fault& ff = faults_[idx];
  if (ff.when.kind == Trigger::Kind::at) {
    push(std::max(ff.when.at, now_), [this, idx] { fire(faults_[idx]); });
  } else {
    have_triggers_[static_cast<int>(ff.when.kind)] = true;
  }
}

void World::match_triggers(Trigger::Kind kind, ProcId p, std::string_view label) {
  for (std::size_t i = 0; i < faults_.size(); ++i) {
    const Trigger& t = faults_[i].when;
    if (t.kind != kind || t.label != label || (t.proc.valid() && t.proc != p)) continue;
    if (++fault_hits_[i] != t.nth) continue;
    const Fault& f = faults_[i];
    // Faults on the process that triggered them take effect before its next statement; all others run as
    // events at this same instant, after the current event and before the process steps still queued for
    // it (world callbacks come first at an instant: sim/world.hpp).
    if (t.delay == 0ns && f.kind == Fault::Kind::pause && f.target == p) {
      fire(f);
    } else {
      push(now_ + t.delay, [this, i] { fire(faults_[i]); });
    }
  }
}

void World::fire(const Fault& f) {
  record(TraceKind::fault, f.target, f.peer, 0, std::string(to_string(f.kind)),
         f.duration != 0ns ? fmt::format("duration={}", format_time(f.duration)) : "");
  switch (f.kind) {
    case Fault::Kind::pause:
      pause(f.target, f.duration > 0ns ? f.duration : kForever);
      break;
    case Fault::Kind::crash:
      crash(f.target, f.power_loss);
      if (f.duration > 0ns) {
        // A planned restart keeps the process live, so the run does not end as "done" before it.
        Process& p = *procs_[f.target.value];
        if (p.state == ProcState::crashed && !p.restart_pending) {
          p.restart_pending = true;
          if (!p.opts.daemon) ++live_;
        }
        ProcId t = f.target;
        push(now_ + f.duration, [this, t] { restart(t); });
      }
      break;
    case Fault::Kind::restart:
      restart(f.target);
      break;
    case Fault::Kind::clock_jump:
      clock_jump(f.target, f.duration);
      break;
    case Fault::Kind::clock_drift:
      clock_drift(f.target, f.ppm);
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
      network_.add_spike(f.target, f.peer, f.extra, f.duration > 0ns ? now_ + f.duration : kTimeMax, f.count);
      break;
  }
}

}  // namespace locksim
