// Internal to the injector: typed, range-checked reads from one JSON object of a configuration
// (a campaign config, a fault model), each error naming the file and the key.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/core/error.hpp"

namespace resil::inject::detail {

/// Every value must have the documented type: nlohmann's get<> would turn -5 into 2^64 - 5, 1.7
/// into 1 and true into 1, and a wrong type into an error that does not name the key. An absent
/// key keeps the default; null is refused. Errors are UsageError
/// "<source>: <prefix><key> must be <what>, not <value>". The object, the source and the result of
/// object() refer to the caller's JSON and string: they must outlive the JsonFields.
class JsonFields {
public:
  using json = nlohmann::json;

  JsonFields(const json& j, std::string prefix, const std::string& source) : j_(j), prefix_(std::move(prefix)), source_(source) {}

  /// Refuse keys not in `known` (a misspelt key would otherwise be ignored silently).
  void only(std::initializer_list<const char*> known) const {
    for (const auto& [k, v] : j_.items())
      if (std::none_of(known.begin(), known.end(), [&](const char* n) { return k == n; }))
        throw UsageError(source_ + ": unknown key '" + prefix_ + k + "' (see docs/reference/campaign.md)");
  }
  const json* find(const char* key) const {
    const auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  [[noreturn]] void bad(const char* key, const std::string& want, const json& v) const {
    std::string shown = v.dump();
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    throw UsageError(source_ + ": " + prefix_ + key + " must be " + want + ", not " + shown);
  }
  void string(const char* key, std::string& out) const {
    if (const json* v = find(key)) {
      if (!v->is_string()) bad(key, "a string", *v);
      out = v->get<std::string>();
    }
  }
  void boolean(const char* key, bool& out) const {
    if (const json* v = find(key)) {
      if (!v->is_boolean()) bad(key, "true or false", *v);
      out = v->get<bool>();
    }
  }
  void strings(const char* key, std::vector<std::string>& out) const {
    if (const json* v = find(key)) {
      if (!v->is_array() || std::any_of(v->begin(), v->end(), [](const json& e) { return !e.is_string(); }))
        bad(key, "an array of strings", *v);
      out = v->get<std::vector<std::string>>();
    }
  }
  /// An integer in [lo, hi]; an integral float (1e15) counts when it is exact (below 2^53).
  void integer(const char* key, std::uint64_t& out, std::uint64_t lo, std::uint64_t hi) const {
    const json* v = find(key);
    if (!v) return;
    const std::string want = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (v->is_number_unsigned()) {
      out = v->get<std::uint64_t>();
    } else if (v->is_number_float()) {
      const double d = v->get<double>();
      if (!(d >= 0 && d <= 9007199254740992.0 && std::floor(d) == d)) bad(key, want, *v);
      out = static_cast<std::uint64_t>(d);
    } else {
      bad(key, want, *v);  // negative, string, boolean, null, array, object
    }
    if (out < lo || out > hi) bad(key, want, *v);
  }
  /// A finite number accepted by `ok` (described by `want`).
  void number(const char* key, double& out, const std::function<bool(double)>& ok, const std::string& want) const {
    if (const json* v = find(key)) {
      if (!v->is_number() || !std::isfinite(v->get<double>()) || !ok(v->get<double>())) bad(key, want, *v);
      out = v->get<double>();
    }
  }
  /// A finite number in [lo, hi], nullopt when absent (an error when `required`).
  std::optional<double> number_in(const char* key, double lo, double hi, bool required = false) const {
    const json* v = find(key);
    if (!v) {
      if (required) throw UsageError(source_ + ": " + prefix_ + key + " is required");
      return std::nullopt;
    }
    const std::string want = "a number in [" + shortest(lo) + ", " + shortest(hi) + "]";
    if (!v->is_number()) bad(key, want, *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) bad(key, want, *v);
    return x;
  }
  void exit_codes(const char* key, std::vector<int>& out) const {
    if (const json* v = find(key)) {
      const std::string want = "an array of exit codes 1..255";
      if (!v->is_array()) bad(key, want, *v);
      std::vector<int> codes;
      for (const auto& e : *v) {
        if (!e.is_number_unsigned() || e.get<std::uint64_t>() < 1 || e.get<std::uint64_t>() > 255) bad(key, want, *v);
        codes.push_back(static_cast<int>(e.get<std::uint64_t>()));
      }
      out = std::move(codes);
    }
  }
  /// One of the names of `table` (pairs of name and value, e.g. inject::role_names), read as its
  /// value; the error names every accepted name.
  template <class Table, class T>
  void choice(const char* key, T& out, const Table& table) const {
    const json* v = find(key);
    if (!v) return;
    if (v->is_string())
      for (const auto& [name, value] : table)
        if (name == v->template get_ref<const std::string&>()) {
          out = value;
          return;
        }
    std::string names;
    for (const auto& [name, value] : table) names += (names.empty() ? "\"" : ", \"") + std::string(name) + "\"";
    bad(key, "one of " + names, *v);
  }
  /// The same for an optional value: "" reads as none (what name_of writes for it).
  template <class Table, class E>
  void choice(const char* key, std::optional<E>& out, const Table& table) const {
    const json* v = find(key);
    if (!v) return;
    if (v->is_string() && v->template get_ref<const std::string&>().empty()) {
      out.reset();
      return;
    }
    E e{};
    choice(key, e, table);
    out = e;
  }
  /// A nested object (`inject`, `golden`); absent reads as empty.
  JsonFields object(const char* key) const {
    static const json empty = json::object();
    const json* v = find(key);
    if (!v) return JsonFields(empty, prefix_ + key + ".", source_);
    if (!v->is_object()) bad(key, "an object", *v);
    return JsonFields(*v, prefix_ + key + ".", source_);
  }

private:
  static std::string shortest(double x) {  // 1e+12, 0.5: as a person wrote the bound
    char b[32];
    std::snprintf(b, sizeof b, "%g", x);
    return b;
  }

  const json& j_;
  std::string prefix_;
  const std::string& source_;
};

/// `text` parsed as JSON, which must be an object: UsageError "<source>: not valid JSON: ..." or
/// "<source>: <what> is a JSON object" (`what`: "a fault model").
inline nlohmann::json parse_object(std::string_view text, const std::string& source, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw UsageError(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw UsageError(source + ": " + what + " is a JSON object");
  return j;
}

/// The name of `value` in `table` (a table of choice()); "" when it has none.
template <class Table, class T>
std::string name_of(const Table& table, const T& value) {
  for (const auto& [name, v] : table)
    if (v == value) return std::string(name);
  return {};
}
template <class Table, class E>
std::string name_of(const Table& table, const std::optional<E>& value) {
  return value ? name_of(table, *value) : std::string();
}

}  // namespace resil::inject::detail
