#include "reality/etcd_client.hpp"

#include <curl/curl.h>

#include <charconv>
#include <cstring>

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

std::optional<nlohmann::json> EtcdCalls::call(const std::string& path, const nlohmann::json& body) {
  for (std::size_t k = 0; k < ports_.size(); ++k) {
    const std::size_t i = (current_ + k) % ports_.size();
    auto j = etcd_post(ports_[i], path, body, timeout_ms_);
    // A member without a leader (just restarted, or cut off) answers with an error that is no decision:
    // "etcdserver: no leader", "etcdserver: request timed out": try the next member.
    if (!j) continue;
    if (const std::string e = error_text(*j); !e.empty()) {
      if (e.find("no leader") != std::string::npos || e.find("timed out") != std::string::npos ||
          e.find("leader changed") != std::string::npos)
        continue;
    }
    current_ = i;
    return j;
  }
  return std::nullopt;
}

std::optional<EtcdLease> EtcdCalls::grant(std::int64_t ttl_s) {
  auto j = call("/v3/lease/grant", {{"TTL", std::to_string(ttl_s)}});
  if (!j || !j->is_object() || !j->contains("ID") || int_field(*j, "TTL") <= 0) return std::nullopt;
  return EtcdLease{std::to_string(int_field(*j, "ID")), int_field(*j, "TTL")};
}

std::optional<std::uint64_t> EtcdCalls::create(const std::string& key, const std::string& value,
                                               const std::string& lease) {
  const std::string k = base64(key);
  const nlohmann::json body = {
      {"compare", {{{"target", "CREATE"}, {"result", "EQUAL"}, {"key", k}, {"create_revision", "0"}}}},
      {"success", {{{"request_put", {{"key", k}, {"value", base64(value)}, {"lease", lease}}}}}}};
  auto j = call("/v3/kv/txn", body);
  if (!j || !j->is_object() || !error_text(*j).empty() || !j->contains("header")) return std::nullopt;
  if (!j->value("succeeded", false)) return 0;
  return static_cast<std::uint64_t>(int_field((*j)["header"], "revision"));
}

std::optional<bool> EtcdCalls::keepalive(const std::string& lease) {
  auto j = call("/v3/lease/keepalive", {{"ID", lease}});
  if (!j) return std::nullopt;
  if (!error_text(*j).empty() || !j->is_object()) return std::nullopt;
  const nlohmann::json& r = j->contains("result") ? (*j)["result"] : *j;
  if (!r.is_object() || !error_text(r).empty()) return std::nullopt;
  return int_field(r, "TTL") > 0;
}

void EtcdCalls::remove(const std::string& key) {
  call("/v3/kv/deleterange", {{"key", base64(key)}});
}

void EtcdCalls::revoke(const std::string& lease) {
  call("/v3/lease/revoke", {{"ID", lease}});
}

}  // namespace locksim::reality
