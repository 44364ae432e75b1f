#include "reality/etcd_server.hpp"

#include <curl/curl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "reality/children.hpp"
#include "reality/etcd_client.hpp"

namespace locksim::reality {

namespace {

constexpr std::int64_t kStartDeadlineNs = 10'000'000'000;

std::string str_field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return "0";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

/// The member's status: {own id, leader id} ("0": none).
/// What a member says of itself: its id, the leader it knows ("0": none) and its raft term.
struct Status {
  std::string id, leader;
  std::uint64_t term = 0;
};

std::optional<Status> status(std::uint16_t port, long timeout_ms) {
  auto j = etcd_post(port, "/v3/maintenance/status", nlohmann::json::object(), timeout_ms);
  if (!j || !j->contains("header")) return std::nullopt;
  return Status{str_field((*j)["header"], "member_id"), str_field(*j, "leader"),
                std::stoull(str_field(*j, "raftTerm"))};
}

/// The watch stream's state inside libcurl's callbacks.
struct Stream {
  std::string buffer, node;
  std::atomic<bool>* stop = nullptr;
  std::atomic<std::uint64_t>* next = nullptr;
  std::atomic<bool>* created = nullptr;
  std::mutex* mu = nullptr;
  std::vector<LeaseRecord>* records = nullptr;
  std::string name;  ///< the lock's name; its keys are name/<lease hex>
  /// The lock's keys alive now: create revision -> (key, lease). The lowest holds (concurrency.Mutex).
  std::map<std::uint64_t, std::pair<std::string, std::string>>* alive = nullptr;
};

/// Applies one message of the watch stream to the lock's live keys, and records each key that becomes the
/// lowest (the holder) when it does: at its own creation when no key was older, or when the keys before it
/// were deleted (unlocked, or revoked with their lease).
void on_message(Stream& s, const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.contains("result")) return;
  const nlohmann::json& r = j["result"];
  if (r.value("created", false)) *s.created = true;
  if (!r.contains("events")) return;
  const std::int64_t t = mono_ns();
  auto& alive = *s.alive;
  for (const auto& e : r["events"]) {
    const nlohmann::json& kv = e.value("kv", nlohmann::json::object());
    const std::uint64_t mod = std::stoull(str_field(kv, "mod_revision"));
    if (mod >= *s.next) *s.next = mod + 1;  // a stream resumed on another member starts after it
    const std::string key = unbase64(kv.value("key", ""));
    const std::uint64_t before = alive.empty() ? 0 : alive.begin()->first;
    if (e.contains("type") && e["type"] == "DELETE") {
      for (auto it = alive.begin(); it != alive.end(); ++it)
        if (it->second.first == key) {
          alive.erase(it);
          break;
        }
    } else if (str_field(kv, "version") == "1") {  // a creation, not an update
      alive[std::stoull(str_field(kv, "create_revision"))] = {key, str_field(kv, "lease")};
    }
    if (alive.empty() || alive.begin()->first == before) continue;
    std::lock_guard lk(*s.mu);
    s.records->push_back(
        {t, s.node, alive.begin()->second.first, alive.begin()->second.second, alive.begin()->first});
  }
}

std::size_t on_data(char* data, std::size_t size, std::size_t n, void* p) {
  auto& s = *static_cast<Stream*>(p);
  s.buffer.append(data, size * n);
  for (std::size_t nl; (nl = s.buffer.find('\n')) != std::string::npos;) {
    const std::string line = s.buffer.substr(0, nl);
    s.buffer.erase(0, nl + 1);
    try {
      on_message(s, line);
    } catch (const std::exception&) {
      // A message of another shape (a numeric field that is not a number): not a creation; skip it.
    }
  }
  return size * n;
}

}  // namespace

std::string etcd_missing() {
  if (find_program("etcd").empty()) return "etcd is not installed (Debian: apt-get install etcd-server)";
  return {};
}

EtcdCluster::EtcdCluster(std::vector<std::string> names, const std::string& dir, std::string lock_key)
    : lock_key_(std::move(lock_key)) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  token_ = fmt::format("locksim-{}-{}", ::getpid(), mono_ns());
  for (std::string& n : names) {
    Member m;
    m.name = std::move(n);
    m.dir = dir + "/" + m.name;
    ::mkdir(m.dir.c_str(), 0700);
    m.client = free_loopback_port();
    m.peer = free_loopback_port();
    m.advertised = m.peer;
    watch_ports_.push_back(m.client);
    watch_names_.push_back(m.name);
    members_.push_back(std::move(m));
  }
  live_ = std::make_unique<std::atomic<pid_t>[]>(members_.size());
  for (std::size_t i = 0; i < members_.size(); ++i) live_[i] = -1;
}

EtcdCluster::~EtcdCluster() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  for (Member& m : members_) {
    kill_and_reap(m.pid);
    m.pid = -1;
  }
}

void EtcdCluster::spawn(Member& m) {
  const std::string bin = find_program("etcd");
  if (bin.empty()) throw StartError(etcd_missing());
  std::string cluster;
  for (const Member& o : members_)
    cluster += fmt::format("{}{}=http://127.0.0.1:{}", cluster.empty() ? "" : ",", o.name, o.advertised);
  const std::string client = fmt::format("http://127.0.0.1:{}", m.client);
  const std::string peer = fmt::format("http://127.0.0.1:{}", m.peer);
  const std::string advertised = fmt::format("http://127.0.0.1:{}", m.advertised);
  std::vector<std::string> args = {bin,
                                   "--name=" + m.name,
                                   "--data-dir=" + m.dir + "/data",
                                   "--listen-client-urls=" + client,
                                   "--advertise-client-urls=" + client,
                                   "--listen-peer-urls=" + peer,
                                   "--initial-advertise-peer-urls=" + advertised,
                                   "--initial-cluster=" + cluster,
                                   "--initial-cluster-state=new",
                                   "--initial-cluster-token=" + token_,
                                   "--auto-compaction-retention=0",
                                   "--listen-metrics-urls=",
                                   "--enable-pprof=false"};
  m.pid = spawn_server(std::move(args), {.dir = m.dir, .log = m.dir + "/etcd.log"});
  live_[static_cast<std::size_t>(&m - members_.data())] = m.pid;
}

void EtcdCluster::wait_healthy(const std::vector<Member*>& ms, const char* what) {
  const std::int64_t deadline = mono_ns() + kStartDeadlineNs;
  std::vector<bool> ok(ms.size(), false);
  for (;;) {
    bool all = true;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      if (ok[i]) continue;
      Member& m = *ms[i];
      int st = 0;
      if (::waitpid(m.pid, &st, WNOHANG) == m.pid) {
        forget_child(m.pid);
        m.pid = -1;
        const std::string tail = log_tail(m.dir + "/etcd.log");
        for (Member& o : members_) {
          kill_and_reap(o.pid);
          o.pid = -1;
        }
        throw StartError(
            fmt::format("{}: etcd exited at {} (client port {}):\n{}", m.name, what, m.client, tail));
      }
      const auto s = status(m.client, 200);
      ok[i] = s && s->leader != "0";
      all = all && ok[i];
    }
    if (all) return;
    if (mono_ns() > deadline || interrupted()) {
      for (Member& o : members_) {
        kill_and_reap(o.pid);
        o.pid = -1;
      }
      check_interrupted();
      std::string tails;
      for (std::size_t i = 0; i < ms.size(); ++i)
        if (!ok[i]) tails += fmt::format("{}:\n{}", ms[i]->name, log_tail(ms[i]->dir + "/etcd.log"));
      throw StartError(fmt::format("etcd did not elect a leader within 10 s at {}:\n{}", what, tails));
    }
    ::usleep(20'000);
  }
}

void EtcdCluster::start() {
  std::vector<Member*> all;
  try {
    for (Member& m : members_) {
      spawn(m);
      all.push_back(&m);
    }
  } catch (...) {
    for (Member& o : members_) {
      kill_and_reap(o.pid);
      o.pid = -1;
    }
    throw;
  }
  wait_healthy(all, "start-up");
  watcher_ = std::thread([this] { watch_loop(); });
  // The watch is created before any client runs, so no creation is made unseen.
  const std::int64_t deadline = mono_ns() + 5'000'000'000;
  while (!watch_created_.load()) {
    if (mono_ns() > deadline || interrupted()) {
      stop_ = true;
      watcher_.join();
      for (Member& o : members_) {
        kill_and_reap(o.pid);
        o.pid = -1;
      }
      check_interrupted();
      throw StartError("etcd: could not watch the lock key within 5 s");
    }
    ::usleep(2'000);
  }
}

void EtcdCluster::watch_loop() {
  std::size_t at = 0;
  std::map<std::uint64_t, std::pair<std::string, std::string>> alive;  // kept across the members' streams
  while (!stop_) {
    Stream s;
    s.node = watch_names_[at];
    s.stop = &stop_;
    s.next = &next_revision_;
    s.mu = &mu_;
    s.records = &records_;
    s.created = &watch_created_;
    s.name = lock_key_;
    s.alive = &alive;
    // Every key under "<lock>/": range_end is the prefix with its last byte one higher ('/' + 1 = '0').
    const nlohmann::json body = {{"create_request",
                                  {{"key", base64(lock_key_ + "/")},
                                   {"range_end", base64(lock_key_ + "0")},
                                   {"start_revision", std::to_string(next_revision_.load())}}}};
    const std::string payload = body.dump();
    const std::string url = fmt::format("http://127.0.0.1:{}/v3/watch", watch_ports_[at]);
    CURL* c = curl_easy_init();
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 500L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    // Until the member dies, stop_ is set, or the member is stopped (SIGSTOP): a stopped member's stream
    // stalls without closing, so it is left for another's, looked at every 20 ms.
    const std::uint32_t bit = 1u << at;
    CURLM* multi = curl_multi_init();
    curl_multi_add_handle(multi, c);
    for (int running = 1; running && !stop_ && !(paused_.load() & bit);) {
      if (curl_multi_perform(multi, &running) != CURLM_OK || !running) break;
      curl_multi_poll(multi, nullptr, 0, 20, nullptr);
    }
    curl_multi_remove_handle(multi, c);
    curl_multi_cleanup(multi);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    if (!stop_) {
      // Another member, not a stopped one, from the next revision.
      for (std::size_t k = 1; k <= watch_ports_.size(); ++k) {
        const std::size_t next = (at + k) % watch_ports_.size();
        if (!(paused_.load() & (1u << next))) {
          at = next;
          break;
        }
      }
      ::usleep(20'000);
    }
  }
}

void EtcdCluster::kill(const std::string& name) {
  for (Member& m : members_)
    if (m.name == name) {
      kill_and_reap(m.pid);
      m.pid = -1;
    }
}

void EtcdCluster::restart(const std::string& name) {
  for (Member& m : members_)
    if (m.name == name && m.pid <= 0) spawn(m);  // it rejoins on its own; the run goes on meanwhile
}

void EtcdCluster::advance_revision(std::uint64_t revision) {
  const nlohmann::json put = {{"key", base64("locksim/revision")}, {"value", base64("-")}};
  for (std::uint64_t now = 1; now < revision;) {
    auto j = etcd_post(members_[0].client, "/v3/kv/put", put, 2000);
    if (!j || !j->contains("header"))
      throw StartError(
          fmt::format("{}: could not advance etcd's revision to {}", members_[0].name, revision));
    now = std::stoull(str_field((*j)["header"], "revision"));
  }
}

bool EtcdCluster::has(const std::string& name) const {
  for (const Member& m : members_)
    if (m.name == name) return true;
  return false;
}

bool EtcdCluster::running(const std::string& name) const {
  for (const Member& m : members_)
    if (m.name == name) return m.pid > 0;
  return false;
}

std::string EtcdCluster::leader() const {
  // Of the members that say they lead, the one of the highest term: a leader cut off from the others goes on
  // saying so (until its check-quorum steps it down) after the majority elected another in a newer term.
  std::string best;
  std::uint64_t best_term = 0;
  for (const Member& m : members_) {
    if (m.pid <= 0) continue;
    const auto s = status(m.client, 500);
    if (!s || s->id != s->leader) continue;
    if (best.empty() || s->term > best_term) {
      best = m.name;
      best_term = s->term;
    }
  }
  return best;
}

std::vector<std::uint16_t> EtcdCluster::client_ports() const {
  std::vector<std::uint16_t> out;
  for (const Member& m : members_) out.push_back(m.client);
  return out;
}

std::vector<std::uint16_t> EtcdCluster::all_ports() const {
  std::vector<std::uint16_t> out;
  for (const Member& m : members_) {
    out.push_back(m.client);
    out.push_back(m.peer);
  }
  return out;
}

std::vector<std::pair<std::string, std::uint16_t>> EtcdCluster::peer_ports() const {
  std::vector<std::pair<std::string, std::uint16_t>> out;
  for (const Member& m : members_) out.emplace_back(m.name, m.peer);
  return out;
}

void EtcdCluster::advertise_peer(const std::string& name, std::uint16_t port) {
  for (Member& m : members_)
    if (m.name == name) m.advertised = port;
}

std::vector<std::pair<std::string, pid_t>> EtcdCluster::live_pids() const {
  std::vector<std::pair<std::string, pid_t>> out;
  for (std::size_t i = 0; i < members_.size(); ++i) out.emplace_back(members_[i].name, live_[i].load());
  return out;
}

void EtcdCluster::set_paused(const std::string& name, bool paused) {
  for (std::size_t i = 0; i < watch_names_.size(); ++i)
    if (watch_names_[i] == name) {
      if (paused)
        paused_.fetch_or(1u << i);
      else
        paused_.fetch_and(~(1u << i));
    }
}

pid_t EtcdCluster::pid(const std::string& name) const {
  for (const Member& m : members_)
    if (m.name == name) return m.pid;
  return -1;
}

std::vector<pid_t> EtcdCluster::pids() const {
  std::vector<pid_t> out;
  for (const Member& m : members_) out.push_back(m.pid);
  return out;
}

bool EtcdCluster::wait_record(std::uint64_t revision, std::int64_t timeout_ns) const {
  const std::int64_t deadline = mono_ns() + timeout_ns;
  for (;;) {
    {
      std::lock_guard lk(mu_);
      for (const LeaseRecord& r : records_)
        if (r.revision == revision) return true;
    }
    if (mono_ns() > deadline) return false;
    ::usleep(1'000);
  }
}

std::vector<LeaseRecord> EtcdCluster::records() const {
  std::lock_guard lk(mu_);
  return records_;
}

}  // namespace locksim::reality
