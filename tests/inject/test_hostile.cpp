// The dataset model at its limits: names that are not UTF-8 (escaping, logs, globs),
// counts beyond 64 bits (weights, sampling, JSON), null dataspaces, hard links (C API files,
// including a group linked under two names and into itself), never-written huge datasets.
#include <catch2/catch.hpp>

#include <hdf5.h>

#include <chrono>
#include <set>
#include <unordered_set>

#include "resil/ckpt/h5.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/counts.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/names.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/regions.hpp"
#include "resil/inject/sampling.hpp"
#include "resil/inject/select_expr.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil;
using namespace resil::inject;
using ckpt::DType;

TEST_CASE("names that are not UTF-8 escape reversibly; valid names stay as they are", "[inject][unit]") {
  CHECK(is_utf8("/model/fc1.weight"));
  CHECK(is_utf8("/\xc3\xa9t\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80"));
  CHECK_FALSE(is_utf8("/w\xff"));
  CHECK_FALSE(is_utf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(is_utf8("\xed\xa0\x80"));      // surrogate
  CHECK_FALSE(is_utf8("\xf4\x90\x80\x80"));  // beyond U+10FFFF
  CHECK_FALSE(is_utf8("\xe2\x82"));          // truncated
  CHECK(escape_name("/w\xff") == "/w\\xff");
  CHECK(escape_name("/g\xfe\\x/v\xc3") == "/g\\xfe\\\\x/v\\xc3");
  CHECK(display_name("/plain\\name") == "/plain\\name");
  CHECK_FALSE(unescape_name("/w\\q").has_value());
  CHECK_FALSE(unescape_name("/w\\x4").has_value());
  CHECK_FALSE(unescape_name("/w\\").has_value());
  // Random byte strings: the escape is valid UTF-8 and gives the bytes back.
  Rng rng(7, 0);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng.below(24), '\0');
    for (auto& c : s) c = static_cast<char>(rng.below(256));
    const std::string e = escape_name(s);
    REQUIRE(is_utf8(e));
    REQUIRE(unescape_name(e) == s);
    nlohmann::json j;
    put_name(j, "dataset", s);
    REQUIRE_NOTHROW(j.dump());
    REQUIRE(j.contains("dataset_escaped") == !is_utf8(s));
    // Human text: no control character reaches a terminal, and the bytes are still recoverable.
    const std::string shown = display_name(s);
    REQUIRE(is_printable_name(shown));
    if (!is_printable_name(s)) REQUIRE(unescape_name(shown) == s);
  }
}

TEST_CASE("names with control characters print escaped; others as they are", "[inject][unit]") {
  // ESC [ 31 m turns a terminal red, ESC ] 0 ; ... BEL retitles it, a newline adds a listing line;
  // NUL, DEL and C1 (U+0085) are controls too.
  CHECK(display_name("/a\x1b[31mred\nb") == "/a\\x1b[31mred\\x0ab");
  CHECK(display_name(std::string("/\x1b]0;t\x07\0\x7f\xc2\x85", 11)) == "/\\x1b]0;t\\x07\\x00\\x7f\\xc2\\x85");
  CHECK(display_name("/\xc2\xa0nbsp\xc3\xa9") == "/\xc2\xa0nbsp\xc3\xa9");  // U+00A0 and U+00E9: printable
  CHECK(display_name("/tab\there\\x") == "/tab\\x09here\\\\x");  // once escaped, a backslash is doubled
  CHECK(escape_name("/a\nb") == "/a\nb");                          // JSON escapes controls itself
}

TEST_CASE("flip logs carry names and paths that are not UTF-8 and give back their bytes", "[inject][unit]") {
  LogHeader h;
  h.tool_version = "t";
  h.input = "in\xfe.h5";
  h.output = "out.h5";
  h.args = {"ckpt-flip", "--include", "/w\xff", "plain\\x41"};
  FlipRecord r;
  r.dataset = "/g\xfe\\x/w\xff";
  r.dtype = DType::f32;
  r.width = 32;
  r.index = 3;
  r.nd = {3};
  r.anchor = 30;
  r.old_bits = 0x3f800000;
  r.new_bits = 0x7f800000;
  FlipRecord plain = r;
  plain.dataset = "/model/w";
  const std::string rec = record_line(r, 0);
  CHECK(rec.find("\"dataset\":\"/g\\\\xfe\\\\\\\\x/w\\\\xff\",\"dataset_escaped\":true,\"dtype\"") != std::string::npos);
  // The hand-written record is what json::dump() writes for the same object.
  CHECK(nlohmann::json::parse(rec).dump() == rec);
  CHECK(record_line(plain, 1).find("escaped") == std::string::npos);
  const std::string text = header_line(h) + "\n" + rec + "\n" + record_line(plain, 1) + "\n" + footer_line(2, "") + "\n";
  const FlipLog log = parse_log(text, "t.log");
  CHECK(log.header.input == h.input);
  CHECK(log.header.output == h.output);
  CHECK(log.header.args == h.args);
  REQUIRE(log.records.size() == 2);
  CHECK(log.records[0].dataset == r.dataset);
  CHECK(log.records[1].dataset == "/model/w");
  // A flagged name with a malformed escape is a damaged log (exit 4), not a different dataset.
  std::string bad = rec;
  bad.replace(bad.find("\\\\xff"), 5, "\\\\xzz");
  CHECK_THROWS_AS(parse_log(header_line(h) + "\n" + bad + "\n", "t.log"), CorruptInputError);
}

TEST_CASE("globs select names that are not UTF-8 by their bytes or by \\xHH", "[inject][unit]") {
  CHECK(Glob("/w\\xff").matches("/w\xff"));
  CHECK(Glob("/w\xff").matches("/w\xff"));
  CHECK(Glob("*\\xFF").matches("/a/w\xff"));
  CHECK(Glob("/g\\xfe\\\\x/*").matches("/g\xfe\\x/v\xc3"));
  CHECK_FALSE(Glob("/w\\xff").matches("/wxff"));
  // A backslash not followed by x and two hex digits escapes the one character after it.
  CHECK(Glob("/w\\xz").matches("/wxz"));
  CHECK(Glob("/w\\x4").matches("/wx4"));
  CHECK(Glob("/a\\*").matches("/a*"));
}

TEST_CASE("counts beyond 2^53 are JSON strings of their exact digits", "[inject][unit]") {
  CHECK(count_json(0).dump() == "0");
  CHECK(count_json(json_exact_max).dump() == "9007199254740992");
  CHECK(count_json(uint128_t{json_exact_max} + 1).dump() == "\"9007199254740993\"");
  CHECK(count_string(uint128_t{1} << 68) == "295147905179352825856");
  CHECK(count_string(~uint128_t{0}) == "340282366920938463463374607431768211455");
}

namespace {
Target make_target(const std::string& path, DType t, ckpt::Shape shape) {
  Target x{};
  x.info.path = path;
  x.info.dtype = t;
  x.info.shape = std::move(shape);
  x.dtype = t;
  x.allowed = width_mask(ckpt::dtype_bits(t));
  x.nbits = ckpt::dtype_bits(t);
  return x;
}

// Floyd's algorithm in 64 bits: the 128-bit sampler must draw the same plans over spaces below
// 2^64.
std::vector<std::uint64_t> draw_without_replacement_reference(std::uint64_t total, std::uint64_t n, Rng& rng) {
  std::unordered_set<std::uint64_t> chosen;
  std::vector<std::uint64_t> out;
  for (std::uint64_t j = total - n; j < total; ++j) {
    const std::uint64_t t = rng.below(j + 1);
    out.push_back(chosen.insert(t).second ? t : (chosen.insert(j), j));
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST_CASE("fault spaces beyond 64 bits: exact weights, draws over the whole space", "[inject][unit]") {
  CHECK(make_target("/wide", DType::f64, {std::uint64_t{1} << 31, std::uint64_t{1} << 31}).weight() == uint128_t{1} << 68);
  // Three f32[2^58]: 3 x 2^63 bits (a 64-bit total would wrap to 2^63, and only /t0 would ever be drawn).
  const std::uint64_t n58 = std::uint64_t{1} << 58;
  const std::vector<Target> t = {make_target("/t0", DType::f32, {n58}), make_target("/t1", DType::f32, {n58}),
                                 make_target("/t2", DType::f32, {n58})};
  PlanOptions opt;
  opt.seed = 11;
  opt.flips = 3000;
  std::map<std::uint32_t, int> per;
  for (const auto& s : sample_sites(t, opt)) {
    ++per[s.target];
    REQUIRE(s.index < n58);
  }
  for (std::uint32_t k = 0; k < 3; ++k) CHECK(per[k] > 850);
  // Spaces below 2^64 draw exactly what the 64-bit sampler drew.
  for (const std::uint64_t total : {std::uint64_t{10}, std::uint64_t{1} << 40, ~std::uint64_t{0} - 5}) {
    Rng a(3, 0), b(3, 0);
    const auto mine = draw_without_replacement(total, 6, a);
    const auto ref = draw_without_replacement_reference(total, 6, b);
    REQUIRE(mine.size() == ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i) CHECK(mine[i] == ref[i]);
  }
  // 128-bit draws: in range, above 2^64 about as often as they should be.
  Rng r(5, 0);
  const uint128_t n = (uint128_t{3} << 63) + 17;
  int high = 0;
  for (int i = 0; i < 4000; ++i) {
    const uint128_t x = below(r, n);
    REQUIRE(x < n);
    high += x >= (uint128_t{1} << 64);
  }
  CHECK(high > 4000 / 3 - 150);
  CHECK(high < 4000 / 3 + 150);
  Rng q(6, 0);
  const auto d = draw_bernoulli(n, 1e-16, q);
  for (const auto x : d) CHECK(x < n);
}

namespace {
hid_t make_simple(hid_t file, const char* name, std::vector<hsize_t> dims, hid_t dcpl = H5P_DEFAULT) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t d = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Sclose(space);
  return d;
}
}  // namespace

TEST_CASE("list_datasets: null dataspaces, extents beyond 2^63, hard links under every path", "[inject][unit]") {
  test::TempDir dir("hostile");
  const std::string path = (dir / "h.h5").string();
  {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t null = H5Screate(H5S_NULL);
    H5Dclose(H5Dcreate2(f, "e", H5T_IEEE_F32LE, null, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(null);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t c2[2] = {1, 1024};
    H5Pset_chunk(dcpl, 2, c2);
    H5Dclose(make_simple(f, "huge", {std::uint64_t{1} << 40, std::uint64_t{1} << 40}, dcpl));
    H5Pclose(dcpl);
    const hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const float v[4] = {1, 2, 3, 4};
    const hid_t x = make_simple(g, "x", {4});
    H5Dwrite(x, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(x);
    H5Lcreate_hard(f, "/g/x", f, "/g/y", H5P_DEFAULT, H5P_DEFAULT);  // x under two names
    H5Lcreate_hard(f, "/g", f, "/h", H5P_DEFAULT, H5P_DEFAULT);      // the group under two names
    H5Lcreate_hard(f, "/g", g, "self", H5P_DEFAULT, H5P_DEFAULT);    // and inside itself: a cycle
    H5Lcreate_soft("/g/x", f, "/soft", H5P_DEFAULT, H5P_DEFAULT);    // soft links are not paths of x
    H5Gclose(g);
    H5Fclose(f);
  }
  ckpt::h5::File f = ckpt::h5::open_file(path, ckpt::h5::Mode::read);
  const auto infos = ckpt::list_datasets(f);
  std::map<std::string, ckpt::DatasetInfo> by;
  for (const auto& d : infos) by[d.path] = d;
  REQUIRE(by.size() == 3);  // /e, /g/x (once), /huge
  CHECK(by["/e"].null_space);
  CHECK(by["/e"].numel() == 0);
  CHECK(fault_bits(by["/e"]) == 0);
  CHECK_FALSE(by["/huge"].dtype.has_value());
  CHECK(by["/huge"].numel() == UINT64_MAX);
  CHECK(fault_bits(by["/huge"]) == 0);
  const auto& al = by["/g/x"].aliases;
  CHECK(std::set<std::string>(al.begin(), al.end()) == std::set<std::string>{"/g/y", "/h/x", "/h/y"});
  // Selectable under each of its paths, one target, counted once.
  for (const std::string p : {"/g/x", "/h/y", "/h/*"}) {
    SelectOptions so;
    so.include = {p};
    const auto t = select(infos, so);
    REQUIRE(t.size() == 1);
    CHECK(t[0].info.path == "/g/x");
    CHECK(t[0].weight() == 128);
  }
  SelectOptions so;
  so.include = {"/h/x"};
  so.exclude = {"/g/y"};
  CHECK_THROWS_AS(select(infos, so), NothingSelectedError);
}

TEST_CASE("a never-written 10^12-element dataset is read as fill value without visiting its chunks", "[inject][unit]") {
  test::TempDir dir("hostile");
  const std::string path = (dir / "lazy.h5").string();
  {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t c = 1024;
    H5Pset_chunk(dcpl, 1, &c);
    const float fill = 2.5f;
    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill);
    const hid_t d = make_simple(f, "big", {1'000'000'000'000}, dcpl);
    // One chunk written, far away.
    const hid_t space = H5Dget_space(d);
    const hsize_t start = 999'999'998'976, count = 1024;
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    const hid_t mem = H5Screate_simple(1, &count, nullptr);
    std::vector<float> v(1024, -1.0f);
    H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, v.data());
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Fclose(f);
  }
  ckpt::h5::File f = ckpt::h5::open_file(path, ckpt::h5::Mode::read);
  ckpt::h5::Dataset d = ckpt::h5::open_dataset(f, "/big", path);
  const auto t0 = std::chrono::steady_clock::now();
  const StoredLayout s = stored_layout(d, "big");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  REQUIRE(s.sparse);
  REQUIRE(s.regions.size() == 1);
  CHECK(s.regions[0].start == std::vector<hsize_t>{999'999'998'976});
  CHECK(s.covered == 1024);
  CHECK(s.first_fill == 0);
  float fill = 0;
  REQUIRE(s.fill.size() == 4);
  std::memcpy(&fill, s.fill.data(), 4);
  CHECK(fill == 2.5f);
  CHECK(s.in_regions({999'999'999'000}));
  CHECK_FALSE(s.in_regions({5}));
}
