// The database server: sessions, transactions, row locks, serializable checks, commit to storage,
// asynchronous replication and promotion, and the fence table as a resource.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <utility>

#include "locksim/protocols/dblease/sql.hpp"
#include "locksim/protocols/resource.hpp"

namespace locksim::dblease {

namespace {

/// How soon the server sees that an idle session's client is gone: the FIN's trip and the backend's wake-up.
constexpr Duration kFinNotice = 5ms;
/// Sessions of the server's own transactions (a write or read request on the fence table): above any id a
/// client draws, so never confused with one.
constexpr std::uint64_t kInternalSession = std::uint64_t{1} << 63;

using RowKey = std::pair<std::string, std::string>;  // (table, key)

/// A WAL record streamed to the replica: the rows one commit changed.
struct WalRecord {
  std::uint64_t commit = 0;
  std::vector<std::pair<RowKey, Row>> rows;
};
/// The primary's periodic message when it has nothing to stream (PostgreSQL's walsender keepalive).
struct WalKeepalive {
  std::uint64_t commit = 0;
};

std::string encode(const Row& r) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}", r.token, r.expires.count(), r.owner, r.value);
}

Row decode(const std::string& s) {
  Row r;
  std::vector<std::string> parts;
  std::size_t from = 0;
  for (;;) {
    const std::size_t at = s.find('\x1f', from);
    parts.push_back(s.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) break;
    from = at + 1;
  }
  if (parts.size() != 4) return r;
  std::int64_t ns = 0;
  std::from_chars(parts[0].data(), parts[0].data() + parts[0].size(), r.token);
  std::from_chars(parts[1].data(), parts[1].data() + parts[1].size(), ns);
  r.expires = Time{ns};
  r.owner = parts[2];
  r.value = parts[3];
  return r;
}

std::string storage_key(const RowKey& k) {
  return fmt::format("row\x1f{}\x1f{}", k.first, k.second);
}

class Database {
 public:
  Database(Context& ctx, World& world, History& history, const DatabaseOptions& opts,
           std::shared_ptr<Connections> connections)
      : ctx_(ctx), world_(world), history_(history), opts_(opts), connections_(std::move(connections)) {}

  void run() {
    recover();
    const ServiceRecorder rec = history_.recorder(world_, ctx_.name());
    if (primary_)
      rec.leader(promoted_ ? 1 : 0);
    else
      rec.follower(0);
    last_heard_ = ctx_.now();
    next_keepalive_ = ctx_.now();
    for (;;) {
      housekeeping();
      const Time wake = next_wake();
      auto m = wake == kTimeMax ? ctx_.receive() : ctx_.receive(std::max(wake - ctx_.now(), Duration{0}));
      if (!m) continue;
      if (const auto* rq = m->as<SqlRequest>()) {
        statement(*m, *rq);
      } else if (const auto* w = m->as<WalRecord>()) {
        apply_wal(*w);
      } else if (const auto* k = m->as<WalKeepalive>()) {
        (void)k;
        if (!primary_) last_heard_ = ctx_.now();
      } else if (m->as<WriteRequest>() || m->as<ReadRequest>()) {
        resource_request(*m);
      }
    }
  }

 private:
  struct Stored {
    Row row;
    std::uint64_t commit = 0;  ///< the commit that wrote it
  };
  struct Session {
    bool in_tx = false;
    bool has_snapshot = false;   ///< taken at the transaction's first statement after BEGIN
    std::uint64_t snapshot = 0;  ///< the last commit visible to the transaction
    Time tx_now{};               ///< tx.Now()
    Time idle_since{};           ///< monotonic: when the last statement was answered
    std::uint64_t last_seq = 0;  ///< the last statement taken (SqlRequest::seq)
    std::map<RowKey, Row> writes;
    std::vector<RowKey> locks;
    std::optional<Message> waiting;  ///< the statement waiting for a row lock
    RowKey waiting_for;
  };
  struct Outgoing {
    Time due;
    WalRecord record;
  };

  // ---- recovery and persistence ----
  void recover() {
    rows_.clear();
    const auto snap = ctx_.storage().snapshot();
    for (const auto& [k, v] : snap) {
      if (k == "commit") {
        std::from_chars(v.data(), v.data() + v.size(), commit_);
      } else if (k == "promoted") {
        promoted_ = v == "1";
      } else if (k.rfind("row\x1f", 0) == 0) {
        const std::size_t a = k.find('\x1f', 4);
        if (a == std::string::npos) continue;
        RowKey rk{k.substr(4, a - 4), k.substr(a + 1)};
        rows_[rk] = Stored{decode(v), 0};
      }
    }
    // Rows recovered from disk are as old as the newest commit on it: no open transaction survives.
    for (auto& [k, s] : rows_) s.commit = commit_;
    primary_ = !opts_.replica || promoted_;
  }

  void persist(const std::vector<std::pair<RowKey, Row>>& rows) {
    for (const auto& [k, r] : rows) ctx_.storage().put(storage_key(k), encode(r));
    ctx_.storage().put("commit", std::to_string(commit_));
    ctx_.storage()
        .fsync();  // synchronous_commit = on: the commit's WAL record is flushed before COMMIT returns
  }

  // ---- timers ----
  Time next_wake() const {
    Time t = kTimeMax;
    const bool idle_tx = std::any_of(sessions_.begin(), sessions_.end(), [](const auto& kv) {
      return kv.second.in_tx && !kv.second.waiting && kv.first < kInternalSession;
    });
    if (idle_tx) t = std::min(t, ctx_.now() + kFinNotice);
    if (opts_.idle_in_transaction_timeout > 0ns)
      for (const auto& [id, s] : sessions_)
        if (s.in_tx && !s.waiting) t = std::min(t, s.idle_since + opts_.idle_in_transaction_timeout);
    if (!outbox_.empty()) t = std::min(t, outbox_.front().due);
    if (primary_ && !opts_.peer.empty()) t = std::min(t, next_keepalive_);
    if (!primary_) t = std::min(t, last_heard_ + opts_.failover_after);
    return t;
  }

  Duration keepalive_period() const {
    return std::max<Duration>(std::min<Duration>(1s, opts_.failover_after / 3), 1ms);
  }

  void housekeeping() {
    const Time now = ctx_.now();
    // Sessions idle inside a transaction whose client is gone, or idle for too long, end (rollback).
    std::vector<std::uint64_t> ending;
    for (const auto& [id, s] : sessions_) {
      if (id >= kInternalSession) continue;
      if (connections_->is_closed(id) && !s.waiting) {
        ending.push_back(id);
      } else if (s.in_tx && !s.waiting && opts_.idle_in_transaction_timeout > 0ns &&
                 now >= s.idle_since + opts_.idle_in_transaction_timeout) {
        ctx_.note("idle-in-transaction-timeout", fmt::format("session {:x}", id));
        ending.push_back(id);
      }
    }
    for (std::uint64_t id : ending) terminate(id);
    // The replication stream.
    while (!outbox_.empty() && outbox_.front().due <= now) {
      if (primary_ && !opts_.peer.empty())
        ctx_.send(ctx_.lookup(opts_.peer),
                  Message::of("wal", outbox_.front().record,
                              fmt::format("commit={}", outbox_.front().record.commit)));
      outbox_.pop_front();
      next_keepalive_ = now + keepalive_period();
    }
    if (primary_ && !opts_.peer.empty() && now >= next_keepalive_) {
      ctx_.send(ctx_.lookup(opts_.peer), Message::of("wal-keepalive", WalKeepalive{commit_}));
      next_keepalive_ = now + keepalive_period();
    }
    // A replica that has not heard its primary is promoted (and keeps that role across restarts).
    if (!primary_ && now >= last_heard_ + opts_.failover_after) {
      primary_ = true;
      promoted_ = true;
      ctx_.storage().put("promoted", "1");
      ctx_.storage().fsync();
      ctx_.note("promoted", fmt::format("last commit {}", commit_));
      history_.recorder(world_, ctx_.name()).leader(1);
    }
  }

  // ---- sessions, locks ----
  void reply(const Message& m, SqlReply r) {
    const char* type = r.ok ? "sql-ok" : "sql-error";
    std::string detail = r.ok ? std::string() : r.error;
    ctx_.reply(m, Message::of(type, std::move(r), std::move(detail)));
  }

  /// Ends session `id`: its transaction rolls back, its locks pass on.
  void terminate(std::uint64_t id) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    Session s = std::move(it->second);
    sessions_.erase(it);
    if (s.waiting) {
      auto& q = waiters_[s.waiting_for];
      q.erase(std::remove(q.begin(), q.end(), id), q.end());
    }
    for (const RowKey& k : s.locks) unlock(k);
  }

  void end_transaction(Session& s) {
    s.in_tx = false;
    s.writes.clear();
    const std::vector<RowKey> locks = std::exchange(s.locks, {});
    for (const RowKey& k : locks) unlock(k);
  }

  void unlock(const RowKey& k) {
    holders_.erase(k);
    auto wit = waiters_.find(k);
    while (wit != waiters_.end() && !wit->second.empty()) {
      const std::uint64_t next = wit->second.front();
      wit->second.pop_front();
      auto sit = sessions_.find(next);
      if (sit == sessions_.end() || !sit->second.waiting || sit->second.waiting_for != k) continue;
      // A backend waiting on a lock does not watch its socket (client_connection_check_interval = 0): it
      // finds its client gone only now, when it would answer.
      if (next < kInternalSession && connections_->is_closed(next)) {
        sit->second.waiting.reset();
        terminate(next);
        wit = waiters_.find(k);
        continue;
      }
      holders_[k] = next;
      sit->second.locks.push_back(k);
      Message m = std::move(*sit->second.waiting);
      sit->second.waiting.reset();
      resume(next, m);
      return;
    }
  }

  /// Takes the lock on `k` for session `id`, or queues `m` behind its holder. True if held now.
  bool lock(std::uint64_t id, Session& s, const RowKey& k, const Message& m) {
    auto h = holders_.find(k);
    if (h == holders_.end()) {
      holders_[k] = id;
      s.locks.push_back(k);
      return true;
    }
    if (h->second == id) return true;
    s.waiting = m;
    s.waiting_for = k;
    waiters_[k].push_back(id);
    ctx_.note("lock-wait", fmt::format("{}/{} held by session {:x}", k.first, k.second, h->second));
    return false;
  }

  /// The row as transaction `s` sees it (its own writes first).
  std::optional<Row> read(const Session& s, const RowKey& k) const {
    if (auto w = s.writes.find(k); w != s.writes.end()) return w->second;
    if (auto r = rows_.find(k); r != rows_.end()) return r->second.row;
    return std::nullopt;
  }

  /// Serializable: a row another transaction committed after this one began cannot be locked or changed.
  bool conflicts(const Session& s, const RowKey& k) const {
    auto r = rows_.find(k);
    return r != rows_.end() && r->second.commit > s.snapshot;
  }

  void statement(const Message& m, const SqlRequest& rq) {
    auto it = sessions_.find(rq.session);
    // A copy of a statement already taken (the network duplicated it): TCP would never deliver it.
    if (it != sessions_.end() && rq.seq <= it->second.last_seq) return;
    if (rq.connect && it != sessions_.end()) {
      terminate(rq.session);  // a new connection never continues an old session
      it = sessions_.end();
    }
    if (it == sessions_.end() && rq.connect && rq.seq != 1) return;  // a late copy of a connect
    if (it == sessions_.end()) {
      if (!rq.connect || rq.session >= kInternalSession) {
        reply(m, SqlReply{.ok = false, .error = kSessionTerminated});
        return;
      }
      it = sessions_.emplace(rq.session, Session{}).first;
    }
    Session& s = it->second;
    s.last_seq = rq.seq;
    if (!primary_) {
      terminate(rq.session);
      reply(m, SqlReply{.ok = false, .error = kReadOnly});
      return;
    }
    s.idle_since = ctx_.now();
    switch (rq.op) {
      case SqlOp::begin:
        if (!s.in_tx) {
          s.in_tx = true;
          s.has_snapshot = false;
          s.tx_now = ctx_.wall();
        }
        reply(m, SqlReply{.ok = true, .now = s.tx_now});
        return;
      case SqlOp::select_for_update:
      case SqlOp::update:
        if (!s.in_tx) {
          reply(m, SqlReply{.ok = false, .error = kNoTransaction});
          return;
        }
        if (!s.has_snapshot) {
          s.snapshot = commit_;
          s.has_snapshot = true;
        }
        if (lock(rq.session, s, RowKey{rq.table, rq.key}, m)) resume(rq.session, m);
        return;
      case SqlOp::commit:
        if (s.in_tx) commit(s);
        reply(m, SqlReply{.ok = true});
        return;
      case SqlOp::rollback:
        end_transaction(s);
        reply(m, SqlReply{.ok = true});
        return;
    }
  }

  /// A statement of session `id` that holds its row lock now.
  void resume(std::uint64_t id, const Message& m) {
    Session& s = sessions_.at(id);
    s.idle_since = ctx_.now();
    if (id >= kInternalSession) {
      resource_locked(id, s, m);
      return;
    }
    const SqlRequest& rq = *m.as<SqlRequest>();
    const RowKey k{rq.table, rq.key};
    if (conflicts(s, k)) {
      end_transaction(s);
      reply(m, SqlReply{.ok = false, .error = kSerializationFailure});
      return;
    }
    if (rq.op == SqlOp::update) {
      s.writes[k] = rq.row;
      reply(m, SqlReply{.ok = true});
      return;
    }
    reply(m, SqlReply{.ok = true, .row = read(s, k)});
  }

  void commit(Session& s) {
    if (!s.writes.empty()) {
      ++commit_;
      WalRecord rec{commit_, {}};
      for (const auto& [k, r] : s.writes) {
        auto old = rows_.find(k);
        const bool new_holder =
            k.first == kLeaseTable && !r.owner.empty() &&
            (old == rows_.end() || old->second.row.owner != r.owner || old->second.row.token != r.token);
        rows_[k] = Stored{r, commit_};
        rec.rows.emplace_back(k, r);
        if (new_holder) history_.recorder(world_, ctx_.name()).grant(k.second, r.owner);
      }
      persist(rec.rows);
      if (!opts_.peer.empty())
        outbox_.push_back(Outgoing{ctx_.now() + opts_.replication_delay, std::move(rec)});
    }
    end_transaction(s);
  }

  void apply_wal(const WalRecord& w) {
    if (primary_) return;  // a promoted replica no longer follows
    last_heard_ = ctx_.now();
    if (w.commit <= commit_) return;
    commit_ = w.commit;
    for (const auto& [k, r] : w.rows) rows_[k] = Stored{r, commit_};
    persist(w.rows);
  }

  // ---- the fence table as the protected resource ----
  void resource_request(const Message& m) {
    if (!primary_) {
      if (m.as<WriteRequest>())
        ctx_.reply(m, Message::of("rejected", WriteReply{false, kReadOnly}, kReadOnly));
      else
        ctx_.reply(m, Message::of("read-rejected", ReadReply{std::nullopt, true, kReadOnly}, kReadOnly));
      return;
    }
    const std::uint64_t id = kInternalSession | m.id;
    Session& s = sessions_[id];
    s.in_tx = true;
    s.snapshot = commit_;
    s.tx_now = ctx_.wall();
    const std::string& key = m.as<WriteRequest>() ? m.as<WriteRequest>()->key : m.as<ReadRequest>()->key;
    if (lock(id, s, RowKey{kFenceTable, key}, m)) resume(id, m);
  }

  /// WriteWithFence in one transaction: the fence row locked, the token checked (>=: equal accepted), the
  /// value and the fence written together; a read is fenced the same way (protocols/resource.hpp).
  void resource_locked(std::uint64_t id, Session& s, const Message& m) {
    const auto* wq = m.as<WriteRequest>();
    const auto* rq = m.as<ReadRequest>();
    const std::string key = wq ? wq->key : rq->key;
    const std::optional<std::uint64_t> token = wq ? wq->token : rq->token;
    const RowKey k{kFenceTable, key};
    const std::optional<Row> cur = read(s, k);
    std::string reason;
    bool ok = true;
    if (token && cur && *token < cur->token) {
      ok = false;
      reason = fmt::format("token {} < highest {}", *token, cur->token);
    }
    Row next = cur.value_or(Row{});
    if (ok && token) next.token = std::max(next.token, *token);
    if (ok && wq) next.value = wq->value;
    if (ok && (!cur || next != *cur)) s.writes[k] = next;
    const auto op = wq ? ResourceEntry::Op::write : ResourceEntry::Op::read;
    std::string value = wq ? wq->value : (ok && cur ? cur->value : std::string());
    history_.log(ResourceEntry{.op = op,
                               .time = world_.now(),
                               .resource = ctx_.name(),
                               .key = key,
                               .request = wq ? wq->write_id : rq->read_id,
                               .token = token,
                               .accepted = ok,
                               .applied = ok && wq != nullptr,
                               .value = value,
                               .reason = reason});
    commit(s);
    sessions_.erase(id);
    if (wq) {
      ctx_.reply(m, Message::of(ok ? "accepted" : "rejected", WriteReply{ok, reason}, reason));
    } else {
      ReadReply rep{ok && cur ? std::optional<std::string>(cur->value) : std::nullopt, !ok, reason};
      ctx_.reply(m, Message::of(ok ? "read-ok" : "read-rejected", rep, ok ? value : reason));
    }
  }

  Context& ctx_;
  World& world_;
  History& history_;
  DatabaseOptions opts_;
  std::shared_ptr<Connections> connections_;

  std::map<RowKey, Stored> rows_;
  std::uint64_t commit_ = 0;
  bool primary_ = true;
  bool promoted_ = false;
  std::map<std::uint64_t, Session> sessions_;
  std::map<RowKey, std::uint64_t> holders_;
  std::map<RowKey, std::deque<std::uint64_t>> waiters_;
  std::deque<Outgoing> outbox_;
  Time last_heard_{};
  Time next_keepalive_{};
};

}  // namespace

ProcId spawn_database(World& world, const DatabaseOptions& opts, History& history,
                      std::shared_ptr<Connections> connections) {
  World* w = &world;
  History* h = &history;
  ProcessOptions po;
  po.daemon = true;
  po.fsync = FsyncPolicy::never;  // the server fsyncs at every commit itself
  return world.spawn(
      opts.name,
      [w, h, opts, connections](Context& ctx) {
        Database db(ctx, *w, *h, opts, connections);
        db.run();
      },
      po);
}

}  // namespace locksim::dblease
