#include "locksim/sim/trace.hpp"

#include <fmt/format.h>
#include <xxhash.h>
#if LOCKSIM_XXH_DISPATCH
#include <xxh_x86dispatch.h>  // XXH3_64bits_update -> the CPU's widest vector path (same hash values)
#endif

#include <bit>
#include <cstring>

namespace locksim {

std::string_view to_string(TraceKind k) {
  switch (k) {
    case TraceKind::start:
      return "start";
    case TraceKind::exit:
      return "exit";
    case TraceKind::send:
      return "send";
    case TraceKind::deliver:
      return "deliver";
    case TraceKind::drop:
      return "drop";
    case TraceKind::duplicate:
      return "duplicate";
    case TraceKind::receive:
      return "receive";
    case TraceKind::timeout:
      return "timeout";
    case TraceKind::pause:
      return "pause";
    case TraceKind::resume:
      return "resume";
    case TraceKind::crash:
      return "crash";
    case TraceKind::restart:
      return "restart";
    case TraceKind::clock:
      return "clock";
    case TraceKind::network:
      return "network";
    case TraceKind::fault:
      return "fault";
    case TraceKind::note:
      return "note";
    case TraceKind::limit:
      return "limit";
    case TraceKind::hold:
      return "hold";
  }
  return "?";
}

Trace::Trace(bool keep_events, std::uint64_t max_kept)
    : keep_(keep_events),
      room_(keep_events ? 0 : kBatch),
      max_kept_(max_kept),
      state_(XXH3_createState()),
      pending_(std::make_unique_for_overwrite<unsigned char[]>(kBatch)) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

void Trace::flush() const {
  if (used_ == 0) return;
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), pending_.get(), used_);
  used_ = 0;
}

void Trace::append(const void* p, std::size_t n) {
  if (n == 0) return;
  if (used_ + n > kBatch) {
    flush();
    if (n > kBatch) {  // a huge label or detail: hash it in place (the same byte stream)
      XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), p, n);
      return;
    }
  }
  std::memcpy(pending_.get() + used_, p, n);
  used_ += n;
}

Trace::~Trace() {
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void Trace::record(TraceEvent ev) {
  record(ev.time, ev.node_time, ev.wall_time, ev.kind, ev.proc, ev.peer, ev.msg, ev.label, ev.detail);
  if (keep_) events_.back() = std::move(ev);
}

void Trace::record_slow(Time time, Time node_time, Time wall_time, TraceKind kind, ProcId proc, ProcId peer,
                        std::uint64_t msg, std::string_view label, std::string_view detail) {
  unsigned char buf[kFixed];
  encode_fixed(buf, time, node_time, wall_time, kind, proc, peer, msg, label.size(), detail.size());
  append(buf, kFixed);
  append(label.data(), label.size());
  append(detail.data(), detail.size());
  ++count_;
  if (keep_) keep(time, node_time, wall_time, kind, proc, peer, msg, label, detail);
}

void Trace::keep(Time time, Time node_time, Time wall_time, TraceKind kind, ProcId proc, ProcId peer,
                 std::uint64_t msg, std::string_view label, std::string_view detail) {
  if (events_.size() >= max_kept_) {
    keep_ = false;  // the hash goes on; the kept list stops growing
    room_ = kBatch;
    truncated_ = true;
    return;
  }
  events_.push_back(
      TraceEvent{time, node_time, wall_time, kind, proc, peer, msg, std::string(label), std::string(detail)});
}

std::uint64_t Trace::hash() const {
  flush();
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

std::string Trace::format(const TraceEvent& ev, std::string_view proc_name, std::string_view peer_name) {
  std::string s = fmt::format("{:>14} {:<9} {:<10}", format_time(ev.time), to_string(ev.kind), proc_name);
  if (ev.peer.valid()) s += fmt::format(" peer={}", peer_name);
  if (ev.msg != 0) s += fmt::format(" msg={}", ev.msg);
  if (!ev.label.empty()) s += fmt::format(" {}", ev.label);
  if (!ev.detail.empty()) s += fmt::format(" {}", ev.detail);
  if (ev.proc.valid())
    s += fmt::format(" [mono={} wall={}]", format_time(ev.node_time), format_time(ev.wall_time));
  return s;
}

}  // namespace locksim
