#include "locksim/protocols/dblease/lease_algorithm.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace locksim::dblease {

namespace {
/// Serialization failures retried within one acquire/extend/release before it gives up.
constexpr int kSerializationRetries = 8;
}  // namespace

LeaseAlgorithm::LeaseAlgorithm(LeaseClientOptions opts) : opts_(opts) {}

template <class Change>
LeaseAlgorithm::Outcome LeaseAlgorithm::transaction(Link& link, const std::string& key, Duration timeout,
                                                    Change&& change, Row& row, Time& now,
                                                    std::string_view commit_note) {
  const Time deadline = link.now() + timeout;
  auto failed = [&](const std::optional<SqlReply>& r) {
    if (!r) return Outcome::failed;
    return r->error == kSerializationFailure ? Outcome::retry : Outcome::failed;
  };
  auto b = link.exec(SqlRequest{.op = SqlOp::begin}, deadline);
  if (!b || !b->ok) return failed(b);
  now = b->now;  // tx.Now(): the database's clock
  auto s = link.exec(SqlRequest{.op = SqlOp::select_for_update, .table = kLeaseTable, .key = key}, deadline);
  if (!s || !s->ok) return failed(s);
  row = s->row.value_or(Row{.token = opts_.first_token > 0 ? opts_.first_token - 1 : 0});
  if (!change(row, now)) {
    link.exec(SqlRequest{.op = SqlOp::rollback}, deadline);
    return Outcome::refused;
  }
  auto u = link.exec(SqlRequest{.op = SqlOp::update, .table = kLeaseTable, .key = key, .row = row}, deadline);
  if (!u || !u->ok) return failed(u);
  auto c = link.exec(SqlRequest{.op = SqlOp::commit}, deadline, commit_note);
  if (!c || !c->ok) return failed(c);  // no answer: it may have committed; the TTL settles it
  return Outcome::done;
}

template <class Change>
LeaseAlgorithm::Outcome LeaseAlgorithm::with_retries(Link& link, const std::string& key, Duration timeout,
                                                     Change&& change, Row& row, Time& now,
                                                     std::string_view commit_note) {
  Outcome o = Outcome::retry;
  for (int i = 0; i <= kSerializationRetries && o == Outcome::retry; ++i) {
    if (i > 0) link.note("serialization-retry", key);
    o = transaction(link, key, timeout, change, row, now, commit_note);
  }
  return o == Outcome::retry ? Outcome::failed : o;
}

void LeaseAlgorithm::set_validity(Link& link, Grant& g, Time expires, Time sent, Duration ttl) const {
  g.lease_id = static_cast<std::uint64_t>(expires.count());
  // What the client believes, on its monotonic clock for the reports: the wall-clock deadline read now, or
  // the monotonic one from before the request.
  g.valid_until = opts_.monotonic_deadline ? sent + ttl : link.now() + (expires - link.wall());
}

std::optional<Grant> LeaseAlgorithm::acquire(Link& link, const std::string& key, Duration ttl) {
  const Time sent = link.now();
  const std::string owner = fmt::format("{}#{}", link.name(), link.unique());
  Row row;
  Time now{};
  // The notes' AcquireLease: free or expired by the database's clock, then Token++, Owner, Expires.
  auto take = [&](Row& r, Time tx_now) {
    if (!r.owner.empty() && r.expires > tx_now) return false;
    ++r.token;
    r.owner = owner;
    r.expires = tx_now + ttl;
    return true;
  };
  // "acquire-sent": the COMMIT that makes the client the holder has left; its answer is in flight.
  if (with_retries(link, key, timeout_for(ttl), take, row, now, "acquire-sent") != Outcome::done)
    return std::nullopt;
  Grant g;
  g.key = key;
  g.value = owner;
  g.token =
      opts_.app_counter ? ++app_counter_ + (opts_.first_token > 0 ? opts_.first_token - 1 : 0) : row.token;
  set_validity(link, g, row.expires, sent, ttl);
  return g;
}

bool LeaseAlgorithm::extend(Link& link, Grant& grant, Duration ttl) {
  const Time sent = link.now();
  Row row;
  Time now{};
  // Only the owner, with its token, while the row still names it and has not expired.
  auto renew = [&](Row& r, Time tx_now) {
    if (r.owner != grant.value || r.expires <= tx_now) return false;
    if (!opts_.app_counter && grant.token && r.token != *grant.token) return false;
    r.expires = tx_now + ttl;
    return true;
  };
  if (with_retries(link, grant.key, timeout_for(ttl), renew, row, now) != Outcome::done) return false;
  set_validity(link, grant, row.expires, sent, ttl);
  return true;
}

void LeaseAlgorithm::release(Link& link, const Grant& grant) {
  Row row;
  Time now{};
  auto free = [&](Row& r, Time tx_now) {
    if (r.owner != grant.value) return false;
    if (!opts_.app_counter && grant.token && r.token != *grant.token) return false;
    r.owner.clear();
    r.expires = tx_now;
    return true;
  };
  with_retries(link, grant.key, timeout_for(std::max<Duration>(grant.valid_until - link.now(), 1s)), free,
               row, now);
}

bool LeaseAlgorithm::believes_valid(Link& link, const Grant& grant) const {
  if (opts_.monotonic_deadline) return link.now() < grant.valid_until;
  return link.wall() < Time{static_cast<std::int64_t>(grant.lease_id)};
}

}  // namespace locksim::dblease
