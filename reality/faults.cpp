#include <signal.h>

#include <fmt/format.h>

#include "reality/plan.hpp"
#include "reality/real_run.hpp"

namespace locksim::reality::detail {

void RealRun::fire(std::size_t a) {
  Armed& armed = armed_[a];
  if (armed.fired) return;
  armed.fired = true;
  const FaultSpec& fs = *armed.spec;
  const Fault& f = fs.fault;
  ++firings_[armed.index];
  armed.target = fs.target;
  if (etcd_ && parse_fault_role(fs.target) == FaultRole::leader) armed.target = etcd_->leader();
  if (zk_ && parse_fault_role(fs.target) == FaultRole::leader) armed.target = zk_->leader();
  trace(TraceKind::fault, armed.target, std::string(to_string(f.kind)),
        armed.target == fs.target ? fmt::format("target={}", fs.target)
                                  : fmt::format("target={} ({}={})", armed.target, fs.target,
                                                armed.target.empty() ? "none" : armed.target));
  if (fire_network(a)) return;
  if (Child* c = child(fs.target)) {
    if (c->done) return;
    if (f.kind == Fault::Kind::pause) {
      ::kill(c->pid, SIGSTOP);
      trace(TraceKind::pause, c->name, "pause", fmt::format("SIGSTOP for {} s", format_seconds(f.duration)));
      actions_.push_back({now() + f.duration.count(), ActionKind::resume, a});
    } else if (f.kind == Fault::Kind::crash) {
      kill_and_reap(c->pid);
      c->pid = -1;
      c->done = true;
      trace(TraceKind::crash, c->name, "crash", "SIGKILL");
      for (auto& [id, g] : c->grants)
        if (g.belief_end == kTimeMax) {
          g.belief_end = Time{now()};
          g.end_reason = "crashed";
        }
    }
    return;
  }
  if (f.kind == Fault::Kind::pause) {
    pause_server(a, true);
    return;
  }
  if (etcd_ && etcd_->has(armed.target)) {
    const std::string& m = armed.target;
    if (f.kind == Fault::Kind::crash && etcd_->running(m)) {
      etcd_->kill(m);
      trace(TraceKind::crash, m, "crash", "SIGKILL");
      if (f.duration > 0ns) actions_.push_back({now() + f.duration.count(), ActionKind::restart, a});
    } else if (f.kind == Fault::Kind::restart && !etcd_->running(m)) {
      etcd_->restart(m);
      trace(TraceKind::restart, m, "restart", "etcd again on its folder");
    }
    return;
  }
  if (zk_ && zk_->has(armed.target)) {
    const std::string& m = armed.target;
    if (f.kind == Fault::Kind::crash && zk_->running(m)) {
      zk_->kill(m);
      trace(TraceKind::crash, m, "crash", "SIGKILL of its JVM");
      if (f.duration > 0ns) actions_.push_back({now() + f.duration.count(), ActionKind::restart, a});
    } else if (f.kind == Fault::Kind::restart && !zk_->running(m)) {
      zk_->restart(m);
      trace(TraceKind::restart, m, "restart", "ZooKeeper again on its folder");
    }
    return;
  }
  if (RedisServer* s = server(fs.target)) {
    if (f.kind == Fault::Kind::crash && s->running()) {
      s->kill();
      // What the proxy still held of the replication stream was in the master's own buffers (the simulated
      // master holds each command its replication_delay before sending it): lost with it.
      if (repl_ && s->name() == repl_->to(repl_link_)) repl_->drop(repl_link_);
      listener(s->name())->wait_disconnected();
      trace(TraceKind::crash, s->name(), "crash", f.power_loss ? "SIGKILL (power loss)" : "SIGKILL");
      if (f.duration > 0ns) actions_.push_back({now() + f.duration.count(), ActionKind::restart, a});
    } else if (f.kind == Fault::Kind::restart) {
      restart(*s);
    }
  }
}

pid_t RealRun::server_pid(const std::string& name) const {
  for (const auto& s : servers_)
    if (s->name() == name) return s->pid();
  if (etcd_ && etcd_->has(name)) return etcd_->pid(name);
  if (zk_ && zk_->has(name)) return zk_->pid(name);
  return -1;
}

void RealRun::pause_server(std::size_t a, bool on) {
  const std::string& target = armed_[a].target;
  const Fault& f = armed_[a].spec->fault;
  if (target == sc_.resource_name) {
    // The store is a thread of this process: it stops taking requests, and what arrives waits in order.
    store_->pause(on);
    if (on)
      trace(TraceKind::pause, target, "pause", fmt::format("stalled for {} s", format_seconds(f.duration)));
    else
      trace(TraceKind::resume, target, "resume", "takes what waited, in arrival order");
  } else if (const pid_t pid = server_pid(target); pid > 0) {
    ::kill(pid, on ? SIGSTOP : SIGCONT);
    if (etcd_ && etcd_->has(target)) etcd_->set_paused(target, on);  // the watcher leaves its stream
    if (on)
      trace(TraceKind::pause, target, "pause", fmt::format("SIGSTOP for {} s", format_seconds(f.duration)));
    else
      trace(TraceKind::resume, target, "resume", "SIGCONT");
  } else {
    return;  // not running (crashed): nothing to pause, nor to resume
  }
  if (on) actions_.push_back({now() + f.duration.count(), ActionKind::resume, a});
}

void RealRun::restart(RedisServer& s) {
  if (s.running()) return;
  s.start();
  listener(s.name())->wait_subscribed();
  trace(TraceKind::restart, s.name(), "restart", "redis-server again on its folder");
}

}  // namespace locksim::reality::detail
