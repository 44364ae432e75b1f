#include "sim/trace.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <bit>
#include <cstring>

namespace locksim {

std::string_view to_string(TraceKind k) {
  switch (k) {
    case TraceKind::start: return "start";
    case TraceKind::exit: return "exit";
    case TraceKind::send: return "send";
    case TraceKind::deliver: return "deliver";
    case TraceKind::drop: return "drop";
    case TraceKind::duplicate: return "duplicate";
    case TraceKind::receive: return "receive";
    case TraceKind::timeout: return "timeout";
    case TraceKind::pause: return "pause";
    case TraceKind::resume: return "resume";
    case TraceKind::crash: return "crash";
    case TraceKind::restart: return "restart";
    case TraceKind::clock: return "clock";
    case TraceKind::network: return "network";
    case TraceKind::fault: return "fault";
    case TraceKind::note: return "note";
    case TraceKind::limit: return "limit";
  }
  return "?";
}

Trace::Trace(bool keep_events) : keep_(keep_events), state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Trace::~Trace() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

namespace {
void put_u64(unsigned char* p, std::uint64_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, 8);  // one store; the byte loop below cost ~400 instructions per event
  } else {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));  // little-endian everywhere
  }
}
}  // namespace

void Trace::record(TraceEvent ev) {
  // Canonical form: fixed-width little-endian fields, then length-prefixed strings.
  unsigned char buf[8 * 7 + 1];
  put_u64(buf, static_cast<std::uint64_t>(ev.time.count()));
  put_u64(buf + 8, static_cast<std::uint64_t>(ev.node_time.count()));
  put_u64(buf + 16, static_cast<std::uint64_t>(ev.wall_time.count()));
  put_u64(buf + 24, (static_cast<std::uint64_t>(ev.proc.value) << 32) | ev.peer.value);
  put_u64(buf + 32, ev.msg);
  put_u64(buf + 40, ev.label.size());
  put_u64(buf + 48, ev.detail.size());
  buf[56] = static_cast<unsigned char>(ev.kind);
  auto* st = static_cast<XXH3_state_t*>(state_);
  // One streaming update per event when it fits a small buffer (same bytes, so the same hash): each update call
  // has a fixed cost that dominated the kernel's per-event time.
  unsigned char small[sizeof buf + 192];
  if (ev.label.size() + ev.detail.size() <= sizeof small - sizeof buf) {
    std::memcpy(small, buf, sizeof buf);
    std::memcpy(small + sizeof buf, ev.label.data(), ev.label.size());
    std::memcpy(small + sizeof buf + ev.label.size(), ev.detail.data(), ev.detail.size());
    XXH3_64bits_update(st, small, sizeof buf + ev.label.size() + ev.detail.size());
  } else {
    XXH3_64bits_update(st, buf, sizeof buf);
    XXH3_64bits_update(st, ev.label.data(), ev.label.size());
    XXH3_64bits_update(st, ev.detail.data(), ev.detail.size());
  }
  ++count_;
  if (keep_) events_.push_back(std::move(ev));
}

std::uint64_t Trace::hash() const { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_)); }

std::string Trace::format(const TraceEvent& ev, std::string_view proc_name, std::string_view peer_name) {
  std::string s = fmt::format("{:>14} {:<9} {:<10}", format_time(ev.time), to_string(ev.kind), proc_name);
  if (ev.peer.valid()) s += fmt::format(" peer={}", peer_name);
  if (ev.msg != 0) s += fmt::format(" msg={}", ev.msg);
  if (!ev.label.empty()) s += fmt::format(" {}", ev.label);
  if (!ev.detail.empty()) s += fmt::format(" {}", ev.detail);
  if (ev.proc.valid()) s += fmt::format(" [mono={} wall={}]", format_time(ev.node_time), format_time(ev.wall_time));
  return s;
}

}  // namespace locksim
