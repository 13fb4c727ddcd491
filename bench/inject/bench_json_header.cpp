// The safetensors header reader (injectors/formats/src/json.cpp, a strict RFC 8259 reader written
// for it) against nlohmann-json's SAX parser with a handler that builds the same tree under the
// same rules (duplicate keys refused, numbers kept as their text, 64 levels, 1024 values per
// array), and nlohmann's DOM parse for scale. Times on generated headers of --tensors entries
// (medians over --reps, and the ratio), the two trees compared, then the error each reader gives
// for the cases the format checks depend on: what it refuses, the offset it names, its message.
// Label perf.
//   bench_json_header [--tensors N] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "json.hpp"
#include "resil/core/error.hpp"

using resil::inject::formats::detail::JsonValue;
using resil::inject::formats::detail::parse_json;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A header as safetensors writes it: "__metadata__" then one entry per tensor, offsets tiling the data.
std::string make_header(std::size_t n) {
  std::string h = R"({"__metadata__":{"format":"pt","note":"caf\u00e9"})";
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t rows = 64 + i % 512, cols = 128, bytes = rows * cols * 2;
    h += ",\"model.layers." + std::to_string(i / 16) + ".mlp.w" + std::to_string(i % 16) + ".weight\":{\"dtype\":\"BF16\",\"shape\":[" +
         std::to_string(rows) + "," + std::to_string(cols) + "],\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + bytes) + "]}";
    at += bytes;
  }
  return h + "}";
}

// nlohmann SAX -> JsonValue, with json.cpp's rules. A SAX callback is not told where its value
// starts: offsets stay 0 (only parse_error carries a position).
class Builder : public nlohmann::json_sax<nlohmann::json> {
public:
  JsonValue root;
  std::string error;          // why the parse stopped, when it did
  std::size_t error_at = 0;   // nlohmann's position for syntax errors; 0 for the handler's own

  bool null() override { return put(JsonValue{}); }
  bool boolean(bool b) override {
    JsonValue v;
    v.kind = JsonValue::Kind::boolean;
    v.boolean = b;
    return put(std::move(v));
  }
  bool number_integer(number_integer_t i) override { return number(std::to_string(i)); }
  bool number_unsigned(number_unsigned_t u) override { return number(std::to_string(u)); }
  bool number_float(number_float_t, const string_t& s) override { return number(s); }
  bool string(string_t& s) override {
    JsonValue v;
    v.kind = JsonValue::Kind::string;
    v.text = std::move(s);
    return put(std::move(v));
  }
  bool binary(binary_t&) override { return refuse("binary value"); }
  bool start_object(std::size_t) override { return open(JsonValue::Kind::object); }
  bool key(string_t& k) override {
    if (!seen_.back().insert(k).second) return refuse("duplicate key '" + k + "'");
    stack_.back()->keys.push_back(std::move(k));
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(JsonValue::Kind::array); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    error = ex.what();
    error_at = position;
    return false;
  }

private:
  bool refuse(std::string why) {
    error = std::move(why);
    return false;
  }
  bool number(std::string text) {
    JsonValue v;
    v.kind = JsonValue::Kind::number;
    v.text = std::move(text);
    return put(std::move(v));
  }
  JsonValue* slot() {
    if (stack_.empty()) return &root;
    JsonValue* top = stack_.back();
    if (top->kind == JsonValue::Kind::array && top->items.size() == 1024) return nullptr;
    top->items.emplace_back();
    return &top->items.back();
  }
  bool put(JsonValue v) {
    JsonValue* s = slot();
    if (!s) return refuse("JSON array of more than 1024 values");
    *s = std::move(v);
    return true;
  }
  bool open(JsonValue::Kind kind) {
    if (stack_.size() == 65) return refuse("JSON nested deeper than 64");
    JsonValue* s = slot();
    if (!s) return refuse("JSON array of more than 1024 values");
    s->kind = kind;
    stack_.push_back(s);
    seen_.emplace_back();
    return true;
  }
  bool close() {
    stack_.pop_back();
    seen_.pop_back();
    return true;
  }
  std::vector<JsonValue*> stack_;
  std::vector<std::unordered_set<std::string>> seen_;
};

bool same(const JsonValue& a, const JsonValue& b) {
  if (a.kind != b.kind || a.boolean != b.boolean || a.text != b.text || a.keys != b.keys || a.items.size() != b.items.size()) return false;
  for (std::size_t i = 0; i < a.items.size(); ++i)
    if (!same(a.items[i], b.items[i])) return false;
  return true;
}

std::string own_error(const std::string& text) {
  try {
    parse_json(text, "safetensors", 8);
    return "accepted";
  } catch (const resil::Error& e) {
    return e.what();
  }
}

std::string sax_error(const std::string& text) {
  Builder b;
  if (nlohmann::json::sax_parse(text, &b, nlohmann::json::input_format_t::json, true)) return "accepted";
  return (b.error_at ? "position " + std::to_string(b.error_at) + ": " : std::string("no position: ")) + b.error;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t tensors = 200'000;
  int reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tensors")) tensors = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  std::printf("bench_json_header: median of %d runs per reader\n", reps);
  std::printf("%10s %10s %12s %12s %12s %10s %10s\n", "tensors", "MB", "json.cpp_ms", "sax_ms", "dom_ms", "sax/own", "dom/own");
  for (const std::size_t n : {std::size_t{1000}, tensors}) {
    const std::string h = make_header(n);
    std::vector<double> own, sax, dom;
    JsonValue a;
    Builder b;
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      a = parse_json(h, "safetensors", 8);
      auto t1 = Clock::now();
      b = Builder{};
      if (!nlohmann::json::sax_parse(h, &b, nlohmann::json::input_format_t::json, true)) throw std::runtime_error("sax: " + b.error);
      auto t2 = Clock::now();
      const auto j = nlohmann::json::parse(h);
      auto t3 = Clock::now();
      if (j.size() != n + 1) throw std::runtime_error("dom: wrong size");
      own.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      sax.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      dom.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
    }
    if (!same(a, b.root)) throw std::runtime_error("the two readers built different trees");
    std::printf("%10zu %10.2f %12.3f %12.3f %12.3f %10.2f %10.2f\n", n, static_cast<double>(h.size()) / 1e6, median(own), median(sax), median(dom),
                median(sax) / median(own), median(dom) / median(own));
  }
  std::printf("trees: identical (keys in order, strings, numbers' text)\n\n");

  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const struct {
    const char* what;
    std::string text;
  } cases[] = {
      {"duplicate tensor name", "{" + a + "," + a + "}"},
      {"offset beyond 64 bits", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551616]}})"},
      {"offset 2^64 - 1", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})"},
      {"invalid UTF-8 in a name", "{\"w\xff\":1}"},
      {"unpaired surrogate", R"({"\ud800":1})"},
      {"control character", "{\"a\tb\":1}"},
      {"trailing comma", R"({"a":1,})"},
      {"leading zero", R"({"a":01})"},
      {"66 levels", std::string(66, '[') + std::string(66, ']')},
      {"1025 values in an array", "[" + [] { std::string s = "0"; for (int i = 0; i < 1024; ++i) s += ",0"; return s; }() + "]"},
      {"cut short", R"({"a":{"dtype":"F32")"},
  };
  std::printf("%-26s | %-70s | %s\n", "case", "json.cpp (offsets from the file start: header + 8)", "nlohmann SAX");
  for (const auto& c : cases) std::printf("%-26s | %-70s | %s\n", c.what, own_error(c.text).c_str(), sax_error(c.text).c_str());
  return 0;
}
