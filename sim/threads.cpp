// Threads of a process (Context::spawn_thread): more fibers than the main one, sharing the process's fate as
// OS threads do. A thread is a Process of its own (its fiber, mailbox, wait state, trace name "host/name"),
// linked to its host: the kernel actions that hit a process (sim/faults.cpp) reach its threads there, and the
// network takes a thread's messages over its process's links (Network::set_host). Nothing here is on the
// message path: a world without threads runs exactly the code it ran before they existed.
#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include "locksim/sim/world.hpp"

namespace locksim {

// ---------------------------------------------------------------- Context

ProcId Context::spawn_thread(std::string name, Body body) {
  return world_.spawn_thread(proc_.id, std::move(name), std::move(body));
}

Storage& Context::storage() {
  return proc_.host ? proc_.host->storage : proc_.storage;
}

std::uint32_t Context::incarnation() const {
  return proc_.host ? proc_.host->incarnation : proc_.incarnation;
}

ProcId Context::process() const {
  return proc_.host ? proc_.host->id : proc_.id;
}

bool Context::wait_notified(Duration d) {
  // A sleep (Context::sleep) that notify() may end early; forever arms no timer at all.
  World& w = world_;
  Process& p = proc_;
  if (d < 0ns) d = 0ns;
  const Time local = now();
  p.wait_local = d >= kForever - local ? kTimeMax : local + d;
  const std::uint64_t gen = ++p.wait_gen;
  if (p.wait_local != kTimeMax)
    w.push_event(std::max(p.clock.true_time_at(p.wait_local), w.now_), World::EvKind::wake, p.id.value, gen);
  p.waiting_notify = true;
  w.block(p);
  p.wait_local = kTimeMax;
  const bool notified = !p.waiting_notify;  // notify() clears it
  p.waiting_notify = false;
  return notified;
}

void Context::notify(ProcId t) {
  World& w = world_;
  if (!t.valid() || t.value >= w.procs_.size()) throw std::out_of_range("notify: unknown process");
  Process& q = *w.procs_[t.value];
  if (&World::process_ref(q) != &World::process_ref(proc_))
    throw std::logic_error(
        fmt::format("notify: '{}' is not a fiber of process '{}'", q.name, World::process_ref(proc_).name));
  if (!q.waiting_notify || q.state != ProcState::blocked) return;
  // The wait ends now: its timer's wake goes stale, and a drift change does not arm it again (wait_local).
  q.waiting_notify = false;
  q.wait_local = kTimeMax;
  const std::uint64_t gen = ++q.wait_gen;
  w.push_event(w.now_, World::EvKind::wake, q.id.value, gen);
}

// ---------------------------------------------------------------- World

Process& World::process_ref(Process& p) {
  return p.host ? *p.host : p;
}

ProcId World::process_of(ProcId p) const {
  if (!p.valid() || p.value >= procs_.size()) return p;
  const Process& pr = *procs_[p.value];
  return pr.host ? pr.host->id : p;
}

std::vector<ProcId> World::threads_of(ProcId p) const {
  std::vector<ProcId> out;
  for (const Process* t : procs_.at(p.value)->threads) out.push_back(t->id);
  return out;
}

ProcId World::spawn_thread(ProcId process, std::string name, Body body) {
  Process& host = process_ref(process);  // a thread's thread is its process's thread
  if (host.state == ProcState::crashed || host.state == ProcState::exited)
    throw std::logic_error(fmt::format("process '{}' is not running: it cannot start a thread", host.name));
  std::string full = host.name + "/" + name;
  if (const ProcId existing = find(full); existing.valid()) {
    Process& t = *procs_[existing.value];
    if (t.host != &host) throw std::invalid_argument(fmt::format("duplicate process name '{}'", full));
    if (t.state != ProcState::crashed && t.state != ProcState::exited)
      throw std::logic_error(fmt::format("thread '{}' is running already", full));
    // The same thread started again (after it ended, or after a restart of its process): a new incarnation
    // under the same name and id; replies addressed to its earlier run are dropped when they arrive.
    lose_volatile(t);
    ++t.incarnation;
    t.first_msg = next_msg_;
    t.body = std::move(body);
    t.clock = host.clock;
    t.paused = host.paused;
    t.state = ProcState::created;
    push_event(now_, EvKind::start, t.id.value, 0);
    return t.id;
  }
  ProcessOptions o = host.opts;
  o.daemon = true;               // its process keeps the world running, not the thread
  o.fsync = FsyncPolicy::never;  // the process's storage is the one (Context::storage)
  const ProcId id = spawn(std::move(full), std::move(body), o);
  Process& t = *procs_[id.value];
  t.host = &host;
  t.clock = host.clock;  // one clock per host: a copy, changed with the process's (sim/faults.cpp)
  t.paused = host.paused;
  host.threads.push_back(&t);
  network_.set_host(id, host.id);
  return id;
}

void World::end_threads(Process& h, bool crashed, std::string_view detail) {
  for (Process* t : h.threads) {
    if (t->state == ProcState::crashed || t->state == ProcState::exited) continue;
    if (crashed) record(TraceKind::crash, t->id, {}, 0, {}, detail);
    kill_fiber(*t);  // unwinds a fiber that ran (nothing for one that never started)
    t->fiber = boost::context::fiber{};
    t->state = crashed ? ProcState::crashed : ProcState::exited;
    lose_volatile(*t);
    if (!crashed) record(TraceKind::exit, t->id);
  }
}

}  // namespace locksim
