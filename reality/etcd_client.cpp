#include "reality/etcd_client.hpp"

#include <curl/curl.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <map>
#include <memory>

#include "reality/children.hpp"

namespace locksim::reality {

namespace {

constexpr const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::size_t append(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

/// int64 fields come as JSON strings from the gateway; tolerate numbers too (anything else: 0).
std::int64_t int_field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) return 0;
  const std::string& t = it->get_ref<const std::string&>();
  std::int64_t v = 0;
  std::from_chars(t.data(), t.data() + t.size(), v);
  return v;
}

/// A field as text (int64 fields are JSON strings); "0" when absent.
std::string str_field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return "0";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

/// An answer's error, as text ("" for none): a string in unary answers, an object in streamed ones.
std::string error_text(const nlohmann::json& j) {
  auto it = j.find("error");
  if (it == j.end()) return {};
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

std::string base64(const std::string& in) {
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) | static_cast<unsigned char>(in[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kB64[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string unbase64(const std::string& in) {
  std::string out;
  unsigned v = 0;
  int bits = 0;
  for (char c : in) {
    const char* p = c ? std::strchr(kB64, c) : nullptr;
    if (p == nullptr) continue;  // '=' and anything else
    v = (v << 6) | static_cast<unsigned>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xff);
    }
  }
  return out;
}

std::optional<nlohmann::json> etcd_post(std::uint16_t port, const std::string& path,
                                        const nlohmann::json& body, long timeout_ms) {
  CURL* c = curl_easy_init();
  if (c == nullptr) return std::nullopt;
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  const std::string payload = body.dump();
  std::string answer;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK) return std::nullopt;
  auto j = nlohmann::json::parse(answer, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string v3lock_key(const std::string& name, std::uint64_t lease) {
  return fmt::format("{}/{:x}", name, lease);
}

/// A lock request in flight: an easy handle of the multi handle.
struct Request {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::uint64_t req = 0;
  raft::Command cmd;
  std::uint16_t port = 0;
  std::string payload, answer;
};

struct EtcdLink::Impl {
  CURLM* multi = nullptr;
  std::map<std::uint64_t, std::unique_ptr<Request>> flying;
  std::deque<raft::ClientReply> done;  ///< answers read from the multi handle, not asked for yet
};

EtcdLink::EtcdLink(std::vector<std::uint16_t> ports, Duration rpc_timeout, std::int64_t t0,
                   std::uint64_t seed, Note note)
    : ports_(std::move(ports)),
      rpc_timeout_(rpc_timeout),
      t0_(t0),
      rng_(seed),
      note_(std::move(note)),
      impl_(new Impl) {
  impl_->multi = curl_multi_init();
}

EtcdLink::~EtcdLink() {
  for (auto& [req, r] : impl_->flying) {
    curl_multi_remove_handle(impl_->multi, r->easy);
    curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
  }
  curl_multi_cleanup(impl_->multi);
  delete impl_;
}

Time EtcdLink::now() {
  return Time{mono_ns() - t0_};
}

void EtcdLink::sleep(Duration d) {
  if (d > 0ns) sleep_until_ns(mono_ns() + d.count());
}

void EtcdLink::note(std::string_view label, std::string detail) {
  note_(std::string(label), detail);
}

bool EtcdLink::follow(const raft::ClientReply&) {
  current_ = (current_ + 1) % ports_.size();  // the gateway names no leader: the next member
  return false;
}

raft::ClientReply EtcdLink::reply_of(const raft::Command& c, const std::optional<nlohmann::json>& answer,
                                     std::uint16_t port) {
  raft::ClientReply r;
  // No answer within the timeout (a killed, paused or cut-off member, or one that gave up on a proposal):
  // perhaps done. Ask again: every command is idempotent.
  if (!answer || !answer->is_object()) {
    r.error = "leader-changed";
    return r;
  }
  const nlohmann::json& j = *answer;
  const std::string e = error_text(j);
  if (!e.empty()) {
    if (e.find("no leader") != std::string::npos)
      r.error = "not-leader";
    else if (e.find("timed out") != std::string::npos || e.find("leader changed") != std::string::npos)
      r.error = "leader-changed";
    else if (e.find("lease not found") != std::string::npos)
      r.error = "lease-not-found";
    else if (c.op == raft::Op::grant && e.find("lease already exists") != std::string::npos) {
      r.ok = true;  // this attempt's own grant, asked again after an answer that did not come
      r.value = c.lease & 0x7fff'ffff'ffff'ffffULL;
    } else {
      r.error = e;
    }
    return r;
  }
  switch (c.op) {
    case raft::Op::grant:
      r.ok = int_field(j, "TTL") > 0;
      r.value = static_cast<std::uint64_t>(int_field(j, "ID"));
      if (!r.ok) r.error = "no-grant";
      break;
    case raft::Op::keepalive: {
      const nlohmann::json& k = j.contains("result") ? j["result"] : j;
      if (!k.is_object() || !error_text(k).empty()) {
        r.error = "leader-changed";
      } else if (int_field(k, "TTL") > 0) {
        r.ok = true;
        r.value = c.lease;
      } else {
        r.error = "lease-not-found";  // a keep-alive of a lease etcd no longer has answers TTL 0
      }
      break;
    }
    case raft::Op::lock: {
      // The key holds; its create revision is the token. Read as of the answer's revision (the Mutex saw its
      // key hold there; compaction is off), so a key deleted since, its lease run out while the answer
      // waited to be read, still names its revision, as the simulated service's answer does.
      const std::string key = unbase64(j.value("key", ""));
      const std::string at = j.contains("header") ? str_field(j["header"], "revision") : "0";
      auto got = etcd_post(port, "/v3/kv/range", {{"key", base64(key)}, {"revision", at}},
                           rpc_timeout_.count() / 1'000'000);
      if (!got || !got->is_object() || !error_text(*got).empty()) {
        r.error = "leader-changed";
      } else if (!got->contains("kvs") || (*got)["kvs"].empty()) {
        r.error = "no-key";
      } else {
        r.ok = true;
        r.value = static_cast<std::uint64_t>(int_field((*got)["kvs"][0], "create_revision"));
      }
      break;
    }
    default:  // revoke, unlock
      r.ok = true;
      r.value = c.lease;
  }
  return r;
}

namespace {

std::string path_of(raft::Op op) {
  switch (op) {
    case raft::Op::grant:
      return "/v3/lease/grant";
    case raft::Op::keepalive:
      return "/v3/lease/keepalive";
    case raft::Op::revoke:
      return "/v3/lease/revoke";
    case raft::Op::lock:
      return "/v3/lock/lock";
    case raft::Op::unlock:
      return "/v3/lock/unlock";
    default:
      return {};
  }
}

nlohmann::json body_of(const raft::Command& c) {
  switch (c.op) {
    case raft::Op::grant: {
      const std::int64_t ttl_s = (c.ttl.count() + 999'999'999) / 1'000'000'000;  // etcd's unit: whole seconds
      return {{"TTL", std::to_string(ttl_s)}, {"ID", std::to_string(c.lease & 0x7fff'ffff'ffff'ffffULL)}};
    }
    case raft::Op::lock:
      return {{"name", base64(c.name)}, {"lease", std::to_string(c.lease)}};
    case raft::Op::unlock:
      return {{"key", base64(v3lock_key(c.name, c.lease))}};
    default:  // keepalive, revoke
      return {{"ID", std::to_string(c.lease)}};
  }
}

}  // namespace

std::optional<raft::ClientReply> EtcdLink::submit(const raft::Command& c, Time deadline) {
  while (now() < deadline) {
    const std::uint16_t port = ports_[current_];
    const Duration wait = std::min(deadline - now(), rpc_timeout_);
    const long ms = std::max<long>(1, static_cast<long>(wait.count() / 1'000'000));
    raft::ClientReply r = reply_of(c, etcd_post(port, path_of(c.op), body_of(c), ms), port);
    if (!raft::Client::nothing_done(r) && r.error != "leader-changed") return r;
    follow(r);
    if (now() < deadline) sleep(std::min<Duration>(raft::LeaseAlgorithm::kRetryPause, deadline - now()));
  }
  return std::nullopt;
}

std::uint64_t EtcdLink::send(const raft::Command& c) {
  auto r = std::make_unique<Request>();
  r->req = next_req_++;
  r->cmd = c;
  r->port = ports_[current_];
  r->payload = body_of(c).dump();
  r->easy = curl_easy_init();
  const std::string url = fmt::format("http://127.0.0.1:{}{}", r->port, path_of(c.op));
  r->headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(r->easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
  curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->payload.c_str());
  curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(r->payload.size()));
  curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, &r->answer);
  curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(rpc_timeout_.count() / 1'000'000));
  curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(r->easy, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r.get());
  curl_multi_add_handle(impl_->multi, r->easy);
  CURL* easy = r->easy;
  const std::uint64_t id = r->req;
  impl_->flying.emplace(id, std::move(r));
  // The request has left (its bytes written to the socket) before the caller notes it, as a simulated
  // message leaves at send: a pause triggered by the note stops the client with the request on its way.
  // Bounded by the rpc timeout; a connection that fails ends the transfer, and wait() reads that.
  const Time give_up = now() + rpc_timeout_;
  for (;;) {
    int running = 0;
    curl_multi_perform(impl_->multi, &running);
    long sent = 0;
    curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &sent);
    if (sent > 0 || running == 0 || now() >= give_up) break;
    curl_multi_poll(impl_->multi, nullptr, 0, 1, nullptr);
  }
  return id;
}

std::optional<raft::ClientReply> EtcdLink::wait(const std::set<std::uint64_t>& reqs, Time until) {
  for (;;) {
    // Answers to requests the caller no longer waits for (an earlier attempt's) are dropped, as the
    // simulated client drops them.
    while (!impl_->done.empty()) {
      raft::ClientReply r = std::move(impl_->done.front());
      impl_->done.pop_front();
      if (reqs.count(r.req)) return r;
    }
    int running = 0;
    curl_multi_perform(impl_->multi, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(impl_->multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      Request* q = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&q));
      std::optional<nlohmann::json> answer;
      if (m->data.result == CURLE_OK) {
        auto j = nlohmann::json::parse(q->answer, nullptr, false);
        if (!j.is_discarded()) answer = std::move(j);
      }
      raft::ClientReply r = reply_of(q->cmd, answer, q->port);
      r.req = q->req;
      impl_->done.push_back(std::move(r));
      curl_multi_remove_handle(impl_->multi, q->easy);
      curl_easy_cleanup(q->easy);
      curl_slist_free_all(q->headers);
      impl_->flying.erase(q->req);
    }
    // Past the deadline, what already waited in the sockets was read by the perform above (a paused client
    // resumes and reads the answer that came meanwhile, as a simulated receive returns what is in the
    // mailbox); nothing more is waited for.
    if (!impl_->done.empty()) continue;
    const Time t = now();
    if (t >= until) return std::nullopt;
    const auto ms = std::clamp<std::int64_t>((until - t).count() / 1'000'000, 1, 50);
    curl_multi_poll(impl_->multi, nullptr, 0, static_cast<int>(ms), nullptr);
  }
}

}  // namespace locksim::reality
